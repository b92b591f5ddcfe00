// The cost model as a value: its queries, layer freezing, and compiling it
// into a replay's per-stage costs (replayCosts). The estimators live in
// CostModelFromModel.cpp and CostModelFromMeasured.cpp.
#include "whatif/CostModel.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "whatif/detail/CostMath.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

namespace pipescope::whatif {

using namespace detail;

std::string_view toString(LayerSource source)
{
    switch (source) {
    case LayerSource::Stages: return "stages";
    case LayerSource::Count: return "count";
    case LayerSource::Model: return "model";
    case LayerSource::Trace: return "trace";
    }
    return "stages";
}

double CostModel::speedOfRank(int rank) const
{
    if (rank < 0 || static_cast<size_t>(rank) >= stageSpeed.size())
        return 1.0;
    return stageSpeed[static_cast<size_t>(rank)];
}

double CostModel::paceOfRank(int rank) const
{
    const double pace = rank >= 0 && static_cast<size_t>(rank) < replicaPace.size() ? replicaPace[size_t(rank)] : 1.0;
    return speedOfRank(rank) / pace;
}

bool CostModel::heterogeneous() const
{
    return std::any_of(stageSpeed.begin(), stageSpeed.end(), [](double x) { return x != 1.0; });
}

void CostModel::setStageSpeeds(std::vector<double> speeds)
{
    for (size_t r = 0; r < speeds.size(); ++r)
        if (!std::isfinite(speeds[r]) || speeds[r] <= 0 || speeds[r] > 1e6)
            throw ValueError(Setting::StageSpeed, "the speed of stage " + std::to_string(r) + " is " + formatNumber(speeds[r]) +
                                                "; speeds must be finite numbers above 0 (1 = as fast as the reference, "
                                                "0.5 = twice as slow) and at most 1,000,000");
    if (measuredCosts && !speeds.empty() && static_cast<int>(speeds.size()) != measuredPp)
        throw ValueError(Setting::StageSpeed, std::to_string(speeds.size()) + " stage speeds given; the measured pipeline has " +
                                            std::to_string(measuredPp) + " stages (one speed per pipeline rank)");
    if (measuredCosts && measuredPartition && measuredPp > 0) {
        // Back to reference speed: each layer was timed on its measured rank.
        const ScheduleKind kind = measuredSchedule.value_or(ScheduleKind::OneFOneB);
        const int p = measuredPp;
        const Partition& part = *measuredPartition;
        auto rankOf = [&](int s) { return isVShaped(kind) ? (s < p ? s : 2 * p - 1 - s) : s % p; };
        auto speedOf = [&](int s) {
            const size_t r = static_cast<size_t>(rankOf(s));
            return r < speeds.size() ? speeds[r] : 1.0;
        };
        // Undo the speeds declared before, then apply the new ones.
        for (int s = 0; s < part.stages(); ++s) {
            const double f = speedOf(s) / speedOfRank(rankOf(s));
            for (int l = part.firstLayer[size_t(s)]; l < part.firstLayer[size_t(s) + 1] && l < layerCount(); ++l) {
                layers[size_t(l)].forwardNs *= f;
                layers[size_t(l)].backwardNs *= f;
            }
        }
        const double f0 = speedOf(0) / speedOfRank(rankOf(0));
        firstStageExtra.forwardNs *= f0;
        firstStageExtra.backwardNs *= f0;
        const double fl = speedOf(part.stages() - 1) / speedOfRank(rankOf(part.stages() - 1));
        lastStageExtra.forwardNs *= fl;
        lastStageExtra.backwardNs *= fl;
    }
    stageSpeed = std::move(speeds);
}

std::vector<double> CostModel::measuredStageSpeeds() const
{
    if (layerSource != LayerSource::Trace || !measuredCosts || !measuredPartition || measuredPp < 2 ||
        measuredPartition->firstLayer.back() != layerCount())
        throw ValueError(Setting::StageSpeed,
                         "speeds come from the trace only when it times each layer (PyTorch module ranges from "
                         "with_modules=True or pipescope/layer annotations) on a pipeline of two or more ranks; give "
                         "the speeds with --stage-speed S0,S1,... or --gpu-types and --gpu-throughput instead");
    const ScheduleKind kind = measuredSchedule.value_or(ScheduleKind::OneFOneB);
    const int p = measuredPp;
    const Partition& part = *measuredPartition;
    auto rankOf = [&](int s) { return isVShaped(kind) ? (s < p ? s : 2 * p - 1 - s) : s % p; };
    // Each layer as timed on its rank: the costs are stored at reference speed.
    std::vector<std::vector<double>> perRank(static_cast<size_t>(p));
    for (int s = 0; s < part.stages(); ++s) {
        const int r = rankOf(s);
        for (int l = part.firstLayer[size_t(s)]; l < part.firstLayer[size_t(s) + 1]; ++l) {
            const double t = (layers[size_t(l)].forwardNs + layers[size_t(l)].backwardNs) / speedOfRank(r);
            if (t > 0 && r >= 0 && r < p)
                perRank[size_t(r)].push_back(t);
        }
    }
    std::vector<double> medians;
    for (int r = 0; r < p; ++r) {
        if (perRank[size_t(r)].empty())
            throw ValueError(Setting::StageSpeed, "rank " + std::to_string(r) +
                                                " runs no timed layer in the measured iteration, so its speed cannot be "
                                                "compared; give the speeds with --stage-speed instead");
        medians.push_back(median(perRank[size_t(r)]));
    }
    const double reference = median(medians);
    std::vector<double> speeds;
    for (double m : medians) {
        const double speed = reference / m;
        speeds.push_back(std::abs(speed - 1.0) < kSameSpeedTolerance ? 1.0 : speed);
    }
    return speeds;
}

double CostModel::microbatchScale(int microbatches) const
{
    if (!keepGlobalBatch || microbatches <= 0 || referenceMicrobatches <= 0)
        return 1.0;
    return static_cast<double>(referenceMicrobatches) / microbatches;
}

std::vector<int64_t> CostModel::stageParams(const Partition& partition) const
{
    const int S = partition.stages();
    std::vector<int64_t> out(static_cast<size_t>(S), 0);
    for (int s = 0; s < S; ++s)
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            out[size_t(s)] += layers[size_t(l)].params;
    if (S > 0) {
        out.front() += firstStageExtra.params;
        out.back() += lastStageExtra.params;
    }
    return out;
}

std::vector<int64_t> CostModel::stageTrainableParams(const Partition& partition) const
{
    const int S = partition.stages();
    std::vector<int64_t> out(static_cast<size_t>(S), 0);
    for (int s = 0; s < S; ++s)
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            out[size_t(s)] += layers[size_t(l)].trainableParams();
    if (S > 0) {
        out.front() += firstStageExtra.trainableParams();
        out.back() += lastStageExtra.trainableParams();
    }
    return out;
}

int CostModel::frozenPrefix() const
{
    int n = 0;
    while (n < layerCount() && layers[size_t(n)].frozen)
        ++n;
    return n;
}

void CostModel::freezeLayers(const std::vector<LayerRange>& ranges)
{
    if (!frozenLayers.empty())
        throw Error("the cost model's layers are frozen already");
    const int L = layerCount();
    for (const LayerRange& r : ranges) {
        if (r.first > r.last)
            throw ValueError(Setting::Freeze, "the range " + std::to_string(r.first) + ".." + std::to_string(r.last) +
                                           " runs backwards; give FIRST..LAST with FIRST at most LAST");
        if (r.first < 0 || r.last >= L)
            throw ValueError(Setting::Freeze, "the range " + std::to_string(r.first) + ".." + std::to_string(r.last) +
                                           " is outside the model's " + std::to_string(L) + " layers (numbered 0.." +
                                           std::to_string(L - 1) + ")");
    }
    // Sorted and merged, so overlapping or touching ranges read as one.
    std::vector<LayerRange> merged = ranges;
    std::sort(merged.begin(), merged.end(), [](const LayerRange& a, const LayerRange& b) { return a.first < b.first; });
    frozenLayers.clear();
    for (const LayerRange& r : merged) {
        if (!frozenLayers.empty() && r.first <= frozenLayers.back().last + 1)
            frozenLayers.back().last = std::max(frozenLayers.back().last, r.last);
        else
            frozenLayers.push_back(r);
    }
    for (const LayerRange& r : frozenLayers)
        for (int l = r.first; l <= r.last; ++l)
            layers[size_t(l)].frozen = true;
    // Before the first trainable layer nobody needs an input gradient: no
    // backward at all, so no activations kept for one either.
    const int prefix = frozenPrefix();
    auto dropBackward = [](LayerCostModel& l) {
        l.frozen = true;
        l.backwardNs = 0;
        l.activationBytes = 0;
    };
    if (prefix > 0)
        dropBackward(firstStageExtra);
    for (int l = 0; l < L; ++l) {
        LayerCostModel& lc = layers[size_t(l)];
        if (!lc.frozen)
            continue;
        if (l < prefix) {
            dropBackward(lc);
        } else {
            // Only the input gradient is left: I = share x B, W = 0.
            lc.backwardNs *= lc.backwardInputShare;
            lc.backwardInputShare = 1.0;
        }
    }
}

std::vector<int64_t> CostModel::stageActivationBytes(const Partition& partition, int microbatches) const
{
    const int S = partition.stages();
    const double scale = microbatchScale(microbatches);
    std::vector<int64_t> out(static_cast<size_t>(S), 0);
    for (int s = 0; s < S; ++s) {
        double bytes = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            bytes += static_cast<double>(layers[size_t(l)].activationBytes);
        if (s == 0)
            bytes += static_cast<double>(firstStageExtra.activationBytes);
        if (s == S - 1)
            bytes += static_cast<double>(lastStageExtra.activationBytes);
        out[size_t(s)] = toBytes(bytes * scale, "activation memory of a stage");
    }
    return out;
}

bool CostModel::unevenFor(int microbatches, MicrobatchOrder order) const
{
    return microbatchSizes && order != MicrobatchOrder::Equal && microbatchSizes->count() == microbatches &&
           microbatchSizes->rows() > 0;
}

bool CostModel::perReplicaFor(int pp, int microbatches, MicrobatchOrder order) const
{
    return replicaSizes.size() >= 2 && order != MicrobatchOrder::Equal && pp >= 1 && microbatches >= 1 &&
           replicaSizes.front().count() >= 1 && replicaSizes.front().rows() > 0;
}

void CostModel::setMicrobatchTokens(const MicrobatchTokens& t)
{
    if (t.tokens.empty())
        throw ValueError(Setting::MicrobatchTokens, "the tokens file lists no microbatches");
    microbatchSizes = uniformRows(t.tokens, SizeSource::Tokens);
    microbatchSizes->tokens = t.tokens;
    const double mean = std::accumulate(t.tokens.begin(), t.tokens.end(), 0.0) / static_cast<double>(t.tokens.size());
    for (LayerCostModel& l : layers) {
        if (t.forwardNsPerToken)
            l.forwardNs = *t.forwardNsPerToken * mean;
        if (t.backwardNsPerToken)
            l.backwardNs = *t.backwardNsPerToken * mean;
    }
}

namespace {

// The row of MicrobatchSizes a layer takes: the measured virtual stage that ran it.
int sizeRowOfLayer(const CostModel& m, int layer)
{
    const int R = m.microbatchSizes->rows(), L = m.layerCount();
    if (R <= 1 || L == 0)
        return 0;
    const auto& mp = m.measuredPartition;
    if (mp && mp->stages() == R && mp->firstLayer.back() == L) {
        const auto it = std::upper_bound(mp->firstLayer.begin(), mp->firstLayer.end(), layer);
        return std::clamp(static_cast<int>(it - mp->firstLayer.begin()) - 1, 0, R - 1);
    }
    return std::min(R - 1, static_cast<int>(static_cast<int64_t>(layer) * R / L));
}

// The partition and the stage speeds describe the schedule's stages and the model's layers.
void checkPartitionFits(const CostModel& m, const Partition& partition, const Schedule& schedule)
{
    const int S = schedule.stages;
    if (partition.stages() != S)
        throw Error("the partition has " + std::to_string(partition.stages()) + " stages, the schedule " +
                    std::to_string(S));
    if (partition.firstLayer.back() != m.layerCount())
        throw Error("the partition covers " + std::to_string(partition.firstLayer.back()) + " layers, the model has " +
                    std::to_string(m.layerCount()));
    if (!m.stageSpeed.empty() && static_cast<int>(m.stageSpeed.size()) != schedule.pp)
        throw ValueError(Setting::StageSpeed, "the stage speeds describe a pipeline of " + std::to_string(m.stageSpeed.size()) +
                                            " ranks and the scenario has pp " + std::to_string(schedule.pp) +
                                            "; uneven GPUs are predicted at the measured pipeline degree only, so leave "
                                            "out --pp or the speeds");
}

// Each stage's F, I, W and B: its layers' (and extras') costs, scaled to
// the microbatch count and divided by the pace of the rank holding it.
void addStageCosts(const CostModel& m, const Partition& partition, const Schedule& schedule, double scale,
                   ReplayCosts& c)
{
    const int S = schedule.stages;
    c.stages.resize(static_cast<size_t>(S));
    auto add = [](double& f, double& i, double& w, const LayerCostModel& l) {
        f += l.forwardNs;
        i += l.backwardNs * l.backwardInputShare;
        w += l.backwardNs * (1.0 - l.backwardInputShare);
    };
    for (int s = 0; s < S; ++s) {
        double f = 0, i = 0, w = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            add(f, i, w, m.layers[size_t(l)]);
        if (s == 0)
            add(f, i, w, m.firstStageExtra);
        if (s == S - 1)
            add(f, i, w, m.lastStageExtra);
        // x / 1.0 is x exactly: all speeds 1 cost what they did without speeds.
        const double speed = m.paceOfRank(schedule.rankOfStage[size_t(s)]);
        StageCost& sc = c.stages[size_t(s)];
        sc.forward = toNs(f * scale / speed);
        sc.backwardInput = toNs(i * scale / speed);
        sc.backwardWeight = toNs(w * scale / speed);
        sc.backward = toNs((i + w) * scale / speed);
    }
}

// Each stage's microbatch i costs its layers' costs, each scaled by the
// size of microbatch perm[i] on the layer's measured stage.
void addMicrobatchCosts(const CostModel& m, const Partition& partition, const Schedule& schedule,
                        MicrobatchOrder order, ReplayCosts& c)
{
    const int S = schedule.stages;
    const MicrobatchSizes& ms = *m.microbatchSizes;
    const int M = schedule.microbatches, R = ms.rows();
    const std::vector<int> perm = microbatchPermutation(ms.size(), order);
    c.microbatchCosts.resize(static_cast<size_t>(S) * static_cast<size_t>(M));
    std::vector<double> fRow(static_cast<size_t>(R)), bRow(static_cast<size_t>(R));
    for (int s = 0; s < S; ++s) {
        std::fill(fRow.begin(), fRow.end(), 0.0);
        std::fill(bRow.begin(), bRow.end(), 0.0);
        auto addTo = [&](int row, const LayerCostModel& l) {
            fRow[size_t(row)] += l.forwardNs;
            bRow[size_t(row)] += l.backwardNs;
        };
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            addTo(sizeRowOfLayer(m, l), m.layers[size_t(l)]);
        if (s == 0)
            addTo(0, m.firstStageExtra);
        if (s == S - 1)
            addTo(R - 1, m.lastStageExtra);
        const double fSum = std::accumulate(fRow.begin(), fRow.end(), 0.0);
        const double bSum = std::accumulate(bRow.begin(), bRow.end(), 0.0);
        const StageCost& sc = c.stages[size_t(s)];
        for (int i = 0; i < M; ++i) {
            double fw = 0, bw = 0;
            for (int r = 0; r < R; ++r) {
                fw += fRow[size_t(r)] * ms.forward[size_t(r)][size_t(perm[size_t(i)])];
                bw += bRow[size_t(r)] * ms.backward[size_t(r)][size_t(perm[size_t(i)])];
            }
            fw = fSum > 0 ? fw / fSum : 1.0;
            bw = bSum > 0 ? bw / bSum : 1.0;
            StageCost& mc = c.microbatchCosts[size_t(s) * size_t(M) + size_t(i)];
            mc.forward = toNs(static_cast<double>(sc.forward) * fw);
            mc.backward = toNs(static_cast<double>(sc.backward) * bw);
            mc.backwardInput = toNs(static_cast<double>(sc.backwardInput) * bw);
            mc.backwardWeight = toNs(static_cast<double>(sc.backwardWeight) * bw);
        }
    }
}

// Transfers between stages, host gaps and how the ranks exchange.
void addExchangeCosts(const CostModel& m, const Schedule& schedule, double scale, ReplayCosts& c)
{
    const int S = schedule.stages;
    c.boundaryBytes.assign(S > 1 ? size_t(S - 1) : 0, toBytes(static_cast<double>(m.p2pBytes) * scale, "bytes sent between stages"));
    c.p2pLatencyNs = m.p2pLatencyNs;
    c.p2pBytesPerNs = m.p2pBytesPerNs;
    c.eagerBytes = m.p2pEagerBytes;
    c.launchGapNs = m.launchGapNs;
    // Each rank's measured gap before a step: as measured at the measured
    // degree, else the median over the measured ranks for every rank (a
    // host's per-step cost does not depend on which stage it runs).
    if (!m.stepGapNs.empty()) {
        if (schedule.pp == m.measuredPp && static_cast<int>(m.stepGapNs.size()) == schedule.pp) {
            c.stepGapNs = m.stepGapNs;
            if (static_cast<int>(m.localStepGapNs.size()) == schedule.pp)
                c.localStepGapNs = m.localStepGapNs;
        } else {
            // The median over the ranks that measured one; `none` where none did.
            const auto typical = [](const std::vector<std::array<TimeNs, 2>>& gaps, TimeNs least, TimeNs none) {
                std::array<TimeNs, 2> t{none, none};
                for (size_t k = 0; k < 2; ++k) {
                    std::vector<TimeNs> v;
                    for (const auto& g : gaps)
                        if (g[k] >= least)
                            v.push_back(g[k]);
                    if (!v.empty()) {
                        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
                        t[k] = v[v.size() / 2];
                    }
                }
                return t;
            };
            c.stepGapNs.assign(static_cast<size_t>(schedule.pp), typical(m.stepGapNs, 1, 0));
            if (!m.localStepGapNs.empty())
                c.localStepGapNs.assign(static_cast<size_t>(schedule.pp), typical(m.localStepGapNs, 0, -1));
        }
    }
    // Exchanges learnt on Megatron's schedules (1F1B, interleaved) carry to
    // those; another schedule is torch.distributed.pipelining's, which posts
    // each receive before the step that needs it and lets sends overlap
    // compute (docs/whatif.md, "Exchanges").
    const auto megatronKind = [](ScheduleKind k) {
        return k == ScheduleKind::OneFOneB || k == ScheduleKind::Interleaved1F1B;
    };
    const std::optional<ScheduleKind> measuredKind = m.measuredSchedule;
    const bool carries = megatronKind(schedule.kind) || !measuredKind || !megatronKind(*measuredKind);
    c.blockingExchanges = m.blockingExchanges && carries;
    c.exchangeGapNs = m.exchangeGapNs;
    c.megatronExchanges = m.megatronExchanges && carries;
    c.sharedLinks = m.sharedLinks;
    c.pipelineSyncNs = m.pipelineSyncNs;
    if (schedule.pp == m.measuredPp && static_cast<int>(m.rankStartNs.size()) == schedule.pp)
        c.rankStartNs = m.rankStartNs;
}

// Each rank's gradient all-reduce and optimizer step: scaled from the
// measured ones by what the rank holds, else from bandwidth and parameters.
void addIterationEndCosts(const CostModel& m, const Partition& partition, const Schedule& schedule, ReplayCosts& c)
{
    const int S = schedule.stages;
    // Per rank: what its stages hold, in parameters when known, else in layers.
    // Frozen layers have no gradients to all-reduce and no optimizer step.
    const std::vector<int64_t> params = m.stageParams(partition);
    const std::vector<int64_t> trainable = m.stageTrainableParams(partition);
    const bool haveParams = std::accumulate(params.begin(), params.end(), int64_t(0)) > 0;
    std::vector<double> units(static_cast<size_t>(schedule.pp), 0.0);
    std::vector<int64_t> rankParams(static_cast<size_t>(schedule.pp), 0);
    for (int s = 0; s < S; ++s) {
        const size_t r = static_cast<size_t>(schedule.rankOfStage[size_t(s)]);
        rankParams[r] += trainable[size_t(s)];
        int trainableLayers = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            trainableLayers += m.layers[size_t(l)].frozen ? 0 : 1;
        units[r] += haveParams ? static_cast<double>(trainable[size_t(s)]) : trainableLayers;
    }
    c.allReduceNs.assign(static_cast<size_t>(schedule.pp), 0);
    c.optimizerNs.assign(static_cast<size_t>(schedule.pp), 0);
    const double dp = std::max(1, m.dataParallel);
    for (size_t r = 0; r < units.size(); ++r) {
        if (m.measuredAllReduceNs && m.measuredUnits > 0)
            c.allReduceNs[r] = toNs(static_cast<double>(*m.measuredAllReduceNs) * units[r] / m.measuredUnits);
        else if (m.dataParallel > 1 && m.allReduceBytesPerNs > 0)
            c.allReduceNs[r] = m.allReduceLatencyNs +
                               toNs(2.0 * (dp - 1) / dp * static_cast<double>(rankParams[r]) * m.gradCommBytesPerParam /
                                    m.allReduceBytesPerNs);
        if (m.measuredOptimizerNs && m.measuredUnits > 0)
            c.optimizerNs[r] = toNs(static_cast<double>(*m.measuredOptimizerNs) * units[r] / m.measuredUnits);
        else
            c.optimizerNs[r] =
                toNs(m.optimizerNsPerParam * static_cast<double>(rankParams[r]) / (m.memory.zeroStage >= 1 ? dp : 1.0));
    }
}

} // namespace

ReplayCosts CostModel::replayCosts(const Partition& partition, const Schedule& schedule, MicrobatchOrder order) const
{
    checkPartitionFits(*this, partition, schedule);
    const double scale = microbatchScale(schedule.microbatches);
    ReplayCosts c;
    addStageCosts(*this, partition, schedule, scale, c);
    if (unevenFor(schedule.microbatches, order))
        addMicrobatchCosts(*this, partition, schedule, order, c);
    addExchangeCosts(*this, schedule, scale, c);
    addIterationEndCosts(*this, partition, schedule, c);
    return c;
}

} // namespace pipescope::whatif
