#include "whatif/CostModel.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"

#include <cstdio>
#include <limits>
#include <string>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pipescope::whatif {

namespace {

// Defaults for planning without a trace: an InfiniBand-class link between
// pipeline stages and a ring all-reduce over the same fabric.
constexpr double kDefaultP2pLatencyUs = 20.0;
constexpr double kDefaultP2pGBps = 25.0;
constexpr double kDefaultAllReduceLatencyUs = 30.0;
constexpr double kDefaultAllReduceGBps = 40.0;
// Adam touches ~36 bytes per parameter; at ~2 TB/s that is ~0.02 ns each.
constexpr double kDefaultOptimizerNsPerParam = 0.02;

// A value as the user wrote it, for messages ("nan", "inf", "1e+30").
std::string formatNumber(double v)
{
    if (std::isnan(v))
        return "nan";
    if (std::isinf(v))
        return v < 0 ? "-inf" : "inf";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// Costs become int64 nanoseconds and bytes; a value that does not fit is
// refused by name rather than wrapped (a wrapped time looks like a deadlock).
TimeNs toNs(double ns)
{
    if (std::isnan(ns) || ns > static_cast<double>(kMaxTimeNs))
        throw Error("a stage's step time (" + formatNumber(ns) +
                    " ns) does not fit the nanosecond clock (about 146 years); check the layer costs and weights");
    return static_cast<TimeNs>(std::llround(std::max(0.0, ns)));
}

int64_t toBytes(double bytes, const char* what)
{
    if (std::isnan(bytes) || bytes > static_cast<double>(std::numeric_limits<int64_t>::max() / 4))
        throw Error(std::string("the ") + what + " (" + formatNumber(bytes) + " bytes) is too large to count; check the model sizes");
    return static_cast<int64_t>(std::llround(std::max(0.0, bytes)));
}

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Megatron's per-layer forward FLOPs of a transformer layer.
double transformerLayerFlops(const ModelDescription& m)
{
    const double b = m.microbatchSize, s = m.sequenceLength, h = m.hiddenSize;
    return 24.0 * b * s * h * h + 4.0 * b * s * s * h;
}

} // namespace

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

Partition evenPartition(int layers, int stages)
{
    if (stages < 1)
        throw Error("a pipeline needs at least one stage");
    if (layers < stages)
        throw Error(std::to_string(layers) + " layers cannot fill " + std::to_string(stages) +
                    " stages; use fewer stages (--pp, --v)");
    if (layers % stages != 0)
        throw Error(std::to_string(layers) + " layers do not split evenly over " + std::to_string(stages) +
                    " stages (pp x v); give stage boundaries, auto-balance, or choose a pipeline degree and v that divide the layers");
    Partition p;
    for (int s = 0; s <= stages; ++s)
        p.firstLayer.push_back(s * (layers / stages));
    return p;
}

Partition partitionFromBoundaries(const std::vector<int>& boundaries, int layers, int stages)
{
    if (static_cast<int>(boundaries.size()) != stages - 1)
        throw ValueError("boundaries", std::to_string(boundaries.size()) + " stage boundaries given; " +
                                           std::to_string(stages) + " stages (pp x v) need " + std::to_string(stages - 1) +
                                           ", the first layer of each stage after the first");
    Partition p;
    p.firstLayer.push_back(0);
    for (size_t i = 0; i < boundaries.size(); ++i) {
        const int b = boundaries[i];
        if (b <= p.firstLayer.back())
            throw ValueError("boundaries", "stage boundaries must increase and be above 0: boundary " + std::to_string(i + 1) +
                                               " (" + std::to_string(b) + ") does not exceed " +
                                               std::to_string(p.firstLayer.back()));
        if (b >= layers)
            throw ValueError("boundaries", "stage boundary " + std::to_string(b) +
                                               " leaves no layer for the last stage (the model has " + std::to_string(layers) +
                                               " layers, numbered 0.." + std::to_string(layers - 1) + ")");
        p.firstLayer.push_back(b);
    }
    p.firstLayer.push_back(layers);
    return p;
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
            throw ValueError("stage-speed", "the speed of stage " + std::to_string(r) + " is " + formatNumber(speeds[r]) +
                                                "; speeds must be finite numbers above 0 (1 = as fast as the reference, "
                                                "0.5 = twice as slow) and at most 1,000,000");
    if (measuredCosts && !speeds.empty() && static_cast<int>(speeds.size()) != measuredPp)
        throw ValueError("stage-speed", std::to_string(speeds.size()) + " stage speeds given; the measured pipeline has " +
                                            std::to_string(measuredPp) + " stages (one speed per pipeline rank)");
    if (measuredCosts && measuredPartition && measuredPp > 0) {
        // Back to reference speed: each layer was timed on its measured rank.
        const ScheduleKind kind = scheduleKindFromString(measuredSchedule).value_or(ScheduleKind::OneFOneB);
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
        throw ValueError("stage-speed",
                         "speeds come from the trace only when it times each layer (PyTorch module ranges from "
                         "with_modules=True or pipescope/layer annotations) on a pipeline of two or more ranks; give "
                         "the speeds with --stage-speed S0,S1,... or --gpu-types and --gpu-throughput instead");
    const ScheduleKind kind = scheduleKindFromString(measuredSchedule).value_or(ScheduleKind::OneFOneB);
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
            throw ValueError("stage-speed", "rank " + std::to_string(r) +
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

std::vector<LayerRange> parseLayerRanges(const std::vector<std::string>& items)
{
    auto index = [](const std::string& text, int& out) {
        if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
            return false;
        out = std::stoi(text);
        return true;
    };
    std::vector<LayerRange> out;
    for (const std::string& item : items) {
        const size_t dots = item.find("..");
        LayerRange r;
        const bool ok = dots == std::string::npos
                            ? index(item, r.first) && index(item, r.last)
                            : index(item.substr(0, dots), r.first) && index(item.substr(dots + 2), r.last);
        if (!ok)
            throw ValueError("freeze", "'" + printable(item, 64) +
                                           "' is not a layer range; give FIRST..LAST (0-based, inclusive), several "
                                           "comma-separated, e.g. 0..3,30..31");
        if (r.first > r.last)
            throw ValueError("freeze", "the range " + item + " runs backwards; give FIRST..LAST with FIRST at most LAST");
        out.push_back(r);
    }
    return out;
}

std::string layerRangesText(const std::vector<LayerRange>& ranges)
{
    std::string out;
    for (const LayerRange& r : ranges) {
        if (!out.empty())
            out += ", ";
        out += std::to_string(r.first);
        if (r.last != r.first)
            out += ".." + std::to_string(r.last);
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
            throw ValueError("freeze", "the range " + std::to_string(r.first) + ".." + std::to_string(r.last) +
                                           " runs backwards; give FIRST..LAST with FIRST at most LAST");
        if (r.first < 0 || r.last >= L)
            throw ValueError("freeze", "the range " + std::to_string(r.first) + ".." + std::to_string(r.last) +
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

void CostModel::setMicrobatchTokens(const MicrobatchTokens& t)
{
    if (t.tokens.empty())
        throw ValueError("microbatch-tokens", "the tokens file lists no microbatches");
    microbatchSizes = uniformRows(t.tokens, "tokens");
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

} // namespace

ReplayCosts CostModel::replayCosts(const Partition& partition, const Schedule& schedule, MicrobatchOrder order) const
{
    const int S = schedule.stages;
    if (partition.stages() != S)
        throw Error("the partition has " + std::to_string(partition.stages()) + " stages, the schedule " +
                    std::to_string(S));
    if (partition.firstLayer.back() != layerCount())
        throw Error("the partition covers " + std::to_string(partition.firstLayer.back()) + " layers, the model has " +
                    std::to_string(layerCount()));
    if (!stageSpeed.empty() && static_cast<int>(stageSpeed.size()) != schedule.pp)
        throw ValueError("stage-speed", "the stage speeds describe a pipeline of " + std::to_string(stageSpeed.size()) +
                                            " ranks and the scenario has pp " + std::to_string(schedule.pp) +
                                            "; uneven GPUs are predicted at the measured pipeline degree only, so leave "
                                            "out --pp or the speeds");
    const double scale = microbatchScale(schedule.microbatches);
    ReplayCosts c;
    c.stages.resize(static_cast<size_t>(S));
    auto add = [](double& f, double& i, double& w, const LayerCostModel& l) {
        f += l.forwardNs;
        i += l.backwardNs * l.backwardInputShare;
        w += l.backwardNs * (1.0 - l.backwardInputShare);
    };
    for (int s = 0; s < S; ++s) {
        double f = 0, i = 0, w = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            add(f, i, w, layers[size_t(l)]);
        if (s == 0)
            add(f, i, w, firstStageExtra);
        if (s == S - 1)
            add(f, i, w, lastStageExtra);
        // x / 1.0 is x exactly: all speeds 1 cost what they did without speeds.
        const double speed = paceOfRank(schedule.rankOfStage[size_t(s)]);
        StageCost& sc = c.stages[size_t(s)];
        sc.forward = toNs(f * scale / speed);
        sc.backwardInput = toNs(i * scale / speed);
        sc.backwardWeight = toNs(w * scale / speed);
        sc.backward = toNs((i + w) * scale / speed);
    }
    if (unevenFor(schedule.microbatches, order)) {
        // Each stage's microbatch i costs its layers' costs, each scaled by
        // the size of microbatch perm[i] on the layer's measured stage.
        const MicrobatchSizes& ms = *microbatchSizes;
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
                addTo(sizeRowOfLayer(*this, l), layers[size_t(l)]);
            if (s == 0)
                addTo(0, firstStageExtra);
            if (s == S - 1)
                addTo(R - 1, lastStageExtra);
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
    c.boundaryBytes.assign(S > 1 ? size_t(S - 1) : 0, toBytes(static_cast<double>(p2pBytes) * scale, "bytes sent between stages"));
    c.p2pLatencyNs = p2pLatencyNs;
    c.p2pBytesPerNs = p2pBytesPerNs;
    c.eagerBytes = p2pEagerBytes;
    c.launchGapNs = launchGapNs;
    // Exchanges learnt on Megatron's schedules (1F1B, interleaved) carry to
    // those; another schedule is torch.distributed.pipelining's, which posts
    // each receive before the step that needs it and lets sends overlap
    // compute (docs/whatif.md, "Exchanges").
    const auto megatronKind = [](ScheduleKind k) {
        return k == ScheduleKind::OneFOneB || k == ScheduleKind::Interleaved1F1B;
    };
    const std::optional<ScheduleKind> measuredKind = scheduleKindFromString(measuredSchedule);
    const bool carries = megatronKind(schedule.kind) || !measuredKind || !megatronKind(*measuredKind);
    c.blockingExchanges = blockingExchanges && carries;
    c.exchangeGapNs = exchangeGapNs;
    c.megatronExchanges = megatronExchanges && carries;
    c.sharedLinks = sharedLinks;
    c.pipelineSyncNs = pipelineSyncNs;
    if (schedule.pp == measuredPp && static_cast<int>(rankStartNs.size()) == schedule.pp)
        c.rankStartNs = rankStartNs;

    // Per rank: what its stages hold, in parameters when known, else in layers.
    // Frozen layers have no gradients to all-reduce and no optimizer step.
    const std::vector<int64_t> params = stageParams(partition);
    const std::vector<int64_t> trainable = stageTrainableParams(partition);
    const bool haveParams = std::accumulate(params.begin(), params.end(), int64_t(0)) > 0;
    std::vector<double> units(static_cast<size_t>(schedule.pp), 0.0);
    std::vector<int64_t> rankParams(static_cast<size_t>(schedule.pp), 0);
    for (int s = 0; s < S; ++s) {
        const size_t r = static_cast<size_t>(schedule.rankOfStage[size_t(s)]);
        rankParams[r] += trainable[size_t(s)];
        int trainableLayers = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            trainableLayers += layers[size_t(l)].frozen ? 0 : 1;
        units[r] += haveParams ? static_cast<double>(trainable[size_t(s)]) : trainableLayers;
    }
    c.allReduceNs.assign(static_cast<size_t>(schedule.pp), 0);
    c.optimizerNs.assign(static_cast<size_t>(schedule.pp), 0);
    const double dp = std::max(1, dataParallel);
    for (size_t r = 0; r < units.size(); ++r) {
        if (measuredAllReduceNs && measuredUnits > 0)
            c.allReduceNs[r] = toNs(static_cast<double>(*measuredAllReduceNs) * units[r] / measuredUnits);
        else if (dataParallel > 1 && allReduceBytesPerNs > 0)
            c.allReduceNs[r] = allReduceLatencyNs +
                               toNs(2.0 * (dp - 1) / dp * static_cast<double>(rankParams[r]) * gradCommBytesPerParam /
                                    allReduceBytesPerNs);
        if (measuredOptimizerNs && measuredUnits > 0)
            c.optimizerNs[r] = toNs(static_cast<double>(*measuredOptimizerNs) * units[r] / measuredUnits);
        else
            c.optimizerNs[r] =
                toNs(optimizerNsPerParam * static_cast<double>(rankParams[r]) / (memory.zeroStage >= 1 ? dp : 1.0));
    }
    return c;
}

CostModel CostModel::fromModel(const ModelDescription& m)
{
    CostModel c;
    c.name = m.name;
    const bool flopsKnown = m.hiddenSize > 0 && m.sequenceLength > 0;
    const double layerFlops = flopsKnown ? transformerLayerFlops(m) : 0.0;
    // Reference forward time of a layer with cost 1.0.
    std::optional<double> refNs;
    if (m.layerForwardMs)
        refNs = *m.layerForwardMs * 1e6;
    else if (m.gpuTflops && flopsKnown)
        refNs = layerFlops / (*m.gpuTflops * 1e3);
    const double h = m.hiddenSize, s = m.sequenceLength, b = m.microbatchSize;

    // flopsRatio: the layer's FLOPs relative to a transformer layer's, for
    // extras whose time is derived rather than given.
    auto convert = [&](const LayerSpec& spec, const std::string& where, double flopsRatio, int64_t defaultParams,
                       int64_t defaultActivation) {
        LayerCostModel l;
        l.name = spec.name;
        if (spec.forwardMs)
            l.forwardNs = *spec.forwardMs * 1e6;
        else if (refNs)
            l.forwardNs = spec.cost * *refNs * flopsRatio;
        else
            throw FormatError(m.source + ": " + where +
                              " has no forward_ms; give forward_ms, a top-level layer_forward_ms, or gpu_tflops with "
                              "hidden_size and sequence_length");
        l.backwardNs = spec.backwardMs ? *spec.backwardMs * 1e6 : l.forwardNs * m.backwardRatio;
        l.backwardInputShare = spec.backwardInputShare.value_or(m.backwardInputShare);
        l.params = spec.params.value_or(defaultParams);
        l.activationBytes = spec.activationBytes.value_or(defaultActivation);
        return l;
    };
    // Korthikanti et al.: 34 s b h bytes per transformer layer in 16-bit with
    // flash attention (no stored attention matrix), no recomputation.
    const int64_t layerActivation = flopsKnown ? toBytes(34.0 * s * b * h, "activation memory of a layer") : 0;
    const int64_t layerParams = m.hiddenSize > 0 ? toBytes(12.0 * h * h + 13.0 * h, "parameter count of a layer") : 0;
    c.layerSource = LayerSource::Model;
    for (size_t i = 0; i < m.layers.size(); ++i)
        c.layers.push_back(convert(m.layers[i], "layers[" + std::to_string(i) + "] (" + m.layers[i].name + ")", 1.0,
                                   layerParams, layerActivation));

    const double V = m.vocabSize;
    if (m.firstStage) {
        c.firstStageExtra = convert(*m.firstStage, "first_stage", 1.0, 0, 0);
    } else if (V > 0 && h > 0) {
        // Embedding lookup: parameters and one hidden state, negligible compute.
        c.firstStageExtra.name = "embedding";
        c.firstStageExtra.params = toBytes(V * h, "parameter count of the embedding");
        c.firstStageExtra.activationBytes = toBytes(s * b * h * m.dtypeBytes(), "activation memory of the embedding");
    }
    if (m.lastStage) {
        c.lastStageExtra = convert(*m.lastStage, "last_stage", 1.0, 0, 0);
    } else if (V > 0 && h > 0) {
        // Output projection and loss: 2 b s h V FLOPs forward, fp32 logits kept for the loss.
        LayerSpec head;
        head.name = "head+loss";
        c.lastStageExtra = refNs && flopsKnown ? convert(head, "last_stage", 2.0 * b * s * h * V / layerFlops, 0, 0)
                                               : LayerCostModel{};
        c.lastStageExtra.name = "head+loss";
        c.lastStageExtra.params = toBytes(V * h, "parameter count of the output layer");
        c.lastStageExtra.activationBytes = toBytes(s * b * V * 4.0, "activation memory of the output layer");
    }

    c.p2pBytes = m.p2pBytes.value_or(flopsKnown ? toBytes(s * b * h * m.dtypeBytes(), "activation sent between stages") : 0);
    c.p2pLatencyNs = toNs(m.p2pLatencyUs.value_or(kDefaultP2pLatencyUs) * 1e3);
    c.p2pBytesPerNs = m.p2pBandwidthGBps.value_or(kDefaultP2pGBps); // 1 GB/s = 1 byte/ns
    c.allReduceLatencyNs = toNs(m.allReduceLatencyUs.value_or(kDefaultAllReduceLatencyUs) * 1e3);
    c.allReduceBytesPerNs = m.allReduceBandwidthGBps.value_or(kDefaultAllReduceGBps);
    c.gradCommBytesPerParam = m.dtypeBytes();
    c.dataParallel = m.dp.value_or(1);
    c.memory = m.memory;
    c.memory.dataParallel = c.dataParallel;
    int64_t totalParams = c.firstStageExtra.params + c.lastStageExtra.params;
    for (const auto& l : c.layers)
        totalParams += l.params;
    c.optimizerNsPerParam = m.optimizerMs && totalParams > 0 ? *m.optimizerMs * 1e6 / static_cast<double>(totalParams)
                                                             : kDefaultOptimizerNsPerParam;
    c.launchGapNs = toNs(m.launchGapUs.value_or(0.0) * 1e3);
    c.referenceMicrobatches = m.microbatches.value_or(1);
    c.keepGlobalBatch = false;
    return c;
}

CostModel CostModel::fromMeasured(const MeasuredPipeline& mp, const ModelDescription* model,
                                  const FromMeasuredOptions& options)
{
    for (size_t l = 0; l < options.layerWeights.size(); ++l) {
        const double w = options.layerWeights[l];
        if (!std::isfinite(w) || w < 0)
            throw ValueError("weights", "layer weight " + std::to_string(l + 1) + " is " + formatNumber(w) +
                                            "; weights must be finite numbers of at least 0");
    }
    const int p = std::max(1, mp.pipelineDegree), v = std::max(1, mp.chunks), S = p * v;
    const int m = std::max(1, mp.microbatches);
    const ScheduleKind kind = scheduleKindFromString(mp.schedule).value_or(ScheduleKind::OneFOneB);
    std::optional<MicrobatchSizes> measuredSizes;

    // Mean step time per virtual stage and kind.
    std::vector<double> sum(static_cast<size_t>(S) * 4, 0.0), count(static_cast<size_t>(S) * 4, 0.0);
    for (const PipelineStep& st : mp.steps) {
        int vs = st.stage >= p ? st.stage : virtualStage(kind, p, st.stage, std::clamp(st.chunk, 0, v - 1));
        if (v == 1)
            vs = st.stage;
        if (vs < 0 || vs >= S || st.end < st.start)
            continue;
        const size_t k = static_cast<size_t>(vs) * 4 + static_cast<size_t>(st.kind);
        sum[k] += static_cast<double>(st.end - st.start);
        count[k] += 1;
    }
    std::vector<double> meanF(static_cast<size_t>(S), -1), meanB(static_cast<size_t>(S), -1),
        share(static_cast<size_t>(S), -1);
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
    // Uneven microbatches: each microbatch's steps against its stage's mean
    // (replicas averaged; a backward is B, or I + W when split). A pipeline
    // larger than a replay takes is never replayed, so it keeps no sizes.
    if (m >= 2 && int64_t{S} * m <= kMaxReplaySteps) {
        const size_t SM = static_cast<size_t>(S) * static_cast<size_t>(m);
        std::vector<double> ks(SM * 4, 0.0), kn(SM * 4, 0.0);
        for (const PipelineStep& st : mp.steps) {
            int vs = st.stage >= p ? st.stage : virtualStage(kind, p, st.stage, std::clamp(st.chunk, 0, v - 1));
            if (v == 1)
                vs = st.stage;
            if (vs < 0 || vs >= S || st.end < st.start || st.microbatch < 0 || st.microbatch >= m)
                continue;
            const size_t k = (static_cast<size_t>(vs) * static_cast<size_t>(m) + static_cast<size_t>(st.microbatch)) * 4 +
                             static_cast<size_t>(st.kind);
            ks[k] += static_cast<double>(st.end - st.start);
            kn[k] += 1;
        }
        MicrobatchSizes sizes;
        sizes.source = "trace";
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
            measuredSizes = std::move(sizes);
    }

    // Stages without measured steps take the mean of the others.
    auto fill = [&](std::vector<double>& v_, const char* what) {
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
    };
    fill(meanF, "forward");
    fill(meanB, "backward");

    CostModel c;
    c.name = model ? model->name : "measured";
    const double defaultShare = model ? model->backwardInputShare : 0.5;
    c.layerSource = !mp.layers.empty() ? LayerSource::Trace
                    : model             ? LayerSource::Model
                    : options.layers    ? LayerSource::Count
                                        : LayerSource::Stages;
    if (!mp.layers.empty()) {
        // Layers attributed by annotations: their own times, scaled so each
        // stage adds up to its measured step; first/last stage residue is the extra.
        std::vector<LayerCost> ls = mp.layers;
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
    } else {
        // Each stage's measured time split over its layers by weight.
        int L = S;
        if (model)
            L = static_cast<int>(model->layers.size());
        if (options.layers)
            L = *options.layers;
        if (!options.layerWeights.empty() && static_cast<int>(options.layerWeights.size()) != L)
            throw ValueError("weights", std::to_string(options.layerWeights.size()) + " layer weights given for " +
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
        const double firstW = model && model->firstStage && model->firstStageGiven ? model->firstStage->cost : 0.0;
        const double lastW = model && model->lastStage && model->lastStageGiven ? model->lastStage->cost : 0.0;
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
                throw ValueError("weights", "the layer weights of stage " + std::to_string(s) +
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
    if (model) {
        const CostModel planned = [&] {
            try {
                return fromModel(*model);
            } catch (const Error&) {
                // A description without times still has structure; take what it gives.
                ModelDescription copy = *model;
                copy.layerForwardMs = 1.0;
                return fromModel(copy);
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
        c.memory = model->memory;
        c.gradCommBytesPerParam = planned.gradCommBytesPerParam;
        c.optimizerNsPerParam = planned.optimizerNsPerParam;
    }

    // Point-to-point: fit latency + bytes / bandwidth to the measured transfers.
    std::vector<double> bytes, ns;
    for (const MeasuredTransfer& t : mp.transfers)
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
            c.p2pBytesPerNs = 1.0 / slope;
            c.p2pLatencyNs = toNs(ym - slope * xm);
        } else if (mb > 0) {
            // One message size: all of it is attributed to bandwidth, so
            // larger or smaller microbatches scale the transfer time.
            c.p2pLatencyNs = 0;
            c.p2pBytesPerNs = mb / std::max(1.0, mt);
        } else {
            c.p2pLatencyNs = toNs(mt);
            c.p2pBytesPerNs = 0;
        }
        c.p2pBytes = toBytes(mb, "bytes sent between stages");
    }
    // The kernels show what the bytes needed once both sides were there; a
    // receiver that was already waiting shows how long a message really took
    // to land after its send began (a slow transport, GPUs time-shared between
    // processes). A send that held its stream for most of that time waited
    // for the bytes to land (a rendezvous), so its end is when they did and
    // whatever the receive took beyond it is the receiver's own delay; a
    // short send only handed its bytes to a buffer, and the receive's end
    // tells when they arrived. Whatever exceeds the bytes' own time is latency.
    {
        std::vector<double> landed;
        // A send of exactly 1 ns is one the trace only implies (a Megatron
        // timing file): it tells nothing of when the bytes left or landed.
        for (const MeasuredMessage& msg : mp.messages)
            if (msg.recvStart <= msg.sendStart && msg.recvEnd >= msg.sendStart && msg.sendEnd - msg.sendStart != 1) {
                const TimeNs received = msg.recvEnd - msg.sendStart, sent = msg.sendEnd - msg.sendStart;
                const bool rendezvous = sent > 0 && sent <= received && 2 * sent >= received;
                landed.push_back(static_cast<double>(rendezvous ? sent : received));
            }
        if (!landed.empty()) {
            const double wire = c.p2pBytesPerNs > 0 ? static_cast<double>(c.p2pBytes) / c.p2pBytesPerNs : 0.0;
            const double latency = median(landed) - wire;
            if (latency > static_cast<double>(c.p2pLatencyNs))
                c.p2pLatencyNs = toNs(latency);
        }
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

    // Host time between steps: the smallest gap a rank leaves between two
    // consecutive steps (a wait on data is longer), the smallest over ranks:
    // a rank downstream of a slower one waits for data before every step
    // (GPipe's forwards), while the slowest runs back to back. With
    // blocking exchanges only gaps without an exchange in them count: the
    // others are the exchange and exchangeGapNs.
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
        if (!(model && model->launchGapUs))
            c.launchGapNs = gaps.empty() ? 0 : toNs(*std::min_element(gaps.begin(), gaps.end()));
    }

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
    // Where each pipeline rank began the measured iteration (median over its replicas).
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
    // Time after the last step that neither the all-reduce, the pipeline-wide
    // collective nor the optimizer explains (e.g. an optimizer the analysis
    // could not name) still belongs to every iteration: carry it as optimizer time.
    if (mp.iterationNs > 0 && !mp.steps.empty()) {
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
    if (model && model->allReduceBandwidthGBps) {
        c.measuredAllReduceNs.reset();
        c.allReduceBytesPerNs = *model->allReduceBandwidthGBps;
        c.allReduceLatencyNs = toNs(model->allReduceLatencyUs.value_or(0.0) * 1e3);
    }
    if (model && model->optimizerMs)
        c.measuredOptimizerNs.reset();
    // The measured all-reduce and optimizer belong to the busiest rank.
    {
        const Partition& part = *c.measuredPartition;
        const std::vector<int64_t> params = c.stageParams(part);
        const bool haveParams = std::accumulate(params.begin(), params.end(), int64_t(0)) > 0;
        std::vector<double> units(static_cast<size_t>(p), 0.0);
        for (int s = 0; s < S; ++s) {
            const int r = isVShaped(kind) ? (s < p ? s : 2 * p - 1 - s) : s % p;
            units[size_t(r)] += haveParams ? static_cast<double>(params[size_t(s)]) : part.layersOf(s);
        }
        c.measuredUnits = *std::max_element(units.begin(), units.end());
    }

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
    if (std::any_of(mp.measuredPeakBytes.begin(), mp.measuredPeakBytes.end(), [](int64_t b) { return b >= 0; })) {
        c.measuredPeakBytes.assign(static_cast<size_t>(p), -1);
        for (size_t r = 0; r < mp.measuredPeakBytes.size() && r < mp.stageOfRank.size(); ++r) {
            const int st = mp.stageOfRank[r];
            if (st >= 0 && st < p)
                c.measuredPeakBytes[size_t(st)] = std::max(c.measuredPeakBytes[size_t(st)], mp.measuredPeakBytes[r]);
        }
    }
    return c;
}

} // namespace pipescope::whatif
