// A sharded job read as one store (store/detail/Shards.h).
#include "store/detail/Shards.h"
#include "store/detail/StoreSteps.h"
#include "store/Schema.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/Work.h"

#include <algorithm>
#include <thread>
#include <future>
#include <deque>
#include <filesystem>
#include <set>
#include <tuple>
#include <unordered_map>

namespace pipescope {

namespace fs = std::filesystem;
using store::detail::localId;
using store::detail::shardOfId;
using store::detail::tagId;

void Store::openShards(const std::string& folder)
{
    auto shards = std::make_unique<store::detail::Shards>();
    shards->folder = folder;
    shards->guard = AtomicOutput::InputGuard(folder);
    shards->index = readJobIndex(folder);
    if (!shards->index.complete())
        throw FormatError(incompleteJobMessage(folder, shards->index));
    shards->stores.resize(static_cast<size_t>(shards->index.shards));
    version_ = kSchemaVersion;
    const std::string n = std::to_string(shards->index.shards);
    for (const ShardRecord& r : shards->index.records) {
        if (r.file.empty()) {
            if (!r.ranks.empty())
                throw FormatError(folder + ": the job index is damaged: shard " + std::to_string(r.index) + " of " + n +
                                  " lists " + std::to_string(r.ranks.size()) +
                                  " ranks but names no store; re-run the import of that shard with --shard " +
                                  std::to_string(r.index) + "/" + n);
            continue;
        }
        const std::string file = (fs::path(folder) / r.file).string();
        std::error_code ec;
        if (!fs::is_regular_file(file, ec)) // not a folder (a job cannot hold a job, or itself)
            throw FormatError(folder + ": shard " + std::to_string(r.index) + " of " + std::to_string(shards->index.shards) +
                              " (" + r.file + ") is missing or not a store file; re-run the import of that shard with --shard " +
                              std::to_string(r.index) + "/" + std::to_string(shards->index.shards));
        try {
            shards->stores[static_cast<size_t>(r.index)] = std::make_unique<Store>(file);
        } catch (const Error& e) {
            throw FormatError(folder + ": shard " + std::to_string(r.index) + " of " + std::to_string(shards->index.shards) +
                              " cannot be read (" + e.what() + "); re-run the import of that shard with --shard " +
                              std::to_string(r.index) + "/" + std::to_string(shards->index.shards));
        }
        Store& shard = *shards->stores[static_cast<size_t>(r.index)];
        version_ = std::min(version_, shard.schemaVersion());
        // The store must be the one its record describes, not another job's put in its place.
        std::vector<int> held;
        auto st = shard.database().prepare("SELECT rank FROM ranks ORDER BY rank");
        while (st.step())
            held.push_back(static_cast<int>(st.int64(0)));
        std::vector<int> listed = r.ranks;
        std::sort(listed.begin(), listed.end());
        if (held != listed)
            throw FormatError(folder + ": shard " + std::to_string(r.index) + " of " + n + " (" + r.file + ") holds ranks " +
                              rankRuns(held) + " but the job index lists " + rankRuns(listed) +
                              ": the store is not this job's (replaced or copied from another import); re-run the import "
                              "of that shard with --shard " + std::to_string(r.index) + "/" + n);
        for (int rank : r.ranks)
            if (auto [it, fresh] = shards->shardOfRank.emplace(rank, r.index); !fresh)
                throw FormatError(folder + ": rank " + std::to_string(rank) + " is in shards " + std::to_string(it->second) +
                                  " and " + std::to_string(r.index) + "; the job mixes two imports, re-run the import");
    }
    shards_ = std::move(shards);
}

namespace store::detail {

Store* Shards::ofRank(int rank) const
{
    auto it = shardOfRank.find(rank);
    return it == shardOfRank.end() ? nullptr : stores[static_cast<size_t>(it->second)].get();
}

Store* Shards::ofId(int64_t id) const
{
    const int s = shardOfId(id);
    return s >= 0 && static_cast<size_t>(s) < stores.size() ? stores[static_cast<size_t>(s)].get() : nullptr;
}

TimeNs Shards::clockOffset(int shard) const
{
    const auto& off = index.shardClockOffsets;
    return shard >= 0 && static_cast<size_t>(shard) < off.size() ? off[static_cast<size_t>(shard)] : 0;
}

TimeNs Shards::clockOffsetOfRank(int rank) const
{
    auto it = shardOfRank.find(rank);
    return it == shardOfRank.end() ? 0 : clockOffset(it->second);
}

void shiftTrace(Trace& t, TimeNs by)
{
    if (by == 0)
        return;
    for (auto& s : t.sources)
        s.clockOffset += by;
    for (auto& a : t.activities) {
        a.start += by;
        a.end += by;
        if (a.launchStart)
            a.launchStart = *a.launchStart + by;
    }
    for (auto& op : t.ncclOps) {
        if (op.start)
            *op.start += by;
        if (op.end)
            *op.end += by;
    }
    for (auto& c : t.cpuRanges) {
        c.start += by;
        c.end += by;
    }
    for (auto& e : t.memoryEvents)
        e.ts += by;
}

void shiftSummary(StoreSummary& s, TimeNs by)
{
    if (by == 0)
        return;
    auto shift = [by](std::optional<TimeNs>& t) {
        if (t)
            *t += by;
    };
    for (auto& src : s.sources)
        src.clockOffset += by;
    for (auto& g : s.gpuSummaries) {
        shift(g.kernelFirst);
        shift(g.kernelLast);
        shift(g.gpuFirst);
        shift(g.gpuLast);
    }
    shift(s.first);
    shift(s.last);
}

StreamIds numberStreams(const std::vector<std::pair<int, std::vector<StreamInfo>>>& perShard)
{
    std::vector<std::tuple<int, int, int64_t>> all; // rank, shard, local id
    for (const auto& [shard, streams] : perShard)
        for (const StreamInfo& s : streams)
            all.emplace_back(s.rank, shard, s.id);
    std::sort(all.begin(), all.end());
    StreamIds ids;
    int64_t next = 1;
    for (const auto& [rank, shard, id] : all)
        ids.emplace(std::make_pair(shard, id), next++);
    return ids;
}

namespace {

int64_t streamId(const StreamIds& ids, int shard, int64_t local)
{
    auto it = ids.find({shard, local});
    // A record naming a stream its shard lacks keeps a number no stream has.
    return it != ids.end() ? it->second : -tagId(shard, local) - 1;
}

void mergeMeta(std::map<std::string, std::string>& into, const std::map<std::string, std::string>& from)
{
    for (const auto& [k, v] : from)
        if (!k.starts_with("count."))
            into.emplace(k, v);
}

// What a Trace and a StoreSummary both describe (meta, sources, ranks,
// GPUs, streams, diagnostics), moved from a shard's into the job's with the
// shard's ids tagged and its streams numbered.
template <typename Job>
void mergeDescriptions(Job& into, Job& from, int shard, const StreamIds& streamIds)
{
    mergeMeta(into.meta, from.meta);
    for (auto& src : from.sources) {
        src.id = tagId(shard, src.id);
        into.sources.push_back(std::move(src));
    }
    for (auto& r : from.ranks) {
        if (r.sourceId)
            r.sourceId = tagId(shard, *r.sourceId);
        into.ranks.push_back(std::move(r));
    }
    for (auto& g : from.gpus)
        into.gpus.push_back(std::move(g));
    for (auto& st : from.streams) {
        st.id = streamId(streamIds, shard, st.id);
        into.streams.push_back(std::move(st));
    }
    for (auto& d : from.diagnostics) {
        if (d.sourceId)
            d.sourceId = tagId(shard, *d.sourceId);
        into.diagnostics.push_back(std::move(d));
    }
}

// Ranks, GPUs and streams in the order Store gives them.
template <typename Job>
void sortDescriptions(Job& job)
{
    std::stable_sort(job.ranks.begin(), job.ranks.end(), [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
    std::stable_sort(job.gpus.begin(), job.gpus.end(),
                     [](const GpuInfo& a, const GpuInfo& b) { return std::tie(a.rank, a.device) < std::tie(b.rank, b.device); });
    std::sort(job.streams.begin(), job.streams.end(), [](const StreamInfo& a, const StreamInfo& b) { return a.id < b.id; });
}

// Sums counts by name, names in the order first seen.
void addCounts(std::vector<std::pair<std::string, int64_t>>& into, const std::vector<std::pair<std::string, int64_t>>& from)
{
    for (const auto& entry : from) { // not a structured binding: clang 14 cannot capture one
        auto it = std::find_if(into.begin(), into.end(), [&](const auto& e) { return e.first == entry.first; });
        if (it == into.end())
            into.emplace_back(entry.first, entry.second);
        else
            it->second += entry.second;
    }
}

} // namespace

struct TraceMerger::Strings {
    std::unordered_map<std::string, StringId> ids;
};

TraceMerger::TraceMerger(const StreamIds& streamIds, size_t /*activities: laid out whole by finish()*/, size_t ncclOps)
    : streamIds_(streamIds), strings_(std::make_unique<Strings>())
{
    t_.strings.emplace_back();
    strings_->ids.emplace(std::string(), 0);
    t_.ncclOps.reserve(ncclOps);
}

TraceMerger::~TraceMerger() = default;

void TraceMerger::add(int s, Trace&& part)
{
    Trace p = std::move(part); // freed when this returns
    Trace& t = t_;
    mergeDescriptions(t, p, s, streamIds_);
    std::vector<StringId> name(p.strings.size(), 0);
    for (size_t i = 0; i < p.strings.size(); ++i) {
        auto [it, fresh] = strings_->ids.emplace(p.strings[i], static_cast<StringId>(t.strings.size()));
        if (fresh)
            t.strings.push_back(std::move(p.strings[i]));
        name[i] = it->second;
    }
    auto str = [&](StringId id) { return id >= 0 && static_cast<size_t>(id) < name.size() ? name[static_cast<size_t>(id)] : 0; };
    for (auto& a : p.activities) {
        a.id = tagId(s, a.id);
        a.streamId = streamId(streamIds_, s, a.streamId);
        a.name = str(a.name);
        a.ncclIndex = -1;
        a.ncclCount = 0;
    }
    activityParts_.push_back(std::move(p.activities));
    for (auto& op : p.ncclOps) {
        op.id = tagId(s, op.id);
        if (op.activityId)
            op.activityId = tagId(s, *op.activityId);
        if (op.streamId)
            op.streamId = streamId(streamIds_, s, *op.streamId);
        t.ncclOps.push_back(std::move(op));
    }
    for (auto& c : p.cpuRanges) {
        c.id = tagId(s, c.id);
        if (c.parentId)
            c.parentId = tagId(s, *c.parentId);
        c.name = str(c.name);
        if (c.domain)
            c.domain = str(*c.domain);
        t.cpuRanges.push_back(c);
    }
    for (auto& g : p.processGroups)
        t.processGroups.push_back(std::move(g));
    for (auto& e : p.memoryEvents)
        t.memoryEvents.push_back(e);
    for (auto& [k, v] : p.threadNames)
        t.threadNames.emplace(k, std::move(v));
}

namespace {

// The shards' activities as one vector in `before` order. Where each part
// is in that order and each rank's rows are in one part (the shards of a
// job hold disjoint ranks), the rank runs are copied in rank order: one
// pass. Otherwise they are put together and sorted.
template <typename Before>
void layOutActivities(std::vector<std::vector<Activity>>& parts, std::vector<Activity>& out, const Before& before)
{
    struct Run {
        int rank;
        size_t part, begin, end;
    };
    std::vector<Run> runs;
    size_t total = 0;
    bool byRuns = true;
    for (size_t k = 0; k < parts.size() && byRuns; ++k) {
        const auto& p = parts[k];
        total += p.size();
        byRuns = std::is_sorted(p.begin(), p.end(), before);
        for (size_t i = 0; i < p.size();) {
            size_t j = i + 1;
            while (j < p.size() && p[j].rank == p[i].rank)
                ++j;
            runs.push_back({p[i].rank, k, i, j});
            i = j;
        }
    }
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.rank < b.rank; });
    for (size_t i = 1; i < runs.size() && byRuns; ++i)
        byRuns = runs[i - 1].rank != runs[i].rank;
    out.clear();
    if (byRuns) {
        out.reserve(total);
        for (const Run& r : runs)
            out.insert(out.end(), parts[r.part].begin() + static_cast<std::ptrdiff_t>(r.begin),
                       parts[r.part].begin() + static_cast<std::ptrdiff_t>(r.end));
        parts.clear();
        return;
    }
    total = 0;
    for (const auto& p : parts)
        total += p.size();
    out.reserve(total);
    for (auto& p : parts) {
        out.insert(out.end(), p.begin(), p.end());
        std::vector<Activity>().swap(p);
    }
    parts.clear();
    std::sort(out.begin(), out.end(), before);
}

} // namespace

Trace TraceMerger::finish()
{
    Trace t = std::move(t_);
    // Every rank's rows come from one shard, in that shard's order.
    sortDescriptions(t);
    // A shard gives rows of equal (rank, start, end) in id order, so the id
    // settles ties as the shard did; an in-place sort needs no second copy.
    auto before = [](const Activity& x, const Activity& y) {
        return std::tie(x.rank, x.start, x.end, x.id) < std::tie(y.rank, y.start, y.end, y.id);
    };
    layOutActivities(activityParts_, t.activities, before);
    std::stable_sort(t.ncclOps.begin(), t.ncclOps.end(), [](const NcclOp& x, const NcclOp& y) {
        if (x.rank != y.rank)
            return x.rank < y.rank;
        if (x.start.has_value() != y.start.has_value())
            return !x.start.has_value();
        if (x.start && *x.start != *y.start)
            return *x.start < *y.start;
        return x.id < y.id;
    });
    store::detail::linkNcclOps(t.activities, t.ncclOps);
    std::sort(t.cpuRanges.begin(), t.cpuRanges.end(), [](const CpuRange& x, const CpuRange& y) {
        return std::tie(x.rank, x.tid, x.start, x.id) < std::tie(y.rank, y.tid, y.start, y.id);
    });
    std::stable_sort(t.processGroups.begin(), t.processGroups.end(), [](const ProcessGroup& a, const ProcessGroup& b) {
        return std::tie(a.rank, a.name) < std::tie(b.rank, b.name);
    });
    std::stable_sort(t.memoryEvents.begin(), t.memoryEvents.end(), [](const MemoryEvent& a, const MemoryEvent& b) {
        return std::tie(a.rank, a.device, a.ts) < std::tie(b.rank, b.device, b.ts);
    });
    return t;
}

StoreSummary mergeSummaries(std::vector<std::pair<int, StoreSummary>> parts)
{
    StoreSummary m;
    std::vector<std::pair<int, std::vector<StreamInfo>>> streams;
    for (const auto& [shard, s] : parts)
        streams.emplace_back(shard, s.streams);
    const StreamIds streamIds = numberStreams(streams);
    m.schemaVersion = parts.empty() ? kSchemaVersion : parts.front().second.schemaVersion;
    for (auto& [shard, s] : parts) {
        m.schemaVersion = std::min(m.schemaVersion, s.schemaVersion);
        mergeDescriptions(m, s, shard, streamIds);
        addCounts(m.activityCounts, s.activityCounts);
        addCounts(m.ncclCounts, s.ncclCounts);
        addCounts(m.cpuRangeCounts, s.cpuRangeCounts);
        for (auto& g : s.gpuSummaries)
            m.gpuSummaries.push_back(g);
        for (const auto& [id, counts] : s.streamCounts)
            m.streamCounts[streamId(streamIds, shard, id)] = counts;
        if (s.first && (!m.first || *s.first < *m.first))
            m.first = s.first;
        if (s.last && (!m.last || *s.last > *m.last))
            m.last = s.last;
    }
    // As Store::summary() orders NCCL counts: most first, then by name.
    std::sort(m.ncclCounts.begin(), m.ncclCounts.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    sortDescriptions(m);
    std::stable_sort(m.gpuSummaries.begin(), m.gpuSummaries.end(), [](const GpuSummary& a, const GpuSummary& b) {
        return std::tie(a.rank, a.device) < std::tie(b.rank, b.device);
    });
    return m;
}

StoreSummary shardedSummary(Shards& shards)
{
    std::vector<std::pair<int, StoreSummary>> parts;
    for (size_t k = 0; k < shards.stores.size(); ++k)
        if (shards.stores[k]) {
            parts.emplace_back(static_cast<int>(k), shards.stores[k]->summary());
            shiftSummary(parts.back().second, shards.clockOffset(static_cast<int>(k)));
        }
    return mergeSummaries(std::move(parts));
}

Trace shardedLoad(Shards& shards, const LoadOptions& options)
{
    const size_t n = shards.stores.size();
    // The shards that hold the ranks asked for (a stage's replicas: thousands of ranks).
    std::set<int> holding;
    if (options.ranks)
        for (int rank : *options.ranks)
            if (auto it = shards.shardOfRank.find(rank); it != shards.shardOfRank.end())
                holding.insert(it->second);
    std::vector<int> wanted;
    for (size_t k = 0; k < n; ++k) {
        if (!shards.stores[k])
            continue;
        if (options.ranks && !holding.count(static_cast<int>(k)))
            continue;
        wanted.push_back(static_cast<int>(k));
    }
    // Stream numbers from every shard's streams; room for the whole job's
    // activities at once when all are read (no growth, no slack).
    std::vector<std::pair<int, std::vector<StreamInfo>>> streams;
    size_t activities = 0, ncclOps = 0;
    const bool whole = !options.ranks && !options.from && !options.to;
    for (int k : wanted) {
        const StoreSummary s = shards.stores[static_cast<size_t>(k)]->summary();
        streams.emplace_back(k, s.streams);
        for (const auto& [kind, count] : s.activityCounts)
            activities += static_cast<size_t>(count);
        for (const auto& [kind, count] : s.ncclCounts)
            ncclOps += static_cast<size_t>(count);
    }
    const StreamIds streamIds = numberStreams(streams);
    TraceMerger merger(streamIds, whole ? activities : 0, whole ? ncclOps : 0);
    // Each shard is its own store file and connection: two are read side by
    // side (where the machine has two cores) while the merge takes them in
    // order, so a job's first read costs about half its shards' reads.
    auto readShard = [&shards, &options](int k) {
        LoadOptions own = options;
        own.work = nullptr; // progress is told per shard, here
        // A window is asked in the shard's own times.
        const TimeNs by = shards.clockOffset(k);
        if (own.from)
            *own.from -= by;
        if (own.to)
            *own.to -= by;
        Trace part = shards.stores[static_cast<size_t>(k)]->load(own);
        shiftTrace(part, by);
        return part;
    };
    const size_t ahead = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
    std::deque<std::future<Trace>> reading;
    size_t started = 0;
    auto startMore = [&] {
        while (started < wanted.size() && reading.size() < ahead)
            reading.push_back(std::async(std::launch::async, readShard, wanted[started++]));
    };
    for (size_t i = 0; i < wanted.size(); ++i) {
        checkpoint(options.work, "reading shard " + std::to_string(i + 1) + " of " + std::to_string(wanted.size()),
                   static_cast<double>(i) / static_cast<double>(wanted.size()));
        startMore();
        Trace part = reading.front().get();
        reading.pop_front();
        startMore();
        merger.add(wanted[i], std::move(part));
    }
    return merger.finish();
}

std::vector<std::vector<int64_t>> shardedAutogradSequences(Shards& shards, const std::vector<int64_t>& activityIds)
{
    std::vector<std::vector<int64_t>> out(activityIds.size());
    std::map<int, std::vector<size_t>> byShard;
    for (size_t i = 0; i < activityIds.size(); ++i)
        byShard[shardOfId(activityIds[i])].push_back(i);
    for (const auto& [shard, at] : byShard) {
        Store* store = shard >= 0 && static_cast<size_t>(shard) < shards.stores.size() ? shards.stores[static_cast<size_t>(shard)].get() : nullptr;
        if (!store)
            continue;
        std::vector<int64_t> local;
        for (size_t i : at)
            local.push_back(localId(activityIds[i]));
        auto seqs = store->autogradSequences(local);
        for (size_t j = 0; j < at.size(); ++j)
            out[at[j]] = std::move(seqs[j]);
    }
    return out;
}

} // namespace store::detail

} // namespace pipescope
