#include "import/optable/OpTable.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/Limits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

namespace pipescope {

namespace {

// A line longer than this is not a row of such a table (a row is some 100 bytes).
constexpr size_t kMaxLineBytes = 64 * 1024;
// Rows are held in memory until every step's extent is known (some 64 bytes each).
constexpr int64_t kMaxRows = 10'000'000;
// Times and durations: up to a day, in seconds.
constexpr double kMaxSeconds = 86'400;
constexpr int64_t kMaxStep = 999'999'999;
constexpr int64_t kMaxMicrobatch = 1'000'000;
constexpr int64_t kMaxChunk = 4'095;
// Steps are placed k x 10 s apart (a multiple of 10 s that leaves at least
// 1 s between steps when a step lasts longer than 9 s).
constexpr TimeNs kStrideUnit = 10'000'000'000;
constexpr TimeNs kMinGap = 1'000'000'000;

const char* const kAdvice = "a per-operation table names the columns dp_rank, stage, rank, step, optype, start_ts, "
                            "duration and mb_id (docs/import-optable.md)";

enum Column { DpRank, Stage, Rank, StepNo, Optype, StartTs, Duration, SeqId, Mc, MbId, Gmc, kColumns };
constexpr std::array<std::string_view, kColumns> kColumnNames = {"dp_rank", "stage",    "rank",   "step",
                                                                 "optype",  "start_ts", "duration", "seq_id",
                                                                 "mc",      "mb_id",    "gmc"};
constexpr std::array<bool, kColumns> kRequired = {true, true, true, true, true, true, true, false, false, true, false};

// What an operation becomes in the store.
enum class OpKind : uint8_t {
    Forward,
    Backward,
    ForwardRecv,
    ForwardSend,
    BackwardRecv,
    BackwardSend,
    DpAllGather,     // params-all-gather: over the stage's data-parallel replicas
    DpReduceScatter, // grads-reduce-scatter
    DpAllReduce,     // grads-all-reduce, params-all-reduce, all-grads-sync (without the distributed optimizer)
    Embedding,       // embedding-grads-all-reduce: the first and the last stage of one replica
    Layernorm,       // layernorm-grads-all-reduce: the ranks of one stage of one replica (tensor parallel)
    GradNorm,        // optimizer-clip-main-grad: the gradient norm's all-reduce over every rank
    Optimizer,       // optimizer and its other timers: compute
    Host,            // gc, batch-generator: the host only
    Unknown,
};

OpKind kindOf(std::string_view t)
{
    static const std::map<std::string_view, OpKind> kinds = {
        {"forward-compute", OpKind::Forward},
        {"backward-compute", OpKind::Backward},
        {"forward-recv", OpKind::ForwardRecv},
        {"forward-send", OpKind::ForwardSend},
        {"backward-recv", OpKind::BackwardRecv},
        {"backward-send", OpKind::BackwardSend},
        {"params-all-gather", OpKind::DpAllGather},
        {"grads-reduce-scatter", OpKind::DpReduceScatter},
        {"grads-all-reduce", OpKind::DpAllReduce},
        {"params-all-reduce", OpKind::DpAllReduce},
        {"all-grads-sync", OpKind::DpAllReduce},
        {"embedding-grads-all-reduce", OpKind::Embedding},
        {"layernorm-grads-all-reduce", OpKind::Layernorm},
        {"optimizer-clip-main-grad", OpKind::GradNorm},
        {"gc", OpKind::Host},
        {"batch-generator", OpKind::Host},
    };
    if (auto it = kinds.find(t); it != kinds.end())
        return it->second;
    if (t == "optimizer" || t.starts_with("optimizer-"))
        return OpKind::Optimizer;
    return OpKind::Unknown;
}

bool isCompute(OpKind k) { return k == OpKind::Forward || k == OpKind::Backward; }

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// The fields of one line: separated by `sep`, each optionally in double
// quotes (a doubled quote inside stands for one), blanks around trimmed.
void splitFields(std::string_view line, char sep, std::vector<std::string>& out)
{
    out.clear();
    size_t i = 0;
    while (true) {
        std::string field;
        while (i < line.size() && (line[i] == ' ' || (line[i] == '\t' && sep != '\t')))
            ++i;
        if (i < line.size() && line[i] == '"') {
            ++i;
            while (i < line.size()) {
                if (line[i] == '"') {
                    if (i + 1 < line.size() && line[i + 1] == '"') {
                        field += '"';
                        i += 2;
                        continue;
                    }
                    ++i;
                    break;
                }
                field += line[i++];
            }
            while (i < line.size() && line[i] != sep)
                ++i; // blanks after the closing quote
        } else {
            const size_t end = std::min(line.find(sep, i), line.size());
            field = std::string(trim(line.substr(i, end - i)));
            i = end;
        }
        out.push_back(std::move(field));
        if (i >= line.size())
            break;
        ++i; // the separator
        if (i == line.size()) {
            out.emplace_back(); // a trailing separator: an empty last field
            break;
        }
    }
}

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// The header's separator: a tab when the line has one, else a comma.
char separatorOf(std::string_view header) { return header.find('\t') != std::string_view::npos ? '\t' : ','; }

std::string_view firstLine(std::string_view head)
{
    if (head.substr(0, 3) == "\xEF\xBB\xBF")
        head.remove_prefix(3);
    return head.substr(0, std::min(head.find('\n'), head.size()));
}

// "f.csv: line 12, column duration", for messages.
std::string at(const std::string& path, int64_t line, Column c)
{
    return path + ": line " + formatCount(line) + ", column " + std::string(kColumnNames[static_cast<size_t>(c)]);
}

// One operation as the table records it; times in ns from the step's clock.
struct Op {
    TimeNs start = 0, end = 0;
    int64_t step = 0;
    int64_t line = 0;
    int32_t rank = 0, stage = 0, dp = 0;
    int32_t microbatch = -1, chunk = -1;
    uint16_t type = 0; // index into Table::types
    OpKind kind = OpKind::Unknown;
};

struct RankPlace {
    int stage = 0, dp = 0;
    int64_t line = 0; // where it was first seen
};

struct Table {
    std::vector<Op> ops;
    std::vector<std::string> types; // operation types as written
    std::map<std::string, uint16_t, std::less<>> typeIndex;
    std::map<std::string, std::pair<int64_t, int64_t>> unknown; // type -> (rows, first line)
    std::map<int, RankPlace> ranks;
};

// Reads the rows: every value checked where it is read, a message naming the
// file, the line and the column for the first that is wrong.
class RowReader {
public:
    RowReader(const std::string& path, Table& t) : path_(path), t_(t) {}

    void header(std::string_view line)
    {
        if (line.substr(0, 3) == "\xEF\xBB\xBF")
            line.remove_prefix(3);
        sep_ = separatorOf(line);
        splitFields(line, sep_, fields_);
        headerFields_ = fields_.size();
        index_.fill(-1);
        for (size_t i = 0; i < fields_.size(); ++i) {
            const std::string name = lower(fields_[i]);
            for (size_t c = 0; c < kColumns; ++c)
                if (name == kColumnNames[c]) {
                    if (index_[c] >= 0)
                        throw FormatError(path_ + ": line 1 (the header): column " + name + " appears twice; " + kAdvice);
                    index_[c] = static_cast<int>(i);
                }
        }
        for (size_t c = 0; c < kColumns; ++c)
            if (kRequired[c] && index_[c] < 0)
                throw FormatError(path_ + ": line 1 (the header): no column " + std::string(kColumnNames[c]) + "; " +
                                  kAdvice);
    }

    void row(std::string_view line, int64_t lineNo)
    {
        line_ = lineNo;
        splitFields(line, sep_, fields_);
        if (fields_.size() != headerFields_)
            throw FormatError(path_ + ": line " + formatCount(lineNo) + ": " + std::to_string(fields_.size()) +
                              " fields, but the header names " + std::to_string(headerFields_) + " columns");
        const std::string& type = fields_[static_cast<size_t>(index_[Optype])];
        if (type.empty())
            throw FormatError(at(path_, lineNo, Optype) + ": empty; an operation type (a Megatron-LM timer name) was expected");
        Op op;
        op.kind = kindOf(type);
        if (op.kind == OpKind::Unknown) {
            auto [it, fresh] = t_.unknown.try_emplace(printable(type, 80), 0, lineNo);
            ++it->second.first;
            return;
        }
        if (static_cast<int64_t>(t_.ops.size()) >= kMaxRows)
            throw FormatError(path_ + ": more than " + formatCount(kMaxRows) + " operations; pipescope reads tables of up "
                                                                              "to that many rows (split it by step)");
        op.line = lineNo;
        op.rank = static_cast<int32_t>(whole(Rank, 0, kMaxRank, "a rank from 0 to 1,048,575"));
        op.stage = static_cast<int32_t>(whole(Stage, 0, kMaxRank, "a pipeline stage from 0 to 1,048,575"));
        op.dp = static_cast<int32_t>(whole(DpRank, 0, kMaxRank, "a data-parallel rank from 0 to 1,048,575"));
        op.step = whole(StepNo, 0, kMaxStep, "a step number from 0 to 999,999,999");
        const double start = real(StartTs);
        if (std::abs(start) > kMaxSeconds)
            throw FormatError(at(path_, lineNo, StartTs) + ": " + printable(field(StartTs), 40) +
                              " is not a time from -86,400 to 86,400 s since the step began");
        const double duration = real(Duration);
        if (duration < 0)
            throw FormatError(at(path_, lineNo, Duration) + ": " + printable(field(Duration), 40) +
                              " is negative; a duration from 0 to 86,400 s was expected");
        if (duration > kMaxSeconds)
            throw FormatError(at(path_, lineNo, Duration) + ": " + printable(field(Duration), 40) +
                              " is not a duration from 0 to 86,400 s");
        op.start = static_cast<TimeNs>(std::llround(start * 1e9));
        op.end = op.start + static_cast<TimeNs>(std::llround(duration * 1e9));
        op.microbatch = static_cast<int32_t>(optionalWhole(MbId, -1, kMaxMicrobatch, "-1 or a microbatch number from 0 to 1,000,000"));
        op.chunk = index_[Mc] < 0 ? 0 : static_cast<int32_t>(optionalWhole(Mc, -1, kMaxChunk, "-1 or a model chunk from 0 to 4,095"));
        if (isCompute(op.kind)) {
            if (op.microbatch < 0)
                throw FormatError(at(path_, lineNo, MbId) + ": " + type + " without a microbatch (" +
                                  printable(field(MbId), 40) + "); a microbatch number from 0 to 1,000,000 was expected");
            if (op.chunk < 0)
                throw FormatError(at(path_, lineNo, Mc) + ": " + type + " without a model chunk (" +
                                  printable(field(Mc), 40) + "); a chunk number from 0 to 4,095 was expected");
        }
        auto [place, fresh] = t_.ranks.try_emplace(op.rank, RankPlace{op.stage, op.dp, lineNo});
        if (!fresh && (place->second.stage != op.stage || place->second.dp != op.dp))
            throw FormatError(path_ + ": line " + formatCount(lineNo) + ": rank " + std::to_string(op.rank) + " is stage " +
                              std::to_string(op.stage) + " of replica " + std::to_string(op.dp) + " here, but stage " +
                              std::to_string(place->second.stage) + " of replica " + std::to_string(place->second.dp) +
                              " at line " + formatCount(place->second.line) + "; each rank holds one stage of one replica");
        auto [ti, added] = t_.typeIndex.try_emplace(type, static_cast<uint16_t>(t_.types.size()));
        if (added)
            t_.types.push_back(type);
        op.type = ti->second;
        t_.ops.push_back(op);
    }

private:
    const std::string& field(Column c) const { return fields_[static_cast<size_t>(index_[c])]; }

    double real(Column c) const
    {
        const std::string& s = field(c);
        if (s.empty())
            throw FormatError(at(path_, line_, c) + ": empty; a number was expected");
        std::string_view v(s);
        if (v.front() == '+')
            v.remove_prefix(1);
        double d = 0;
        auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
        if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(d))
            throw FormatError(at(path_, line_, c) + ": " + printable(s, 40) + " is not a number");
        return d;
    }

    int64_t whole(Column c, int64_t lo, int64_t hi, const char* range) const
    {
        const double d = real(c);
        if (d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
            throw FormatError(at(path_, line_, c) + ": " + printable(field(c), 40) + " is not " + range);
        return static_cast<int64_t>(d);
    }

    // An empty field (a missing value, as pandas writes NaN) is -1.
    int64_t optionalWhole(Column c, int64_t lo, int64_t hi, const char* range) const
    {
        const std::string& s = field(c);
        if (s.empty() || lower(s) == "nan")
            return -1;
        return whole(c, lo, hi, range);
    }

    const std::string& path_;
    Table& t_;
    char sep_ = ',';
    size_t headerFields_ = 0;
    std::array<int, kColumns> index_{};
    std::vector<std::string> fields_;
    int64_t line_ = 0;
};

Table readTable(const std::string& path)
{
    Table t;
    RowReader reader(path, t);
    InputFile in(path);
    std::string pending;
    int64_t lineNo = 0;
    bool haveHeader = false;
    auto take = [&](std::string_view line) {
        ++lineNo;
        if (!haveHeader) {
            reader.header(line);
            haveHeader = true;
            return;
        }
        if (trim(line).empty())
            return;
        reader.row(line, lineNo);
    };
    auto tooLong = [&] {
        throw FormatError(path + ": line " + formatCount(lineNo + 1) + " is longer than 64 KiB; not a per-operation "
                                                                          "table (" + kAdvice + ")");
    };
    for (std::string_view chunk = in.read(); !chunk.empty(); chunk = in.read()) {
        size_t from = 0;
        for (size_t nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n', from)) {
            if (pending.empty()) {
                if (nl - from > kMaxLineBytes)
                    tooLong();
                take(chunk.substr(from, nl - from));
            } else {
                pending.append(chunk.substr(from, nl - from));
                if (pending.size() > kMaxLineBytes)
                    tooLong();
                take(pending);
                pending.clear();
            }
            from = nl + 1;
        }
        pending.append(chunk.substr(from));
        if (pending.size() > kMaxLineBytes)
            tooLong();
    }
    if (!pending.empty())
        take(pending);
    if (!haveHeader)
        throw FormatError(path + ": file is empty; " + kAdvice);
    return t;
}

// The job's layout: stages, replicas and, within a stage of a replica, the
// tensor-parallel ranks in rank order. Every stage of every replica must be
// there, with as many ranks as every other: the transfers and groups are
// between ranks of the same position.
struct Layout {
    int pp = 0, dp = 0, tp = 0;
    std::map<int, int> tpOf;                           // rank -> its place among its stage's ranks in its replica
    std::map<std::tuple<int, int, int>, int> rankAt; // (stage, dp, tp) -> rank
    // Ranks 0 .. n - 1 all in the table: n. A table that leaves ranks out
    // (StragglerAnalysis's SE job lists every second rank of 128) does not
    // say how many the job had: 0, unknown.
    int worldSize = 0;
};

Layout layoutOf(const std::string& path, const Table& t)
{
    Layout l;
    std::map<std::pair<int, int>, std::vector<int>> cell; // (stage, dp) -> ranks
    for (const auto& [rank, place] : t.ranks) {
        l.pp = std::max(l.pp, place.stage + 1);
        l.dp = std::max(l.dp, place.dp + 1);
        cell[{place.stage, place.dp}].push_back(rank);
    }
    if (!t.ranks.empty() && t.ranks.rbegin()->first + 1 == static_cast<int>(t.ranks.size()))
        l.worldSize = static_cast<int>(t.ranks.size());
    // The highest stage and replica bound the tables below: each must have
    // ranks in every stage and replica under it.
    auto lineOf = [&](auto pick, int value) {
        for (const auto& [rank, place] : t.ranks)
            if (pick(place) == value)
                return place.line;
        return int64_t{0};
    };
    for (int s = 0; s < l.pp; ++s)
        for (int d = 0; d < l.dp; ++d) {
            if (cell.count({s, d}))
                continue;
            const bool stageMissing = std::none_of(t.ranks.begin(), t.ranks.end(), [&](const auto& r) { return r.second.stage == s; });
            const std::string what = stageMissing ? "stage " + std::to_string(s) + " (the table holds stage " +
                                                        std::to_string(l.pp - 1) + ", line " +
                                                        formatCount(lineOf([](const RankPlace& p) { return p.stage; }, l.pp - 1)) + ")"
                                                  : "stage " + std::to_string(s) + " of replica " + std::to_string(d) +
                                                        " (the table holds replica " + std::to_string(l.dp - 1) + ", line " +
                                                        formatCount(lineOf([](const RankPlace& p) { return p.dp; }, l.dp - 1)) + ")";
            throw FormatError(path + ": no rank is " + what + "; every stage of every replica must be in the table (a "
                                     "rank's rows are missing?)");
        }
    l.tp = static_cast<int>(cell.begin()->second.size());
    for (const auto& [sd, ranks] : cell) {
        if (static_cast<int>(ranks.size()) != l.tp)
            throw FormatError(path + ": stage " + std::to_string(sd.first) + " of replica " + std::to_string(sd.second) +
                              " has " + std::to_string(ranks.size()) + " ranks (" + rankRuns(ranks) + "), but stage " +
                              std::to_string(cell.begin()->first.first) + " of replica " +
                              std::to_string(cell.begin()->first.second) + " has " + std::to_string(l.tp) +
                              "; every stage of every replica has as many ranks (a rank's rows are missing?)");
        for (size_t i = 0; i < ranks.size(); ++i) {
            l.tpOf[ranks[i]] = static_cast<int>(i);
            l.rankAt[{sd.first, sd.second, static_cast<int>(i)}] = ranks[i];
        }
    }
    return l;
}

// "[0, 2, 4, 6]", as the store writes a group's members.
std::string members(const std::vector<int>& ranks)
{
    std::string out = "[";
    for (size_t i = 0; i < ranks.size(); ++i)
        out += (i ? ", " : "") + std::to_string(ranks[i]);
    return out + "]";
}

// A process group as the NCCL records name it.
struct Group {
    std::string name;
    std::string ranks; // JSON array text
    int size = 0;
};

// The groups each rank's operations run over.
class Groups {
public:
    Groups(const Layout& l, const Table& t) : l_(l)
    {
        std::vector<int> all;
        for (const auto& [rank, place] : t.ranks)
            all.push_back(rank);
        world_ = {"world", members(all), static_cast<int>(all.size())};
    }

    // The pipeline of the rank's replica (and tensor-parallel place), stages in order.
    const Group& pipeline(int dp, int tp)
    {
        return cached(pipelines_, {dp, tp}, [&] {
            std::vector<int> r;
            for (int s = 0; s < l_.pp; ++s)
                r.push_back(l_.rankAt.at({s, dp, tp}));
            return Group{"pipeline replica " + std::to_string(dp) + suffix(tp), members(r), l_.pp};
        });
    }
    // The data-parallel replicas of one stage.
    const Group& dataParallel(int stage, int tp)
    {
        return cached(dataParallel_, {stage, tp}, [&] {
            std::vector<int> r;
            for (int d = 0; d < l_.dp; ++d)
                r.push_back(l_.rankAt.at({stage, d, tp}));
            return Group{"data-parallel stage " + std::to_string(stage) + suffix(tp), members(r), l_.dp};
        });
    }
    // Megatron-LM's embedding group: the first and the last stage of one replica.
    const Group& embedding(int dp, int tp)
    {
        return cached(embedding_, {dp, tp}, [&] {
            std::vector<int> r{l_.rankAt.at({0, dp, tp})};
            if (l_.pp > 1)
                r.push_back(l_.rankAt.at({l_.pp - 1, dp, tp}));
            return Group{"embedding replica " + std::to_string(dp) + suffix(tp), members(r), static_cast<int>(r.size())};
        });
    }
    // The tensor-parallel ranks of one stage of one replica.
    const Group& tensorParallel(int stage, int dp)
    {
        return cached(tensorParallel_, {stage, dp}, [&] {
            std::vector<int> r;
            for (int k = 0; k < l_.tp; ++k)
                r.push_back(l_.rankAt.at({stage, dp, k}));
            return Group{"tensor-parallel stage " + std::to_string(stage) + " replica " + std::to_string(dp), members(r),
                         l_.tp};
        });
    }
    const Group& world() const { return world_; }

private:
    std::string suffix(int tp) const { return l_.tp > 1 ? " tp " + std::to_string(tp) : ""; }
    template <class Make>
    const Group& cached(std::map<std::pair<int, int>, Group>& m, std::pair<int, int> key, Make make)
    {
        auto it = m.find(key);
        if (it == m.end())
            it = m.emplace(key, make()).first;
        return it->second;
    }

    const Layout& l_;
    Group world_;
    std::map<std::pair<int, int>, Group> pipelines_, dataParallel_, embedding_, tensorParallel_;
};

// Each sampled step on the common clock: it begins at its earliest operation
// (over every rank) and lasts until its latest ends.
struct StepPlace {
    TimeNs origin = 0; // the step's earliest start, on its own clock
    TimeNs span = 0;
    TimeNs base = 0;   // where it begins on the common clock
    int64_t ops = 0;
};

std::map<int64_t, StepPlace> placeSteps(const std::string& path, const Table& t, TimeNs& stride)
{
    std::map<int64_t, StepPlace> steps;
    std::map<int64_t, TimeNs> last;
    for (const Op& op : t.ops) {
        auto [it, fresh] = steps.try_emplace(op.step);
        auto [e, freshEnd] = last.try_emplace(op.step, op.end);
        if (fresh)
            it->second.origin = op.start;
        it->second.origin = std::min(it->second.origin, op.start);
        e->second = std::max(e->second, op.end);
        ++it->second.ops;
    }
    TimeNs longest = 0;
    for (auto& [number, s] : steps) {
        s.span = last[number] - s.origin;
        longest = std::max(longest, s.span);
    }
    stride = kStrideUnit * ((longest + kMinGap + kStrideUnit - 1) / kStrideUnit);
    if (static_cast<int64_t>(steps.size()) > kMaxTimeNs / 2 / stride)
        throw FormatError(path + ": " + formatCount(static_cast<int64_t>(steps.size())) + " steps of up to " +
                          formatDuration(longest) + " do not fit on one clock; import fewer steps");
    int64_t k = 0;
    for (auto& [number, s] : steps)
        s.base = stride * k++;
    return steps;
}

// Writes one rank's records.
class RankWriter {
public:
    RankWriter(StoreWriter& w, ImportedSource& src, int rank)
        : w_(w), src_(src), rank_(rank), compute_(w.stream(rank, rank, 7, "compute")),
          send_(w.stream(rank, rank, 23, "p2p send")), recv_(w.stream(rank, rank, 24, "p2p recv"))
    {
    }

    void range(const std::string& name, TimeNs start, TimeNs end)
    {
        CpuRangeRecord c;
        c.rank = rank_;
        c.tid = 1;
        c.start = start;
        c.end = end;
        c.name = name_(name);
        w_.addCpuRange(c);
        ++src_.records;
    }

    int64_t kernel(int64_t stream, const std::string& name, TimeNs start, TimeNs end)
    {
        ActivityRecord a;
        a.rank = rank_;
        a.streamId = stream;
        a.start = start;
        a.end = std::max(end, start + 1);
        a.name = name_(name);
        ++src_.records;
        return w_.addActivity(a);
    }

    // A communication kernel and its NCCL record.
    void communication(Collective kind, const Group& g, std::optional<int> peer, const std::string& name, TimeNs start,
                       TimeNs end)
    {
        const bool p2p = kind == Collective::Send || kind == Collective::Recv;
        const int64_t id = kernel(p2p ? (kind == Collective::Send ? send_ : recv_) : collectiveStream(g), name, start, end);
        NcclRecord n;
        n.rank = rank_;
        n.activityId = id;
        n.kind = kind;
        n.isP2p = p2p;
        n.peer = peer;
        n.groupName = g.name;
        n.groupDesc = g.name;
        n.groupRanks = g.ranks;
        n.groupSize = g.size;
        n.start = start;
        n.end = std::max(end, start + 1);
        w_.addNcclOp(n);
        ++src_.records;
    }

    int64_t compute() const { return compute_; }

private:
    // NCCL runs each communicator on its own stream: one stream per group
    // (31, 32, ...), so collectives of different groups may overlap.
    int64_t collectiveStream(const Group& g)
    {
        auto it = collectives_.find(g.name);
        if (it == collectives_.end())
            it = collectives_.emplace(g.name, w_.stream(rank_, rank_, 31 + static_cast<int64_t>(collectives_.size()), g.name)).first;
        return it->second;
    }

    StringId name_(const std::string& s)
    {
        auto it = names_.find(s);
        if (it == names_.end())
            it = names_.emplace(s, w_.intern(s)).first;
        return it->second;
    }

    StoreWriter& w_;
    ImportedSource& src_;
    int rank_;
    int64_t compute_, send_, recv_;
    std::map<std::string, int64_t> collectives_; // group name -> stream
    std::map<std::string, StringId> names_;
};

// The neighbour a transfer goes to or comes from: the next stage for a
// forward's output and a backward's input, the previous one otherwise, in a
// ring (interleaved schedules hand the last stage's output to the first).
int peerOf(const std::string& path, const Op& op, const Layout& l, const std::string& type)
{
    const bool next = op.kind == OpKind::ForwardSend || op.kind == OpKind::BackwardRecv;
    if (l.pp < 2)
        throw FormatError(path + ": line " + formatCount(op.line) + ": " + type + " in a job of one pipeline stage; a "
                                                                                 "transfer needs a neighbouring stage");
    const int stage = next ? (op.stage + 1) % l.pp : (op.stage + l.pp - 1) % l.pp;
    return l.rankAt.at({stage, op.dp, l.tpOf.at(op.rank)});
}

// Compute operations recorded twice on a rank in one step would make two
// steps of one microbatch.
void refuseRepeatedSteps(const std::string& path, const Table& t)
{
    std::map<std::tuple<int, int64_t, bool, int, int>, int64_t> seen;
    for (const Op& op : t.ops) {
        if (!isCompute(op.kind))
            continue;
        auto [it, fresh] = seen.try_emplace({op.rank, op.step, op.kind == OpKind::Forward, op.chunk, op.microbatch}, op.line);
        if (!fresh)
            throw FormatError(path + ": line " + formatCount(op.line) + ": " + t.types[op.type] + " of microbatch " +
                              std::to_string(op.microbatch) + " (chunk " + std::to_string(op.chunk) + ") on rank " +
                              std::to_string(op.rank) + " in step " + std::to_string(op.step) +
                              " is recorded again (first at line " + formatCount(it->second) + ")");
    }
}

} // namespace

bool looksLikeOpTable(std::string_view head)
{
    const std::string_view line = firstLine(head);
    if (line.empty() || line.size() > kMaxLineBytes)
        return false;
    std::vector<std::string> fields;
    splitFields(line, separatorOf(line), fields);
    std::set<std::string> names;
    for (const std::string& f : fields)
        names.insert(lower(f));
    if (!names.count("optype") || !names.count("start_ts") || !names.count("duration"))
        return false;
    int place = 0;
    for (const char* n : {"rank", "stage", "step", "dp_rank"})
        place += static_cast<int>(names.count(n));
    return place >= 2;
}

bool looksLikeParquet(std::string_view head) { return head.substr(0, 4) == "PAR1"; }

std::optional<std::string> opTableFormat(const std::string& path, std::string_view head)
{
    if (looksLikeParquet(head))
        throw FormatError(path + ": a Parquet file; pipescope reads per-operation tables as CSV: convert it with "
                                 "`python3 -c \"import pandas as pd; pd.read_parquet('" + path + "').to_csv('" + path +
                          ".csv', index=False)\"` (or duckdb) and import the CSV");
    if (looksLikeOpTable(head))
        return std::string("optable");
    return std::nullopt;
}

ImportedSource importOpTable(const std::string& path, StoreWriter& writer, const ImportOptions& options)
{
    if (options.rank)
        throw FormatError(path + ": --rank sets the rank of a file of one rank, but a per-operation table holds every "
                                 "rank (its rank column)");
    const Table t = readTable(path);
    if (t.ops.empty()) {
        std::string what = path + ": no operation pipescope reads";
        if (!t.unknown.empty()) {
            what += " (operation types:";
            for (const auto& [type, seen] : t.unknown)
                what += " " + type;
            what += ")";
        }
        throw FormatError(what + "; " + kAdvice);
    }
    if (std::none_of(t.ops.begin(), t.ops.end(), [](const Op& op) { return isCompute(op.kind); }))
        throw FormatError(path + ": no forward-compute or backward-compute operation; the pipeline's steps are those");
    refuseRepeatedSteps(path, t);
    const Layout l = layoutOf(path, t);
    for (const Op& op : t.ops) // every transfer has its neighbour before anything is written
        if (op.kind >= OpKind::ForwardRecv && op.kind <= OpKind::BackwardSend)
            peerOf(path, op, l, t.types[op.type]);
    TimeNs stride = 0;
    const std::map<int64_t, StepPlace> steps = placeSteps(path, t, stride);

    ImportedSource src;
    SourceRecord sr;
    sr.path = path;
    sr.format = "optable";
    nlohmann::json details{{"pipeline_degree", l.pp},          {"data_parallel", l.dp},
                           {"tensor_parallel", l.tp},          {"steps", steps.size()},
                           {"first_step", steps.begin()->first}, {"last_step", steps.rbegin()->first},
                           {"step_stride_ns", stride},        {"operations", t.ops.size()}};
    if (!t.unknown.empty()) {
        nlohmann::json skipped = nlohmann::json::object();
        for (const auto& [type, seen] : t.unknown)
            skipped[type] = seen.first;
        details["skipped_operation_types"] = skipped;
    }
    sr.details = details.dump();
    src.sourceId = writer.addSource(sr);
    if (l.worldSize > 0)
        src.worldSize = l.worldSize;
    for (const auto& [rank, place] : t.ranks) {
        src.ranks.push_back(rank);
        RankInfo ri;
        ri.rank = rank;
        if (l.worldSize > 0)
            ri.worldSize = l.worldSize;
        ri.device = rank;
        ri.sourceId = src.sourceId;
        writer.addRank(ri);
    }
    for (const auto& [type, seen] : t.unknown)
        writer.diagnostic(src.sourceId, Severity::Warning, "optable_unknown_operation",
                          path + ": line " + formatCount(seen.second) + ": operation type '" + type +
                              "' is not one pipescope reads (docs/import-optable.md); its rows are skipped",
                          seen.first);

    Groups groups(l, t);
    std::map<int, RankWriter> out;
    for (const auto& [rank, place] : t.ranks)
        out.try_emplace(rank, writer, src, rank);
    // Each rank's steps: a ProfilerStep#N range over the whole step.
    std::set<std::pair<int64_t, int>> stepsOfRank;
    for (const Op& op : t.ops)
        stepsOfRank.emplace(op.step, op.rank);
    for (const auto& [number, rank] : stepsOfRank) {
        const StepPlace& s = steps.at(number);
        out.at(rank).range("ProfilerStep#" + std::to_string(number), s.base, s.base + s.span);
    }
    for (const Op& op : t.ops) {
        const StepPlace& s = steps.at(op.step);
        const TimeNs start = s.base + (op.start - s.origin), end = s.base + (op.end - s.origin);
        RankWriter& w = out.at(op.rank);
        const std::string& type = t.types[op.type];
        const int tp = l.tpOf.at(op.rank);
        switch (op.kind) {
        case OpKind::Forward:
        case OpKind::Backward: {
            const std::string chunk = std::to_string(op.chunk);
            w.range(std::string("pipescope/") + (op.kind == OpKind::Forward ? "forward" : "backward") +
                        " mb=" + std::to_string(op.microbatch) + " stage=" + std::to_string(op.stage) + " chunk=" + chunk,
                    start, end);
            w.kernel(w.compute(), type + " (chunk " + chunk + ")", start, end);
            break;
        }
        case OpKind::ForwardRecv:
        case OpKind::ForwardSend:
        case OpKind::BackwardRecv:
        case OpKind::BackwardSend: {
            const bool send = op.kind == OpKind::ForwardSend || op.kind == OpKind::BackwardSend;
            w.communication(send ? Collective::Send : Collective::Recv, groups.pipeline(op.dp, tp),
                            peerOf(path, op, l, type), "ncclDevKernel_SendRecv (" + type + ")", start, end);
            break;
        }
        case OpKind::DpAllGather:
            w.communication(Collective::AllGather, groups.dataParallel(op.stage, tp), std::nullopt,
                            "ncclDevKernel_AllGather (" + type + ")", start, end);
            break;
        case OpKind::DpReduceScatter:
            w.communication(Collective::ReduceScatter, groups.dataParallel(op.stage, tp), std::nullopt,
                            "ncclDevKernel_ReduceScatter (" + type + ")", start, end);
            break;
        case OpKind::DpAllReduce:
            w.communication(Collective::AllReduce, groups.dataParallel(op.stage, tp), std::nullopt,
                            "ncclDevKernel_AllReduce (" + type + ")", start, end);
            break;
        case OpKind::Embedding:
            w.communication(Collective::AllReduce, groups.embedding(op.dp, tp), std::nullopt,
                            "ncclDevKernel_AllReduce (" + type + ")", start, end);
            break;
        case OpKind::Layernorm:
            w.communication(Collective::AllReduce, groups.tensorParallel(op.stage, op.dp), std::nullopt,
                            "ncclDevKernel_AllReduce (" + type + ")", start, end);
            break;
        case OpKind::GradNorm:
            w.communication(Collective::AllReduce, groups.world(), std::nullopt, "ncclDevKernel_AllReduce (" + type + ")",
                            start, end);
            break;
        case OpKind::Optimizer:
            w.kernel(w.compute(), type, start, end);
            break;
        case OpKind::Host:
            w.range(type, start, end);
            break;
        case OpKind::Unknown:
            break;
        }
    }
    return src;
}

} // namespace pipescope
