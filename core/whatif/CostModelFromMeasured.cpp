// CostModel::fromMeasured: a cost model calibrated on a measured pipeline
// (docs/whatif.md, "Cost model from a trace").
#include "whatif/CostModel.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "whatif/MeasuredFits.h"
#include "whatif/detail/CostMath.h"
#include "whatif/detail/MeasuredSteps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>
#include <numeric>
#include <string>

namespace pipescope::whatif {

using namespace detail;

// The kernels show what the bytes needed once both sides were there; a
// receiver that was already waiting shows how long a message really took to
// land after its send began (a slow transport, GPUs time-shared between
// processes). A send that held its stream for most of that time waited for
// the bytes to land (a rendezvous), so its end is when they did and whatever
// the receive took beyond it is the receiver's own delay; a short send only
// handed its bytes to a buffer, and the receive's end tells when they
// arrived. Whatever exceeds the bytes' own time is latency.
P2pLink fitP2pLink(const std::vector<MeasuredTransfer>& transfers, const std::vector<MeasuredMessage>& messages,
                   P2pLink link)
{
    // Fit latency + bytes / bandwidth to the transfers' kernel times.
    std::vector<double> bytes, ns;
    for (const MeasuredTransfer& t : transfers)
        if (t.transferNs > 0 && t.bytes >= 0) {
            bytes.push_back(static_cast<double>(t.bytes));
            ns.push_back(static_cast<double>(t.transferNs));
        }
    if (!bytes.empty()) {
        const double mb = median(bytes), mt = median(ns);
        const double xm = std::accumulate(bytes.begin(), bytes.end(), 0.0) / static_cast<double>(bytes.size());
        const double ym = std::accumulate(ns.begin(), ns.end(), 0.0) / static_cast<double>(ns.size());
        double sxx = 0, sxy = 0;
        for (size_t i = 0; i < bytes.size(); ++i) {
            sxx += (bytes[i] - xm) * (bytes[i] - xm);
            sxy += (bytes[i] - xm) * (ns[i] - ym);
        }
        const double slope = sxx > 0 ? sxy / sxx : 0.0;
        if (slope > 0 && ym - slope * xm >= 0) {
            link.bytesPerNs = 1.0 / slope;
            link.latencyNs = toNs(ym - slope * xm);
        } else if (mb > 0) {
            // One message size: all of it is attributed to bandwidth, so
            // larger or smaller microbatches scale the transfer time.
            link.latencyNs = 0;
            link.bytesPerNs = mb / std::max(1.0, mt);
        } else {
            link.latencyNs = toNs(mt);
            link.bytesPerNs = 0;
        }
        link.bytes = toBytes(mb, "bytes sent between stages");
    }
    // Then the landings of messages whose receiver was already waiting.
    {
        std::vector<double> landed;
        // A send of exactly 1 ns is one the trace only implies (a Megatron
        // timing file): it tells nothing of when the bytes left or landed.
        for (const MeasuredMessage& msg : messages)
            if (msg.recvStart <= msg.sendStart && msg.recvEnd >= msg.sendStart && msg.sendEnd - msg.sendStart != 1) {
                const TimeNs received = msg.recvEnd - msg.sendStart, sent = msg.sendEnd - msg.sendStart;
                const bool rendezvous = sent > 0 && sent <= received && 2 * sent >= received;
                landed.push_back(static_cast<double>(rendezvous ? sent : received));
            }
        if (!landed.empty()) {
            const double wire = link.bytesPerNs > 0 ? static_cast<double>(link.bytes) / link.bytesPerNs : 0.0;
            const double latency = median(landed) - wire;
            if (latency > static_cast<double>(link.latencyNs))
                link.latencyNs = toNs(latency);
        }
    }
    return link;
}

// Host time between steps: the smallest gap a rank leaves between two
// consecutive steps (a wait on data is longer), the smallest over ranks: a
// rank downstream of a slower one waits for data before every step (GPipe's
// forwards), while the slowest runs back to back. With blocking exchanges
// only gaps without an exchange in them count: the others are the exchange
// and exchangeGapNs.
std::optional<TimeNs> smallestStepGap(const MeasuredPipeline& mp)
{
    std::vector<std::vector<TimeNs>> exchangeEnds;
    if (mp.blockingExchanges)
        for (const MeasuredMessage& msg : mp.messages)
            for (auto [rank, end] : {std::pair{msg.srcRank, msg.sendEnd}, std::pair{msg.dstRank, msg.recvEnd}})
                if (rank >= 0 && rank <= 100000) {
                    if (exchangeEnds.size() <= size_t(rank))
                        exchangeEnds.resize(size_t(rank) + 1);
                    exchangeEnds[size_t(rank)].push_back(end);
                }
    for (auto& e : exchangeEnds)
        std::sort(e.begin(), e.end());
    auto exchangeBetween = [&](size_t rank, TimeNs from, TimeNs to) {
        if (rank >= exchangeEnds.size())
            return false;
        const auto& e = exchangeEnds[rank];
        auto it = std::lower_bound(e.begin(), e.end(), from);
        return it != e.end() && *it <= to;
    };
    std::vector<std::vector<std::pair<TimeNs, TimeNs>>> byRank;
    for (const PipelineStep& st : mp.steps) {
        if (st.rank < 0 || st.rank > 100000)
            continue;
        if (byRank.size() <= size_t(st.rank))
            byRank.resize(size_t(st.rank) + 1);
        byRank[size_t(st.rank)].emplace_back(st.start, st.end);
    }
    std::vector<double> gaps;
    for (size_t rank = 0; rank < byRank.size(); ++rank) {
        auto& steps = byRank[rank];
        std::sort(steps.begin(), steps.end());
        std::optional<TimeNs> best;
        for (size_t i = 1; i < steps.size(); ++i) {
            const TimeNs g = steps[i].first - steps[i - 1].second;
            if (exchangeBetween(rank, steps[i - 1].second, steps[i].first))
                continue;
            if (g >= 0 && (!best || g < *best))
                best = g;
        }
        if (best)
            gaps.push_back(static_cast<double>(*best));
    }
    if (gaps.empty())
        return std::nullopt;
    return toNs(*std::min_element(gaps.begin(), gaps.end()));
}
namespace detail {

namespace {

// The virtual stage a measured step ran on.
int virtualStageOf(const MeasuredShape& sh, const PipelineStep& st)
{
    int vs = st.stage >= sh.p ? st.stage : virtualStage(sh.kind, sh.p, st.stage, std::clamp(st.chunk, 0, sh.v - 1));
    if (sh.v == 1)
        vs = st.stage;
    return vs;
}

// Each rank's steps in start order, and when each step's input was surely
// ready: the latest end of its producer (the previous virtual stage's
// forward, the next one's backward) over the replicas.
struct StepInputs {
    StepInputs(const MeasuredPipeline& mp, const MeasuredShape& sh) : sh_(sh)
    {
        const size_t n = static_cast<size_t>(sh.S) * static_cast<size_t>(sh.m);
        producedF_.assign(n, -1);
        producedB_.assign(n, -1);
        stageF_.assign(n, -1);
        stageB_.assign(n, -1);
        for (const PipelineStep& st : mp.steps) {
            const int vs = virtualStageOf(sh, st);
            if (vs < 0 || vs >= sh.S || st.microbatch < 0 || st.microbatch >= sh.m || st.end < st.start)
                continue;
            const size_t k = key(vs, st.microbatch);
            const bool f = st.kind == StepKind::F, b = st.kind == StepKind::B || st.kind == StepKind::I;
            if (f || b) {
                TimeNs& produced = f ? producedF_[k] : producedB_[k];
                produced = std::max(produced, st.end);
                (f ? stageF_ : stageB_)[k] = st.stage;
            }
            byRank[st.rank].push_back(&st);
        }
        for (auto& [rank, steps] : byRank)
            std::sort(steps.begin(), steps.end(), [](const PipelineStep* a, const PipelineStep* b) { return a->start < b->start; });
    }
    // When the step's input was ready: 0 for one made on its rank or by the
    // data loader, -1 when no producer was measured.
    TimeNs inputReady(const PipelineStep& st) const
    {
        const int vs = virtualStageOf(sh_, st);
        if (st.kind == StepKind::F && vs > 0)
            return producedF_[key(vs - 1, st.microbatch)];
        if ((st.kind == StepKind::B || st.kind == StepKind::I) && vs < sh_.S - 1)
            return producedB_[key(vs + 1, st.microbatch)];
        return 0;
    }
    // Where the step's input came from: another pipeline rank, or this one
    // (a chunk of its own, its own forward before the loss's backward, or
    // the data loader).
    enum class Source { Local, Remote, Unknown };
    Source inputSource(const PipelineStep& st) const
    {
        const int vs = virtualStageOf(sh_, st);
        int producer = st.stage;
        if (st.kind == StepKind::F && vs > 0)
            producer = stageF_[key(vs - 1, st.microbatch)];
        else if ((st.kind == StepKind::B || st.kind == StepKind::I) && vs < sh_.S - 1)
            producer = stageB_[key(vs + 1, st.microbatch)];
        if (producer < 0)
            return Source::Unknown;
        return producer == st.stage ? Source::Local : Source::Remote;
    }
    // When the input could be used: its producer's end, and for one from
    // another rank `remoteLatency` after it (the trace's measured cost of a
    // remote input where it times no transfer: remoteInputLatency).
    TimeNs inputUsable(const PipelineStep& st, TimeNs remoteLatency) const
    {
        const TimeNs ready = inputReady(st);
        return ready > 0 && inputSource(st) == Source::Remote ? ready + remoteLatency : ready;
    }
    std::map<int, std::vector<const PipelineStep*>> byRank;

private:
    size_t key(int vs, int mb) const { return static_cast<size_t>(vs) * static_cast<size_t>(sh_.m) + static_cast<size_t>(mb); }
    const MeasuredShape& sh_;
    std::vector<TimeNs> producedF_, producedB_;
    std::vector<int> stageF_, stageB_; // the pipeline rank that produced it
};

} // namespace

MeasuredStepGaps measuredStepGaps(const MeasuredPipeline& mp, const MeasuredShape& sh, TimeNs remoteLatency)
{
    const int S = sh.S, M = sh.m, p = sh.p;
    if (mp.steps.empty() || p < 1 || M < 1)
        return {};
    StepInputs in(mp, sh);
    // Exchanges that end between two steps hold the second (exchangeGapNs):
    // their gaps are not the host's per-step cost.
    std::map<int, std::vector<TimeNs>> exchangeEnds;
    if (mp.blockingExchanges)
        for (const MeasuredMessage& msg : mp.messages) {
            exchangeEnds[msg.srcRank].push_back(msg.sendEnd);
            exchangeEnds[msg.dstRank].push_back(msg.recvEnd);
        }
    for (auto& [r, e] : exchangeEnds)
        std::sort(e.begin(), e.end());
    // [stage][kind]: every such step's gap, and apart those whose input came
    // from this rank and from another.
    using Lists = std::vector<std::array<std::vector<TimeNs>, 2>>;
    Lists gaps(static_cast<size_t>(p)), localGaps = gaps, remoteGaps = gaps;
    for (const auto& [rank, steps] : in.byRank) {
        if (rank < 0 || static_cast<size_t>(rank) >= mp.stageOfRank.size())
            continue;
        const int stage = mp.stageOfRank[static_cast<size_t>(rank)];
        if (stage < 0 || stage >= p)
            continue;
        const auto ends = exchangeEnds.find(rank);
        for (size_t i = 1; i < steps.size(); ++i) {
            const PipelineStep& st = *steps[i];
            const TimeNs prevEnd = steps[i - 1]->end;
            const TimeNs gap = st.start - prevEnd;
            if (gap < 0)
                continue;
            const TimeNs input = in.inputUsable(st, remoteLatency);
            if (input < 0 || input > prevEnd)
                continue; // it waited for its input: not the host's gap alone
            if (ends != exchangeEnds.end()) {
                auto it = std::lower_bound(ends->second.begin(), ends->second.end(), prevEnd);
                if (it != ends->second.end() && *it <= st.start)
                    continue;
            }
            const size_t k = st.kind == StepKind::F ? 0 : 1;
            gaps[static_cast<size_t>(stage)][k].push_back(gap);
            const StepInputs::Source source = in.inputSource(st);
            if (source != StepInputs::Source::Unknown)
                (source == StepInputs::Source::Local ? localGaps : remoteGaps)[static_cast<size_t>(stage)][k].push_back(gap);
        }
    }
    // A median needs a few steps; fewer say too little of what each step pays.
    constexpr size_t kMinSteps = 3;
    // Each list's element at `at` of its length (1/2: the median), `none` for a short list.
    auto quantiles = [&](Lists& lists, double at, TimeNs none) {
        std::vector<std::array<TimeNs, 2>> out(static_cast<size_t>(p), std::array<TimeNs, 2>{none, none});
        for (size_t st = 0; st < lists.size(); ++st)
            for (size_t k = 0; k < 2; ++k) {
                auto& v = lists[st][k];
                if (v.size() < kMinSteps)
                    continue;
                const auto i = static_cast<std::ptrdiff_t>(static_cast<double>(v.size()) * at);
                std::nth_element(v.begin(), v.begin() + i, v.end());
                out[st][k] = v[static_cast<size_t>(i)];
            }
        return out;
    };
    const std::vector<std::array<TimeNs, 2>> low = quantiles(gaps, 0.25, 0); // the first quartile: what nearly every step pays
    MeasuredStepGaps out;
    out.all = quantiles(gaps, 0.5, 0);
    const bool any = std::any_of(out.all.begin(), out.all.end(), [](const auto& g) { return g[0] > 0 || g[1] > 0; });
    // A cost only where the trace shows one that nearly every step pays: the
    // first quartile, summed over a rank's steps, at least 5% of the
    // iteration. Below that the gaps are launch noise or waits of another
    // kind (an exchange's partner), and the launch gap stands for them.
    const double steps = static_cast<double>(S / std::max(1, p)) * static_cast<double>(M);
    double worst = 0;
    for (const auto& g : low)
        worst = std::max(worst, steps * static_cast<double>(g[0] + g[1]));
    if (!any || mp.iterationNs <= 0 || worst < 0.05 * static_cast<double>(mp.iterationNs))
        return {};
    // Where both kinds of input show enough steps, each pays its own: a step
    // whose input this rank made posts no receive (the last stage's first
    // backward, a first stage's forward fed by the data loader).
    out.local = quantiles(localGaps, 0.5, -1);
    const std::vector<std::array<TimeNs, 2>> remote = quantiles(remoteGaps, 0.5, -1);
    bool split = false;
    for (size_t st = 0; st < out.all.size(); ++st)
        for (size_t k = 0; k < 2; ++k)
            if (out.local[st][k] >= 0 && remote[st][k] >= 0) {
                out.all[st][k] = remote[st][k];
                split = true;
            } else {
                out.local[st][k] = -1;
            }
    if (!split)
        out.local.clear();
    return out;
}

std::optional<TimeNs> remoteInputLatency(const MeasuredPipeline& mp, const MeasuredShape& sh)
{
    // Only where the messages do not say when their bytes left: none, or
    // nearly all sends of exactly 1 ns, the instants a timing file implies
    // (a Megatron timing file times only its first send of an iteration).
    const auto implied = std::count_if(mp.messages.begin(), mp.messages.end(),
                                       [](const MeasuredMessage& msg) { return msg.sendEnd - msg.sendStart == 1; });
    if (4 * static_cast<size_t>(implied) < 3 * mp.messages.size())
        return std::nullopt;
    if (mp.steps.empty())
        return std::nullopt;
    StepInputs in(mp, sh);
    std::vector<double> after;
    for (const auto& [rank, steps] : in.byRank)
        for (size_t i = 1; i < steps.size(); ++i) {
            const PipelineStep& st = *steps[i];
            const TimeNs input = in.inputReady(st);
            if (in.inputSource(st) != StepInputs::Source::Remote || input <= steps[i - 1]->end || st.start < input)
                continue; // its input was there before the rank was free
            after.push_back(static_cast<double>(st.start - input));
        }
    if (after.size() < 8)
        return std::nullopt;
    return toNs(median(after));
}

WaitedInput waitedInputLatency(const MeasuredPipeline& mp, const MeasuredShape& sh,
                               const std::vector<std::array<TimeNs, 2>>& gaps)
{
    const int p = sh.p;
    if (gaps.empty() || mp.steps.empty())
        return {};
    StepInputs in(mp, sh);
    std::vector<double> beyond, after;
    for (const auto& [rank, steps] : in.byRank) {
        if (rank < 0 || static_cast<size_t>(rank) >= mp.stageOfRank.size())
            continue;
        const int stage = mp.stageOfRank[static_cast<size_t>(rank)];
        if (stage < 0 || stage >= p || static_cast<size_t>(stage) >= gaps.size())
            continue;
        for (size_t i = 1; i < steps.size(); ++i) {
            const PipelineStep& st = *steps[i];
            const TimeNs input = in.inputReady(st);
            if (input <= 0 || input <= steps[i - 1]->end || st.start < input)
                continue; // not a step that waited for its input
            const TimeNs gap = gaps[static_cast<size_t>(stage)][st.kind == StepKind::F ? 0 : 1];
            beyond.push_back(static_cast<double>(st.start - input - gap));
            after.push_back(static_cast<double>(st.start - input));
        }
    }
    if (beyond.size() < 8)
        return {};
    std::sort(beyond.begin(), beyond.end());
    WaitedInput w;
    w.medianAfterInputNs = toNs(median(after));
    w.beyondGapNs = std::max<TimeNs>(0, toNs(beyond[beyond.size() / 10]));
    return w;
}

std::optional<Schedule> measuredOrder(const MeasuredPipeline& mp, const MeasuredShape& sh)
{
    if (!mp.schedule || *mp.schedule == ScheduleKind::Custom || mp.steps.empty())
        return std::nullopt;
    Schedule builtin;
    try {
        builtin = makeSchedule(sh.kind, sh.p, sh.v, sh.m);
    } catch (const Error&) {
        return std::nullopt;
    }
    if (builtin.stages != sh.S)
        return std::nullopt;
    // One replica's ranks: the lowest global rank of each pipeline stage.
    std::vector<int> rankOfPipelineRank(static_cast<size_t>(sh.p), -1);
    for (size_t g = 0; g < mp.stageOfRank.size(); ++g) {
        const int st = mp.stageOfRank[g];
        if (st >= 0 && st < sh.p && rankOfPipelineRank[static_cast<size_t>(st)] < 0)
            rankOfPipelineRank[static_cast<size_t>(st)] = static_cast<int>(g);
    }
    std::map<int, std::vector<const PipelineStep*>> byRank;
    for (const PipelineStep& st : mp.steps)
        byRank[st.rank].push_back(&st);
    Schedule order = builtin;
    for (int r = 0; r < sh.p; ++r) {
        auto it = byRank.find(rankOfPipelineRank[static_cast<size_t>(r)]);
        if (it == byRank.end())
            return std::nullopt;
        auto& steps = it->second;
        std::stable_sort(steps.begin(), steps.end(), [](const PipelineStep* a, const PipelineStep* b) { return a->start < b->start; });
        std::vector<Action> actions;
        for (const PipelineStep* st : steps) {
            const int vs = virtualStageOf(sh, *st);
            if (vs < 0 || vs >= sh.S || builtin.rankOfStage[static_cast<size_t>(vs)] != r || st->microbatch < 0 ||
                st->microbatch >= sh.m)
                return std::nullopt;
            actions.push_back(Action{st->kind, vs, st->microbatch});
        }
        // The same steps as the built-in schedule's, in another order.
        auto key = [](const Action& a) { return std::tuple(a.stage, a.microbatch, static_cast<int>(a.kind)); };
        auto mine = actions, theirs = builtin.ranks[static_cast<size_t>(r)];
        std::sort(mine.begin(), mine.end(), [&](const Action& a, const Action& b) { return key(a) < key(b); });
        std::sort(theirs.begin(), theirs.end(), [&](const Action& a, const Action& b) { return key(a) < key(b); });
        if (mine.size() != theirs.size() ||
            !std::equal(mine.begin(), mine.end(), theirs.begin(), [&](const Action& a, const Action& b) { return key(a) == key(b); }))
            return std::nullopt;
        order.ranks[static_cast<size_t>(r)] = std::move(actions);
    }
    bool same = true;
    for (int r = 0; r < sh.p && same; ++r) {
        const auto& a = order.ranks[static_cast<size_t>(r)];
        const auto& b = builtin.ranks[static_cast<size_t>(r)];
        for (size_t i = 0; i < a.size() && same; ++i)
            same = a[i].kind == b[i].kind && a[i].stage == b[i].stage && a[i].microbatch == b[i].microbatch;
    }
    if (same)
        return std::nullopt;
    try {
        validateSchedule(order, "the measured order");
    } catch (const Error&) {
        return std::nullopt;
    }
    return order;
}

StageStepTimes fitStepTimes(const MeasuredPipeline& mp, const MeasuredShape& sh)
{
    const int S = sh.S;
    std::vector<double> sum(static_cast<size_t>(S) * 4, 0.0), count(static_cast<size_t>(S) * 4, 0.0);
    for (const PipelineStep& st : mp.steps) {
        const int vs = virtualStageOf(sh, st);
        if (vs < 0 || vs >= S || st.end < st.start)
            continue;
        const size_t k = static_cast<size_t>(vs) * 4 + static_cast<size_t>(st.kind);
        sum[k] += static_cast<double>(st.end - st.start);
        count[k] += 1;
    }
    StageStepTimes t;
    std::vector<double>& meanF = t.forward;
    std::vector<double>& meanB = t.backward;
    std::vector<double>& share = t.inputShare;
    meanF.assign(static_cast<size_t>(S), -1);
    meanB.assign(static_cast<size_t>(S), -1);
    share.assign(static_cast<size_t>(S), -1);
    for (int s = 0; s < S; ++s) {
        auto mean = [&](StepKind k) {
            const size_t i = static_cast<size_t>(s) * 4 + static_cast<size_t>(k);
            return count[i] > 0 ? sum[i] / count[i] : -1.0;
        };
        meanF[size_t(s)] = mean(StepKind::F);
        const double B = mean(StepKind::B), I = mean(StepKind::I), W = mean(StepKind::W);
        if (I >= 0 && W >= 0 && I + W > 0) {
            meanB[size_t(s)] = B >= 0 ? B : I + W;
            share[size_t(s)] = I / (I + W);
        } else if (B >= 0) {
            meanB[size_t(s)] = B;
        } else if (I >= 0) {
            meanB[size_t(s)] = I;
        }
    }
    return t;
}

// Time after the last step that neither the all-reduce, the pipeline-wide
// collective nor the optimizer explains (e.g. an optimizer the analysis
// could not name) still belongs to every iteration: carry it as optimizer time.
void attributeIterationTail(const MeasuredPipeline& mp, CostModel& c)
{
    if (mp.iterationNs <= 0 || mp.steps.empty())
        return;
    TimeNs first = mp.steps.front().start, last = mp.steps.front().end;
    for (const PipelineStep& st : mp.steps) {
        first = std::min(first, st.start);
        last = std::max(last, st.end);
    }
    // With the ranks' starts the replay begins where the iteration does,
    // not at its first step.
    if (!c.rankStartNs.empty() && mp.iterationStart && *mp.iterationStart <= first)
        first = *mp.iterationStart;
    // After the last step of the iteration, less the pipeline-wide
    // collective (which the replay starts as the last rank joins it).
    const TimeNs critical = std::max<TimeNs>(0, mp.iterationNs - (last - first) - c.pipelineSyncNs);
    const TimeNs tail = critical - mp.dataParallelSyncNs - mp.optimizerNs;
    if (tail > 0) {
        c.measuredOptimizerNs = mp.optimizerNs + tail;
    } else if (critical >= 0) {
        // The measured all-reduce is the longest of any rank; the rank
        // that finishes last had at most this much after its last step.
        const TimeNs opt = std::min(mp.optimizerNs, critical);
        if (opt > 0)
            c.measuredOptimizerNs = opt;
        else
            c.measuredOptimizerNs.reset();
        if (critical - opt > 0)
            c.measuredAllReduceNs = critical - opt;
        else
            c.measuredAllReduceNs.reset();
    }
}

} // namespace detail

namespace {

void checkLayerWeights(const std::vector<double>& weights)
{
    for (size_t l = 0; l < weights.size(); ++l) {
        const double w = weights[l];
        if (!std::isfinite(w) || w < 0)
            throw ValueError(Setting::Weights, "layer weight " + std::to_string(l + 1) + " is " + formatNumber(w) +
                                            "; weights must be finite numbers of at least 0");
    }
}

// Uneven microbatches: each microbatch's steps against its stage's mean
// (replicas averaged; a backward is B, or I + W when split). A pipeline
// larger than a replay takes is never replayed, so it keeps no sizes.
std::optional<MicrobatchSizes> measuredMicrobatchSizes(const MeasuredPipeline& mp, const MeasuredShape& sh)
{
    const int S = sh.S, m = sh.m;
    if (!(m >= 2 && int64_t{S} * m <= kMaxReplaySteps))
        return std::nullopt;
    const size_t SM = static_cast<size_t>(S) * static_cast<size_t>(m);
    std::vector<double> ks(SM * 4, 0.0), kn(SM * 4, 0.0);
    for (const PipelineStep& st : mp.steps) {
        const int vs = virtualStageOf(sh, st);
        if (vs < 0 || vs >= S || st.end < st.start || st.microbatch < 0 || st.microbatch >= m)
            continue;
        const size_t k = (static_cast<size_t>(vs) * static_cast<size_t>(m) + static_cast<size_t>(st.microbatch)) * 4 +
                         static_cast<size_t>(st.kind);
        ks[k] += static_cast<double>(st.end - st.start);
        kn[k] += 1;
    }
    MicrobatchSizes sizes;
    sizes.source = SizeSource::Trace;
    bool complete = true;
    for (int s = 0; s < S && complete; ++s) {
        std::vector<double> fr(static_cast<size_t>(m)), br(static_cast<size_t>(m));
        for (int mb = 0; mb < m; ++mb) {
            const size_t base = (static_cast<size_t>(s) * static_cast<size_t>(m) + static_cast<size_t>(mb)) * 4;
            auto mean = [&](StepKind k) { return kn[base + size_t(k)] > 0 ? ks[base + size_t(k)] / kn[base + size_t(k)] : -1.0; };
            const double F = mean(StepKind::F), B = mean(StepKind::B), I = mean(StepKind::I), W = mean(StepKind::W);
            fr[size_t(mb)] = F;
            br[size_t(mb)] = B >= 0 ? B : (I >= 0 ? I + std::max(0.0, W) : -1.0);
            if (F < 0 || br[size_t(mb)] < 0)
                complete = false;
        }
        auto relative = [](std::vector<double>& row) {
            const double mean = std::accumulate(row.begin(), row.end(), 0.0) / static_cast<double>(row.size());
            for (double& x : row)
                x = mean > 0 ? x / mean : 1.0;
        };
        relative(fr);
        relative(br);
        sizes.forward.push_back(std::move(fr));
        sizes.backward.push_back(std::move(br));
    }
    // Kept only when every step was seen and the microbatches really differ.
    if (complete && sizes.spread() >= kUnevenMicrobatchCv)
        return sizes;
    return std::nullopt;
}

// Each data-parallel replica's microbatch sizes against the stage's mean
// over every replica (a replica's tensor-parallel ranks averaged), so that
// a replica with longer sequences, or a slow GPU, replays slower. Empty for
// one replica, or when a replica misses a step.
std::vector<MicrobatchSizes> measuredReplicaSizes(const MeasuredPipeline& mp, const MeasuredShape& sh)
{
    const int S = sh.S, m = sh.m;
    if (mp.dataParallel < 2 || mp.replicaOfRank.empty() || !(int64_t{S} * m <= kMaxReplaySteps) ||
        mp.dataParallel > 4096)
        return {};
    const size_t R = static_cast<size_t>(mp.dataParallel), SM = static_cast<size_t>(S) * static_cast<size_t>(m);
    // [replica][(vs * m + mb) * 2 + (0: F, 1: backward)]: sum and count
    std::vector<std::vector<double>> sum(R, std::vector<double>(SM * 2, 0.0)), n = sum;
    for (const PipelineStep& st : mp.steps) {
        const int vs = virtualStageOf(sh, st);
        if (vs < 0 || vs >= S || st.end < st.start || st.microbatch < 0 || st.microbatch >= m || st.rank < 0 ||
            static_cast<size_t>(st.rank) >= mp.replicaOfRank.size())
            continue;
        const int r = mp.replicaOfRank[static_cast<size_t>(st.rank)];
        if (r < 0 || static_cast<size_t>(r) >= R)
            continue;
        // A split backward's I and W add up to its B.
        const size_t k = (static_cast<size_t>(vs) * static_cast<size_t>(m) + static_cast<size_t>(st.microbatch)) * 2 +
                         (st.kind == StepKind::F ? 0 : 1);
        sum[size_t(r)][k] += static_cast<double>(st.end - st.start);
        if (st.kind != StepKind::W)
            n[size_t(r)][k] += 1;
    }
    std::vector<double> stageMean(static_cast<size_t>(S) * 2, 0.0);
    for (size_t r = 0; r < R; ++r)
        for (size_t k = 0; k < SM * 2; ++k) {
            if (n[r][k] <= 0)
                return {};
            stageMean[(k / 2 / static_cast<size_t>(m)) * 2 + k % 2] += sum[r][k] / n[r][k];
        }
    for (double& x : stageMean)
        x /= static_cast<double>(R) * static_cast<double>(m);
    std::vector<MicrobatchSizes> out(R);
    for (size_t r = 0; r < R; ++r) {
        MicrobatchSizes& sz = out[r];
        sz.source = SizeSource::Trace;
        for (int s = 0; s < S; ++s) {
            std::vector<double> fr(static_cast<size_t>(m)), br(static_cast<size_t>(m));
            for (int mb = 0; mb < m; ++mb) {
                const size_t k = (static_cast<size_t>(s) * static_cast<size_t>(m) + static_cast<size_t>(mb)) * 2;
                const double fm = stageMean[size_t(s) * 2], bm = stageMean[size_t(s) * 2 + 1];
                fr[size_t(mb)] = fm > 0 ? sum[r][k] / n[r][k] / fm : 1.0;
                br[size_t(mb)] = bm > 0 ? sum[r][k + 1] / n[r][k + 1] / bm : 1.0;
            }
            sz.forward.push_back(std::move(fr));
            sz.backward.push_back(std::move(br));
        }
    }
    return out;
}

// Stages without measured steps take the mean of the others.
void fillUnmeasuredStages(std::vector<double>& v_, const char* what)
{
    double total = 0, n = 0;
    for (double x : v_)
        if (x >= 0) {
            total += x;
            n += 1;
        }
    if (n == 0)
        throw Error(std::string("the measured pipeline has no ") + what +
                    " steps, so it cannot calibrate a replay; check that the trace covers a whole iteration");
    for (double& x : v_)
        if (x < 0)
            x = total / n;
}

// Layers attributed by annotations: their own times, scaled so each stage
// adds up to its measured step; first/last stage residue is the extra.
void layersFromTrace(CostModel& c, const std::vector<LayerCost>& traceLayers, const StageStepTimes& times, int S,
                     double defaultShare)
{
    const std::vector<double>& meanF = times.forward;
    const std::vector<double>& meanB = times.backward;
    const std::vector<double>& share = times.inputShare;
    std::vector<LayerCost> ls = traceLayers;
    std::stable_sort(ls.begin(), ls.end(), [](const LayerCost& a, const LayerCost& b) { return a.stage < b.stage; });
    Partition measured;
    measured.firstLayer.assign(static_cast<size_t>(S) + 1, 0);
    std::vector<int> perStage(static_cast<size_t>(S), 0);
    for (const LayerCost& l : ls) {
        if (l.stage < 0 || l.stage >= S)
            throw Error("the measured layer '" + l.name + "' is on stage " + std::to_string(l.stage) +
                        ", outside the pipeline's " + std::to_string(S) + " stages");
        ++perStage[size_t(l.stage)];
    }
    for (int s = 0; s < S; ++s)
        measured.firstLayer[size_t(s) + 1] = measured.firstLayer[size_t(s)] + perStage[size_t(s)];
    for (const LayerCost& l : ls) {
        LayerCostModel lc;
        lc.name = l.name;
        lc.forwardNs = static_cast<double>(l.forwardNs);
        if (l.backwardInputNs && l.backwardWeightNs && *l.backwardInputNs + *l.backwardWeightNs > 0) {
            lc.backwardNs = static_cast<double>(*l.backwardInputNs + *l.backwardWeightNs);
            lc.backwardInputShare = static_cast<double>(*l.backwardInputNs) / lc.backwardNs;
        } else {
            lc.backwardNs = static_cast<double>(l.backwardNs);
            lc.backwardInputShare = share[size_t(l.stage)] >= 0 ? share[size_t(l.stage)] : defaultShare;
        }
        c.layers.push_back(lc);
    }
    for (int s = 0; s < S; ++s) {
        double f = 0, b = 0;
        for (int l = measured.firstLayer[size_t(s)]; l < measured.firstLayer[size_t(s) + 1]; ++l) {
            f += c.layers[size_t(l)].forwardNs;
            b += c.layers[size_t(l)].backwardNs;
        }
        const bool edge = s == 0 || s == S - 1;
        LayerCostModel& extra = s == 0 ? c.firstStageExtra : c.lastStageExtra;
        auto settle = [&](double layersSum, double target, double LayerCostModel::*field) {
            if (edge && target >= layersSum) {
                extra.*field += target - layersSum;
                return;
            }
            if (layersSum > 0)
                for (int l = measured.firstLayer[size_t(s)]; l < measured.firstLayer[size_t(s) + 1]; ++l)
                    c.layers[size_t(l)].*field *= target / layersSum;
            else if (edge)
                extra.*field += target;
        };
        settle(f, meanF[size_t(s)], &LayerCostModel::forwardNs);
        settle(b, meanB[size_t(s)], &LayerCostModel::backwardNs);
    }
    c.firstStageExtra.backwardInputShare = share[0] >= 0 ? share[0] : defaultShare;
    c.lastStageExtra.backwardInputShare = share[size_t(S - 1)] >= 0 ? share[size_t(S - 1)] : defaultShare;
    c.firstStageExtra.name = "first-stage extra";
    c.lastStageExtra.name = "last-stage extra";
    c.measuredPartition = measured;
}

// Each stage's measured time split over its layers by weight: the options'
// weights, else the model's layer costs, else equal.
// Layers from a count alone: the first stage also runs the embedding and the
// last the output layer and loss, which an even spread would charge to their
// layers. With three or more virtual stages, a layer costs what it costs on
// the interior stages (the median of their time per layer, forward plus
// backward); what the first and last stages take beyond their layers at that
// cost is their extra, as a weight in layers (0 when they take less). The
// sentence saying so goes to CostModel::stageExtrasNote.
void estimateStageExtras(CostModel& c, const Partition& measured, const StageStepTimes& times, int S, double& firstW,
                         double& lastW)
{
    if (S < 3)
        return;
    std::vector<double> perLayer;
    for (int s = 1; s + 1 < S; ++s) {
        const int n = measured.firstLayer[size_t(s) + 1] - measured.firstLayer[size_t(s)];
        if (n > 0)
            perLayer.push_back((times.forward[size_t(s)] + times.backward[size_t(s)]) / n);
    }
    if (perLayer.empty())
        return;
    std::sort(perLayer.begin(), perLayer.end());
    const double layer = perLayer.size() % 2 ? perLayer[perLayer.size() / 2]
                                             : (perLayer[perLayer.size() / 2 - 1] + perLayer[perLayer.size() / 2]) / 2;
    if (!(layer > 0))
        return;
    auto extra = [&](int s) {
        const int n = measured.firstLayer[size_t(s) + 1] - measured.firstLayer[size_t(s)];
        const double beyond = (times.forward[size_t(s)] + times.backward[size_t(s)]) / layer - n;
        return beyond > 0.05 ? beyond : 0.0; // within 5% of a layer: none
    };
    firstW = extra(0);
    lastW = extra(S - 1);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "no layer ranges: a layer costs the interior stages' median per layer (%s forward + backward); "
                  "the first stage's extra (embedding) is %.2f layers, the last stage's (output layer and loss) %.2f layers",
                  formatDuration(static_cast<TimeNs>(std::llround(layer))).c_str(), firstW, lastW);
    c.stageExtrasNote = buf;
}

void layersByWeight(CostModel& c, const ModelDescription* model, const FromMeasuredOptions& options,
                    const StageStepTimes& times, int S, double defaultShare)
{
    const std::vector<double>& meanF = times.forward;
    const std::vector<double>& meanB = times.backward;
    const std::vector<double>& share = times.inputShare;
    int L = S;
    if (model)
        L = static_cast<int>(model->layers.size());
    if (options.layers)
        L = *options.layers;
    if (!options.layerWeights.empty() && static_cast<int>(options.layerWeights.size()) != L)
        throw ValueError(Setting::Weights, std::to_string(options.layerWeights.size()) + " layer weights given for " +
                                        std::to_string(L) + " layers");
    const Partition measured = options.measuredBoundaries.empty()
                                   ? evenPartition(L, S)
                                   : partitionFromBoundaries(options.measuredBoundaries, L, S);
    std::vector<double> weight(static_cast<size_t>(L), 1.0);
    for (int l = 0; l < L; ++l) {
        if (!options.layerWeights.empty())
            weight[size_t(l)] = options.layerWeights[size_t(l)];
        else if (model && l < static_cast<int>(model->layers.size()))
            weight[size_t(l)] = model->layers[size_t(l)].cost;
    }
    double firstW = model && model->firstStage && model->firstStageGiven ? model->firstStage->cost : 0.0;
    double lastW = model && model->lastStage && model->lastStageGiven ? model->lastStage->cost : 0.0;
    if (!model && options.layerWeights.empty())
        estimateStageExtras(c, measured, times, S, firstW, lastW);
    c.layers.resize(static_cast<size_t>(L));
    for (int s = 0; s < S; ++s) {
        double total = 0;
        for (int l = measured.firstLayer[size_t(s)]; l < measured.firstLayer[size_t(s) + 1]; ++l)
            total += weight[size_t(l)];
        if (s == 0)
            total += firstW;
        if (s == S - 1)
            total += lastW;
        if (!std::isfinite(total))
            throw ValueError(Setting::Weights, "the layer weights of stage " + std::to_string(s) +
                                            " add up to more than a number can hold; give smaller weights");
        if (total <= 0)
            throw Error("the layer weights of stage " + std::to_string(s) + " add up to zero; give positive weights");
        const double sh = share[size_t(s)] >= 0 ? share[size_t(s)] : defaultShare;
        for (int l = measured.firstLayer[size_t(s)]; l < measured.firstLayer[size_t(s) + 1]; ++l) {
            LayerCostModel& lc = c.layers[size_t(l)];
            lc.name = model && l < static_cast<int>(model->layers.size()) ? model->layers[size_t(l)].name
                                                                         : "layer " + std::to_string(l);
            lc.forwardNs = meanF[size_t(s)] * weight[size_t(l)] / total;
            lc.backwardNs = meanB[size_t(s)] * weight[size_t(l)] / total;
            lc.backwardInputShare = sh;
        }
        if (s == 0) {
            c.firstStageExtra.forwardNs = meanF[0] * firstW / total;
            c.firstStageExtra.backwardNs = meanB[0] * firstW / total;
            c.firstStageExtra.backwardInputShare = sh;
        }
        if (s == S - 1) {
            c.lastStageExtra.forwardNs = meanF[size_t(s)] * lastW / total;
            c.lastStageExtra.backwardNs = meanB[size_t(s)] * lastW / total;
            c.lastStageExtra.backwardInputShare = sh;
        }
    }
    c.firstStageExtra.name = model && model->firstStage ? model->firstStage->name : "first-stage extra";
    c.lastStageExtra.name = model && model->lastStage ? model->lastStage->name : "last-stage extra";
    c.measuredPartition = measured;
}

// Parameters and activations come from the model description when it has them.
void takeModelSizes(CostModel& c, const ModelDescription& model)
{
    const CostModel planned = [&] {
        try {
            return CostModel::fromModel(model);
        } catch (const Error&) {
            // A description without times still has structure; take what it gives.
            ModelDescription copy = model;
            copy.layerForwardMs = 1.0;
            return CostModel::fromModel(copy);
        }
    }();
    if (planned.layers.size() == c.layers.size())
        for (size_t l = 0; l < c.layers.size(); ++l) {
            c.layers[l].params = planned.layers[l].params;
            c.layers[l].activationBytes = planned.layers[l].activationBytes;
        }
    c.firstStageExtra.params = planned.firstStageExtra.params;
    c.firstStageExtra.activationBytes = planned.firstStageExtra.activationBytes;
    c.lastStageExtra.params = planned.lastStageExtra.params;
    c.lastStageExtra.activationBytes = planned.lastStageExtra.activationBytes;
    c.p2pBytes = planned.p2pBytes;
    c.memory = model.memory;
    c.gradCommBytesPerParam = planned.gradCommBytesPerParam;
    c.optimizerNsPerParam = planned.optimizerNsPerParam;
}

// Point-to-point: latency and bandwidth from the measured transfers and
// messages, then what the model description gives instead; the launch gap
// from the steps unless the description gives it.
void fitLinksAndLaunchGap(CostModel& c, const MeasuredPipeline& mp, const ModelDescription* model)
{
    {
        const P2pLink link = fitP2pLink(mp.transfers, mp.messages, P2pLink{c.p2pLatencyNs, c.p2pBytesPerNs, c.p2pBytes});
        c.p2pLatencyNs = link.latencyNs;
        c.p2pBytesPerNs = link.bytesPerNs;
        c.p2pBytes = link.bytes;
    }
    if (model) {
        if (model->p2pLatencyUs)
            c.p2pLatencyNs = toNs(*model->p2pLatencyUs * 1e3);
        if (model->p2pBandwidthGBps)
            c.p2pBytesPerNs = *model->p2pBandwidthGBps;
        if (model->p2pBytes)
            c.p2pBytes = *model->p2pBytes;
        if (model->launchGapUs)
            c.launchGapNs = toNs(*model->launchGapUs * 1e3);
    }

    if (!(model && model->launchGapUs))
        c.launchGapNs = smallestStepGap(mp).value_or(0);
}

// Data parallelism, the iteration end's collectives and the optimizer, and
// how the ranks exchanged, as measured.
void takeMeasuredCollectives(CostModel& c, const MeasuredPipeline& mp)
{
    c.dataParallel = std::max(1, mp.dataParallel);
    c.memory.dataParallel = c.dataParallel;
    if (!c.memory.gpuMemoryBytes)
        c.memory.gpuMemoryBytes = mp.gpuMemoryBytes;
    if (mp.dataParallelSyncNs > 0)
        c.measuredAllReduceNs = mp.dataParallelSyncNs;
    if (mp.optimizerNs > 0)
        c.measuredOptimizerNs = mp.optimizerNs;
    c.pipelineSyncNs = std::max<TimeNs>(0, mp.pipelineSyncNs);
    c.blockingExchanges = mp.blockingExchanges;
    c.exchangeGapNs = std::max<TimeNs>(0, mp.exchangeGapNs);
}

// Where each pipeline rank began the measured iteration (median over its
// replicas); none when every rank began at the start.
void takeRankStarts(CostModel& c, const MeasuredPipeline& mp, int p)
{
    std::vector<std::vector<double>> starts(static_cast<size_t>(p));
    for (size_t g = 0; g < mp.rankStartNs.size() && g < mp.stageOfRank.size(); ++g)
        if (mp.stageOfRank[g] >= 0 && mp.stageOfRank[g] < p)
            starts[size_t(mp.stageOfRank[g])].push_back(static_cast<double>(mp.rankStartNs[g]));
    bool any = false;
    for (const auto& s_ : starts)
        for (double x : s_)
            any = any || x > 0;
    if (any)
        for (const auto& s_ : starts)
            c.rankStartNs.push_back(toNs(median(s_)));
}

// An all-reduce bandwidth or an optimizer time in the model description
// replaces what was measured.
void takeModelCollectives(CostModel& c, const ModelDescription* model)
{
    if (model && model->allReduceBandwidthGBps) {
        c.measuredAllReduceNs.reset();
        c.allReduceBytesPerNs = *model->allReduceBandwidthGBps;
        c.allReduceLatencyNs = toNs(model->allReduceLatencyUs.value_or(0.0) * 1e3);
    }
    if (model && model->optimizerMs)
        c.measuredOptimizerNs.reset();
}

// The measured all-reduce and optimizer belong to the busiest rank: what it
// holds, in parameters when known, else in layers.
double busiestRankUnits(const CostModel& c, const MeasuredShape& sh)
{
    const int p = sh.p, S = sh.S;
    const ScheduleKind kind = sh.kind;
    const Partition& part = *c.measuredPartition;
    const std::vector<int64_t> params = c.stageParams(part);
    const bool haveParams = std::accumulate(params.begin(), params.end(), int64_t(0)) > 0;
    std::vector<double> units(static_cast<size_t>(p), 0.0);
    for (int s = 0; s < S; ++s) {
        const int r = isVShaped(kind) ? (s < p ? s : 2 * p - 1 - s) : s % p;
        units[size_t(r)] += haveParams ? static_cast<double>(params[size_t(s)]) : part.layersOf(s);
    }
    return *std::max_element(units.begin(), units.end());
}

// Each pipeline stage's measured peak memory: the most over its replicas.
void takeMeasuredPeaks(CostModel& c, const MeasuredPipeline& mp, int p)
{
    if (std::any_of(mp.measuredPeakBytes.begin(), mp.measuredPeakBytes.end(), [](int64_t b) { return b >= 0; })) {
        c.measuredPeakBytes.assign(static_cast<size_t>(p), -1);
        for (size_t r = 0; r < mp.measuredPeakBytes.size() && r < mp.stageOfRank.size(); ++r) {
            const int st = mp.stageOfRank[r];
            if (st >= 0 && st < p)
                c.measuredPeakBytes[size_t(st)] = std::max(c.measuredPeakBytes[size_t(st)], mp.measuredPeakBytes[r]);
        }
    }
}

} // namespace

CostModel CostModel::fromMeasured(const MeasuredPipeline& mp, const ModelDescription* model,
                                  const FromMeasuredOptions& options)
{
    checkLayerWeights(options.layerWeights);
    const int p = std::max(1, mp.pipelineDegree), v = std::max(1, mp.chunks), S = p * v;
    const int m = std::max(1, mp.microbatches);
    const ScheduleKind kind = mp.schedule.value_or(ScheduleKind::OneFOneB);
    const MeasuredShape shape{p, v, S, m, kind};

    // Mean step time per virtual stage and kind, and each microbatch's own.
    StageStepTimes times = fitStepTimes(mp, shape);
    std::optional<MicrobatchSizes> measuredSizes = measuredMicrobatchSizes(mp, shape);
    fillUnmeasuredStages(times.forward, "forward");
    fillUnmeasuredStages(times.backward, "backward");

    CostModel c;
    c.name = model ? model->name : "measured";
    const double defaultShare = model ? model->backwardInputShare : 0.5;
    c.layerSource = !mp.layers.empty() ? LayerSource::Trace
                    : model             ? LayerSource::Model
                    : options.layers    ? LayerSource::Count
                                        : LayerSource::Stages;
    if (!mp.layers.empty())
        layersFromTrace(c, mp.layers, times, S, defaultShare);
    else
        layersByWeight(c, model, options, times, S, defaultShare);
    if (model)
        takeModelSizes(c, *model);

    fitLinksAndLaunchGap(c, mp, model);
    if (!(model && model->launchGapUs)) {
        // Where the trace times no transfer and shows a host gap before each
        // step, a remote input's cost is what the steps that waited for one
        // show: from its producer's end to their start (the transfer and the
        // receiver's host work after it). The host gaps are then read off
        // the steps whose input had come by that measure, and the replay
        // charges the same two costs. Without such gaps the links are
        // fitted from the exchanges as elsewhere.
        std::optional<TimeNs> remote = model && model->p2pLatencyUs ? std::nullopt : remoteInputLatency(mp, shape);
        MeasuredStepGaps gaps = measuredStepGaps(mp, shape, remote.value_or(0));
        if (remote && gaps.all.empty()) {
            remote.reset();
            gaps = measuredStepGaps(mp, shape);
        }
        c.stepGapNs = std::move(gaps.all);
        c.localStepGapNs = std::move(gaps.local);
        if (remote) {
            const double wire = c.p2pBytesPerNs > 0 ? static_cast<double>(c.p2pBytes) / c.p2pBytesPerNs : 0.0;
            c.p2pLatencyNs = std::max<TimeNs>(0, *remote - toNs(wire));
        } else {
            // A transfer's latency fitted from one message whose receiver waited
            // holds that receiver's host time too. Longer than the median wait
            // the steps that waited for their input saw after it, it is not the
            // link's: what those steps show beyond their host gap (the tenth
            // percentile: the transfer, not a late host) is taken instead.
            const WaitedInput w = waitedInputLatency(mp, shape, c.stepGapNs);
            if (w.medianAfterInputNs && w.beyondGapNs && c.p2pLatencyNs > *w.medianAfterInputNs && !(model && model->p2pLatencyUs))
                c.p2pLatencyNs = *w.beyondGapNs;
        }
    }
    c.measuredOrder = detail::measuredOrder(mp, shape);
    takeMeasuredCollectives(c, mp);
    takeRankStarts(c, mp, p);
    attributeIterationTail(mp, c);
    takeModelCollectives(c, model);
    c.measuredUnits = busiestRankUnits(c, shape);

    c.referenceMicrobatches = m;
    c.keepGlobalBatch = true;
    c.measuredCosts = true;
    if (mp.iterationNs > 0)
        c.measuredIterationNs = mp.iterationNs;
    c.measuredIdleNsPerStage = mp.idleNsPerStage;
    c.measuredSchedule = mp.schedule;
    c.measuredPp = p;
    c.measuredV = v;
    c.measuredMicrobatches = m;
    c.microbatchSizes = std::move(measuredSizes);
    c.replicaSizes = measuredReplicaSizes(mp, shape);
    takeMeasuredPeaks(c, mp, p);
    return c;
}

} // namespace pipescope::whatif
