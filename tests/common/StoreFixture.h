#pragma once
// Writes an in-memory trace into a store file, as an importer would, for
// tests that run the command line or the report on a store.
#include "model/Trace.h"
#include "store/StoreWriter.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace pipescope::test {

// meta: extra store meta entries; host: every rank's host; sourcePath: the
// one source the ranks came from.
inline void writeStore(const Trace& t, const std::string& path, const std::map<std::string, std::string>& meta = {},
                       const std::string& host = "node-a", const std::string& sourcePath = "rank-0.json")
{
    StoreWriter w(path);
    using nlohmann::json;
    auto src = w.addSource({sourcePath, "kineto", 0, 0, ""});
    for (const auto& [k, v] : meta)
        w.setMeta(k, v);
    for (RankInfo ri : t.ranks) {
        ri.host = host;
        ri.sourceId = ri.rank == 0 ? std::optional<int64_t>(src) : std::nullopt;
        w.addRank(ri);
    }
    std::map<int64_t, int64_t> streamOf;
    for (const auto& s : t.streams)
        streamOf[s.id] = w.stream(s.rank, s.device, s.stream, s.name);
    std::vector<StringId> nameOf;
    for (const auto& s : t.strings)
        nameOf.push_back(w.intern(s));
    for (const auto& a : t.activities) {
        const int64_t id = w.addActivity({a.rank, streamOf[a.streamId], a.kind, a.start, a.end, nameOf[static_cast<size_t>(a.name)],
                                          a.correlation, a.bytes, std::nullopt, {}, {}});
        if (a.ncclIndex >= 0) {
            const NcclOp& op = t.ncclOps[static_cast<size_t>(a.ncclIndex)];
            NcclRecord r;
            r.rank = op.rank;
            r.activityId = id;
            r.kind = op.kind;
            r.isP2p = op.isP2p;
            r.bytes = op.bytes;
            r.peer = op.peer;
            r.groupRanks = json(op.groupRanks).dump();
            r.start = op.start;
            r.end = op.end;
            r.streamId = streamOf[a.streamId];
            w.addNcclOp(r);
        }
    }
    for (const auto& c : t.cpuRanges)
        w.addCpuRange({c.rank, c.tid, c.kind, c.start, c.end, nameOf[static_cast<size_t>(c.name)], std::nullopt, c.correlation});
    w.finish();
}

} // namespace pipescope::test
