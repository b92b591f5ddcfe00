#include "model/Exchanges.h"

#include <initializer_list>

namespace pipescope {

namespace {

int messageId(int boundary, int microbatch, bool gradient, int microbatches)
{
    return (boundary * microbatches + microbatch) * 2 + (gradient ? 1 : 0);
}

bool backwardLike(StepKind k) { return k == StepKind::B || k == StepKind::I; }

// The message a step receives from another rank, or -1.
int inputOf(const Schedule& s, int rank, const Action& a)
{
    if (a.kind == StepKind::F && a.stage > 0 && s.rankOfStage[size_t(a.stage - 1)] != rank)
        return messageId(a.stage - 1, a.microbatch, false, s.microbatches);
    if (backwardLike(a.kind) && a.stage < s.stages - 1 && s.rankOfStage[size_t(a.stage + 1)] != rank)
        return messageId(a.stage, a.microbatch, true, s.microbatches);
    return -1;
}

// The message a step sends to another rank, or -1.
int outputOf(const Schedule& s, int rank, const Action& a)
{
    if (a.kind == StepKind::F && a.stage < s.stages - 1 && s.rankOfStage[size_t(a.stage + 1)] != rank)
        return messageId(a.stage, a.microbatch, false, s.microbatches);
    if (backwardLike(a.kind) && a.stage > 0 && s.rankOfStage[size_t(a.stage - 1)] != rank)
        return messageId(a.stage - 1, a.microbatch, true, s.microbatches);
    return -1;
}

class RankPlan {
public:
    RankPlan(const Schedule& s, int rank) : s_(s), rank_(rank), list_(s.ranks[size_t(rank)]) {}

    int in(int step) const { return step >= 0 && size_t(step) < list_.size() ? inputOf(s_, rank_, list_[size_t(step)]) : -1; }
    int out(int step) const { return step >= 0 && size_t(step) < list_.size() ? outputOf(s_, rank_, list_[size_t(step)]) : -1; }

    // A batch after `step` of the sends `sends` and receives `recvs` that exist (ids >= 0).
    void batch(int step, std::initializer_list<int> sends, std::initializer_list<int> recvs)
    {
        ExchangeGroup g;
        g.afterStep = step;
        for (int m : sends)
            if (m >= 0)
                g.ops.push_back({m, true});
        for (int m : recvs)
            if (m >= 0)
                g.ops.push_back({m, false});
        if (!g.ops.empty())
            groups.push_back(std::move(g));
    }

    // One batch after each step: its output and the next step's input.
    void generic()
    {
        groups.clear();
        batch(-1, {}, {in(0)});
        for (int j = 0; j < int(list_.size()); ++j)
            batch(j, {out(j)}, {in(j + 1)});
    }

    // Megatron-LM's batches; false when the list does not have its shape.
    bool megatron(bool interleaved)
    {
        groups.clear();
        const int n = int(list_.size());
        int forwards = 0, firstBackward = -1;
        for (int j = 0; j < n; ++j) {
            const StepKind k = list_[size_t(j)].kind;
            if (k == StepKind::F)
                ++forwards;
            else if (k == StepKind::B) {
                if (firstBackward < 0)
                    firstBackward = j;
            } else {
                return false; // I and W are not Megatron's
            }
        }
        if (n == 0 || forwards * 2 != n || firstBackward < 0)
            return false;
        const bool allWarm = interleaved && firstBackward == forwards;
        const int w = allWarm ? forwards : firstBackward - 1;
        const int R = forwards - w;
        auto kindAt = [&](int j) { return list_[size_t(j)].kind; };
        for (int j = 0; j < w; ++j)
            if (kindAt(j) != StepKind::F)
                return false;
        for (int i = 0; i < R; ++i)
            if (kindAt(w + 2 * i) != StepKind::F || kindAt(w + 2 * i + 1) != StepKind::B)
                return false;
        const int cool = w + 2 * R;
        if (!interleaved) {
            // Warm-up: recv_forward, forward, send_forward.
            for (int k = 0; k < w; ++k) {
                batch(k - 1, {}, {in(k)});
                batch(k, {out(k)}, {});
            }
            // Steady state: send_forward_recv_backward, send_backward_recv_forward.
            for (int i = 0; i < R; ++i) {
                const int f = w + 2 * i, b = f + 1;
                if (i == 0)
                    batch(f - 1, {}, {in(f)});
                batch(f, {out(f)}, {in(b)});
                batch(b, {out(b)}, {i + 1 < R ? in(b + 1) : -1});
            }
            // Cool-down: recv_backward, backward, send_backward.
            for (int j = cool; j < n; ++j) {
                batch(j - 1, {}, {in(j)});
                batch(j, {out(j)}, {});
            }
            return true;
        }
        batch(-1, {}, {in(0)});
        for (int k = 0; k < w; ++k) {
            if (k == w - 1 && R > 0) // send_forward_backward_recv_forward_backward
                batch(k, {out(k)}, {in(w), in(w + 1)});
            else // send_forward_recv_forward
                batch(k, {out(k)}, {k + 1 < w ? in(k + 1) : -1});
        }
        if (allWarm) // recv_backward
            batch(w - 1, {}, {in(w)});
        for (int i = 0; i < R; ++i) {
            const int f = w + 2 * i, b = f + 1;
            const int nextF = i + 1 < R ? f + 2 : -1;
            const int nextB = i + 1 < R ? b + 2 : (cool < n ? cool : -1);
            batch(b, {out(f), out(b)}, {in(nextF), in(nextB)});
        }
        for (int j = cool; j < n; ++j) // send_backward_recv_backward
            batch(j, {out(j)}, {in(j + 1)});
        return true;
    }

    // Megatron's interleaved 1F1B with overlap_p2p_comm; false when the list
    // does not have its shape.
    bool megatronOverlapped()
    {
        if (!megatron(true)) // the shape check, and the blocking batches to start from
            return false;
        groups.clear();
        const int n = int(list_.size());
        int forwards = 0, firstBackward = -1;
        for (int j = 0; j < n; ++j) {
            if (list_[size_t(j)].kind == StepKind::F)
                ++forwards;
            else if (firstBackward < 0)
                firstBackward = j;
        }
        const bool allWarm = firstBackward == forwards;
        const int w = allWarm ? forwards : firstBackward - 1;
        const int R = forwards - w;
        const int cool = w + 2 * R;
        auto isForward = [&](int j) { return j >= 0 && j < n && list_[size_t(j)].kind == StepKind::F; };
        // Posted after `step`, waited for before `sendWait` / `recvWait`.
        auto post = [&](int step, int send, int sendWait, int recv, int recvWait) {
            ExchangeGroup g;
            g.afterStep = step;
            if (send >= 0)
                g.ops.push_back({send, true, sendWait});
            if (recv >= 0)
                g.ops.push_back({recv, false, recvWait});
            if (!g.ops.empty())
                groups.push_back(std::move(g));
        };
        // Warm-up: recv_forward, then a blocking send_forward_recv_forward
        // after each forward; after the last, the first backward's gradient
        // is received without blocking.
        post(-1, -1, -1, in(0), 0);
        for (int k = 0; k < w; ++k) {
            post(k, out(k), k + 1, isForward(k + 1) ? in(k + 1) : -1, k + 1);
            if (k == w - 1 && R > 0)
                post(k, -1, -1, in(w + 1), w + 1);
        }
        if (allWarm) // recv_backward
            post(w - 1, -1, -1, in(w), w);
        // Steady state: after a forward, its output and the next forward's
        // input; after a backward, its gradient and the next backward's. A
        // send is waited for once the rank's next send that way is posted.
        for (int i = 0; i < R; ++i) {
            const int f = w + 2 * i, b = f + 1;
            const bool more = i + 1 < R;
            post(f, out(f), more ? b + 2 : n, more ? in(f + 2) : -1, f + 2);
            const int nextB = more ? b + 2 : (cool < n ? cool : -1);
            post(b, out(b), more ? b + 3 : n, nextB >= 0 ? in(nextB) : -1, nextB);
        }
        // Cool-down: blocking send_backward_recv_backward.
        for (int j = cool; j < n; ++j)
            post(j, out(j), j + 1, in(j + 1), j + 1);
        return true;
    }

    // Every input received in a batch before its step, every output sent in
    // one at or after it, each exactly once.
    bool complete(int messages) const
    {
        constexpr int kNone = -2, kTwice = -3;
        std::vector<int> recvAfter(size_t(messages), kNone), sendAfter(size_t(messages), kNone);
        waitOf_.assign(size_t(messages), -1);
        for (const ExchangeGroup& g : groups)
            for (const ExchangeOp& op : g.ops) {
                int& at = (op.send ? sendAfter : recvAfter)[size_t(op.message)];
                at = at == kNone ? g.afterStep : kTwice;
                if (!op.send)
                    waitOf_[size_t(op.message)] = waitStep(g, op);
                if (waitStep(g, op) <= g.afterStep || waitStep(g, op) > int(list_.size()))
                    return false; // waited for before it is posted, or past the end
            }
        for (int j = 0; j < int(list_.size()); ++j) {
            if (const int m = in(j); m >= 0) {
                const int at = recvAfter[size_t(m)];
                if (at == kNone || at == kTwice || at >= j)
                    return false;
                if (waitOf_[size_t(m)] > j)
                    return false; // used before it is waited for
            }
            if (const int m = out(j); m >= 0) {
                const int at = sendAfter[size_t(m)];
                if (at == kNone || at == kTwice || at < j)
                    return false;
            }
        }
        return true;
    }

    std::vector<ExchangeGroup> groups;

private:
    const Schedule& s_;
    int rank_;
    const std::vector<Action>& list_;
    mutable std::vector<int> waitOf_; // [message]: where its receive is waited for
};

} // namespace

MessageEnds messageEnds(const Schedule& s, int message)
{
    MessageEnds e;
    e.boundary = message / 2 / s.microbatches;
    e.microbatch = (message / 2) % s.microbatches;
    e.gradient = (message & 1) != 0;
    e.fromStage = e.gradient ? e.boundary + 1 : e.boundary;
    e.toStage = e.gradient ? e.boundary : e.boundary + 1;
    e.fromRank = s.rankOfStage[size_t(e.fromStage)];
    e.toRank = s.rankOfStage[size_t(e.toStage)];
    return e;
}

ExchangePlan exchangePlan(const Schedule& schedule)
{
    ExchangePlan plan;
    plan.messages = schedule.stages > 1 ? (schedule.stages - 1) * schedule.microbatches * 2 : 0;
    plan.ranks.resize(size_t(schedule.pp));
    const bool megatron = schedule.kind == ScheduleKind::OneFOneB || schedule.kind == ScheduleKind::Interleaved1F1B;
    for (int r = 0; r < schedule.pp && size_t(r) < schedule.ranks.size(); ++r) {
        RankPlan rp(schedule, r);
        if (!(megatron && rp.megatron(schedule.kind == ScheduleKind::Interleaved1F1B) && rp.complete(plan.messages)))
            rp.generic();
        plan.ranks[size_t(r)] = std::move(rp.groups);
    }
    return plan;
}

ExchangePlan megatronExchangePlan(const Schedule& schedule)
{
    if (schedule.kind != ScheduleKind::Interleaved1F1B)
        return exchangePlan(schedule);
    ExchangePlan plan;
    plan.messages = schedule.stages > 1 ? (schedule.stages - 1) * schedule.microbatches * 2 : 0;
    plan.ranks.resize(size_t(schedule.pp));
    for (int r = 0; r < schedule.pp && size_t(r) < schedule.ranks.size(); ++r) {
        RankPlan rp(schedule, r);
        if (!(rp.megatronOverlapped() && rp.complete(plan.messages)))
            return exchangePlan(schedule);
        plan.ranks[size_t(r)] = std::move(rp.groups);
    }
    return plan;
}

} // namespace pipescope
