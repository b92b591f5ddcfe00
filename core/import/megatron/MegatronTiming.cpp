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

ImportedSource importMegatronTiming(const std::string& path, StoreWriter& writer, const ImportOptions& options,
                                    int p)
{
    const json doc = readList(path);
    const int rank = options.rank ? *options.rank : rankOf(doc, path);
    if (p < 1 || rank >= p)
        throw FormatError(path + ": pipeline rank " + std::to_string(rank) + " in a job of " + std::to_string(p) +
                          " Megatron timing files; import every rank's file together");
    int chunks = 1;
    for (const json& r : doc)
        if (r.is_object())
            if (auto c = integer(r, "model_chunk"); c && *c >= 0 && *c < 4096)
                chunks = std::max(chunks, static_cast<int>(*c) + 1);
    const int virtualStages = p * chunks;

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
    std::string members = "[";
    for (int r = 0; r < p; ++r)
        members += (r ? ", " : "") + std::to_string(r);
    members += "]";

    const int64_t compute = writer.stream(rank, rank, 7, "compute");
    const int64_t comm = writer.stream(rank, rank, 23, "p2p");
    const StringId sendName = writer.intern("ncclDevKernel_SendRecv (send implied by the schedule)");
    const StringId recvName = writer.intern("ncclDevKernel_SendRecv (receive implied by the schedule)");
    auto transfer = [&](bool send, int peer, TimeNs at, TimeNs until = 0) {
        ActivityRecord a;
        a.rank = rank;
        a.streamId = comm;
        a.start = at;
        a.end = std::max(at + 1, until);
        a.name = send ? sendName : recvName;
        const int64_t id = writer.addActivity(a);
        NcclRecord n;
        n.rank = rank;
        n.activityId = id;
        n.kind = send ? Collective::Send : Collective::Recv;
        n.isP2p = true;
        n.peer = peer;
        n.groupName = "pipeline";
        n.groupDesc = "pipeline";
        n.groupRanks = members;
        n.groupSize = p;
        n.start = a.start;
        n.end = a.end;
        writer.addNcclOp(n);
        src.records += 2;
    };

    // The one transfer whose time the timeline shows: the first of each
    // iteration, microbatch 0's activation from rank 0 to rank 1, which has
    // waited for it since the iteration began, with nothing else in flight.
    // Rank 0's send lasts until its next step starts; the other sends are
    // instants the schedule implies.
    bool firstSendPending = false;
    TimeNs firstSendAt = 0;
    int stepsThisIteration = 0;
    TimeNs previousEnd = 0; // the rank's last step's end
    int iteration = -1;
    TimeNs base = 0;
    TimeNs stepBegin = 0;
    bool inStep = false;
    std::string stepName;
    const int next = (rank + 1) % p, prev = (rank + p - 1) % p;
    for (const json& r : doc) {
        if (!r.is_object())
            continue;
        const std::string name = stringOf(r, "name"), ph = stringOf(r, "ph");
        if (name == "iteration") {
            if (ph == "B") {
                ++iteration;
                stepsThisIteration = 0;
                if (firstSendPending) // an iteration with one step: the send stays an instant
                    transfer(true, next, firstSendAt);
                firstSendPending = false;
                base = kIterationStride * iteration;
                if (!validTime(base))
                    throw FormatError(path + ": too many iterations");
                continue;
            }
            if (ph != "E" || iteration < 0)
                continue;
            const TimeNs length = integer(r, "duration_wall").value_or(integer(r, "rel_ts").value_or(0));
            if (length <= 0 || length >= kIterationStride)
                throw FormatError(path + ": iteration " + std::to_string(iteration) + " lasts " + std::to_string(length) +
                                  " ns; Megatron timing iterations up to 10 s are supported");
            CpuRangeRecord c;
            c.rank = rank;
            c.tid = 1;
            c.start = base;
            c.end = base + length;
            c.name = writer.intern("ProfilerStep#" + std::to_string(iteration));
            writer.addCpuRange(c);
            ++src.records;
            continue;
        }
        if (name != "forward" && name != "backward")
            continue;
        const auto ts = integer(r, "rel_ts");
        if (iteration < 0 || !ts || *ts < 0 || *ts >= kIterationStride)
            throw FormatError(path + ": a " + name + " record outside an iteration or without a valid rel_ts");
        if (ph == "B") {
            stepBegin = base + *ts;
            inStep = true;
            stepName = name;
            if (firstSendPending) {
                transfer(true, next, firstSendAt, stepBegin);
                firstSendPending = false;
            }
            continue;
        }
        if (ph != "E" || !inStep || stepName != name)
            throw FormatError(path + ": a " + name + " end without its begin (records out of order)");
        const TimeNs start = stepBegin, end = base + *ts;
        inStep = false;
        const auto mb = integer(r, "microbatch"), chunk = integer(r, "model_chunk");
        if (end < start || !mb || !chunk || *mb < 0 || *mb > 1'000'000 || *chunk < 0 || *chunk >= chunks)
            throw FormatError(path + ": a " + name + " step without a valid microbatch, model_chunk or duration");
        const bool forward = name == "forward";
        const std::string label = "pipescope/" + name + " mb=" + std::to_string(*mb) + " chunk=" + std::to_string(*chunk);
        CpuRangeRecord c;
        c.rank = rank;
        c.tid = 1;
        c.start = start;
        c.end = end;
        c.name = writer.intern(label);
        writer.addCpuRange(c);
        ActivityRecord a;
        a.rank = rank;
        a.streamId = compute;
        a.start = start;
        a.end = std::max(end, start + 1);
        a.name = writer.intern("megatron " + name + " step (chunk " + std::to_string(*chunk) + ")");
        writer.addActivity(a);
        src.records += 2;
        // Virtual stage s = chunk x p + rank: a forward's input comes from
        // s - 1 and its output goes to s + 1; a backward's the other way.
        const int64_t s = *chunk * p + rank;
        const bool first = stepsThisIteration++ == 0;
        // A receive lasts while the rank waited for it: from its previous
        // step's end (the iteration's start before its first) to this step.
        const TimeNs waitFrom = first ? base : previousEnd;
        const TimeNs recvFrom = waitFrom < start ? waitFrom : start - 1;
        previousEnd = std::max(previousEnd, end);
        if (forward) {
            if (s > 0)
                transfer(false, prev, recvFrom, start);
            if (s < virtualStages - 1) {
                if (first && s == 0) {
                    firstSendPending = true;
                    firstSendAt = a.end;
                } else {
                    transfer(true, next, a.end);
                }
            }
        } else {
            if (s < virtualStages - 1)
                transfer(false, next, recvFrom, start);
            if (s > 0)
                transfer(true, prev, a.end);
        }
    }
    if (firstSendPending)
        transfer(true, next, firstSendAt);
    if (src.records == 0)
        throw FormatError(path + ": no iteration with steps; not a Megatron timing file");
    return src;
}

} // namespace pipescope
