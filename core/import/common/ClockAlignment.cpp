#include "import/common/ClockAlignment.h"

#include "util/Limits.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

namespace pipescope {

namespace detail {

// Offsets that make the ends of the same collective (or of the two sides of
// one point-to-point transfer) coincide across ranks. The end of a collective
// is the moment the last participant's data arrived, which all members
// observe together (to within the transfer of the last chunk), so the median
// difference of ends is a robust clock offset.
std::map<int, TimeNs> collectiveOffsets(StoreWriter& writer, const std::vector<int>& ranks)
{
    return offsetsFromEnds(writer.collectiveEnds(), writer.transferEnds(), ranks);
}

std::map<int, TimeNs> offsetsFromEnds(const std::vector<StoreWriter::CollectiveEnd>& collectives,
                                      const std::vector<StoreWriter::TransferEnd>& transfers, const std::vector<int>& ranks)
{
    // A group is named by its name and, when known, its members: some traces
    // reuse one name for several disjoint groups (e.g. every data-parallel group).
    std::map<int, std::map<std::string, TimeNs>> endsByRank;
    std::map<std::pair<int, std::string>, int64_t> ordinal;
    for (const StoreWriter::CollectiveEnd& c : collectives) {
        std::string seq;
        if (c.seq)
            seq = "s" + std::to_string(*c.seq);
        else
            seq = "o" + std::to_string(ordinal[{c.rank, c.group + "/" + c.kind}]++);
        endsByRank[c.rank][c.group + "/" + c.kind + "/" + seq] = c.end;
    }
    // Point-to-point transfers link ranks that share no collective (pipeline
    // neighbours): the k-th send from a to b and the k-th receive on b from a
    // complete together, when the last byte lands.
    std::map<std::tuple<int, int, bool>, int64_t> transferCount;
    for (const StoreWriter::TransferEnd& t : transfers) {
        int from = t.send ? t.rank : t.peer, to = t.send ? t.peer : t.rank;
        int64_t k = transferCount[{t.rank, t.peer, t.send}]++;
        endsByRank[t.rank]["p2p/" + std::to_string(from) + ">" + std::to_string(to) + "/" + std::to_string(k)] = t.end;
    }
    std::map<int, TimeNs> offsets;
    if (ranks.empty())
        return offsets;
    // Which ranks saw each operation, so a rank's neighbours are found through
    // its own operations rather than by comparing every pair of ranks.
    std::map<std::string, std::vector<std::pair<int, TimeNs>>> seenBy;
    for (const auto& [rank, ends] : endsByRank)
        for (const auto& [key, end] : ends)
            seenBy[key].emplace_back(rank, end);
    const std::set<int> wanted(ranks.begin(), ranks.end());
    // Breadth-first from the lowest rank over ranks that share operations.
    std::set<int> done{ranks.front()};
    offsets[ranks.front()] = 0;
    std::vector<int> queue{ranks.front()};
    for (size_t head = 0; head < queue.size() && done.size() < wanted.size(); ++head) {
        const int ref = queue[head];
        std::map<int, std::vector<TimeNs>> diffs;
        for (const auto& [key, refEnd] : endsByRank[ref])
            for (const auto& [r, end] : seenBy[key])
                if (!done.count(r) && wanted.count(r))
                    diffs[r].push_back(refEnd - end);
        for (auto& [r, d] : diffs) {
            std::nth_element(d.begin(), d.begin() + static_cast<long>(d.size() / 2), d.end());
            TimeNs shift = 0;
            if (__builtin_add_overflow(offsets[ref], d[d.size() / 2], &shift) || !validTime(shift))
                continue; // no usable offset through this neighbour
            offsets[r] = shift;
            done.insert(r);
            queue.push_back(r);
        }
    }
    return offsets;
}

} // namespace detail

std::map<int, TimeNs> alignByOperations(StoreWriter& writer, const std::vector<int>& ranks)
{
    if (ranks.size() < 2)
        return {};
    auto corr = detail::collectiveOffsets(writer, ranks);
    if (corr.size() < 2) {
        writer.diagnostic(std::nullopt, Severity::Warning, "alignment:no_shared_collectives",
                          "no collective or point-to-point transfer is seen by two ranks; clocks left as they were");
        return {};
    }
    writer.shiftRanks(corr);
    return corr;
}

} // namespace pipescope
