#include "model/Schedule.h"

#include "util/Error.h"
#include "util/InputFile.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <string>

namespace pipescope {

namespace {

std::string kindName(StepKind k) { return std::string(1, toChar(k)); }

class Builder {
public:
    Builder(ScheduleKind kind, int pp, int v, int m)
    {
        s_.kind = kind;
        s_.pp = pp;
        s_.stages = pp * v;
        s_.microbatches = m;
        s_.ranks.resize(static_cast<size_t>(pp));
        s_.rankOfStage.resize(static_cast<size_t>(s_.stages));
        s_.chunkOfStage.resize(static_cast<size_t>(s_.stages));
        for (int r = 0; r < pp; ++r)
            for (int c = 0; c < v; ++c) {
                const int st = virtualStage(kind, pp, r, c);
                s_.rankOfStage[static_cast<size_t>(st)] = r;
                s_.chunkOfStage[static_cast<size_t>(st)] = c;
            }
    }
    void add(int rank, StepKind k, int stage, int mb)
    {
        s_.ranks[static_cast<size_t>(rank)].push_back(Action{k, stage, mb});
    }
    Schedule take() { return std::move(s_); }

private:
    Schedule s_;
};

void buildGPipe(Builder& b, int pp, int m)
{
    for (int r = 0; r < pp; ++r) {
        for (int k = 0; k < m; ++k)
            b.add(r, StepKind::F, r, k);
        for (int k = 0; k < m; ++k)
            b.add(r, StepKind::B, r, k);
    }
}

void build1F1B(Builder& b, int pp, int m)
{
    for (int r = 0; r < pp; ++r) {
        const int warmup = std::min(pp - r - 1, m);
        const int steady = m - warmup;
        for (int k = 0; k < warmup; ++k)
            b.add(r, StepKind::F, r, k);
        for (int i = 0; i < steady; ++i) {
            b.add(r, StepKind::F, r, warmup + i);
            b.add(r, StepKind::B, r, i);
        }
        for (int k = steady; k < m; ++k)
            b.add(r, StepKind::B, r, k);
    }
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: microbatches
// advance in groups of pp through all chunks; backward visits chunks in
// reverse; when m == pp every rank runs all forwards before any backward.
void buildInterleaved(Builder& b, int pp, int v, int m)
{
    std::vector<std::pair<int, int>> table; // (microbatch, chunk) per step k
    table.reserve(static_cast<size_t>(v * m));
    for (int g = 0; g < m; g += pp) {
        const int hi = g + pp >= m ? m : g + pp;
        for (int c = 0; c < v; ++c)
            for (int mb = g; mb < hi; ++mb)
                table.emplace_back(mb, c);
    }
    const int total = v * m;
    for (int r = 0; r < pp; ++r) {
        const int warmup = m == pp ? total : std::min((pp - r - 1) * 2 + (v - 1) * pp, total);
        const int remaining = total - warmup;
        auto fwd = [&](int k) {
            const auto [mb, c] = table[static_cast<size_t>(k)];
            b.add(r, StepKind::F, c * pp + r, mb);
        };
        auto bwd = [&](int k) {
            const auto [mb, c] = table[static_cast<size_t>(k)];
            b.add(r, StepKind::B, (v - 1 - c) * pp + r, mb);
        };
        for (int k = 0; k < warmup; ++k)
            fwd(k);
        for (int i = 0; i < remaining; ++i) {
            fwd(warmup + i);
            bwd(i);
        }
        for (int i = remaining; i < total; ++i)
            bwd(i);
    }
}

// torch.distributed.pipelining's ScheduleLoopedBFS: every chunk's forwards in
// turn, then the chunks' backwards in reverse, microbatches in reverse.
void buildLoopedBFS(Builder& b, int pp, int v, int m)
{
    for (int r = 0; r < pp; ++r) {
        for (int c = 0; c < v; ++c)
            for (int k = 0; k < m; ++k)
                b.add(r, StepKind::F, c * pp + r, k);
        for (int c = v - 1; c >= 0; --c)
            for (int k = m - 1; k >= 0; --k)
                b.add(r, StepKind::B, c * pp + r, k);
    }
}

// torch's ZB1P (ScheduleInterleavedZeroBubble), which is ZB-H1 for v = 1:
// 1F1B with B split into I and W, the first `rank` W steps deferred to fill
// the cool-down bubbles.
void buildZeroBubbleH1(Builder& b, int pp, int v, int m)
{
    const int rounds = std::max(1, m / pp);
    if (m % rounds != 0)
        throw Error("zb-h1 needs the number of microbatches (" + std::to_string(m) +
                    ") to be a multiple of the number of rounds (" + std::to_string(rounds) +
                    "); choose a multiple of --pp");
    const int perRound = m / rounds;
    const int S = pp * v;
    for (int r = 0; r < pp; ++r) {
        const int warmup = std::min((v - 1) * perRound + (pp - 1 - r), m * v);
        const int total = v * m;
        auto fwdStage = [&](int op) { return ((op / perRound) % v) * pp + r; };
        auto bwdStage = [&](int op) { return (v - 1 - ((op - warmup) / perRound) % v) * pp + r; };
        std::vector<int> fMb(static_cast<size_t>(S), 0), bMb(static_cast<size_t>(S), 0), wMb(static_cast<size_t>(S), 0);
        std::vector<int> backwardOps;
        size_t weightCount = 0;
        auto addW = [&]() {
            const int st = bwdStage(backwardOps[weightCount++]);
            b.add(r, StepKind::W, st, wMb[static_cast<size_t>(st)]++);
        };
        const int oneFOneB = r;
        for (int op = 0; op < total + warmup; ++op) {
            if (op < warmup) {
                const int st = fwdStage(op);
                b.add(r, StepKind::F, st, fMb[static_cast<size_t>(st)]++);
                continue;
            }
            if (op < total) {
                const int st = fwdStage(op);
                b.add(r, StepKind::F, st, fMb[static_cast<size_t>(st)]++);
            }
            const int bst = bwdStage(op);
            b.add(r, StepKind::I, bst, bMb[static_cast<size_t>(bst)]++);
            backwardOps.push_back(op);
            if (op - warmup >= oneFOneB)
                addW();
        }
        while (weightCount < backwardOps.size())
            addW();
    }
}

// ZB-H2 as in the zero-bubble paper: up to 2(p - r) - 1 microbatches between
// forward and input-gradient so extra forwards fill the warm-up bubble, and
// W steps deferred into what is left, turning the drain into a parallelogram.
// Built by stepping all ranks with unit step times, preferring I, then F,
// then the oldest pending W.
void buildZeroBubbleH2(Builder& b, int pp, int m)
{
    const size_t P = static_cast<size_t>(pp), M = static_cast<size_t>(m);
    constexpr int kNever = 1 << 30;
    std::vector<int> fDone(P * M, kNever), iDone(P * M, kNever);
    std::vector<int> nextF(P, 0), nextI(P, 0), inFlight(P, 0), cap(P);
    std::vector<std::deque<int>> pendingW(P);
    for (int r = 0; r < pp; ++r)
        cap[static_cast<size_t>(r)] = std::min(m, 2 * (pp - r) - 1);
    size_t remaining = P * M * 3;
    for (int t = 0; remaining > 0; ++t) {
        for (int r = 0; r < pp; ++r) {
            const size_t R = static_cast<size_t>(r);
            const int ki = nextI[R];
            if (ki < m && fDone[R * M + static_cast<size_t>(ki)] <= t &&
                (r == pp - 1 || iDone[(R + 1) * M + static_cast<size_t>(ki)] <= t)) {
                b.add(r, StepKind::I, r, ki);
                iDone[R * M + static_cast<size_t>(ki)] = t + 1;
                pendingW[R].push_back(ki);
                ++nextI[R];
                --inFlight[R];
                --remaining;
                continue;
            }
            const int kf = nextF[R];
            if (kf < m && inFlight[R] < cap[R] && (r == 0 || fDone[(R - 1) * M + static_cast<size_t>(kf)] <= t)) {
                b.add(r, StepKind::F, r, kf);
                fDone[R * M + static_cast<size_t>(kf)] = t + 1;
                ++nextF[R];
                ++inFlight[R];
                --remaining;
                continue;
            }
            if (!pendingW[R].empty()) {
                b.add(r, StepKind::W, r, pendingW[R].front());
                pendingW[R].pop_front();
                --remaining;
            }
        }
    }
}

// torch's ScheduleZBVZeroBubble: two chunks per rank in a V (stage r and
// 2p - 1 - r), built for max(2p - 1, m) microbatches then trimmed to m.
void buildZeroBubbleV(Builder& b, int pp, int m)
{
    const int nMicro = std::max(2 * pp - 1, m);
    const int S = 2 * pp;
    for (int r = 0; r < pp; ++r) {
        std::vector<Action> ops;
        const int c0 = r, c1 = S - 1 - r;
        int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
        auto push = [&](StepKind k, int st, int mb) { ops.push_back(Action{k, st, mb}); };
        for (int i = 0; i < 2 * (pp - r) - 1; ++i)
            push(StepKind::F, c0, f0++);
        for (int i = 0; i < r; ++i) {
            push(StepKind::F, c1, f1++);
            push(StepKind::F, c0, f0++);
        }
        for (int i = 0; i < pp - r; ++i) {
            push(StepKind::F, c1, f1++);
            push(StepKind::I, c1, b1);
            push(StepKind::W, c1, b1);
            ++b1;
        }
        while (f1 < f0 || f0 < nMicro) {
            if (f0 < nMicro)
                push(StepKind::F, c0, f0++);
            push(StepKind::I, c0, b0);
            push(StepKind::W, c0, b0);
            ++b0;
            push(StepKind::F, c1, f1++);
            push(StepKind::I, c1, b1);
            push(StepKind::W, c1, b1);
            ++b1;
        }
        int w0 = b0, w1 = b1;
        for (int i = 0; i < r; ++i) {
            push(StepKind::I, c0, b0++);
            push(StepKind::I, c1, b1++);
        }
        for (int i = 0; i < pp - r; ++i) {
            push(StepKind::I, c0, b0++);
            push(StepKind::W, c0, w0++);
        }
        while (w1 < b1)
            push(StepKind::W, c1, w1++);
        while (w0 < b0)
            push(StepKind::W, c0, w0++);
        for (const Action& a : ops)
            if (a.microbatch < m)
                b.add(r, a.kind, a.stage, a.microbatch);
    }
}

// torch's ScheduleDualPipeV (after DeepSeek's DualPipeV). Its overlapped
// F+B pairs run back to back here: the overlap hides expert-parallel
// all-to-all, which this model does not carry.
void buildDualPipeV(Builder& b, int pp, int m)
{
    const int S = 2 * pp;
    for (int r = 0; r < pp; ++r) {
        const int s0 = r, s1 = S - 1 - r;
        std::vector<int> fCount(static_cast<size_t>(S), 0), iCount(static_cast<size_t>(S), 0);
        std::deque<std::pair<int, int>> weightQueue;
        auto f = [&](int st) { b.add(r, StepKind::F, st, fCount[static_cast<size_t>(st)]++); };
        auto full = [&](int st) { b.add(r, StepKind::B, st, iCount[static_cast<size_t>(st)]++); };
        auto input = [&](int st) {
            const int mb = iCount[static_cast<size_t>(st)]++;
            b.add(r, StepKind::I, st, mb);
            weightQueue.emplace_back(st, mb);
        };
        auto weight = [&]() {
            if (weightQueue.empty())
                return;
            b.add(r, StepKind::W, weightQueue.front().first, weightQueue.front().second);
            weightQueue.pop_front();
        };
        auto overlap = [&](int fst, int bst) {
            f(fst);
            full(bst);
        };
        for (int i = 0; i < (pp - r - 1) * 2; ++i)
            f(s0);
        for (int i = 0; i < r + 1; ++i) {
            f(s0);
            f(s1);
        }
        for (int i = 0; i < pp - r - 1; ++i) {
            input(s1);
            weight();
            f(s1);
        }
        const int main = m - pp * 2 + r + 1;
        for (int i = 0; i < main; ++i) {
            if (i == 0 && r == pp - 1) {
                f(s0);
                full(s1);
            } else {
                overlap(s0, s1);
            }
            overlap(s1, s0);
        }
        for (int i = 0; i < pp - r - 1; ++i) {
            full(s1);
            overlap(s1, s0);
        }
        bool zb = false;
        const int step6 = r + 1;
        for (int i = 0; i < step6; ++i) {
            if (i == step6 / 2 && r % 2 == 1)
                zb = true;
            zb ? input(s1) : full(s1);
            if (i == step6 / 2 && r % 2 == 0)
                zb = true;
            zb ? input(s0) : full(s0);
        }
        for (int i = 0; i < pp - r - 1; ++i) {
            weight();
            zb ? input(s0) : full(s0);
        }
        for (int i = 0; i < r + 1; ++i)
            weight();
    }
}

} // namespace

size_t Schedule::actionCount() const
{
    size_t n = 0;
    for (const auto& r : ranks)
        n += r.size();
    return n;
}

std::string actionLabel(const Action& a)
{
    return std::to_string(a.stage) + kindName(a.kind) + std::to_string(a.microbatch);
}

int virtualStage(ScheduleKind kind, int pp, int rank, int chunk)
{
    if (isVShaped(kind))
        return chunk == 0 ? rank : 2 * pp - 1 - rank;
    return chunk * pp + rank;
}

std::vector<int> warmupForwards(const Schedule& s)
{
    std::vector<int> warmup;
    warmup.reserve(s.ranks.size());
    for (const auto& actions : s.ranks) {
        int n = 0;
        for (const Action& a : actions) {
            if (a.kind == StepKind::B || a.kind == StepKind::I)
                break;
            n += a.kind == StepKind::F;
        }
        warmup.push_back(n);
    }
    return warmup;
}

Schedule makeSchedule(ScheduleKind kind, int pp, int v, int m)
{
    const std::string name(toString(kind));
    if (kind == ScheduleKind::Custom)
        throw ValueError(Setting::Schedule, "a custom schedule comes from a schedule CSV file");
    if (pp < 1)
        throw ValueError(Setting::Pp, "the pipeline degree must be at least 1 (got " + std::to_string(pp) + ")");
    if (m < 1)
        throw ValueError(Setting::Microbatches, "the number of microbatches must be at least 1 (got " + std::to_string(m) + ")");
    if (v < 1)
        throw ValueError(Setting::V, "the number of chunks per rank must be at least 1 (got " + std::to_string(v) + ")");
    if (isVShaped(kind) && v != 2)
        throw ValueError(Setting::V, name + " places exactly two chunks per rank (v 2; got " + std::to_string(v) + ")");
    if ((kind == ScheduleKind::GPipe || kind == ScheduleKind::OneFOneB || kind == ScheduleKind::ZeroBubbleH2) && v != 1)
        throw ValueError(Setting::V, name + " runs one chunk per rank; use v 1 or an interleaved schedule (interleaved-1f1b, looped-bfs, zb-h1)");
    if (kind == ScheduleKind::Interleaved1F1B && v < 2)
        throw ValueError(Setting::V, "interleaved-1f1b needs v 2 or more chunks per rank (with one chunk per rank it is 1f1b)");
    if (kind == ScheduleKind::Interleaved1F1B && m % pp != 0)
        throw ValueError(Setting::Microbatches, "interleaved-1f1b (Megatron's order) needs the number of microbatches (" + std::to_string(m) +
                    ") to be a multiple of the pipeline degree (" + std::to_string(pp) + ")");
    if (kind == ScheduleKind::DualPipeV && m < 2 * pp)
        throw ValueError(Setting::Microbatches, "dualpipev needs at least 2 x pp = " + std::to_string(2 * pp) + " microbatches (got " +
                    std::to_string(m) + ")");
    if (static_cast<int64_t>(pp) * v * m > 50'000'000)
        throw ValueError(Setting::Microbatches, "the schedule would have more than 50 million steps; reduce the pipeline degree, v or the microbatches");

    Builder b(kind, pp, v, m);
    switch (kind) {
    case ScheduleKind::GPipe: buildGPipe(b, pp, m); break;
    case ScheduleKind::OneFOneB: build1F1B(b, pp, m); break;
    case ScheduleKind::Interleaved1F1B: buildInterleaved(b, pp, v, m); break;
    case ScheduleKind::LoopedBFS: buildLoopedBFS(b, pp, v, m); break;
    case ScheduleKind::ZeroBubbleH1: buildZeroBubbleH1(b, pp, v, m); break;
    case ScheduleKind::ZeroBubbleH2: buildZeroBubbleH2(b, pp, m); break;
    case ScheduleKind::ZeroBubbleV: buildZeroBubbleV(b, pp, m); break;
    case ScheduleKind::DualPipeV: buildDualPipeV(b, pp, m); break;
    case ScheduleKind::Custom: break;
    }
    return b.take();
}

void validateSchedule(const Schedule& s, const std::string& source)
{
    const int S = s.stages, M = s.microbatches;
    if (s.pp < 1 || S < 1 || M < 1 || static_cast<int>(s.ranks.size()) != s.pp ||
        static_cast<int>(s.rankOfStage.size()) != S)
        throw Error(source + ": the schedule has no ranks, stages or microbatches");
    auto where = [&](int r, size_t pos, const Action& a) {
        return source + ": rank " + std::to_string(r) + ", step " + std::to_string(pos + 1) + " (" + actionLabel(a) +
               ")";
    };
    // Per (stage, microbatch): bit 0 F, 1 B, 2 I, 3 W.
    std::vector<uint8_t> seen(static_cast<size_t>(S) * static_cast<size_t>(M), 0);
    for (int r = 0; r < s.pp; ++r) {
        const auto& list = s.ranks[static_cast<size_t>(r)];
        for (size_t pos = 0; pos < list.size(); ++pos) {
            const Action& a = list[pos];
            if (a.stage < 0 || a.stage >= S)
                throw Error(where(r, pos, a) + ": stage " + std::to_string(a.stage) + " is outside 0.." +
                            std::to_string(S - 1));
            if (a.microbatch < 0 || a.microbatch >= M)
                throw Error(where(r, pos, a) + ": microbatch " + std::to_string(a.microbatch) + " is outside 0.." +
                            std::to_string(M - 1));
            if (s.rankOfStage[static_cast<size_t>(a.stage)] != r)
                throw Error(where(r, pos, a) + ": stage " + std::to_string(a.stage) + " belongs to rank " +
                            std::to_string(s.rankOfStage[static_cast<size_t>(a.stage)]));
            uint8_t& st = seen[static_cast<size_t>(a.stage) * static_cast<size_t>(M) + static_cast<size_t>(a.microbatch)];
            const uint8_t bit = static_cast<uint8_t>(1u << static_cast<unsigned>(a.kind));
            if (st & bit)
                throw Error(where(r, pos, a) + " runs twice");
            const std::string fwd = std::to_string(a.stage) + "F" + std::to_string(a.microbatch);
            const std::string inp = std::to_string(a.stage) + "I" + std::to_string(a.microbatch);
            switch (a.kind) {
            case StepKind::F: break;
            case StepKind::B:
            case StepKind::I:
                if (!(st & 1u))
                    throw Error(where(r, pos, a) + " runs before its forward " + fwd);
                if ((st & 6u) != 0)
                    throw Error(where(r, pos, a) + ": microbatch " + std::to_string(a.microbatch) +
                                " already has a backward on stage " + std::to_string(a.stage));
                break;
            case StepKind::W:
                if (!(st & 4u))
                    throw Error(where(r, pos, a) + " runs before its input-gradient step " + inp);
                break;
            }
            st = static_cast<uint8_t>(st | bit);
        }
    }
    for (int st = 0; st < S; ++st)
        for (int k = 0; k < M; ++k) {
            const uint8_t v = seen[static_cast<size_t>(st) * static_cast<size_t>(M) + static_cast<size_t>(k)];
            const std::string what = "stage " + std::to_string(st) + ", microbatch " + std::to_string(k);
            if (!(v & 1u))
                throw Error(source + ": " + what + " has no forward step (" + std::to_string(st) + "F" +
                            std::to_string(k) + ")");
            if (!(v & 6u))
                throw Error(source + ": " + what + " has no backward step (B or I)");
            if ((v & 4u) && !(v & 8u))
                throw Error(source + ": " + what + " has an I step but no W step");
        }

    // Dependencies across ranks: run the orders with unlimited speed until
    // every rank is done or all remaining ranks wait on each other.
    std::vector<uint8_t> done(seen.size(), 0);
    std::vector<size_t> next(static_cast<size_t>(s.pp), 0);
    auto idx = [M](int st, int k) { return static_cast<size_t>(st) * static_cast<size_t>(M) + static_cast<size_t>(k); };
    auto need = [&](const Action& a, Action& missing) {
        if (a.kind == StepKind::F) {
            if (a.stage > 0 && !(done[idx(a.stage - 1, a.microbatch)] & 1u)) {
                missing = Action{StepKind::F, a.stage - 1, a.microbatch};
                return false;
            }
        } else if (a.kind == StepKind::B || a.kind == StepKind::I) {
            if (a.stage < S - 1 && !(done[idx(a.stage + 1, a.microbatch)] & 6u)) {
                const bool split = seen[idx(a.stage + 1, a.microbatch)] & 4u;
                missing = Action{split ? StepKind::I : StepKind::B, a.stage + 1, a.microbatch};
                return false;
            }
        }
        return true;
    };
    bool progress = true;
    while (progress) {
        progress = false;
        for (int r = 0; r < s.pp; ++r) {
            const auto& list = s.ranks[static_cast<size_t>(r)];
            size_t& n = next[static_cast<size_t>(r)];
            Action missing;
            while (n < list.size() && need(list[n], missing)) {
                const Action& a = list[n];
                done[idx(a.stage, a.microbatch)] |= static_cast<uint8_t>(1u << static_cast<unsigned>(a.kind));
                ++n;
                progress = true;
            }
        }
    }
    for (int r = 0; r < s.pp; ++r) {
        const auto& list = s.ranks[static_cast<size_t>(r)];
        const size_t n = next[static_cast<size_t>(r)];
        if (n >= list.size())
            continue;
        Action missing;
        need(list[n], missing);
        const int q = s.rankOfStage[static_cast<size_t>(missing.stage)];
        const auto& other = s.ranks[static_cast<size_t>(q)];
        size_t at = 0;
        while (at < other.size() && !(other[at].stage == missing.stage && other[at].microbatch == missing.microbatch &&
                                      other[at].kind == missing.kind))
            ++at;
        const size_t blocked = next[static_cast<size_t>(q)];
        throw Error(where(r, n, list[n]) + " waits for " + actionLabel(missing) + ", which rank " + std::to_string(q) +
                    " only runs at step " + std::to_string(at + 1) + ", behind its own waiting step " +
                    std::to_string(blocked + 1) + " (" + actionLabel(other[blocked]) +
                    "): the schedule deadlocks; reorder these steps");
    }
}

Schedule parseScheduleCsv(std::string_view text, const std::string& source)
{
    Schedule s;
    s.kind = ScheduleKind::Custom;
    std::vector<std::vector<Action>> rows;
    std::vector<std::vector<int>> columns; // CSV column of each step, for messages
    int maxStage = -1, maxMb = -1;
    size_t lineNo = 0;
    size_t p = 0;
    while (p <= text.size()) {
        size_t e = text.find('\n', p);
        if (e == std::string_view::npos)
            e = text.size();
        std::string_view line = text.substr(p, e - p);
        p = e + 1;
        ++lineNo;
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        if (line.empty() && p > text.size())
            break;
        std::vector<Action> row;
        // Cells are separated by commas outside parentheses; quotes are dropped.
        std::string cell;
        int depth = 0, column = 0;
        auto flush = [&]() {
            std::string c;
            for (char ch : cell)
                if (ch != '"' && !std::isspace(static_cast<unsigned char>(ch)))
                    c.push_back(ch);
            cell.clear();
            ++column;
            if (c.empty())
                return;
            auto bad = [&](const std::string& why) {
                return Error(source + ": line " + std::to_string(lineNo) + ", column " + std::to_string(column) +
                             ": '" + c + "' " + why);
            };
            std::vector<std::string> parts;
            if (c.front() == '(') {
                const size_t close = c.find(')');
                if (close == std::string::npos)
                    throw bad("has no closing parenthesis");
                std::string inner = c.substr(1, close - 1);
                size_t q = 0;
                while (q <= inner.size()) {
                    size_t semi = inner.find(';', q);
                    if (semi == std::string::npos)
                        semi = inner.size();
                    if (semi > q)
                        parts.push_back(inner.substr(q, semi - q));
                    q = semi + 1;
                }
            } else {
                parts.push_back(c);
            }
            for (const std::string& part : parts) {
                size_t i = 0;
                while (i < part.size() && std::isdigit(static_cast<unsigned char>(part[i])))
                    ++i;
                if (i == 0 || i > 9)
                    throw bad("is not a step like 0F1 (stage, F/B/I/W, microbatch)");
                size_t j = i;
                while (j < part.size() && !std::isdigit(static_cast<unsigned char>(part[j])))
                    ++j;
                const std::string type = part.substr(i, j - i);
                const std::string mb = part.substr(j);
                if (type == "SEND_F" || type == "RECV_F" || type == "SEND_B" || type == "RECV_B" ||
                    type == "UNSHARD" || type == "RESHARD" || type == "REDUCE_GRAD")
                    continue;
                if (type.size() != 1 || std::string_view("FBIW").find(type[0]) == std::string_view::npos)
                    throw bad("has an unknown step type '" + type + "' (expected F, B, I or W)");
                if (mb.empty() || mb.size() > 9 ||
                    !std::all_of(mb.begin(), mb.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
                    throw bad("has no microbatch number");
                Action a;
                a.stage = std::stoi(part.substr(0, i));
                a.kind = static_cast<StepKind>(std::string_view("FBIW").find(type[0]));
                a.microbatch = std::stoi(mb);
                maxStage = std::max(maxStage, a.stage);
                maxMb = std::max(maxMb, a.microbatch);
                row.push_back(a);
            }
        };
        for (char ch : line) {
            if (ch == '(')
                ++depth;
            else if (ch == ')')
                --depth;
            if (ch == ',' && depth <= 0)
                flush();
            else
                cell.push_back(ch);
        }
        flush();
        rows.push_back(std::move(row));
        if (rows.size() > 100000)
            throw Error(source + ": more than 100000 rows; a schedule CSV has one row per rank");
    }
    while (!rows.empty() && rows.back().empty())
        rows.pop_back();
    if (rows.empty() || maxStage < 0)
        throw Error(source + ": no steps found; expected one row per rank with cells like 0F0,0F1,0B0");
    if (static_cast<int64_t>(maxStage + 1) * (maxMb + 1) > 50'000'000)
        throw Error(source + ": stage and microbatch numbers are too large for one schedule");
    s.pp = static_cast<int>(rows.size());
    s.stages = maxStage + 1;
    s.microbatches = maxMb + 1;
    s.rankOfStage.assign(static_cast<size_t>(s.stages), -1);
    s.chunkOfStage.assign(static_cast<size_t>(s.stages), 0);
    for (int r = 0; r < s.pp; ++r)
        for (const Action& a : rows[static_cast<size_t>(r)])
            if (s.rankOfStage[static_cast<size_t>(a.stage)] < 0)
                s.rankOfStage[static_cast<size_t>(a.stage)] = r;
    for (int st = 0; st < s.stages; ++st)
        if (s.rankOfStage[static_cast<size_t>(st)] < 0)
            throw Error(source + ": stage " + std::to_string(st) + " has no steps on any rank");
    // A rank's chunks are its stages in increasing order.
    std::vector<int> chunksOnRank(static_cast<size_t>(s.pp), 0);
    for (int st = 0; st < s.stages; ++st)
        s.chunkOfStage[static_cast<size_t>(st)] = chunksOnRank[static_cast<size_t>(s.rankOfStage[static_cast<size_t>(st)])]++;
    s.ranks = std::move(rows);
    validateSchedule(s, source);
    return s;
}

Schedule loadScheduleCsv(const std::string& path)
{
    return parseScheduleCsv(InputFile::readAll(path), path);
}

} // namespace pipescope
