#pragma once
// Steps of the schedule reading tested alone (tst_structure_steps).
// Internal to core/analysis.

namespace pipescope::detail {

// Forwards a rank on pipeline stage s runs before its first backward (B or
// I), as inferSchedule expects them under each schedule, for a rank that runs
// nF forwards in all on p stages (v chunks per rank). They agree with the
// generators' orders (warmupForwards in model/Schedule.h, with nF = v * m)
// for 1F1B, ZB-H1 with one chunk and ZB-H2; Megatron's interleaved order
// differs when m = p (every rank runs all its forwards first, so the ranks
// s >= p/2 run more than the formula says) and exists only when p divides m,
// while inferSchedule applies the formula to any m.

// 1F1B and ZB-H1: min(nF, p - s).
int warmup1F1B(int p, int s, int nF);
// Megatron's interleaved 1F1B: min(nF, 2(p - s - 1) + (v - 1)p + 1).
int warmupInterleaved(int p, int s, int v, int nF);
// ZB-H2: min(nF, 2(p - s) - 1).
int warmupZeroBubbleH2(int p, int s, int nF);

} // namespace pipescope::detail
