#include "import/megatron/MegatronTiming.h"

#include "util/Error.h"
#include "util/InputFile.h"
#include "util/Limits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>

namespace pipescope {

namespace {

using json = nlohmann::json;

// Iteration k starts at k x this on every rank.
constexpr TimeNs kIterationStride = 10'000'000'000;

json readList(const std::string& path)
{
    const std::string text = InputFile::readAll(path, kMaxDescriptionBytes);
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_array())
        throw FormatError(path + ": not a Megatron timing file (a JSON list of begin/end records was expected)");
    return doc;
}

std::optional<int64_t> integer(const json& r, const char* key)
{
    auto it = r.find(key);
    if (it == r.end() || !it->is_number_integer())
        return std::nullopt;
    return it->get<int64_t>();
}

std::string stringOf(const json& r, const char* key)
{
    auto it = r.find(key);
    return it != r.end() && it->is_string() ? it->get<std::string>() : std::string();
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
    const std::string_view first = head.substr(i, head.find('}', i) == std::string_view::npos ? std::string_view::npos
                                                                                            : head.find('}', i) - i);
    return first.find("\"name\"") != std::string_view::npos && first.find("\"iteration\"") != std::string_view::npos &&
           first.find("\"ph\"") != std::string_view::npos;
}

namespace {

// The pipeline rank a file's end records carry.
int rankOf(const json& doc, const std::string& path)
{
    std::optional<int64_t> rank;
    for (const json& r : doc) {
        if (!r.is_object() || stringOf(r, "ph") != "E")
            continue;
        auto pp = integer(r, "pp_rank");
        if (!pp)
            continue;
        if (rank && *rank != *pp)
            throw FormatError(path + ": records of pipeline ranks " + std::to_string(*rank) + " and " + std::to_string(*pp) +
                              "; a Megatron timing file holds one rank");
        rank = pp;
    }
    if (!rank || !validRank(*rank))
        throw FormatError(path + ": no step records with a pp_rank; not a Megatron timing file");
    return static_cast<int>(*rank);
}

} // namespace

int megatronTimingRank(const std::string& path)
{
    return rankOf(readList(path), path);
}

namespace {

// How many model chunks the file's records name (at least 1).
int chunksOf(const json& doc)
{
    int chunks = 1;
    for (const json& r : doc)
        if (r.is_object())
            if (auto c = integer(r, "model_chunk"); c && *c >= 0 && *c < 4096)
                chunks = std::max(chunks, static_cast<int>(*c) + 1);
    return chunks;
}

// The file's source and its rank, the rank's device standing for itself.
ImportedSource addSourceAndRank(const std::string& path, StoreWriter& writer, int rank, int p, int chunks)
{
    ImportedSource src;
    SourceRecord sr;
    sr.path = path;
    sr.format = "megatron-timing";
    sr.rank = rank;
    sr.details = json{{"pipeline_degree", p}, {"chunks", chunks}, {"iteration_stride_ns", kIterationStride}}.dump();
    src.sourceId = writer.addSource(sr);
    src.ranks = {rank};
    src.worldSize = p;
    RankInfo ri;
    ri.rank = rank;
    ri.worldSize = p;
    ri.device = rank;
    ri.sourceId = src.sourceId;
    writer.addRank(ri);
    return src;
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
    void iteration(int index, TimeNs start, TimeNs length)
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

// The walk through one rank's records in file order: iterations around
// forward and backward steps, with the transfers between virtual stages.
class ScheduleWalk {
public:
    ScheduleWalk(const std::string& path, RankRecords& out, int rank, int p, int chunks)
        : path_(path), out_(out), p_(p), chunks_(chunks), virtualStages_(p * chunks), rank_(rank),
          next_((rank + 1) % p), prev_((rank + p - 1) % p)
    {
    }

    void record(const json& r)
    {
        const std::string name = stringOf(r, "name"), ph = stringOf(r, "ph");
        if (name == "iteration") {
            if (ph == "B")
                beginIteration();
            else if (ph == "E" && iteration_ >= 0)
                endIteration(r);
            return;
        }
        if (name != "forward" && name != "backward")
            return;
        const auto ts = integer(r, "rel_ts");
        if (iteration_ < 0 || !ts || *ts < 0 || *ts >= kIterationStride)
            throw FormatError(path_ + ": a " + name + " record outside an iteration or without a valid rel_ts");
        if (ph == "B")
            beginStep(name, *ts);
        else
            endStep(r, name, ph, *ts);
    }

    // The last iteration's first send, when its iteration had one step.
    void finish()
    {
        if (firstSendPending_)
            out_.transfer(true, next_, firstSendAt_);
    }

private:
    void beginIteration()
    {
        ++iteration_;
        stepsThisIteration_ = 0;
        if (firstSendPending_) // an iteration with one step: the send stays an instant
            out_.transfer(true, next_, firstSendAt_);
        firstSendPending_ = false;
        base_ = kIterationStride * iteration_;
        if (!validTime(base_))
            throw FormatError(path_ + ": too many iterations");
    }

    void endIteration(const json& r)
    {
        const TimeNs length = integer(r, "duration_wall").value_or(integer(r, "rel_ts").value_or(0));
        if (length <= 0 || length >= kIterationStride)
            throw FormatError(path_ + ": iteration " + std::to_string(iteration_) + " lasts " + std::to_string(length) +
                              " ns; Megatron timing iterations up to 10 s are supported");
        out_.iteration(iteration_, base_, length);
    }

    void beginStep(const std::string& name, TimeNs ts)
    {
        stepBegin_ = base_ + ts;
        inStep_ = true;
        stepName_ = name;
        if (firstSendPending_) {
            out_.transfer(true, next_, firstSendAt_, stepBegin_);
            firstSendPending_ = false;
        }
    }

    void endStep(const json& r, const std::string& name, const std::string& ph, TimeNs ts)
    {
        if (ph != "E" || !inStep_ || stepName_ != name)
            throw FormatError(path_ + ": a " + name + " end without its begin (records out of order)");
        const TimeNs start = stepBegin_, end = base_ + ts;
        inStep_ = false;
        const auto mb = integer(r, "microbatch"), chunk = integer(r, "model_chunk");
        if (end < start || !mb || !chunk || *mb < 0 || *mb > 1'000'000 || *chunk < 0 || *chunk >= chunks_)
            throw FormatError(path_ + ": a " + name + " step without a valid microbatch, model_chunk or duration");
        const TimeNs kernelEnd = out_.step(name, start, end, *mb, *chunk);
        const bool first = stepsThisIteration_++ == 0;
        // A receive lasts while the rank waited for it: from its previous
        // step's end (the iteration's start before its first) to this step.
        const TimeNs waitFrom = first ? base_ : previousEnd_;
        const TimeNs recvFrom = waitFrom < start ? waitFrom : start - 1;
        previousEnd_ = std::max(previousEnd_, end);
        impliedTransfers(name == "forward", *chunk * p_ + rank_, first, start, kernelEnd, recvFrom);
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

    const std::string& path_;
    RankRecords& out_;
    const int p_, chunks_, virtualStages_, rank_, next_, prev_;
    // The one transfer whose time the timeline shows: the first of each
    // iteration, microbatch 0's activation from rank 0 to rank 1, which has
    // waited for it since the iteration began, with nothing else in flight.
    // Rank 0's send lasts until its next step starts; the other sends are
    // instants the schedule implies.
    bool firstSendPending_ = false;
    TimeNs firstSendAt_ = 0;
    int stepsThisIteration_ = 0;
    TimeNs previousEnd_ = 0; // the rank's last step's end
    int iteration_ = -1;
    TimeNs base_ = 0;
    TimeNs stepBegin_ = 0;
    bool inStep_ = false;
    std::string stepName_;
};

} // namespace

ImportedSource importMegatronTiming(const std::string& path, StoreWriter& writer, const ImportOptions& options,
                                    int p)
{
    const json doc = readList(path);
    const int rank = options.rank ? *options.rank : rankOf(doc, path);
    if (p < 1 || rank >= p)
        throw FormatError(path + ": pipeline rank " + std::to_string(rank) + " in a job of " + std::to_string(p) +
                          " Megatron timing files; import every rank's file together");
    const int chunks = chunksOf(doc);

    ImportedSource src = addSourceAndRank(path, writer, rank, p, chunks);
    RankRecords records(writer, src, rank, p);
    ScheduleWalk walk(path, records, rank, p, chunks);
    for (const json& r : doc)
        if (r.is_object())
            walk.record(r);
    walk.finish();
    if (src.records == 0)
        throw FormatError(path + ": no iteration with steps; not a Megatron timing file");
    return src;
}

} // namespace pipescope
