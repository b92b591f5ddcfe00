#include "store/JobIndex.h"

#include "util/AtomicOutput.h"
#include "util/BoundedJson.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "util/Error.h"
#include "util/JsonText.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

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

// Every number of an index or record is a whole number except a task's
// "seconds": a fraction anywhere else (4.4e57 as a pid) would be converted
// to an integer out of range. Such a document is damaged.
bool onlyWholeNumbers(const json& j, const std::string& key = {})
{
    if (j.is_number_float())
        return key == "seconds";
    if (j.is_object()) {
        for (const auto& [k, v] : j.items())
            if (!onlyWholeNumbers(v, k))
                return false;
    } else if (j.is_array()) {
        for (const auto& v : j)
            if (!onlyWholeNumbers(v, key))
                return false;
    }
    return true;
}

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

// A job index lists every shard with its ranks' summaries: about a kilobyte a
// rank, so 256 MiB holds far more than the 65,536 tasks an import may have.
constexpr size_t kMaxIndexBytes = size_t{256} << 20;
constexpr size_t kMaxRecordBytes = size_t{64} << 20;

// Shards are aligned by the operations they share, so a shard moved by its
// offset overlaps the others; an offset that moves it further than this from
// every other shard was not written by an import.
constexpr TimeNs kMaxShardGapNs = TimeNs{3600} * 1'000'000'000;

struct Window {
    TimeNs first = 0, last = 0;
};

// Each shard's times as its rank summaries give them (before its offset).
std::map<int, Window> shardWindows(const JobIndex& index)
{
    std::map<int, Window> out;
    for (const auto& r : index.records)
        for (const auto& s : r.rankSummaries) {
            if (!s.first || !s.last)
                continue;
            auto [it, fresh] = out.emplace(r.index, Window{*s.first, *s.last});
            if (!fresh) {
                it->second.first = std::min(it->second.first, *s.first);
                it->second.last = std::max(it->second.last, *s.last);
            }
        }
    return out;
}

void checkClockOffsets(const std::string& path, const JobIndex& index)
{
    const auto& off = index.shardClockOffsets;
    auto damaged = [&](size_t k, const std::string& why) {
        return FormatError(path + ": the job index is damaged: shard " + std::to_string(k) + "'s clock offset " +
                           std::to_string(off[k]) + " ns " + why + "; re-run the import");
    };
    for (size_t k = 0; k < off.size(); ++k)
        if (!validTime(off[k]))
            throw damaged(k, "is outside the times a job can hold (about 146 years either side of the epoch)");
    const std::map<int, Window> windows = shardWindows(index);
    for (const auto& [k, w] : windows) {
        const TimeNs d = static_cast<size_t>(k) < off.size() ? off[static_cast<size_t>(k)] : 0;
        if (!validTime(w.first) || !validTime(w.last) || !validTime(w.first + d) || !validTime(w.last + d))
            throw damaged(static_cast<size_t>(k), "moves its records outside the times a job can hold");
    }
    // A moved shard must land near the others.
    for (const auto& [k, w] : windows) {
        const size_t ks = static_cast<size_t>(k);
        if (ks >= off.size() || off[ks] == 0 || windows.size() < 2)
            continue;
        TimeNs lo = kMaxTimeNs, hi = -kMaxTimeNs;
        for (const auto& [j, o] : windows)
            if (j != k) {
                const TimeNs dj = static_cast<size_t>(j) < off.size() ? off[static_cast<size_t>(j)] : 0;
                lo = std::min(lo, o.first + dj);
                hi = std::max(hi, o.last + dj);
            }
        if (w.last + off[ks] < lo - kMaxShardGapNs || w.first + off[ks] > hi + kMaxShardGapNs)
            throw damaged(ks, "moves it more than an hour away from every other shard (" +
                                  formatDuration(std::min(std::abs(w.last + off[ks] - lo), std::abs(w.first + off[ks] - hi))) +
                                  ")");
    }
}

} // namespace

std::string shardStoreName(int index, int shards) { return shardBase(index, shards) + ".pipescope"; }
std::string shardRecordName(int index, int shards) { return shardBase(index, shards) + ".json"; }

JobIndex readJobIndex(const std::string& folder, bool endedTasks)
{
    const std::string path = (fs::path(folder) / kJobIndexName).string();
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw FormatError(folder + ": a folder without a job index (" + kJobIndexName +
                          "); open a .pipescope store, or a job folder written by `pipescope import --shards N` or under srun");
    const std::string advice = "re-run the import";
    const std::string text = readBoundedFile(path, kMaxIndexBytes, advice);
    json j;
    try {
        j = parseBoundedJson(text, path, kMaxIndexBytes, advice);
    } catch (const FormatError& e) {
        throw FormatError(path + ": the job index is damaged (" + std::string(e.what()).substr(path.size() + 2) + ")");
    }
    if (!j.is_object())
        throw FormatError(path + ": the job index is damaged (not a JSON object); re-run the import");
    if (!onlyWholeNumbers(j))
        throw FormatError(path + ": the job index is damaged (a fraction where a whole number belongs); re-run the import");
    const auto formatIt = j.find("format");
    const std::string format = formatIt != j.end() && formatIt->is_string() ? formatIt->get<std::string>() : std::string();
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
    if (index.shards < 1 || index.shards > kMaxShardTasks)
        throw FormatError(path + ": the job index names " + std::to_string(index.shards) + " shards; re-run the import");
    if (!index.shardClockOffsets.empty() && index.shardClockOffsets.size() != static_cast<size_t>(index.shards))
        throw FormatError(path + ": the job index has " + std::to_string(index.shardClockOffsets.size()) +
                          " clock offsets for " + std::to_string(index.shards) + " shards; re-run the import");
    for (const auto& r : index.records)
        if (r.index < 0 || r.index >= index.shards)
            throw FormatError(path + ": the job index names shard " + std::to_string(r.index) + " of " +
                              std::to_string(index.shards) + "; re-run the import");
    checkClockOffsets(path, index);
    if (endedTasks && !index.complete())
        return withShardRecords(folder, std::move(index));
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
    json j;
    try {
        j = parseBoundedJson(readBoundedFile(path, kMaxRecordBytes, "re-run its task"), path, kMaxRecordBytes,
                             "re-run its task");
    } catch (const FormatError&) {
        return std::nullopt; // as a missing record: its task is named as not finished
    }
    // Any shape it has, a record that is not this plan's is not read (a
    // "shards" that is no number is a damaged record, as a missing one).
    try {
        if (!j.is_object() || !onlyWholeNumbers(j) || j.value("plan", std::string()) != plan ||
            j.value("shards", 0) != shards)
            return std::nullopt;
        return recordFromJson(j);
    } catch (const json::exception&) {
        return std::nullopt;
    }
}

JobIndex withShardRecords(const std::string& folder, JobIndex index)
{
    index.records.clear();
    for (int k = 0; k < index.shards; ++k) {
        const std::string path = (fs::path(folder) / shardRecordName(k, index.shards)).string();
        std::error_code ec;
        if (!fs::exists(path, ec))
            continue;
        if (auto r = readShardRecord(path, index.plan, index.shards); r && r->index == k)
            index.records.push_back(std::move(*r));
    }
    return index;
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
            msg += "; shard " + std::to_string(failed.front()) + ": " + printable(r->error, 1000);
    }
    const int first = !missing.empty() ? missing.front() : failed.front();
    msg += ". Re-run the import of those shards (e.g. `pipescope import TRACES -o " + folder + " --shard " +
           std::to_string(first) + "/" + n + "`), or the whole import";
    return msg;
}

} // namespace pipescope
