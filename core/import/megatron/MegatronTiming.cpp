#include "import/megatron/MegatronTiming.h"

#include "util/BoundedJson.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/Limits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <set>
#include <tuple>

namespace pipescope {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Iteration k starts at k x this on every rank.
constexpr TimeNs kIterationStride = 10'000'000'000;
// The highest iteration number whose whole 10 s still lies on the clock.
constexpr int64_t kMaxIteration = (kMaxTimeNs - kIterationStride) / kIterationStride;
// Files are parsed whole: 64 MiB of JSON (some 500,000 records, a few hundred
// MB once parsed) is far more than a run's step timings. Records nest two
// levels (three with `args`); anything deeper is not such a file.
constexpr size_t kMaxMegatronBytes = kMaxDescriptionBytes;
constexpr size_t kMaxMegatronDepth = 8;
const char* const kAdvice = "a Megatron timing file is a JSON list of flat begin/end records (docs/import-megatron.md)";

json readList(const std::string& path)
{
    const std::string text = InputFile::readAll(path, kMaxMegatronBytes);
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw FormatError(path + ": file is empty; " + kAdvice);
    json doc = parseBoundedJson(text, path, kMaxMegatronBytes, kAdvice, kMaxMegatronDepth);
    if (!doc.is_array())
        throw FormatError(path + ": not a Megatron timing file (a JSON list of begin/end records was expected)");
    return doc;
}

std::string stringOf(const json& r, const char* key)
{
    auto it = r.find(key);
    return it != r.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A record's value: at its top level, or under `args` as MegatronApp's
// aggregated file has it.
const json* field(const json& r, const char* key)
{
    if (auto it = r.find(key); it != r.end())
        return &*it;
    if (auto args = r.find("args"); args != r.end() && args->is_object())
        if (auto it = args->find(key); it != args->end())
            return &*it;
    return nullptr;
}

// "f.json: record 12 (forward end)", for messages (records count from 1).
std::string recordAt(const std::string& path, size_t index, const json& r)
{
    const std::string ph = stringOf(r, "ph");
    return path + ": record " + std::to_string(index + 1) + " (" + printable(stringOf(r, "name"), 40) +
           (ph == "B" ? " begin" : ph == "E" ? " end" : "") + ")";
}

// A whole number from lo to hi; nullopt when absent. Any other value (a
// string, a fraction, a number out of range, 2^64 - 1 included) is refused
// naming the file and the record, never wrapped.
std::optional<int64_t> whole(const std::string& path, size_t index, const json& r, const char* key, int64_t lo,
                             int64_t hi, const std::string& range)
{
    const json* v = field(r, key);
    if (!v || v->is_null())
        return std::nullopt;
    bool ok = false;
    int64_t value = 0;
    if (v->is_number_unsigned()) {
        const uint64_t u = v->get<uint64_t>();
        ok = u <= static_cast<uint64_t>(hi);
        value = ok ? static_cast<int64_t>(u) : 0;
        ok = ok && value >= lo;
    } else if (v->is_number_integer()) {
        value = v->get<int64_t>();
        ok = value >= lo && value <= hi;
    } else if (v->is_number_float()) {
        const double d = v->get<double>();
        ok = std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi);
        value = ok ? static_cast<int64_t>(d) : 0;
    }
    if (!ok)
        throw FormatError(recordAt(path, index, r) + ": " + key + " " + printable(v->dump(), 40) + " is not " + range);
    return value;
}

int64_t required(const std::string& path, size_t index, const json& r, const char* key, int64_t lo, int64_t hi,
                 const std::string& range)
{
    if (auto v = whole(path, index, r, key, lo, hi, range))
        return *v;
    throw FormatError(recordAt(path, index, r) + ": no " + key + "; " + kAdvice);
}

const char* const kRelTsRange = "a time from 0 to 10 s (in ns) since the iteration began";
const char* const kLengthRange = "an iteration length from 1 ns to 10 s (in ns; longer iterations are not supported)";
const char* const kMicrobatchRange = "a microbatch number from 0 to 1,000,000";
const char* const kChunkRange = "a model chunk number from 0 to 4,095";
const char* const kRankRange = "a pipeline rank from 0 to 1,048,575";

// One begin or end record of a forward or backward step.
struct StepRecord {
    bool forward = true;
    bool begin = true;
    TimeNs at = 0;                      // from its iteration's start
    int64_t microbatch = 0, chunk = 0; // end records
    size_t index = 0;                   // its place in the file
};

struct IterationRecords {
    int64_t number = 0; // ProfilerStep#number, placed at number x 10 s
    TimeNs length = 0;
    size_t index = 0;   // its end record (or first record)
    std::vector<StepRecord> steps;
};

struct RankTimings {
    std::optional<int> rank;
    std::vector<IterationRecords> iterations;
};

struct MegatronFile {
    bool aggregated = false;
    int chunks = 1;
    std::vector<RankTimings> ranks; // one for a rank's own file
};

std::string stepName(bool forward) { return forward ? "forward" : "backward"; }

// The step fields of a record whose name is forward or backward; `at` in ns.
StepRecord stepRecord(const std::string& path, size_t index, const json& r, TimeNs at, MegatronFile& f)
{
    StepRecord s;
    s.forward = stringOf(r, "name") == "forward";
    const std::string ph = stringOf(r, "ph");
    if (ph != "B" && ph != "E")
        throw FormatError(recordAt(path, index, r) + ": phase \"" + printable(ph, 20) +
                          "\"; steps are begin (B) and end (E) records");
    s.begin = ph == "B";
    s.at = at;
    s.index = index;
    if (!s.begin) {
        s.microbatch = required(path, index, r, "microbatch", 0, 1'000'000, kMicrobatchRange);
        s.chunk = required(path, index, r, "model_chunk", 0, 4095, kChunkRange);
        f.chunks = std::max(f.chunks, static_cast<int>(s.chunk) + 1);
    }
    return s;
}

// The steps of one iteration in time order, paired and each recorded once.
// A file in time order keeps its order (a step of 0 ns included); records
// out of order are sorted by time, an end before a begin at the same time.
void settleIteration(const std::string& path, IterationRecords& it)
{
    auto byTime = [](const StepRecord& a, const StepRecord& b) { return a.at < b.at; };
    if (!std::is_sorted(it.steps.begin(), it.steps.end(), byTime))
        std::stable_sort(it.steps.begin(), it.steps.end(), [](const StepRecord& a, const StepRecord& b) {
            return std::tuple(a.at, a.begin) < std::tuple(b.at, b.begin);
        });
    const StepRecord* open = nullptr;
    std::set<std::tuple<bool, int64_t, int64_t>> seen;
    const std::string where = path + ": iteration " + std::to_string(it.number);
    for (const StepRecord& s : it.steps) {
        if (s.begin) {
            if (open)
                throw FormatError(where + ": a " + stepName(s.forward) + " begins (record " + std::to_string(s.index + 1) +
                                  ") while the " + stepName(open->forward) + " begun at record " +
                                  std::to_string(open->index + 1) + " runs (records out of order)");
            open = &s;
            continue;
        }
        if (!open || open->forward != s.forward)
            throw FormatError(path + ": a " + stepName(s.forward) + " end without its begin (record " +
                              std::to_string(s.index + 1) + " of iteration " + std::to_string(it.number) +
                              "; records out of order)");
        open = nullptr;
        if (!seen.emplace(s.forward, s.microbatch, s.chunk).second)
            throw FormatError(where + " holds " + stepName(s.forward) + " mb=" + std::to_string(s.microbatch) +
                              " chunk=" + std::to_string(s.chunk) + " twice (record " + std::to_string(s.index + 1) +
                              "); records of different iterations are mixed up");
    }
    if (open)
        throw FormatError(where + ": a " + stepName(open->forward) + " begin (record " + std::to_string(open->index + 1) +
                          ") without its end");
    if (!it.steps.empty() && it.steps.back().at > it.length)
        throw FormatError(where + " lasts " + formatCount(it.length) + " ns by its end record (record " +
                          std::to_string(it.index + 1) + "), but its steps run until " +
                          formatCount(it.steps.back().at) + " ns; the file's times do not fit together");
}

// A rank's own file (benchmark-data-D-pipeline-R-tensor-T.json): iterations
// between their begin and end records, times (rel_ts) from the iteration's start.
MegatronFile parseRankFile(const json& doc, const std::string& path)
{
    MegatronFile f;
    RankTimings t;
    size_t begins = 0, ends = 0;
    for (const json& r : doc)
        if (r.is_object() && stringOf(r, "name") == "iteration") {
            const std::string ph = stringOf(r, "ph");
            begins += ph == "B";
            ends += ph == "E";
        }
    // With one iteration every step is its own, in whatever order the records come.
    const bool one = begins == 1 && ends == 1;
    std::optional<IterationRecords> open;
    if (one)
        open.emplace();
    std::optional<int64_t> rank;
    for (size_t i = 0; i < doc.size(); ++i) {
        const json& r = doc[i];
        if (!r.is_object())
            continue;
        const std::string name = stringOf(r, "name"), ph = stringOf(r, "ph");
        if (name == "iteration") {
            if (ph == "B" && !one) {
                if (open)
                    throw FormatError(recordAt(path, i, r) + ": iteration " + std::to_string(t.iterations.size() + 1) +
                                      " begins before iteration " + std::to_string(t.iterations.size()) +
                                      " ended (records out of order)");
                open.emplace();
                open->number = static_cast<int64_t>(t.iterations.size());
                if (open->number > kMaxIteration)
                    throw FormatError(path + ": more than " + formatCount(kMaxIteration) + " iterations");
            } else if (ph == "E") {
                if (!open)
                    throw FormatError(recordAt(path, i, r) + ": an iteration end without its begin (records out of order)");
                auto length = whole(path, i, r, "duration_wall", 1, kIterationStride - 1, kLengthRange);
                if (!length)
                    length = required(path, i, r, "rel_ts", 1, kIterationStride - 1, kLengthRange);
                open->length = *length;
                open->index = i;
                if (!one) {
                    t.iterations.push_back(std::move(*open));
                    open.reset();
                }
            }
            continue;
        }
        if (name != "forward" && name != "backward")
            continue;
        if (!open)
            throw FormatError(recordAt(path, i, r) + ": a " + name + " record outside an iteration; " +
                              (begins == 0 ? std::string("the file has no iteration records")
                                           : "in a file of " + std::to_string(begins) +
                                                 " iterations each must hold its steps between its begin and end records "
                                                 "(records out of order)"));
        const TimeNs at = required(path, i, r, "rel_ts", 0, kIterationStride - 1, kRelTsRange);
        open->steps.push_back(stepRecord(path, i, r, at, f));
        if (ph == "E")
            if (auto pp = whole(path, i, r, "pp_rank", 0, kMaxRank, kRankRange)) {
                if (rank && *rank != *pp)
                    throw FormatError(path + ": records of pipeline ranks " + std::to_string(*rank) + " and " +
                                      std::to_string(*pp) + "; a Megatron timing file holds one rank");
                rank = pp;
            }
    }
    if (one)
        t.iterations.push_back(std::move(*open));
    else if (open)
        throw FormatError(path + ": iteration " + std::to_string(t.iterations.size()) +
                          " has no end record (the file ends inside it)");
    for (IterationRecords& it : t.iterations)
        settleIteration(path, it);
    if (rank)
        t.rank = static_cast<int>(*rank);
    f.ranks.push_back(std::move(t));
    return f;
}

// MegatronApp's aggregated file: every rank's steps as Chrome trace events
// (`ts` in microseconds on one timeline, `pid` the rank's process, the
// iteration, microbatch, model_chunk and pp_rank under `args`), without
// iteration records. Each iteration starts at its earliest record and lasts
// until its latest: the file keeps neither the iteration's start nor its
// length.
MegatronFile parseAggregatedFile(const json& doc, const std::string& path)
{
    MegatronFile f;
    f.aggregated = true;
    struct Raw {
        int64_t pid, iteration;
        StepRecord step;
    };
    std::vector<Raw> steps;
    std::map<int64_t, std::pair<TimeNs, TimeNs>> extent; // iteration -> earliest, latest record
    std::map<int64_t, std::pair<int64_t, size_t>> rankOfPid; // pid -> pp_rank, a record saying so
    std::map<int64_t, std::pair<int64_t, size_t>> tidOfPid;  // pid -> its thread (tensor rank), a record
    for (size_t i = 0; i < doc.size(); ++i) {
        const json& r = doc[i];
        if (!r.is_object())
            continue;
        const std::string name = stringOf(r, "name");
        const bool step = name == "forward" || name == "backward";
        if (!step && !(field(r, "ts") && field(r, "iteration")))
            continue; // metadata, or a record of no iteration
        const int64_t iteration =
            required(path, i, r, "iteration", 0, kMaxIteration, "an iteration number from 0 to " + formatCount(kMaxIteration));
        const TimeNs at = required(path, i, r, "ts", 0, kMaxTimeNs / 1000, "a time in microseconds within 2^62 ns") * 1000;
        auto [e, fresh] = extent.try_emplace(iteration, at, at);
        if (!fresh)
            e->second = {std::min(e->second.first, at), std::max(e->second.second, at)};
        if (!step)
            continue;
        const int64_t pid = required(path, i, r, "pid", 0, kMaxRank, "a process number from 0 to 1,048,575");
        const int64_t tid = whole(path, i, r, "tid", 0, kMaxRank, "a thread number from 0 to 1,048,575").value_or(0);
        if (auto [t, first] = tidOfPid.try_emplace(pid, tid, i); !first && t->second.first != tid)
            throw FormatError(recordAt(path, i, r) + ": process " + std::to_string(pid) + " records tensor rank (tid) " +
                              std::to_string(tid) + " and, at record " + std::to_string(t->second.second + 1) + ", " +
                              std::to_string(t->second.first) +
                              "; pipescope reads one tensor rank: import that rank's per-rank files instead");
        Raw raw{pid, iteration, stepRecord(path, i, r, at, f)};
        if (!raw.step.begin) {
            const int64_t pp = required(path, i, r, "pp_rank", 0, kMaxRank, kRankRange);
            auto [it, first] = rankOfPid.try_emplace(pid, pp, i);
            if (!first && it->second.first != pp)
                throw FormatError(recordAt(path, i, r) + ": process " + std::to_string(pid) + " records pipeline rank " +
                                  std::to_string(pp) + ", but record " + std::to_string(it->second.second + 1) +
                                  " of the same process rank " + std::to_string(it->second.first));
        }
        steps.push_back(std::move(raw));
    }
    std::map<int64_t, int64_t> pidOfRank;
    for (const auto& [pid, pp] : rankOfPid)
        if (auto [it, fresh] = pidOfRank.try_emplace(pp.first, pid); !fresh)
            throw FormatError(path + ": processes " + std::to_string(it->second) + " and " + std::to_string(pid) +
                              " both record pipeline rank " + std::to_string(pp.first) +
                              " (data-parallel replicas); import the per-rank files of one replica instead");
    std::map<int64_t, RankTimings> ranks; // pp_rank -> its iterations
    std::map<std::pair<int64_t, int64_t>, size_t> slot; // (pp_rank, iteration) -> index in its iterations
    for (const auto& [pp, pid] : pidOfRank) {
        RankTimings& t = ranks[pp];
        t.rank = static_cast<int>(pp);
        for (const auto& [number, span] : extent) {
            IterationRecords it;
            it.number = number;
            it.length = std::max<TimeNs>(1, span.second - span.first);
            if (it.length >= kIterationStride)
                throw FormatError(path + ": iteration " + std::to_string(number) + " spans " + formatCount(it.length) +
                                  " ns; Megatron timing iterations up to 10 s are supported");
            slot[{pp, number}] = t.iterations.size();
            t.iterations.push_back(std::move(it));
        }
    }
    for (Raw& raw : steps) {
        auto pp = rankOfPid.find(raw.pid);
        if (pp == rankOfPid.end())
            throw FormatError(path + ": record " + std::to_string(raw.step.index + 1) + " (process " +
                              std::to_string(raw.pid) + ") belongs to no pipeline rank: that process has no end record with a pp_rank");
        IterationRecords& it = ranks[pp->second.first].iterations[slot[{pp->second.first, raw.iteration}]];
        raw.step.at -= extent[raw.iteration].first;
        it.steps.push_back(raw.step);
    }
    for (auto& [pp, t] : ranks) {
        for (IterationRecords& it : t.iterations)
            settleIteration(path, it);
        f.ranks.push_back(std::move(t));
    }
    return f;
}

// An aggregated file has no rel_ts; its records carry `ts` and `args`.
bool aggregatedLayout(const json& doc)
{
    bool chrome = false;
    for (const json& r : doc)
        if (r.is_object()) {
            if (r.contains("rel_ts"))
                return false;
            chrome = chrome || (r.contains("ts") && r.contains("args"));
        }
    return chrome;
}

MegatronFile readMegatronFile(const std::string& path)
{
    const json doc = readList(path);
    return aggregatedLayout(doc) ? parseAggregatedFile(doc, path) : parseRankFile(doc, path);
}

std::vector<int> ranksOf(const MegatronFile& f)
{
    std::vector<int> out;
    for (const RankTimings& t : f.ranks)
        if (t.rank)
            out.push_back(*t.rank);
    return out;
}

} // namespace

bool looksLikeMegatronTiming(std::string_view head)
{
    size_t i = 0;
    auto skip = [&] {
        while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
            ++i;
    };
    skip();
    if (i >= head.size() || head[i] != '[')
        return false;
    ++i;
    skip();
    if (i >= head.size() || head[i] != '{')
        return false;
    // The first record, to its closing brace (an `args` object inside it
    // included), or as much of it as was read.
    const size_t end = jsonValueEnd(head, i);
    const std::string_view first = head.substr(i, std::min(end, head.size()) - i);
    auto has = [&](std::string_view key) { return first.find(key) != std::string_view::npos; };
    if (!has("\"name\"") || !has("\"ph\""))
        return false;
    // Records come in any order in a damaged or rewritten file: any record
    // of the tracer's names one of these.
    for (std::string_view key : {"\"iteration\"", "\"rel_ts\"", "\"pp_rank\"", "\"pad_before\"", "\"duration_wall\"",
                                 "\"model_chunk\"", "\"microbatch\""})
        if (has(key))
            return true;
    return false;
}

int megatronTimingRank(const std::string& path)
{
    const MegatronFile f = readMegatronFile(path);
    if (f.aggregated)
        throw FormatError(path + ": MegatronApp's aggregated file (pipeline ranks " + rankRuns(ranksOf(f)) +
                          " in one file), not one rank's");
    if (!f.ranks.front().rank)
        throw FormatError(path + ": no step records with a pp_rank; not a Megatron timing file");
    return *f.ranks.front().rank;
}

namespace {

bool looksLikeTraceName(const std::string& name)
{
    auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
    return ends(".json") || ends(".json.gz") || ends(".sqlite") || ends(".pscap");
}

// A file starting with a JSON list (after a byte order mark and blanks).
bool startsWithList(const std::string& path)
{
    try {
        InputFile in(path);
        const std::string_view head = in.read();
        size_t i = head.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
        while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
            ++i;
        return i < head.size() && head[i] == '[';
    } catch (const Error&) {
        return false; // the import names it
    }
}

// Every file of a folder of Megatron timing files is one rank's, and the
// pipeline would be wrong without it: a file there that format detection
// dropped (empty; or named benchmark-*, as MegatronApp names rank files) or
// that holds a JSON list without Megatron steps is an error naming it, not
// a file skipped with a warning.
void refuseIncompleteFolders(const std::vector<std::string>& inputs, const std::vector<std::string>& files,
                             const std::vector<std::string>& formats)
{
    std::set<std::string> megatron, found;
    for (size_t i = 0; i < files.size(); ++i) {
        found.insert(files[i]);
        if (formats[i] == "megatron-timing")
            megatron.insert(files[i]);
    }
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (!fs::is_directory(in, ec))
            continue;
        // The folder's traces, listed as `import` lists them.
        std::vector<fs::path> entries;
        bool holdsMegatron = false;
        for (const auto& entry : fs::directory_iterator(in, ec)) {
            const std::string name = entry.path().filename().string();
            std::error_code typeEc;
            if (name.starts_with(".") || !entry.is_regular_file(typeEc) || !looksLikeTraceName(name))
                continue;
            entries.push_back(entry.path());
            holdsMegatron = holdsMegatron || megatron.count(entry.path().string());
        }
        if (!holdsMegatron)
            continue;
        std::sort(entries.begin(), entries.end());
        for (const fs::path& p : entries) {
            const std::string file = p.string();
            if (megatron.count(file))
                continue;
            std::string what;
            if (!found.count(file)) {
                std::error_code sizeEc;
                if (fs::file_size(p, sizeEc) == 0 && !sizeEc)
                    what = "file is empty";
                else if (p.filename().string().starts_with("benchmark-"))
                    what = "not a Megatron timing file (it is named as MegatronApp names a rank's file)";
            } else if (startsWithList(file)) {
                what = "a JSON list without Megatron step records";
            }
            if (!what.empty())
                throw FormatError(file + ": " + what + ", in a folder of Megatron timing files: each is one rank's, and "
                                                       "the pipeline would be wrong without it; re-copy it, or name the "
                                                       "rank files to import");
        }
    }
}

} // namespace

MegatronJobPlan planMegatronJob(const std::vector<std::string>& inputs, const std::vector<std::string>& files,
                                const std::vector<std::string>& formats, std::optional<int> explicitRank)
{
    struct Entry {
        std::string path;
        bool aggregated;
        std::vector<int> ranks;
    };
    std::vector<Entry> entries;
    for (size_t i = 0; i < files.size() && i < formats.size(); ++i)
        if (formats[i] == "megatron-timing") {
            const MegatronFile f = readMegatronFile(files[i]);
            entries.push_back({files[i], f.aggregated, ranksOf(f)});
        }
    MegatronJobPlan plan;
    if (entries.empty())
        return plan;
    refuseIncompleteFolders(inputs, files, formats);

    if (explicitRank) {
        if (!validRank(*explicitRank))
            throw FormatError("--rank " + std::to_string(*explicitRank) + ": not a rank from 0 to 1,048,575");
        if (entries.size() != 1)
            throw FormatError("--rank applies to a single Megatron timing file, but " + std::to_string(entries.size()) +
                              " were given");
        if (entries.front().aggregated)
            throw FormatError(entries.front().path + ": --rank sets the rank of a file of one rank, but this aggregated "
                                                     "file holds pipeline ranks " + rankRuns(entries.front().ranks));
        entries.front().ranks = {*explicitRank};
    }
    const bool perRankFiles = std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return !e.aggregated; });
    std::map<int, std::string> owner; // pipeline rank -> its file
    for (const Entry& e : entries) {
        if (e.aggregated && perRankFiles) {
            plan.skipped[e.path] = e.path + ": MegatronApp's aggregated file (pipeline ranks " + rankRuns(e.ranks) +
                                   " in one file); skipped, the per-rank files are read";
            continue;
        }
        if (e.ranks.empty())
            throw FormatError(e.path + ": no step records with a pp_rank; not a Megatron timing file");
        for (int r : e.ranks)
            if (auto [it, fresh] = owner.emplace(r, e.path); !fresh)
                throw FormatError(e.path + " and " + it->second + " both hold pipeline rank " + std::to_string(r) +
                                  "; import each rank's Megatron timing file once");
    }
    const int top = owner.rbegin()->first;
    if (static_cast<size_t>(top) + 1 != owner.size()) {
        std::vector<int> missing, present;
        for (int r = 0; r < top; ++r)
            if (!owner.count(r))
                missing.push_back(r);
        for (const auto& [r, f] : owner)
            present.push_back(r);
        throw FormatError(owner.rbegin()->second + " holds pipeline rank " + std::to_string(top) +
                          ", but no Megatron timing file holds rank" + (missing.size() > 1 ? "s " : " ") +
                          rankRuns(missing) + " (ranks found: " + rankRuns(present) +
                          "); import every rank's file together");
    }
    plan.pipelineDegree = top + 1;
    return plan;
}

namespace {

// The file's source: one rank's, or every rank's for an aggregated file.
ImportedSource addSource(const std::string& path, StoreWriter& writer, const MegatronFile& f, int p)
{
    ImportedSource src;
    SourceRecord sr;
    sr.path = path;
    sr.format = "megatron-timing";
    if (!f.aggregated)
        sr.rank = f.ranks.front().rank;
    json details{{"pipeline_degree", p}, {"chunks", f.chunks}, {"iteration_stride_ns", kIterationStride}};
    if (f.aggregated)
        details["aggregated"] = true;
    sr.details = details.dump();
    src.sourceId = writer.addSource(sr);
    src.worldSize = p;
    return src;
}

// A rank, its device standing for itself.
void addRank(StoreWriter& writer, ImportedSource& src, int rank, int p)
{
    src.ranks.push_back(rank);
    RankInfo ri;
    ri.rank = rank;
    ri.worldSize = p;
    ri.device = rank;
    ri.sourceId = src.sourceId;
    writer.addRank(ri);
}

// The pipeline group's members as the store writes them: "[0, 1, ..., p-1]".
std::string pipelineMembers(int p)
{
    std::string members = "[";
    for (int r = 0; r < p; ++r)
        members += (r ? ", " : "") + std::to_string(r);
    members += "]";
    return members;
}

// Writes one rank's records: iteration ranges, steps (an annotated range and
// a compute kernel each) and the transfers the schedule implies, counting
// them in the source.
class RankRecords {
public:
    RankRecords(StoreWriter& writer, ImportedSource& src, int rank, int p)
        : writer_(writer), src_(src), rank_(rank), p_(p), members_(pipelineMembers(p)),
          compute_(writer.stream(rank, rank, 7, "compute")), comm_(writer.stream(rank, rank, 23, "p2p")),
          sendName_(writer.intern("ncclDevKernel_SendRecv (send implied by the schedule)")),
          recvName_(writer.intern("ncclDevKernel_SendRecv (receive implied by the schedule)"))
    {
    }

    // A send to or receive from `peer` on the pipeline group: a kernel from
    // `at` to `until` (at least 1 ns) with its NCCL record.
    void transfer(bool send, int peer, TimeNs at, TimeNs until = 0)
    {
        ActivityRecord a;
        a.rank = rank_;
        a.streamId = comm_;
        a.start = at;
        a.end = std::max(at + 1, until);
        a.name = send ? sendName_ : recvName_;
        const int64_t id = writer_.addActivity(a);
        NcclRecord n;
        n.rank = rank_;
        n.activityId = id;
        n.kind = send ? Collective::Send : Collective::Recv;
        n.isP2p = true;
        n.peer = peer;
        n.groupName = "pipeline";
        n.groupDesc = "pipeline";
        n.groupRanks = members_;
        n.groupSize = p_;
        n.start = a.start;
        n.end = a.end;
        writer_.addNcclOp(n);
        src_.records += 2;
    }

    // Iteration `index` as a ProfilerStep range on the CPU.
    void iteration(int64_t index, TimeNs start, TimeNs length)
    {
        CpuRangeRecord c;
        c.rank = rank_;
        c.tid = 1;
        c.start = start;
        c.end = start + length;
        c.name = writer_.intern("ProfilerStep#" + std::to_string(index));
        writer_.addCpuRange(c);
        ++src_.records;
    }

    // A forward or backward step: its annotated range and its kernel; returns
    // the kernel's end (at least 1 ns after its start).
    TimeNs step(const std::string& name, TimeNs start, TimeNs end, int64_t microbatch, int64_t chunk)
    {
        const std::string label = "pipescope/" + name + " mb=" + std::to_string(microbatch) + " chunk=" + std::to_string(chunk);
        CpuRangeRecord c;
        c.rank = rank_;
        c.tid = 1;
        c.start = start;
        c.end = end;
        c.name = writer_.intern(label);
        writer_.addCpuRange(c);
        ActivityRecord a;
        a.rank = rank_;
        a.streamId = compute_;
        a.start = start;
        a.end = std::max(end, start + 1);
        a.name = writer_.intern("megatron " + name + " step (chunk " + std::to_string(chunk) + ")");
        writer_.addActivity(a);
        src_.records += 2;
        return a.end;
    }

private:
    StoreWriter& writer_;
    ImportedSource& src_;
    int rank_, p_;
    std::string members_;
    int64_t compute_, comm_;
    StringId sendName_, recvName_;
};

// The walk through one rank's iterations, each a time-ordered list of paired
// forward and backward steps (settleIteration), with the transfers between
// virtual stages.
class ScheduleWalk {
public:
    ScheduleWalk(RankRecords& out, int rank, int p, int chunks)
        : out_(out), p_(p), virtualStages_(p * chunks), rank_(rank), next_((rank + 1) % p), prev_((rank + p - 1) % p)
    {
    }

    void iteration(const IterationRecords& it)
    {
        beginIteration(it.number);
        for (const StepRecord& s : it.steps) {
            if (s.begin)
                beginStep(s.at);
            else
                endStep(s);
        }
        out_.iteration(it.number, base_, it.length);
    }

    // The last iteration's first send, when its iteration had one step.
    void finish()
    {
        if (firstSendPending_)
            out_.transfer(true, next_, firstSendAt_);
    }

private:
    void beginIteration(int64_t number)
    {
        stepsThisIteration_ = 0;
        if (firstSendPending_) // an iteration with one step: the send stays an instant
            out_.transfer(true, next_, firstSendAt_);
        firstSendPending_ = false;
        base_ = kIterationStride * number; // number <= kMaxIteration: on the clock
    }

    void beginStep(TimeNs ts)
    {
        stepBegin_ = base_ + ts;
        if (firstSendPending_) {
            out_.transfer(true, next_, firstSendAt_, stepBegin_);
            firstSendPending_ = false;
        }
    }

    void endStep(const StepRecord& s)
    {
        const TimeNs start = stepBegin_, end = base_ + s.at;
        const std::string name = stepName(s.forward);
        const TimeNs kernelEnd = out_.step(name, start, end, s.microbatch, s.chunk);
        const bool first = stepsThisIteration_++ == 0;
        // A receive lasts while the rank waited for it: from its previous
        // step's end (the iteration's start before its first) to this step.
        const TimeNs waitFrom = first ? base_ : previousEnd_;
        const TimeNs recvFrom = waitFrom < start ? waitFrom : start - 1;
        previousEnd_ = std::max(previousEnd_, end);
        impliedTransfers(s.forward, s.chunk * p_ + rank_, first, start, kernelEnd, recvFrom);
    }

    // Virtual stage s = chunk x p + rank: a forward's input comes from s - 1
    // and its output goes to s + 1; a backward's the other way.
    void impliedTransfers(bool forward, int64_t s, bool first, TimeNs start, TimeNs kernelEnd, TimeNs recvFrom)
    {
        if (forward) {
            if (s > 0)
                out_.transfer(false, prev_, recvFrom, start);
            if (s < virtualStages_ - 1) {
                if (first && s == 0) {
                    firstSendPending_ = true;
                    firstSendAt_ = kernelEnd;
                } else {
                    out_.transfer(true, next_, kernelEnd);
                }
            }
        } else {
            if (s < virtualStages_ - 1)
                out_.transfer(false, next_, recvFrom, start);
            if (s > 0)
                out_.transfer(true, prev_, kernelEnd);
        }
    }

    RankRecords& out_;
    const int p_, virtualStages_, rank_, next_, prev_;
    // The one transfer whose time the timeline shows: the first of each
    // iteration, microbatch 0's activation from rank 0 to rank 1, which has
    // waited for it since the iteration began, with nothing else in flight.
    // Rank 0's send lasts until its next step starts; the other sends are
    // instants the schedule implies.
    bool firstSendPending_ = false;
    TimeNs firstSendAt_ = 0;
    int stepsThisIteration_ = 0;
    TimeNs previousEnd_ = 0; // the rank's last step's end
    TimeNs base_ = 0;
    TimeNs stepBegin_ = 0;
};

} // namespace

ImportedSource importMegatronTiming(const std::string& path, StoreWriter& writer, const ImportOptions& options,
                                    int p)
{
    MegatronFile f = readMegatronFile(path);
    if (options.rank) {
        if (f.aggregated)
            throw FormatError(path + ": --rank sets the rank of a file of one rank, but this aggregated file holds "
                                     "pipeline ranks " + rankRuns(ranksOf(f)));
        if (!validRank(*options.rank))
            throw FormatError("--rank " + std::to_string(*options.rank) + ": not a rank from 0 to 1,048,575");
        f.ranks.front().rank = *options.rank;
    }
    if (f.ranks.empty() || !f.ranks.front().rank)
        throw FormatError(path + ": no step records with a pp_rank; not a Megatron timing file");
    for (const RankTimings& t : f.ranks)
        if (p < 1 || *t.rank >= p)
            throw FormatError(path + ": pipeline rank " + std::to_string(*t.rank) + " in a job of " + std::to_string(p) +
                              " Megatron timing files; import every rank's file together");

    ImportedSource src = addSource(path, writer, f, p);
    for (const RankTimings& t : f.ranks) {
        addRank(writer, src, *t.rank, p);
        RankRecords records(writer, src, *t.rank, p);
        ScheduleWalk walk(records, *t.rank, p, f.chunks);
        for (const IterationRecords& it : t.iterations)
            walk.iteration(it);
        walk.finish();
    }
    if (src.records == 0)
        throw FormatError(path + ": no iteration with steps; not a Megatron timing file");
    return src;
}

} // namespace pipescope
