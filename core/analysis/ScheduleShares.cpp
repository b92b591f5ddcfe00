// The schedule's own share of each rank's idle time (detail/ScheduleShares.h;
// docs/analysis.md, section 4).
#include "analysis/detail/ScheduleShares.h"
#include "model/Schedule.h"
#include "model/ScheduleShare.h"

#include <algorithm>
#include <array>
#include <tuple>
#include <unordered_map>

namespace pipescope::detail {

namespace {


TimeNs medianOf(std::vector<TimeNs>& v)
{
    if (v.empty())
        return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
}

// Sets RankShare::overheadShown for one replica's ranks in an iteration,
// from the steps of each whose input was ready before the rank was free.
void markOverhead(std::map<std::pair<int, int>, RankShare>& shares, int iteration, const std::vector<int>& ranks)
{
    double worst = 0;
    TimeNs first = std::numeric_limits<TimeNs>::max(), last = std::numeric_limits<TimeNs>::min();
    for (int rank : ranks) {
        const RankShare& sh = shares[{iteration, rank}];
        std::vector<TimeNs> gaps;
        for (size_t i = 1; i < sh.starts.size() && i < sh.inputReady.size(); ++i) {
            const TimeNs prevEnd = sh.ends[i - 1];
            if (sh.inputReady[i] >= 0 && sh.inputReady[i] <= prevEnd && sh.starts[i] >= prevEnd)
                gaps.push_back(sh.starts[i] - prevEnd);
        }
        if (!sh.starts.empty()) {
            first = std::min(first, sh.starts.front());
            last = std::max(last, sh.lastEnd);
        }
        if (gaps.size() < 3)
            continue;
        std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 4), gaps.end());
        worst = std::max(worst, static_cast<double>(gaps[gaps.size() / 4]) * static_cast<double>(sh.starts.size()));
    }
    const bool shown = last > first && worst >= 0.05 * static_cast<double>(last - first);
    for (int rank : ranks)
        shares[{iteration, rank}].overheadShown = shown;
}

// RankShare::waitedOn for one replica's ranks in an iteration (their
// budgets known): each step's wait for its input beyond the schedule's own
// share goes to the virtual stage that held the input up. The chain is
// followed back through producers that themselves only waited for their
// input (their rank was free before it came) to the first that was busy.
void traceWaits(std::map<std::pair<int, int>, RankShare>& shares, int iteration,
                const std::map<int, std::vector<const Step*>>& byRank, const std::vector<std::vector<Action>>& order)
{
    // (forward?, virtual stage, microbatch) -> (rank, index in its order)
    std::map<std::tuple<int, int, int>, std::pair<int, size_t>> at;
    size_t r = 0;
    for (const auto& entry : byRank) {
        for (size_t i = 0; i < order[r].size(); ++i)
            if (order[r][i].kind != StepKind::W)
                at[{order[r][i].kind == StepKind::F ? 1 : 0, order[r][i].stage, order[r][i].microbatch}] = {entry.first, i};
        ++r;
    }
    r = 0;
    for (const auto& entry : byRank) {
        RankShare& sh = shares[{iteration, entry.first}];
        for (size_t i = 1; i < order[r].size() && i < sh.starts.size() && i < sh.inputReady.size(); ++i) {
            const Action& a = order[r][i];
            if (a.kind == StepKind::W || sh.inputReady[i] < 0)
                continue;
            const TimeNs own = i < sh.budget.size() ? sh.budget[i] : 0;
            const TimeNs waited = std::min(sh.starts[i], sh.inputReady[i]) - sh.ends[i - 1] - own;
            if (waited <= 0)
                continue;
            // Back along the chain while each producer only waited for its own input.
            Action cur = a;
            int root = -1;
            for (size_t hops = 0; hops <= at.size(); ++hops) {
                const bool forward = cur.kind == StepKind::F;
                auto p = at.find({forward ? 1 : 0, cur.stage + (forward ? -1 : 1), cur.microbatch});
                if (p == at.end())
                    break;
                cur = Action{forward ? StepKind::F : StepKind::B, cur.stage + (forward ? -1 : 1), cur.microbatch};
                root = cur.stage;
                const auto [prank, pi] = p->second;
                const RankShare& ps = shares[{iteration, prank}];
                const bool producerWaited = pi > 0 && pi < ps.inputReady.size() && ps.inputReady[pi] > ps.ends[pi - 1];
                if (!producerWaited)
                    break;
            }
            if (root >= 0)
                sh.waitedOn[root] += waited;
        }
        ++r;
    }
}

} // namespace

// Per (iteration, rank) of the pipeline.
std::map<std::pair<int, int>, RankShare> scheduleShares(const PipelineStructure& pipeline, const std::vector<Step>& steps)
{
    std::map<std::pair<int, int>, RankShare> shares;
    std::unordered_map<int, int> replicaOf;
    for (const StageAssignment& a : pipeline.stageMap)
        replicaOf[a.rank] = a.replica;
    // (iteration, replica) -> rank -> its steps
    std::map<std::pair<int, int>, std::map<int, std::vector<const Step*>>> groups;
    std::map<int, std::array<std::vector<TimeNs>, 4>> lengths; // iteration -> per kind
    for (const Step& st : steps) {
        RankShare& sh = shares[{st.iteration, st.rank}];
        sh.phases.add(st.kind == StepKind::F, st.start, st.end);
        sh.lastEnd = std::max(sh.lastEnd, st.end);
        auto rep = replicaOf.find(st.rank);
        groups[{st.iteration, rep == replicaOf.end() ? 0 : rep->second}][st.rank].push_back(&st);
        lengths[st.iteration][static_cast<size_t>(st.kind) & 3].push_back(st.end - st.start);
    }
    const ScheduleKind placement = pipeline.schedule.value_or(ScheduleKind::Interleaved1F1B);
    std::map<int, std::array<TimeNs, 4>> costs;
    for (auto& [iteration, byKind] : lengths)
        for (size_t k = 0; k < 4; ++k)
            costs[iteration][k] = medianOf(byKind[k]);
    // When each (iteration, replica, chain link) ended: a step's input.
    auto link = [](const Step& st, int vs, int offset) {
        const bool forward = st.kind == StepKind::F;
        return std::tuple<int, int, int>{forward ? 1 : 0, vs + offset, st.microbatch};
    };
    std::map<std::pair<int, int>, std::map<std::tuple<int, int, int>, TimeNs>> produced;
    for (auto& [key, byRank] : groups)
        for (auto& [rank, list] : byRank)
            for (const Step* st : list)
                if (st->kind != StepKind::W) {
                    TimeNs& e = produced[key][link(*st, virtualStage(placement, pipeline.pp, st->stage, st->chunk), 0)];
                    e = std::max(e, st->end);
                }
    for (auto& [key, byRank] : groups) {
        const auto& made = produced[key];
        std::vector<std::vector<Action>> order;
        std::vector<int> ranks;
        for (auto& [rank, list] : byRank) {
            std::sort(list.begin(), list.end(), [](const Step* x, const Step* y) { return x->start < y->start; });
            std::vector<Action> actions;
            RankShare& sh = shares[{key.first, rank}];
            for (const Step* st : list) {
                const int vs = virtualStage(placement, pipeline.pp, st->stage, st->chunk);
                actions.push_back({st->kind, vs, st->microbatch});
                sh.starts.push_back(st->start);
                sh.ends.push_back(st->end);
                TimeNs ready = -1;
                if (st->kind != StepKind::W)
                    if (auto m = made.find(link(*st, vs, st->kind == StepKind::F ? -1 : 1)); m != made.end())
                        ready = m->second;
                sh.inputReady.push_back(ready);
            }
            order.push_back(std::move(actions));
            ranks.push_back(rank);
        }
        markOverhead(shares, key.first, ranks);
        const ScheduleShare replay = scheduleShare(order, costs[key.first]);
        if (!replay.complete)
            continue;
        for (size_t i = 0; i < ranks.size(); ++i) {
            RankShare& sh = shares[{key.first, ranks[i]}];
            sh.budget = replay.idleBefore[i];
            sh.trailing = replay.idleAfter[i];
            sh.known = true;
        }
        traceWaits(shares, key.first, byRank, order);
    }
    return shares;
}

} // namespace pipescope::detail
