#include "whatif/Memory.h"

#include <algorithm>
#include <cmath>

namespace pipescope::whatif {

int64_t staticMemoryBytes(int64_t params, const MemoryConfig& c)
{
    return staticMemoryBytes(params, params, c);
}

int64_t staticMemoryBytes(int64_t params, int64_t trainable, const MemoryConfig& c)
{
    const double dp = std::max(1, c.dataParallel);
    double weights = c.weightBytesPerParam, grads = c.gradBytesPerParam, opt = c.optimizerBytesPerParam;
    if (c.zeroStage >= 1)
        opt /= dp;
    if (c.zeroStage >= 2)
        grads /= dp;
    if (c.zeroStage >= 3)
        weights /= dp;
    if (trainable == params) // as before freezing existed, to the byte
        return static_cast<int64_t>(std::llround(static_cast<double>(params) * (weights + grads + opt))) + c.reservedBytes;
    return static_cast<int64_t>(std::llround(static_cast<double>(params) * weights +
                                             static_cast<double>(trainable) * (grads + opt))) +
           c.reservedBytes;
}

std::vector<int> peakInFlight(const ReplayResult& replay, bool untilWeightGradient)
{
    std::vector<int> out;
    out.reserve(replay.ranks.size());
    for (const RankReplay& rr : replay.ranks) {
        int now = 0, peak = 0;
        for (const TimedAction& a : rr.actions) {
            switch (a.kind) {
            case StepKind::F: peak = std::max(peak, ++now); break;
            case StepKind::B: --now; break;
            case StepKind::I:
                if (!untilWeightGradient)
                    --now;
                break;
            case StepKind::W:
                if (untilWeightGradient)
                    --now;
                break;
            }
        }
        out.push_back(peak);
    }
    return out;
}

std::vector<RankMemory> memoryOverTime(const ReplayResult& replay, const std::vector<int64_t>& paramsPerRank,
                                       const std::vector<int64_t>& activationBytes, const MemoryConfig& config,
                                       bool keepOverTime, const std::vector<int64_t>& trainableParamsPerRank,
                                       const std::vector<int64_t>& recomputeBytes)
{
    std::vector<RankMemory> out(replay.ranks.size());
    const std::vector<int> inFlight = peakInFlight(replay);
    const double share = std::clamp(config.weightGradActivationShare, 0.0, 1.0);
    for (size_t r = 0; r < replay.ranks.size(); ++r) {
        RankMemory& m = out[r];
        m.parameters = r < paramsPerRank.size() ? paramsPerRank[r] : 0;
        m.trainableParameters = r < trainableParamsPerRank.size() ? trainableParamsPerRank[r] : m.parameters;
        m.staticBytes = staticMemoryBytes(m.parameters, m.trainableParameters, config);
        m.peakInFlight = inFlight[r];
        int64_t act = 0;
        m.overTime.clear();
        m.overTime.push_back(MemoryPoint{0, m.staticBytes});
        m.peakBytes = m.staticBytes;
        auto at = [&](TimeNs t) {
            const int64_t total = m.staticBytes + act;
            if (keepOverTime) {
                if (!m.overTime.empty() && m.overTime.back().t == t)
                    m.overTime.back().bytes = total;
                else if (m.overTime.back().bytes != total)
                    m.overTime.push_back(MemoryPoint{t, total});
            }
            if (total > m.peakBytes) {
                m.peakBytes = total;
                m.peakAt = t;
            }
            m.peakActivationBytes = std::max(m.peakActivationBytes, act);
        };
        for (const TimedAction& a : replay.ranks[r].actions) {
            const int64_t bytes = static_cast<size_t>(a.stage) < activationBytes.size()
                                      ? activationBytes[static_cast<size_t>(a.stage)]
                                      : 0;
            const int64_t again = static_cast<size_t>(a.stage) < recomputeBytes.size()
                                      ? recomputeBytes[static_cast<size_t>(a.stage)]
                                      : 0;
            const int64_t kept = static_cast<int64_t>(std::llround(static_cast<double>(bytes + again) * share));
            // The recomputed forward holds its activations from the backward's start.
            if (again > 0 && (a.kind == StepKind::B || a.kind == StepKind::I)) {
                act += again;
                at(a.start);
            }
            switch (a.kind) {
            case StepKind::F: act += bytes; at(a.start); break;
            case StepKind::B: act -= bytes + again; at(a.end); break;
            case StepKind::I: act -= bytes + again - kept; at(a.end); break;
            case StepKind::W: act -= kept; at(a.end); break;
            }
        }
        if (!keepOverTime)
            m.overTime.clear();
        m.outOfMemory = config.gpuMemoryBytes && m.peakBytes > *config.gpuMemoryBytes;
    }
    return out;
}

} // namespace pipescope::whatif
