// How fast the what-if engine answers: replays and auto-balance on one core,
// median of repeated runs. Targets: 8 stages x 64 microbatches < 1 ms,
// 10,000 steps < 10 ms, auto-balance of 128 layers over 16 stages < 50 ms.
#include "whatif/Session.h"
#include "whatif/WhatIf.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

using namespace pipescope;
using namespace pipescope::whatif;

namespace {

double medianMs(int runs, const std::function<void()>& f)
{
    std::vector<double> t;
    f(); // warm caches and scratch buffers
    for (int i = 0; i < runs; ++i) {
        const auto a = std::chrono::steady_clock::now();
        f();
        const auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

ReplayCosts costsFor(const Schedule& s)
{
    ReplayCosts c;
    for (int st = 0; st < s.stages; ++st)
        c.stages.push_back(StageCost{1'000'000 + 37'000 * st, 2'000'000 + 51'000 * st, 1'000'000, 1'000'000});
    c.boundaryBytes.assign(size_t(std::max(0, s.stages - 1)), 16 << 20);
    c.p2pLatencyNs = 20'000;
    c.p2pBytesPerNs = 25.0;
    c.launchGapNs = 10'000;
    c.allReduceNs.assign(size_t(s.pp), 5'000'000);
    c.optimizerNs.assign(size_t(s.pp), 3'000'000);
    return c;
}

enum class Exchanges { Overlapped, Megatron, MegatronShared };

void replayFigure(const char* what, ScheduleKind kind, int pp, int v, int m, double targetMs,
                  Exchanges exchanges = Exchanges::Overlapped)
{
    const Schedule s = makeSchedule(kind, pp, v, m);
    ReplayCosts c = costsFor(s);
    c.megatronExchanges = exchanges != Exchanges::Overlapped;
    c.sharedLinks = exchanges == Exchanges::MegatronShared;
    Replay replay;
    ReplayResult out;
    ReplayOptions full, fast;
    fast.timeline = false;
    const double tFull = medianMs(201, [&] { replay.run(s, c, out, full); });
    const double tFast = medianMs(201, [&] { replay.run(s, c, out, fast); });
    std::printf("%-44s %6zu steps  %8.3f ms (timeline)  %8.3f ms (time only)  target < %g ms\n", what, s.actionCount(),
                tFull, tFast, targetMs);
}

} // namespace

int main()
{
    std::printf("pipescope what-if engine, single thread, median of 201 runs\n\n");
    replayFigure("replay 1f1b, 8 stages x 64 microbatches", ScheduleKind::OneFOneB, 8, 1, 64, 1.0);
    replayFigure("replay zb-v, 8 ranks x 64 microbatches", ScheduleKind::ZeroBubbleV, 8, 2, 64, 1.0);
    replayFigure("replay interleaved, p8 v4 m160 (~10k steps)", ScheduleKind::Interleaved1F1B, 8, 4, 160, 10.0);
    replayFigure("replay 1f1b, p16 m312 (~10k steps)", ScheduleKind::OneFOneB, 16, 1, 312, 10.0);
    replayFigure("  Megatron's exchanges, separate links", ScheduleKind::OneFOneB, 16, 1, 312, 10.0, Exchanges::Megatron);
    replayFigure("replay interleaved p8 v4 m160, Megatron's", ScheduleKind::Interleaved1F1B, 8, 4, 160, 10.0,
                 Exchanges::Megatron);
    replayFigure("  ... transfers sharing one medium", ScheduleKind::Interleaved1F1B, 8, 4, 160, 10.0,
                 Exchanges::MegatronShared);
    replayFigure("replay interleaved p64 v2 m128, Megatron's shared", ScheduleKind::Interleaved1F1B, 64, 2, 128, 50.0,
                 Exchanges::MegatronShared);

    // 128 heterogeneous layers (every fourth one heavier, a heavy head) over 16 stages.
    CostModel model;
    for (int l = 0; l < 128; ++l) {
        LayerCostModel lc;
        lc.name = "layer " + std::to_string(l);
        lc.forwardNs = l % 4 == 3 ? 1'900'000.0 : 1'000'000.0 + 3'000.0 * l;
        lc.backwardNs = 2 * lc.forwardNs;
        lc.params = 200'000'000;
        lc.activationBytes = 300'000'000;
        model.layers.push_back(lc);
    }
    model.lastStageExtra.forwardNs = 4'000'000;
    model.lastStageExtra.backwardNs = 8'000'000;
    model.p2pBytes = 16 << 20;
    model.p2pLatencyNs = 20'000;
    model.p2pBytesPerNs = 25.0;
    model.memory.gpuMemoryBytes = int64_t(80) << 30;
    Scenario sc;
    sc.schedule = ScheduleKind::OneFOneB;
    sc.pp = 16;
    sc.microbatches = 32;
    int replays = 0;
    const double tBalance = medianMs(51, [&] { replays = autoBalance(model, sc).replays; });
    std::printf("%-44s %6d layers %8.3f ms (%d replays incl. refinement)  target < 50 ms\n",
                "auto-balance 128 layers over 16 stages", 128, tBalance, replays);
    BalanceOptions noRefine;
    noRefine.refineWithReplay = false;
    const double tDp = medianMs(51, [&] { (void)autoBalance(model, sc, noRefine); });
    std::printf("%-44s %6d layers %8.3f ms\n", "  min-max dynamic programming only", 128, tDp);

    // A drag step as the app's editor makes it: the same 128 layers on 8
    // stages x 64 microbatches (1F1B) in a what-if session, one boundary moved
    // by one layer per call, cycling over the boundaries; median of 1000 moves.
    CostModel dragModel = model;
    dragModel.measuredPp = 8;
    dragModel.measuredMicrobatches = 64;
    dragModel.measuredSchedule = ScheduleKind::OneFOneB;
    Session session(dragModel);
    std::vector<int> bounds = session.scenario().boundaries.value_or(std::vector<int>{});
    std::vector<double> steps;
    for (int i = 0; i < 1000; ++i) {
        // Out on even moves, back on odd ones, so every partition stays valid.
        const size_t handle = size_t(i / 2) % bounds.size();
        bounds[handle] += i % 2 == 0 ? 1 : -1;
        const auto a = std::chrono::steady_clock::now();
        (void)session.setBoundaries(bounds);
        const auto b = std::chrono::steady_clock::now();
        steps.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    std::sort(steps.begin(), steps.end());
    std::printf("%-44s %6zu steps  %8.3f ms (median of 1000 moves, %d schedule builds)  target < 16 ms\n",
                "drag step: session, 8 x 64 mb, 128 layers", session.prediction().schedule.actionCount(),
                steps[steps.size() / 2], session.scheduleBuilds());

    // Thousands of layers: auto-balance of 4096 layers over 64 x 4 stages
    // (interleaved, 1024 microbatches) and the replay without a timeline of
    // 6.4 million steps (what `simulate --summary` keeps per step).
    CostModel big = model;
    big.layers.clear();
    for (int l = 0; l < 4096; ++l) {
        LayerCostModel lc = model.layers[size_t(l) % model.layers.size()];
        lc.name = "layer " + std::to_string(l);
        big.layers.push_back(lc);
    }
    Scenario wide;
    wide.schedule = ScheduleKind::Interleaved1F1B;
    wide.pp = 64;
    wide.v = 4;
    wide.microbatches = 1024;
    BalanceResult wideBalance;
    const double tWide = medianMs(1, [&] { wideBalance = autoBalance(big, wide); });
    std::printf("%-44s %6d layers %8.3f ms (%d replays of %lld steps)\n", "auto-balance 4096 layers over 64 x 4 stages",
                4096, tWide, wideBalance.replays, static_cast<long long>(scenarioSteps(wide)));
    Scenario many;
    many.schedule = ScheduleKind::OneFOneB;
    many.pp = 32;
    many.microbatches = 100000;
    ReplayOptions summaryOnly;
    summaryOnly.timeline = false;
    const double tMany = medianMs(1, [&] { (void)predict(big, many, summaryOnly); });
    std::printf("%-44s %8lld steps %8.3f ms (budget %lld bytes per step)\n", "predict 32 x 100000 mb, no timeline",
                static_cast<long long>(scenarioSteps(many)), tMany,
                static_cast<long long>(kReplayBytesPerStep));
    return 0;
}
