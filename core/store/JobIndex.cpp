#include "store/JobIndex.h"

#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/JsonText.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pipescope {

namespace fs = std::filesystem;
using nlohmann::json;

bool JobIndex::complete() const { return shards > 0 && missing().empty() && failed().empty(); }

std::vector<int> JobIndex::missing() const
{
    std::vector<int> out;
    for (int k = 0; k < shards; ++k)
        if (!record(k))
            out.push_back(k);
    return out;
}

std::vector<int> JobIndex::failed() const
{
    std::vector<int> out;
    for (const auto& r : records)
        if (!r.ok)
            out.push_back(r.index);
    return out;
}

const ShardRecord* JobIndex::record(int index) const
{
    for (const auto& r : records)
        if (r.index == index)
            return &r;
    return nullptr;
}

const std::vector<int>* JobIndex::pipelineOf(int rank) const
{
    for (const auto& p : pipelines)
        if (std::find(p.begin(), p.end(), rank) != p.end())
            return &p;
    return nullptr;
}

bool isShardedJob(const std::string& path)
{
    std::error_code ec;
    return fs::is_directory(path, ec) && fs::exists(fs::path(path) / kJobIndexName, ec);
}

namespace {

std::string shardBase(int index, int shards)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "shard-%04d-of-%04d", index, shards);
    return buf;
}

json optTime(const std::optional<TimeNs>& t) { return t ? json(*t) : json(nullptr); }

json recordJson(const ShardRecord& r)
{
    json ranks = json::array();
    for (const auto& s : r.rankSummaries) {
        json its = json::array();
        for (const auto& it : s.iterations) {
            json causes = json::object();
            for (int c = 0; c < kBubbleCauses; ++c)
                causes[std::string(toString(static_cast<BubbleCause>(c)))] = it.idleByCause[static_cast<size_t>(c)];
            its.push_back({{"label", it.label}, {"window_ns", it.windowNs}, {"busy_ns", it.busyNs}, {"idle_ns_by_cause", causes}});
        }
        ranks.push_back({{"rank", s.rank},
                         {"clock_offset_ns", s.clockOffset},
                         {"kernels", s.kernels},
                         {"gpu_busy_ns", s.gpuBusy},
                         {"first_ns", optTime(s.first)},
                         {"last_ns", optTime(s.last)},
                         {"stage", s.stage ? json(*s.stage) : json(nullptr)},
                         {"iterations", its}});
    }
    return {{"index", r.index},         {"file", r.file},
            {"status", r.ok ? "done" : "failed"},
            {"error", r.error},         {"ranks", r.ranks},
            {"inputs", r.inputs},       {"input_bytes", r.inputBytes},
            {"records", r.records},     {"seconds", r.seconds},
            {"peak_rss_bytes", r.peakRssBytes},
            {"host", r.host},           {"pid", r.pid},
            {"rank_summaries", ranks}};
}

// Throws json exceptions on a wrong shape; callers turn them into FormatError.
ShardRecord recordFromJson(const json& j)
{
    ShardRecord r;
    r.index = j.at("index").get<int>();
    r.file = j.at("file").get<std::string>();
    r.ok = j.at("status").get<std::string>() == "done";
    r.error = j.value("error", std::string());
    r.ranks = j.at("ranks").get<std::vector<int>>();
    r.inputs = j.value("inputs", std::vector<std::string>());
    r.inputBytes = j.value("input_bytes", int64_t{0});
    r.records = j.value("records", int64_t{0});
    r.seconds = j.value("seconds", 0.0);
    r.peakRssBytes = j.value("peak_rss_bytes", int64_t{0});
    r.host = j.value("host", std::string());
    r.pid = j.value("pid", int64_t{0});
    for (const auto& s : j.value("rank_summaries", json::array())) {
        JobRankSummary rs;
        rs.rank = s.at("rank").get<int>();
        rs.shard = r.index;
        rs.clockOffset = s.value("clock_offset_ns", TimeNs{0});
        rs.kernels = s.value("kernels", int64_t{0});
        rs.gpuBusy = s.value("gpu_busy_ns", TimeNs{0});
        if (s.contains("first_ns") && s["first_ns"].is_number_integer())
            rs.first = s["first_ns"].get<TimeNs>();
        if (s.contains("last_ns") && s["last_ns"].is_number_integer())
            rs.last = s["last_ns"].get<TimeNs>();
        if (s.contains("stage") && s["stage"].is_number_integer())
            rs.stage = s["stage"].get<int>();
        for (const auto& it : s.value("iterations", json::array())) {
            JobRankIteration ri;
            ri.label = it.value("label", std::string());
            ri.windowNs = it.value("window_ns", TimeNs{0});
            ri.busyNs = it.value("busy_ns", TimeNs{0});
            if (auto causes = it.find("idle_ns_by_cause"); causes != it.end() && causes->is_object())
                for (const auto& [name, v] : causes->items())
                    if (auto c = bubbleCauseFromString(name); c && v.is_number_integer())
                        ri.idleByCause[static_cast<size_t>(*c)] = v.get<TimeNs>();
            rs.iterations.push_back(std::move(ri));
        }
        r.rankSummaries.push_back(rs);
    }
    // A shard's file stays inside the job folder.
    if (r.file.find('/') != std::string::npos || r.file.find("..") != std::string::npos)
        throw json::other_error::create(501, "shard file names a path outside the job folder", nullptr);
    return r;
}

std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return {};
    std::ostringstream os;
    os << in.rdbuf();
    return os.str();
}

} // namespace

std::string shardStoreName(int index, int shards) { return shardBase(index, shards) + ".pipescope"; }
std::string shardRecordName(int index, int shards) { return shardBase(index, shards) + ".json"; }

JobIndex readJobIndex(const std::string& folder)
{
    const std::string path = (fs::path(folder) / kJobIndexName).string();
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw FormatError(folder + ": a folder without a job index (" + kJobIndexName +
                          "); open a .pipescope store, or a job folder written by `pipescope import --shards N` or under srun");
    const std::string text = readText(path);
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw FormatError(path + ": the job index is damaged (not JSON); re-run the import");
    const std::string format = j.value("format", std::string());
    if (format != kJobFormat) {
        if (format.rfind("pipescope.job/", 0) == 0)
            throw FormatError(path + ": job index format " + format + " is newer than this build reads (" + kJobFormat +
                              "); upgrade pipescope");
        throw FormatError(path + ": not a pipescope job index; re-run the import");
    }
    JobIndex index;
    try {
        index.plan = j.at("plan").get<std::string>();
        index.shards = j.at("shards").get<int>();
        index.groupedBy = j.value("grouped_by", std::string());
        for (const auto& r : j.at("shard_list"))
            index.records.push_back(recordFromJson(r));
        if (auto p = j.find("pipelines"); p != j.end() && p->is_array())
            index.pipelines = p->get<std::vector<std::vector<int>>>();
        if (auto off = j.find("shard_clock_offsets_ns"); off != j.end() && !off->is_null())
            index.shardClockOffsets = off->get<std::vector<TimeNs>>();
    } catch (const json::exception& e) {
        throw FormatError(path + ": the job index is damaged (" + std::string(e.what()) + "); re-run the import");
    }
    if (index.shards < 1 || index.shards > 1 << 20)
        throw FormatError(path + ": the job index names " + std::to_string(index.shards) + " shards; re-run the import");
    if (!index.shardClockOffsets.empty() && index.shardClockOffsets.size() != static_cast<size_t>(index.shards))
        throw FormatError(path + ": the job index has " + std::to_string(index.shardClockOffsets.size()) +
                          " clock offsets for " + std::to_string(index.shards) + " shards; re-run the import");
    for (const auto& r : index.records)
        if (r.index < 0 || r.index >= index.shards)
            throw FormatError(path + ": the job index names shard " + std::to_string(r.index) + " of " +
                              std::to_string(index.shards) + "; re-run the import");
    return index;
}

void writeJobIndex(const std::string& folder, const JobIndex& index)
{
    json list = json::array();
    std::vector<const ShardRecord*> sorted;
    for (const auto& r : index.records)
        sorted.push_back(&r);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->index < b->index; });
    for (const auto* r : sorted)
        list.push_back(recordJson(*r));
    json doc = {{"format", kJobFormat},       {"plan", index.plan},
                {"shards", index.shards},     {"grouped_by", index.groupedBy},
                {"complete", index.complete()}, {"missing", index.missing()},
                {"failed", index.failed()},
                {"shard_clock_offsets_ns", index.shardClockOffsets.empty() ? json(nullptr) : json(index.shardClockOffsets)},
                {"pipelines", index.pipelines},
                {"shard_list", list}};
    AtomicOutput::writeFile((fs::path(folder) / kJobIndexName).string(), jsonText(doc, 1) + "\n");
}

std::string shardRecordText(const ShardRecord& record, const std::string& plan, int shards)
{
    json j = recordJson(record);
    j["plan"] = plan;
    j["shards"] = shards;
    return jsonText(j, 1) + "\n";
}

std::optional<ShardRecord> readShardRecord(const std::string& path, const std::string& plan, int shards)
{
    json j = json::parse(readText(path), nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("plan", std::string()) != plan || j.value("shards", 0) != shards)
        return std::nullopt;
    try {
        return recordFromJson(j);
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

std::string incompleteJobMessage(const std::string& folder, const JobIndex& index)
{
    if (index.complete())
        return {};
    auto list = [](const std::vector<int>& ks) {
        std::string s;
        for (int k : ks)
            s += (s.empty() ? "" : ", ") + std::to_string(k);
        return s;
    };
    std::string msg = folder + ": the sharded job is incomplete:";
    const auto missing = index.missing();
    const auto failed = index.failed();
    const std::string n = std::to_string(index.shards);
    if (!missing.empty())
        msg += " " + std::to_string(missing.size()) + " of " + n + " shards are missing (" + list(missing) +
               "; their import tasks did not finish)";
    if (!failed.empty()) {
        msg += std::string(missing.empty() ? "" : ";") + " " + std::to_string(failed.size()) + " of " + n +
               " shards failed (" + list(failed) + ")";
        if (const ShardRecord* r = index.record(failed.front()); r && !r->error.empty())
            msg += "; shard " + std::to_string(failed.front()) + ": " + r->error;
    }
    const int first = !missing.empty() ? missing.front() : failed.front();
    msg += ". Re-run the import of those shards (e.g. `pipescope import TRACES -o " + folder + " --shard " +
           std::to_string(first) + "/" + n + "`), or the whole import";
    return msg;
}

} // namespace pipescope
