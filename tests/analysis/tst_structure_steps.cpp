// The pipeline structure's rules one step at a time: how a chain or ring of
// ranks is ordered into stages, where a forward and a backward that ran back
// to back are split, how the microbatches still unknown are counted, and how
// many forwards each built-in schedule runs before its first backward.
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "analysis/schedule/detail/ScheduleSteps.h"
#include "analysis/structure/detail/StructureSteps.h"
#include "model/Schedule.h"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace pipescope;

namespace {

using Adjacency = std::map<int, std::set<int>>;

// Both directions of each edge.
Adjacency graph(const std::vector<std::pair<int, int>>& edges)
{
    Adjacency adj;
    for (auto [a, b] : edges) {
        adj[a].insert(b);
        adj[b].insert(a);
    }
    return adj;
}

// Kernels on rank 0 as (name, start, end), in start order.
struct Kernels {
    Trace trace;
    std::vector<uint32_t> ids;

    explicit Kernels(const std::vector<std::tuple<std::string, TimeNs, TimeNs>>& ks)
    {
        test::TraceBuilder tb;
        for (const auto& [name, start, end] : ks)
            tb.kernel(0, 7, name, start, end);
        trace = tb.build();
        for (uint32_t i = 0; i < ks.size(); ++i)
            ids.push_back(i);
    }
};

size_t splitAt(const Kernels& k, double share, bool backwardFirst)
{
    const AnalyzeOptions options;
    std::vector<Warning> warnings;
    const detail::Context ctx(k.trace, options, warnings);
    return detail::splitPoint(ctx, k.ids, share, backwardFirst);
}

detail::Draft draft(int rank, StepKind kind, int chunk, int microbatch)
{
    detail::Draft d;
    d.step.rank = rank;
    d.step.kind = kind;
    d.step.chunk = chunk;
    d.step.microbatch = microbatch;
    return d;
}

} // namespace

class TstStructureSteps : public QObject {
    Q_OBJECT
private slots:
    void chainStartsAtTheEndThatComputesFirst()
    {
        const Adjacency adj = graph({{0, 1}, {1, 2}, {2, 3}});
        bool cycle = true;
        QCOMPARE(detail::orderChain({0, 1, 2, 3}, adj, {{0, 500}, {1, 400}, {2, 300}, {3, 200}}, cycle),
                 (std::vector<int>{3, 2, 1, 0}));
        QVERIFY(!cycle);
        // Ends that never compute (or compute at the same time) start from the lower rank.
        QCOMPARE(detail::orderChain({0, 1, 2, 3}, adj, {}, cycle), (std::vector<int>{0, 1, 2, 3}));
        QCOMPARE(detail::orderChain({0, 1, 2, 3}, adj, {{0, 50}, {3, 50}}, cycle), (std::vector<int>{0, 1, 2, 3}));
    }

    void ringStartsAtItsFirstComputingRank()
    {
        // From the rank that computes first, on to the neighbour that computes first.
        const Adjacency adj = graph({{0, 1}, {1, 2}, {2, 3}, {3, 0}});
        bool cycle = false;
        QCOMPARE(detail::orderChain({0, 1, 2, 3}, adj, {{0, 40}, {1, 30}, {2, 10}, {3, 20}}, cycle),
                 (std::vector<int>{2, 3, 0, 1}));
        QVERIFY(cycle);
    }

    void branchingPeersFormNoChain()
    {
        // A rank with three peers: the walk stops short of the component.
        const Adjacency adj = graph({{0, 1}, {0, 2}, {0, 3}});
        bool cycle = true;
        QCOMPARE(detail::orderChain({0, 1, 2, 3}, adj, {}, cycle), (std::vector<int>{1, 0, 2}));
        QVERIFY(!cycle);
    }

    void mergedStepsSplitWhereNamesShowTheBackward()
    {
        // Forward then backward: at the first backward-looking kernel.
        const Kernels fb({{"fwd_gemm", 0, 100}, {"fwd_norm", 100, 200}, {"matmul_bwd", 200, 400}, {"gemm", 400, 500}});
        QCOMPARE(splitAt(fb, 0.9, false), size_t(2));
        // Backward then forward: after the last one.
        const Kernels bf({{"wgrad_x", 0, 100}, {"gemm", 100, 200}, {"dgrad_y", 200, 300}, {"fwd_z", 300, 400}});
        QCOMPARE(splitAt(bf, 0.1, true), size_t(3));
    }

    void mergedStepsSplitByShareWithoutNames()
    {
        const Kernels k({{"a", 0, 100}, {"b", 100, 200}, {"c", 200, 400}, {"d", 400, 500}});
        // A third of 500 ns is nearest the 200 ns before kernel 2; 80% is exactly the 400 ns before kernel 3.
        QCOMPARE(splitAt(k, 1.0 / 3.0, false), size_t(2));
        QCOMPARE(splitAt(k, 0.8, true), size_t(3));
        QCOMPARE(splitAt(k, 0.0, false), size_t(1)); // at least one kernel each side
        // A backward-looking name on the very first kernel of F-then-B says nothing: the share decides.
        const Kernels first({{"bwd_a", 0, 100}, {"b", 100, 200}, {"c", 200, 400}, {"d", 400, 500}});
        QCOMPARE(splitAt(first, 0.8, false), size_t(3));
    }

    void microbatchesCountUpPerChunkAndWFollowsItsI()
    {
        std::vector<detail::Draft> drafts = {
            draft(0, StepKind::F, 0, -1), draft(0, StepKind::F, 1, -1), draft(0, StepKind::F, 0, -1),
            draft(0, StepKind::I, 1, -1), draft(0, StepKind::W, -1, -1), // the W of chunk 1's I
            draft(0, StepKind::B, 0, 3),                                 // known: chunk 0's backwards go on from 4
            draft(0, StepKind::I, 0, -1), draft(0, StepKind::W, -1, -1),
            draft(0, StepKind::W, -1, -1),                               // no I left: chunk 0, its own count
            draft(1, StepKind::F, 0, -1),                                // another rank counts afresh
        };
        detail::assignMicrobatches(drafts, {{0, 9}, {9, 10}});
        std::vector<int> mbs, chunks;
        for (const auto& d : drafts) {
            mbs.push_back(d.step.microbatch);
            chunks.push_back(d.step.chunk);
        }
        QCOMPARE(mbs, (std::vector<int>{0, 0, 1, 0, 0, 3, 4, 4, 0, 0}));
        QCOMPARE(chunks, (std::vector<int>{0, 1, 0, 1, 1, 0, 0, 0, 0, 0}));
    }

    // The warm-up counts inferSchedule expects agree with the schedule
    // generators' orders wherever those exist, except Megatron's interleaved
    // order with m = p, which runs every forward first.
    void warmupFormulasMatchTheGenerators()
    {
        int compared = 0, interleavedAllFirst = 0;
        for (int p = 2; p <= 8; ++p)
            for (int m = 1; m <= 16; ++m) {
                auto ranks = [&](ScheduleKind kind, int v) {
                    try {
                        return warmupForwards(makeSchedule(kind, p, v, m));
                    } catch (const std::exception&) {
                        return std::vector<int>{}; // no such schedule (e.g. m not a multiple of p)
                    }
                };
                // One chunk per rank; ZB-H1 exists only where the rounds divide m.
                for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleH2}) {
                    const std::vector<int> derived = ranks(kind, 1);
                    for (int s = 0; s < static_cast<int>(derived.size()); ++s, ++compared)
                        QCOMPARE(derived[size_t(s)], kind == ScheduleKind::ZeroBubbleH2 ? detail::warmupZeroBubbleH2(p, s, m)
                                                                                        : detail::warmup1F1B(p, s, m));
                }
                for (int v = 2; v <= 3; ++v) {
                    const std::vector<int> derived = ranks(ScheduleKind::Interleaved1F1B, v);
                    QCOMPARE(derived.empty(), m % p != 0);
                    for (int s = 0; s < static_cast<int>(derived.size()); ++s, ++compared) {
                        const int formula = detail::warmupInterleaved(p, s, v, v * m);
                        if (m != p) {
                            QCOMPARE(derived[size_t(s)], formula);
                            continue;
                        }
                        // m = p: all v * m forwards first, where the formula says (v + 1)p - 2s - 1
                        // on the ranks past the middle (2s + 1 > p).
                        QCOMPARE(derived[size_t(s)], v * m);
                        QCOMPARE(formula, 2 * s + 1 > p ? (v + 1) * p - 2 * s - 1 : v * m);
                        interleavedAllFirst += derived[size_t(s)] != formula;
                    }
                }
            }
        // Every rank of every schedule that exists in the ranges; 32 of them interleaved with m = p.
        QCOMPARE(compared, 1808);
        QCOMPARE(interleavedAllFirst, 32);
    }
};

QTEST_GUILESS_MAIN(TstStructureSteps)
#include "tst_structure_steps.moc"
