// Calibration: a cost model from a measured run, its data-parallel pace and
// its exchanges chosen by replaying the measured configuration.
#include "whatif/WhatIf.h"

#include "analysis/MeasuredPipeline.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace pipescope::whatif {

// Replays of the measured run closer than this share of its iteration are
// a tie: noise, not evidence for one exchange model over another.
constexpr double kCalibrationTie = 0.005;

void chooseExchanges(CostModel& model, bool keepCurrent)
{
    if (!model.measuredIterationNs)
        return;
    const Scenario base = measuredScenario(model);
    if (base.schedule != ScheduleKind::OneFOneB && base.schedule != ScheduleKind::Interleaved1F1B)
        return;
    auto errorOf = [&](const CostModel& m) {
        try {
            const TimeNs t = predict(m, base, ReplayOptions{false}).iterationNs();
            return std::abs(static_cast<double>(t - *model.measuredIterationNs));
        } catch (const Error&) {
            return std::numeric_limits<double>::infinity();
        }
    };
    std::vector<CostModel> candidates;
    if (keepCurrent)
        candidates.push_back(model); // as the trace showed
    for (bool shared : {false, true}) {
        CostModel m = model;
        m.megatronExchanges = true;
        m.sharedLinks = shared;
        candidates.push_back(std::move(m));
    }
    // The trace's own exchanges stay unless Megatron's explain the run
    // clearly better (by more than 1% of the iteration): for 1F1B both post
    // the same batches, and a what-if to interleaved should not switch to
    // overlapped exchanges on a rounding difference.
    const double margin = keepCurrent ? 0.01 * static_cast<double>(*model.measuredIterationNs) : 0.0;
    size_t best = 0;
    double bestError = errorOf(candidates[0]);
    for (size_t i = 1; i < candidates.size(); ++i)
        if (const double e = errorOf(candidates[i]); e + (best == 0 ? margin : 0.0) < bestError) {
            best = i;
            bestError = e;
        }
    model = std::move(candidates[best]);
}

CostModel calibrate(const Trace& trace, const AnalysisResult& analysis, const CalibrateOptions& options)
{
    const MeasuredPipeline measured = measurePipeline(trace, analysis);
    CostModel model = CostModel::fromMeasured(measured, options.model, options.measured);
    if (options.gpuMemoryBytes)
        model.memory.gpuMemoryBytes = options.gpuMemoryBytes;
    // dp > 1: each stage runs at its slowest replica's pace (docs/whatif.md,
    // "Data-parallel replicas").
    if (!options.replicaPace.empty() && model.measuredPp > 0) {
        model.replicaPace = options.replicaPace;
        model.replicaPace.resize(static_cast<size_t>(model.measuredPp), 1.0);
    } else if (analysis.pipeline.dp > 1 && model.measuredPp > 0) {
        std::vector<std::vector<double>> compute(static_cast<size_t>(model.measuredPp));
        for (const RankSpeed& r : analysis.imbalance.rankSpeed)
            if (r.stage >= 0 && r.stage < model.measuredPp && r.computeNs > 0)
                compute[size_t(r.stage)].push_back(static_cast<double>(r.computeNs));
        model.replicaPace.assign(static_cast<size_t>(model.measuredPp), 1.0);
        for (size_t s = 0; s < compute.size(); ++s) {
            if (compute[s].size() < 2)
                continue;
            double sum = 0, worst = 0;
            for (double x : compute[s]) {
                sum += x;
                worst = std::max(worst, x);
            }
            model.replicaPace[s] = worst / (sum / static_cast<double>(compute[s].size()));
        }
    }
    // The trace allows blocking exchanges (no send overlapped compute): keep
    // them only when they reproduce the measured iteration at least as well
    // as sends that overlap compute (docs/whatif.md, "Exchanges").
    if (model.blockingExchanges && model.measuredIterationNs) {
        auto errorWith = [&](bool blocking) {
            CostModel m = model;
            m.blockingExchanges = blocking;
            const TimeNs t = predict(m, measuredScenario(m), ReplayOptions{false}).iterationNs();
            return std::abs(static_cast<double>(t - *model.measuredIterationNs));
        };
        try {
            // Within noise (half a percent of the iteration) the two replay the
            // run alike: the batches, as the trace allows and Megatron-LM and
            // torch.distributed.pipelining run by default, stay. A slow replica
            // moving the last digit must not switch the model under a what-if.
            const double tie = kCalibrationTie * static_cast<double>(*model.measuredIterationNs);
            model.blockingExchanges = errorWith(true) <= errorWith(false) + tie;
        } catch (const Error&) {
            model.blockingExchanges = false;
        }
    }
    chooseExchanges(model, true);
    return model;
}

} // namespace pipescope::whatif
