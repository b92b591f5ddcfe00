#pragma once
// Writes an in-memory trace into a store file, as an importer would (as
// tst_report does), for what-if tests that run the command line on a store.
#include "model/Trace.h"
#include "store/StoreWriter.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace pipescope::test {

inline void writeStore(const Trace& t, const std::string& path)
{
    StoreWriter w(path);
    using nlohmann::json;
    auto src = w.addSource({"rank-0.json", "kineto", 0, 0, ""});
    for (RankInfo ri : t.ranks) {
        ri.host = "node-a";
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
