#pragma once
// Reading steps without annotations, checked against simulated truth: a job
// of a given schedule, p, v, m and dp is simulated, written as Kineto traces
// without step annotations, imported and analysed; the outcome says whether
// p, dp, v, m and the schedule came out right and whether every step (kind,
// chunk, microbatch, in order on every rank) did. Used by
// tests/analysis/tst_step_inference.cpp and bench/bench_inference.cpp.
#include "analysis/Analysis.h"
#include "import/Import.h"
#include "store/Store.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/WhatIf.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace pipescope::test {

using namespace pipescope::whatif;


struct Config {
    ScheduleKind kind;
    int pp, v, m, dp;
    std::string name() const
    {
        return std::string(toString(kind)) + " p" + std::to_string(pp) + " v" + std::to_string(v) + " m" +
               std::to_string(m) + " dp" + std::to_string(dp);
    }
};

struct Outcome {
    bool ran = false;   // the configuration is valid and was simulated
    bool shape = false; // p, dp, v, m and schedule right
    bool steps = false; // every step's kind, chunk and microbatch right, in order
    bool ambiguous = false; // p, dp, v, m right; the true schedule named as one the trace cannot tell apart
    std::string detail;
};

// autograd: the analysis may read autograd's sequence numbers from the store
// (AnalyzeOptions::autogradSequences); without, kernel order and transfers alone.
inline Outcome evaluateInference(const CostModel& base, const Config& c, const std::filesystem::path& work, bool modules,
                                 bool autograd = true)
{
    Outcome o;
    CostModel model = base;
    model.dataParallel = c.dp;
    model.memory.dataParallel = c.dp;
    Scenario sc;
    sc.schedule = c.kind;
    sc.pp = c.pp;
    sc.v = c.v;
    sc.microbatches = c.m;
    Prediction p;
    try {
        p = predict(model, sc, ReplayOptions{});
    } catch (const std::exception&) {
        return o; // not a valid combination (e.g. m not a multiple of p for interleaved)
    }
    o.ran = true;
    const std::filesystem::path traces = work / "traces";
    const std::filesystem::path store = work / "job.pipescope";
    std::filesystem::remove_all(traces);
    std::filesystem::remove(store);
    simulate::KinetoEmitOptions eo;
    eo.iterations = 3;
    eo.seed = 11;
    eo.costModel = modules ? &model : nullptr;
    eo.stepAnnotations = false;
    simulate::emitKineto(p, eo, traces.string());
    ImportJobOptions io;
    io.inputs = {traces.string()};
    io.output = store.string();
    io.progress = false;
    importJob(io);
    Store s(store.string());
    AnalyzeOptions ao;
    ao.allIterations = true;
    if (autograd)
        ao.autogradSequences = [&s](const std::vector<int64_t>& ids) { return s.autogradSequences(ids); };
    const AnalysisResult r = analyze(s.load(), ao);
    const PipelineStructure& ps = r.pipeline;
    // A schedule whose order is the same as the simulated one's is right too
    // (Megatron's interleaved 1F1B with m = p runs all forwards first, as looped BFS does).
    auto sameOrder = [&](ScheduleKind found) {
        if (found == c.kind)
            return true;
        try {
            const Schedule other = makeSchedule(found, c.pp, c.v, c.m);
            for (size_t rk = 0; rk < other.ranks.size(); ++rk) {
                if (other.ranks[rk].size() != p.schedule.ranks[rk].size())
                    return false;
                for (size_t i = 0; i < other.ranks[rk].size(); ++i) {
                    const Action &x = other.ranks[rk][i], &y = p.schedule.ranks[rk][i];
                    if (x.kind != y.kind || x.stage != y.stage || x.microbatch != y.microbatch)
                        return false;
                }
            }
            return true;
        } catch (const std::exception&) {
            return false;
        }
    };
    o.shape = ps.found && ps.pp == c.pp && ps.dp == c.dp && ps.chunks == c.v && ps.microbatches == c.m &&
              ps.schedule && sameOrder(*ps.schedule);
    // Told apart from the truth by nothing the analysis read, and said so.
    o.ambiguous = !o.shape && ps.found && ps.pp == c.pp && ps.dp == c.dp && ps.chunks == c.v && ps.microbatches == c.m &&
                  std::find(ps.scheduleAlike.begin(), ps.scheduleAlike.end(), c.kind) != ps.scheduleAlike.end();
    if (!o.shape) {
        o.detail = "found p" + std::to_string(ps.pp) + " dp" + std::to_string(ps.dp) + " v" + std::to_string(ps.chunks) +
                   " m" + std::to_string(ps.microbatches) + " " + scheduleName(ps.schedule) + " (confidence " +
                   std::to_string(ps.scheduleConfidence).substr(0, 4) + ")";
        if (!ps.found)
            o.detail += ": " + ps.reason;
        return o;
    }
    // Steps: per rank and iteration, the schedule's order.
    const Schedule& sched = p.schedule;
    std::map<std::pair<int, int>, std::vector<const Step*>> byRankIt;
    for (const Step& st : r.steps)
        byRankIt[{st.rank, st.iteration}].push_back(&st);
    int wrong = 0, total = 0;
    std::string first;
    for (const auto& [key, steps] : byRankIt) {
        const int stage = key.first / c.dp; // rank = stage * dp + replica
        const auto& truth = sched.ranks[size_t(stage)];
        ++total;
        bool ok = truth.size() == steps.size();
        for (size_t i = 0; ok && i < truth.size(); ++i) {
            const Action& a = truth[i];
            const Step& st = *steps[i];
            ok = st.kind == a.kind && st.chunk == sched.chunkOfStage[size_t(a.stage)] && st.microbatch == a.microbatch;
            if (!ok && first.empty())
                first = "rank " + std::to_string(key.first) + " step " + std::to_string(i) + ": " + toChar(st.kind) +
                        " c" + std::to_string(st.chunk) + " mb" + std::to_string(st.microbatch) + ", truth " +
                        toChar(a.kind) + " c" + std::to_string(sched.chunkOfStage[size_t(a.stage)]) + " mb" +
                        std::to_string(a.microbatch);
        }
        if (!ok && first.empty())
            first = "rank " + std::to_string(key.first) + ": " + std::to_string(steps.size()) + " steps, truth " +
                    std::to_string(truth.size());
        wrong += ok ? 0 : 1;
    }
    o.steps = wrong == 0 && total == c.pp * c.dp * 3;
    if (!o.steps)
        o.detail = std::to_string(wrong) + " of " + std::to_string(total) + " rank-iterations wrong; " + first;
    return o;
}

} // namespace pipescope::test
