// Steps without annotations, read against the known schedules.
//
// Every built-in schedule fixes, for each pipeline rank, the order of its
// steps and so the point-to-point transfers around each of them: a forward
// of a virtual stage after the first receives its input from the rank before
// it and sends its output to the rank after it; a backward (B or I) the other
// way round; a weight-gradient step (W) moves nothing. On a trace, the same
// transfers cut each rank's compute into runs. A schedule explains the trace
// when, on every rank and iteration, its transfers fall between its steps
// exactly as the measured ones fall between the runs of kernels; then each run
// is one or more of its steps (a forward and its backward run back to back on
// the last stage, with nothing moved in between), and every step gets its
// kind, chunk and microbatch from the schedule.
//
// The microbatch count follows from the number of transfers: each microbatch
// crosses every boundary between virtual stages held by different ranks once
// forwards and once backwards.
#include "analysis/Classify.h"
#include "analysis/detail/Context.h"
#include "model/Exchanges.h"
#include "model/Schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace pipescope::detail {

namespace {

// A transfer as the schedule sees it: direction and the peer's pipeline position.
struct Xfer {
    bool send = false;
    int peer = 0;
    auto key() const { return std::make_pair(send, peer); }
    bool operator<(const Xfer& o) const { return key() < o.key(); }
    bool operator==(const Xfer& o) const { return key() == o.key(); }
};

// One rank's iteration as measured: runs of compute kernels and the transfers
// between them. gaps[0] comes before the first run, gaps[i] between run i-1
// and run i, gaps.back() after the last.
struct Observed {
    int rank = 0, iteration = 0, position = 0;
    std::vector<std::vector<uint32_t>> runs;
    std::vector<std::vector<Xfer>> gaps;
    bool directions = true; // every transfer's direction is known
    int transfers = 0;
};

// The same for a schedule: runs of actions.
struct Expected {
    std::vector<std::vector<Action>> runs;
    std::vector<std::vector<Xfer>> gaps;
};

// A rank's actions cut into runs where transfers fall: before(i, gap) adds
// those that come before action i, after(i, gap) those that follow it.
template <typename Before, typename After>
Expected cutRuns(const std::vector<Action>& actions, Before before, After after)
{
    Expected e;
    std::vector<Xfer> gap;
    for (size_t i = 0; i < actions.size(); ++i) {
        before(i, gap);
        if (i == 0 || !gap.empty()) {
            std::sort(gap.begin(), gap.end());
            e.gaps.push_back(std::move(gap));
            gap.clear();
            e.runs.emplace_back();
        }
        e.runs.back().push_back(actions[i]);
        after(i, gap);
    }
    std::sort(gap.begin(), gap.end());
    e.gaps.push_back(std::move(gap));
    return e;
}

Expected expectedFor(const Schedule& s, int position)
{
    const int S = s.stages;
    const auto& actions = s.ranks[size_t(position)];
    auto recvsBefore = [&](size_t i, std::vector<Xfer>& out) {
        const Action& a = actions[i];
        if (a.kind == StepKind::F && a.stage > 0 && s.rankOfStage[size_t(a.stage - 1)] != position)
            out.push_back({false, s.rankOfStage[size_t(a.stage - 1)]});
        if ((a.kind == StepKind::B || a.kind == StepKind::I) && a.stage < S - 1 &&
            s.rankOfStage[size_t(a.stage + 1)] != position)
            out.push_back({false, s.rankOfStage[size_t(a.stage + 1)]});
    };
    auto sendsAfter = [&](size_t i, std::vector<Xfer>& out) {
        const Action& a = actions[i];
        if (a.kind == StepKind::F && a.stage < S - 1 && s.rankOfStage[size_t(a.stage + 1)] != position)
            out.push_back({true, s.rankOfStage[size_t(a.stage + 1)]});
        if ((a.kind == StepKind::B || a.kind == StepKind::I) && a.stage > 0 &&
            s.rankOfStage[size_t(a.stage - 1)] != position)
            out.push_back({true, s.rankOfStage[size_t(a.stage - 1)]});
    };
    return cutRuns(actions, recvsBefore, sendsAfter);
}

// The same under blocking exchanges (model/Exchanges.h): every transfer of a
// batch falls in the gap after the step the batch follows.
Expected expectedBlocking(const Schedule& s, const ExchangePlan& plan, int position)
{
    const auto& groups = plan.ranks[size_t(position)];
    size_t g = 0;
    auto opsAfter = [&](int step, std::vector<Xfer>& out) {
        for (; g < groups.size() && groups[g].afterStep == step; ++g)
            for (const ExchangeOp& op : groups[g].ops) {
                const MessageEnds m = messageEnds(s, op.message);
                out.push_back({op.send, op.send ? m.toRank : m.fromRank});
            }
    };
    return cutRuns(
        s.ranks[size_t(position)],
        [&](size_t i, std::vector<Xfer>& out) {
            if (i == 0)
                opsAfter(-1, out);
        },
        [&](size_t i, std::vector<Xfer>& out) { opsAfter(static_cast<int>(i), out); });
}

bool sameGaps(const Observed& o, const Expected& e)
{
    if (o.runs.size() != e.runs.size() || o.gaps.size() != e.gaps.size())
        return false;
    // A run holds at least one kernel per step it stands for.
    for (size_t i = 0; i < o.runs.size(); ++i)
        if (o.runs[i].size() < e.runs[i].size())
            return false;
    for (size_t g = 0; g < o.gaps.size(); ++g) {
        if (o.gaps[g].size() != e.gaps[g].size())
            return false;
        if (o.directions) {
            if (o.gaps[g] != e.gaps[g])
                return false;
        } else {
            std::vector<int> a, b;
            for (const Xfer& x : o.gaps[g])
                a.push_back(x.peer);
            for (const Xfer& x : e.gaps[g])
                b.push_back(x.peer);
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            if (a != b)
                return false;
        }
    }
    return true;
}

// Transfers per microbatch on a rank: each boundary between virtual stages on
// different ranks is crossed once forwards and once backwards.
int transfersPerMicrobatch(const Schedule& s, int position)
{
    int n = 0;
    for (int st = 0; st < s.stages; ++st) {
        if (s.rankOfStage[size_t(st)] != position)
            continue;
        if (st > 0 && s.rankOfStage[size_t(st - 1)] != position)
            n += 2;
        if (st < s.stages - 1 && s.rankOfStage[size_t(st + 1)] != position)
            n += 2;
    }
    return n;
}

// ---------------------------------------------------------------- what each rank did

// Whether a kernel is the optimizer's, looked up once per name.
bool isOptimizer(const Context& ctx, std::unordered_map<StringId, bool>& optimizer, const Activity& a)
{
    auto [opt, fresh] = optimizer.try_emplace(a.name, false);
    if (fresh)
        opt->second = isOptimizerKernel(ctx.trace.str(a.name));
    return opt->second;
}

// The compute kernels of a rank that start inside its span, the optimizer's left out.
std::vector<uint32_t> stepKernels(const Context& ctx, const RankData& rd, const RankSpan& span,
                                  std::unordered_map<StringId, bool>& optimizer)
{
    std::vector<uint32_t> kernels;
    for (auto k = std::lower_bound(rd.compute.begin(), rd.compute.end(), span.start,
                                   [&](uint32_t x, TimeNs v) { return ctx.act(x).start < v; });
         k != rd.compute.end() && ctx.act(*k).start <= span.end; ++k)
        if (!isOptimizer(ctx, optimizer, ctx.act(*k)))
            kernels.push_back(*k);
    return kernels;
}

// Each transfer lands in the gap before the first kernel that starts after
// it: a receive where it ends (the step after it waits for it), a send where
// it starts (the step before it produced what it sends).
struct GapPlacer {
    const Context& ctx;
    const RankData& rd;
    const RankSpan& span;
    const std::vector<uint32_t>& kernels;
    Observed& o;
    std::vector<std::vector<Xfer>> at; // [i]: before kernel i; [kernels.size()]: after the last

    // One transfer of op `a`; false when the peer is no other stage of the
    // rank's pipeline (a transfer not for this reading).
    bool add(const Activity& a, P2pDir dir, std::optional<int> peer)
    {
        const RankData* pr = peer ? ctx.rankData(*peer) : nullptr;
        if (!pr || pr->stage < 0 || pr->replica != rd.replica || pr->stage == rd.stage)
            return false;
        const TimeNs anchor = dir == P2pDir::Recv ? a.end : a.start;
        if (anchor < span.start || anchor > span.end)
            return true;
        o.directions = o.directions && (dir == P2pDir::Send || dir == P2pDir::Recv);
        const size_t gap = static_cast<size_t>(
            std::lower_bound(kernels.begin(), kernels.end(), anchor,
                             [&](uint32_t x, TimeNs v) { return ctx.act(x).start < v; }) - kernels.begin());
        at[gap].push_back({dir == P2pDir::Send, pr->stage});
        ++o.transfers;
        return true;
    }

    // Every transfer of the rank's point-to-point ops in the span; false as add.
    bool addAll()
    {
        // Comm ops are in start order: from a few before the span (a receive
        // posted early) to the span's end.
        auto c0 = std::lower_bound(rd.comm.begin(), rd.comm.end(), span.start,
                                   [&](uint32_t x, TimeNs v) { return ctx.act(x).start < v; });
        for (int back = 0; back < 8 && c0 != rd.comm.begin(); ++back)
            --c0;
        for (; c0 != rd.comm.end() && ctx.act(*c0).start <= span.end; ++c0) {
            const uint32_t c = *c0;
            const Activity& a = ctx.act(c);
            if (ctx.classOf(c) != WorkClass::P2p || a.start > span.end || a.end < span.start)
                continue;
            // One transfer per op: a coalesced batch (batch_isend_irecv) runs several in one kernel.
            bool ok = true;
            const auto ops = ctx.opsOf(c);
            if (ops.size() > 1) {
                for (const NcclOp& op : ops)
                    ok = ok && add(a, op.kind == Collective::Send ? P2pDir::Send : op.kind == Collective::Recv ? P2pDir::Recv : P2pDir::Unknown,
                                   op.peer);
            } else {
                ok = add(a, ctx.direction(c), ctx.peer(c));
            }
            if (!ok)
                return false;
        }
        return true;
    }
};

// The kernels cut into runs where transfers fell, gaps sorted.
void cutAtTransfers(const std::vector<uint32_t>& kernels, std::vector<std::vector<Xfer>>& at, Observed& o)
{
    o.gaps.push_back(std::move(at[0]));
    o.runs.emplace_back();
    for (size_t k = 0; k < kernels.size(); ++k) {
        if (k > 0 && !at[k].empty()) {
            o.gaps.push_back(std::move(at[k]));
            o.runs.emplace_back();
        }
        o.runs.back().push_back(kernels[k]);
    }
    o.gaps.push_back(std::move(at[kernels.size()]));
    for (auto& g : o.gaps)
        std::sort(g.begin(), g.end());
}

// What each pipeline rank did, per iteration; nullopt when some transfer
// has no pipeline peer.
std::optional<std::vector<Observed>> observeRanks(const Context& ctx, const AnalysisResult& out, int p)
{
    std::vector<Observed> observed;
    std::unordered_map<StringId, bool> optimizer;
    for (const RankData& rd : ctx.ranks) {
        if (rd.stage < 0 || rd.stage >= p)
            continue;
        for (const Iteration& it : out.iterations) {
            const RankSpan* span = nullptr;
            for (const auto& rs : it.ranks)
                if (rs.rank == rd.rank)
                    span = &rs;
            if (!span)
                continue;
            Observed o;
            o.rank = rd.rank;
            o.iteration = it.index;
            o.position = rd.stage;
            const std::vector<uint32_t> kernels = stepKernels(ctx, rd, *span, optimizer);
            if (kernels.empty())
                continue;
            GapPlacer placer{ctx, rd, *span, kernels, o, std::vector<std::vector<Xfer>>(kernels.size() + 1)};
            if (!placer.addAll())
                return std::nullopt;
            cutAtTransfers(kernels, placer.at, o);
            observed.push_back(std::move(o));
        }
    }
    return observed;
}

// ---------------------------------------------------------------- the schedule that explains them

struct Candidate {
    ScheduleKind kind;
    int v;
};

// Every built-in schedule, with the chunk counts it can have.
std::vector<Candidate> candidateSchedules()
{
    std::vector<Candidate> candidates;
    for (ScheduleKind k : builtinScheduleKinds()) {
        if (isVShaped(k)) {
            candidates.push_back({k, 2});
        } else if (k == ScheduleKind::Interleaved1F1B || k == ScheduleKind::LoopedBFS) {
            for (int v = 2; v <= 8; ++v)
                candidates.push_back({k, v});
        } else if (k == ScheduleKind::ZeroBubbleH1) {
            for (int v = 1; v <= 8; ++v)
                candidates.push_back({k, v});
        } else {
            candidates.push_back({k, 1});
        }
    }
    return candidates;
}

struct Best {
    Schedule schedule;
    int matched = 0;
    bool blocking = false; // read with blocking exchanges' batches
};

// The best schedule, and other schedules that explain as many rank-iterations.
struct Ranking {
    std::optional<Best> best;
    std::vector<Best> tied;
};

// Each pipeline position's expected runs: sends that overlap the next step,
// or (blocking) Megatron's blocking batches.
std::vector<Expected> expectedRuns(const Schedule& s, bool blocking, int p)
{
    std::vector<Expected> expected;
    const ExchangePlan plan = blocking ? exchangePlan(s) : ExchangePlan{};
    for (int r = 0; r < p; ++r)
        expected.push_back(blocking ? expectedBlocking(s, plan, r) : expectedFor(s, r));
    return expected;
}

// Rank-iterations whose transfers fall where the schedule puts them.
int explainedCount(const std::vector<Observed>& observed, const std::vector<Expected>& expected)
{
    int n = 0;
    for (const Observed& o : observed)
        n += sameGaps(o, expected[size_t(o.position)]);
    return n;
}

// Microbatches from the layout (the same for every schedule of it): every
// rank's transfers must give the same count; -1 when they do not.
int impliedMicrobatches(const Schedule& layout, const std::vector<Observed>& observed)
{
    int m = -1;
    for (const Observed& o : observed) {
        const int per = transfersPerMicrobatch(layout, o.position);
        if (per == 0 || o.transfers % per != 0)
            return -1;
        const int mm = o.transfers / per;
        if (m >= 0 && mm != m)
            return -1;
        m = mm;
    }
    return m;
}

// The candidate with the microbatches its transfers imply, and how many
// rank-iterations it explains with either exchange reading (overlapped sends
// first when both fit equally); nullopt when it cannot be built or explains none.
std::optional<Best> fitCandidate(const Candidate& c, int p, const std::vector<Observed>& observed)
{
    Schedule layout;
    try {
        layout = makeSchedule(c.kind, p, c.v, c.kind == ScheduleKind::DualPipeV ? 2 * p : p);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    const int m = impliedMicrobatches(layout, observed);
    if (m < 1 || m > 4096)
        return std::nullopt;
    Schedule s;
    try {
        s = makeSchedule(c.kind, p, c.v, m);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    int matched = explainedCount(observed, expectedRuns(s, false, p));
    bool blocking = false;
    if (const int b = explainedCount(observed, expectedRuns(s, true, p)); b > matched) {
        matched = b;
        blocking = true;
    }
    if (matched == 0)
        return std::nullopt;
    return Best{std::move(s), matched, blocking};
}

Ranking rankCandidates(const std::vector<Observed>& observed, int p)
{
    Ranking r;
    for (const Candidate& c : candidateSchedules()) {
        std::optional<Best> fit = fitCandidate(c, p, observed);
        if (!fit)
            continue;
        if (!r.best || fit->matched > r.best->matched) {
            r.best = std::move(*fit);
            r.tied.clear();
        } else if (fit->matched == r.best->matched && c.kind != r.best->schedule.kind &&
                   std::none_of(r.tied.begin(), r.tied.end(), [&](const Best& other) { return other.schedule.kind == c.kind; })) {
            r.tied.push_back(std::move(*fit));
        }
    }
    return r;
}

// ---------------------------------------------------------------- runs split into steps

TimeNs unionNs(const Context& ctx, const std::vector<uint32_t>& ks, size_t from, size_t to)
{
    std::vector<Interval> u;
    for (size_t q = from; q < to; ++q)
        unionAppend(u, ctx.act(ks[q]).start, ctx.act(ks[q]).end);
    return totalLength(u);
}

// Typical compute of each step kind per pipeline position, from runs of one
// step: (position, kind) -> (sum, count).
using Typical = std::map<std::pair<int, StepKind>, std::pair<double, int>>;

Typical typicalFor(const Context& ctx, const std::vector<Observed>& observed, const std::vector<Expected>& expected)
{
    Typical typical;
    for (const Observed& o : observed) {
        const Expected& e = expected[size_t(o.position)];
        if (!sameGaps(o, e))
            continue;
        for (size_t i = 0; i < o.runs.size(); ++i)
            if (e.runs[i].size() == 1) {
                auto& tp = typical[{o.position, e.runs[i][0].kind}];
                tp.first += static_cast<double>(unionNs(ctx, o.runs[i], 0, o.runs[i].size()));
                ++tp.second;
            }
    }
    return typical;
}

double typicalOf(const Typical& typical, int position, StepKind k)
{
    auto it = typical.find({position, k});
    if (it != typical.end() && it->second.second > 0)
        return it->second.first / it->second.second;
    // Nothing measured alone: the usual proportions (a backward is twice a forward).
    return k == StepKind::B ? 2.0 : 1.0;
}

// Where each action of a run starts among its kernels (and, last, the run's end):
// cumulative compute in proportion to the actions' typical times, at least
// one kernel per action.
std::vector<size_t> splitRun(const Context& ctx, const Typical& typical, int position, const std::vector<uint32_t>& ks,
                             const std::vector<Action>& actions)
{
    std::vector<size_t> bounds{0};
    double total = 0;
    for (const auto& a : actions)
        total += typicalOf(typical, position, a.kind);
    const auto runNs = static_cast<double>(unionNs(ctx, ks, 0, ks.size()));
    size_t from = 0;
    double acc = 0, target = 0;
    TimeNs done = 0;
    for (size_t j = 0; j < actions.size(); ++j) {
        size_t to = ks.size();
        if (j + 1 < actions.size()) {
            target += typicalOf(typical, position, actions[j].kind) / total * runNs;
            to = from + 1;
            const size_t last = ks.size() - (actions.size() - j - 1);
            acc = static_cast<double>(done + unionNs(ctx, ks, from, to));
            while (to < last) {
                const double next = static_cast<double>(done + unionNs(ctx, ks, from, to + 1));
                if (std::abs(next - target) >= std::abs(acc - target))
                    break;
                ++to;
                acc = next;
            }
        }
        done += unionNs(ctx, ks, from, to);
        bounds.push_back(to);
        from = to;
    }
    return bounds;
}

// ---------------------------------------------------------------- ties told apart by autograd

// Backward steps whose numbers point to a forward step, and how many
// point to the forward of the same virtual stage and microbatch.
struct Pairing {
    int pairs = 0, agree = 0;
};

// Autograd's sequence numbers of the kernels of a few rank-iterations (one
// per position, up to four) that the best schedule explains.
struct SequenceNumbers {
    std::vector<const Observed*> sample;
    std::vector<std::vector<int64_t>> seqs;
    std::unordered_map<uint32_t, const std::vector<int64_t>*> of; // kernel -> its numbers

    void read(const Context& ctx, const std::vector<Observed>& observed, const std::vector<Expected>& bestExpected)
    {
        std::set<int> positions;
        for (const Observed& o : observed)
            if (sample.size() < 4 && sameGaps(o, bestExpected[size_t(o.position)]) && positions.insert(o.position).second)
                sample.push_back(&o);
        std::vector<int64_t> ids;
        std::vector<uint32_t> kernelsAsked;
        for (const Observed* o : sample)
            for (const auto& run : o->runs)
                for (uint32_t k : run) {
                    ids.push_back(ctx.act(k).id);
                    kernelsAsked.push_back(k);
                }
        try {
            seqs = ctx.options.autogradSequences(ids);
        } catch (const std::exception&) {
            seqs.clear(); // the store could not be read again: the tie stays
        }
        if (seqs.size() == ids.size())
            for (size_t i = 0; i < ids.size(); ++i)
                if (!seqs[i].empty())
                    of.emplace(kernelsAsked[i], &seqs[i]);
    }
};

// How the sampled backwards pair with their forwards as schedule b orders them.
Pairing pairingOf(const Context& ctx, const std::vector<Observed>& observed, const SequenceNumbers& numbers, const Best& b, int p)
{
    const std::vector<Expected> expected = expectedRuns(b.schedule, b.blocking, p);
    const Typical typical = typicalFor(ctx, observed, expected);
    Pairing score;
    for (const Observed* o : numbers.sample) {
        const Expected& e = expected[size_t(o->position)];
        if (!sameGaps(*o, e))
            continue;
        std::unordered_map<int64_t, std::pair<int, int>> forwardOf; // number -> (stage, microbatch)
        std::vector<std::pair<const Action*, std::vector<int64_t>>> backwards;
        for (size_t i = 0; i < o->runs.size(); ++i) {
            const std::vector<size_t> bounds = splitRun(ctx, typical, o->position, o->runs[i], e.runs[i]);
            for (size_t j = 0; j < e.runs[i].size(); ++j) {
                const Action& a = e.runs[i][j];
                std::vector<int64_t> nums;
                for (size_t q = bounds[j]; q < bounds[j + 1]; ++q)
                    if (auto it = numbers.of.find(o->runs[i][q]); it != numbers.of.end())
                        nums.insert(nums.end(), it->second->begin(), it->second->end());
                if (a.kind == StepKind::F) {
                    for (int64_t n : nums)
                        forwardOf.try_emplace(n, a.stage, a.microbatch);
                } else if (a.kind == StepKind::B || a.kind == StepKind::I) {
                    backwards.emplace_back(&a, std::move(nums));
                }
            }
        }
        for (const auto& [a, nums] : backwards) {
            std::map<std::pair<int, int>, int> votes;
            for (int64_t n : nums)
                if (auto f = forwardOf.find(n); f != forwardOf.end())
                    ++votes[f->second];
            if (votes.empty())
                continue;
            auto top = std::max_element(votes.begin(), votes.end(),
                                        [](const auto& x, const auto& y) { return x.second < y.second; });
            ++score.pairs;
            score.agree += top->first == std::make_pair(a->stage, a->microbatch) ? 1 : 0;
        }
    }
    return score;
}

// Schedules that put every transfer in the same places differ in which
// microbatch a backward takes (Megatron's interleaved 1F1B with m = p against
// looped BFS); autograd's sequence numbers, where the trace has them, pair
// each backward with the forward it differentiates. When one schedule alone
// pairs most of them right, it becomes the best and the tie is gone; returns
// the evidence in words, or nothing.
std::string breakTieByAutograd(const Context& ctx, const std::vector<Observed>& observed, Ranking& r, int p)
{
    if (r.tied.empty() || !ctx.options.autogradSequences)
        return {};
    SequenceNumbers numbers;
    numbers.read(ctx, observed, expectedRuns(r.best->schedule, r.best->blocking, p));
    std::vector<Pairing> scores;
    scores.push_back(pairingOf(ctx, observed, numbers, *r.best, p));
    for (const Best& other : r.tied)
        scores.push_back(pairingOf(ctx, observed, numbers, other, p));
    const size_t win = static_cast<size_t>(
        std::max_element(scores.begin(), scores.end(), [](const Pairing& x, const Pairing& y) { return x.agree < y.agree; }) -
        scores.begin());
    const Pairing w = scores[win];
    const bool alone = std::count_if(scores.begin(), scores.end(), [&](const Pairing& x) { return x.agree == w.agree; }) == 1;
    if (!alone || w.agree * 2 <= w.pairs)
        return {};
    if (win > 0)
        std::swap(*r.best, r.tied[win - 1]);
    std::swap(scores[0], scores[win]);
    // The winner is alone at the top: the numbers tell it from every other.
    std::string others;
    for (size_t i = 0; i < r.tied.size(); ++i)
        others += (others.empty() ? "" : ", ") + std::to_string(scores[i + 1].agree) + " as " +
                  std::string(toString(r.tied[i].schedule.kind)) + " orders them";
    r.tied.clear();
    return "; autograd's sequence numbers pair " + std::to_string(w.agree) + " of " + std::to_string(w.pairs) +
           " backward steps with their own forwards as " + std::string(toString(r.best->schedule.kind)) +
           " orders them, against " + others;
}

// ---------------------------------------------------------------- steps from the schedule

// One explained rank-iteration's steps: each run split among its actions.
void appendScheduleSteps(const Context& ctx, const Observed& o, const Expected& e, const Schedule& s, const Typical& typical,
                         std::vector<Step>& fresh)
{
    for (size_t i = 0; i < o.runs.size(); ++i) {
        const auto& ks = o.runs[i];
        const auto& actions = e.runs[i];
        const std::vector<size_t> bounds = splitRun(ctx, typical, o.position, ks, actions);
        for (size_t j = 0; j < actions.size(); ++j) {
            Step st;
            st.iteration = o.iteration;
            st.rank = o.rank;
            st.stage = o.position;
            st.kind = actions[j].kind;
            st.chunk = s.chunkOfStage[size_t(actions[j].stage)];
            st.microbatch = actions[j].microbatch;
            st.start = ctx.act(ks[bounds[j]]).start;
            st.end = st.start;
            for (size_t q = bounds[j]; q < bounds[j + 1]; ++q)
                st.end = std::max(st.end, ctx.act(ks[q]).end);
            st.computeNs = unionNs(ctx, ks, bounds[j], bounds[j + 1]);
            fresh.push_back(st);
        }
    }
}

// The rank-iterations the schedule explains get its steps; the others keep
// the steps found before.
void stepsFromSchedule(const Context& ctx, const std::vector<Observed>& observed, const Best& best, int p, std::vector<Step>& steps)
{
    const std::vector<Expected> expected = expectedRuns(best.schedule, best.blocking, p);
    const Typical typical = typicalFor(ctx, observed, expected);
    std::set<std::pair<int, int>> replaced;
    std::vector<Step> fresh;
    for (const Observed& o : observed) {
        const Expected& e = expected[size_t(o.position)];
        if (!sameGaps(o, e))
            continue;
        replaced.insert({o.rank, o.iteration});
        appendScheduleSteps(ctx, o, e, best.schedule, typical, fresh);
    }
    for (const Step& st : steps)
        if (!replaced.count({st.rank, st.iteration}))
            fresh.push_back(st);
    std::stable_sort(fresh.begin(), fresh.end(), [](const Step& a, const Step& b) {
        return a.iteration != b.iteration ? a.iteration < b.iteration : a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
    });
    steps = std::move(fresh);
}

// The schedule, its layout, confidence and evidence in words.
void publishMatch(Context& ctx, PipelineStructure& ps, const Best& best, const std::vector<ScheduleKind>& alike,
                  size_t observedCount, int p, const std::string& pairing)
{
    const Schedule& s = best.schedule;
    ctx.scheduleMatched = true;
    ctx.ring = !isVShaped(s.kind) && s.chunks() > 1;
    ctx.vShape = isVShaped(s.kind);
    ps.chunks = s.chunks();
    ps.microbatches = s.microbatches;
    ps.schedule = s.kind;
    const double share = static_cast<double>(best.matched) / static_cast<double>(observedCount);
    double confidence = 0.85 * share; // inferred, as for the segment reading
    std::string evidence = "the point-to-point transfers between the steps of " + std::to_string(best.matched) + " of " +
                           std::to_string(observedCount) + " rank-iterations fall exactly where " + std::string(toString(s.kind)) +
                           " with " + std::to_string(p) + " stages, " + std::to_string(s.chunks()) + " chunk" +
                           (s.chunks() > 1 ? "s" : "") + " and " + std::to_string(s.microbatches) +
                           " microbatches puts them" +
                           (best.blocking ? std::string(" under blocking exchanges (Megatron-LM's batches)") : "");
    if (!alike.empty()) {
        confidence *= 0.5;
        std::string names;
        for (ScheduleKind a : alike)
            names += (names.empty() ? "" : ", ") + std::string(toString(a));
        evidence += "; " + names + " would put them in the same places (the orders differ only where no transfer "
                    "shows it)";
    }
    evidence += pairing;
    ps.scheduleAlike = alike;
    ps.scheduleConfidence = std::round(std::clamp(confidence, 0.0, 1.0) * 100) / 100;
    ps.scheduleEvidence = evidence + "; steps inferred from kernel order and point-to-point peers, not annotated";
}

} // namespace

bool matchScheduleTemplate(Context& ctx, AnalysisResult& out, std::vector<Step>& steps)
{
    PipelineStructure& ps = out.pipeline;
    if (!ps.found || ps.pp < 2 || ps.labelsFrom != StepLabels::Inferred || out.iterations.empty())
        return false;
    const int p = ps.pp;
    const std::optional<std::vector<Observed>> observed = observeRanks(ctx, out, p);
    if (!observed || observed->empty())
        return false;
    Ranking ranking = rankCandidates(*observed, p);
    // Every rank of every iteration but one may be explained (a capture cut mid-step).
    if (!ranking.best || ranking.best->matched * 10 < static_cast<int>(observed->size()) * 9)
        return false;
    const std::string pairing = breakTieByAutograd(ctx, *observed, ranking, p);
    std::vector<ScheduleKind> alike;
    for (const Best& other : ranking.tied)
        alike.push_back(other.schedule.kind);
    stepsFromSchedule(ctx, *observed, *ranking.best, p, steps);
    publishMatch(ctx, ps, *ranking.best, alike, observed->size(), p, pairing);
    return true;
}

} // namespace pipescope::detail
