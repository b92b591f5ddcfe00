#pragma once
// A pipeline job run the way Megatron-LM runs it, written out as a trace:
// the 1F1B and interleaved 1F1B loops of megatron/core/pipeline_parallel/
// schedules.py (warm-up counts, model-chunk order, which tensors each
// p2p_communication call sends and receives), with batch_isend_irecv and
// batch_p2p_sync on (the defaults): every call posts its sends and receives
// together, the compute stream waits for all of them, and the host then
// synchronizes before it launches the next step. NCCL matches the k-th send
// from one rank to another with the k-th receive there, and moves a message
// once both have posted.
//
// This is an independent model of those jobs: it shares no code with
// pipescope's replay, so tests can hold the replay's predictions against it.
#include "SyntheticTrace.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace pipescope::test {

struct MegatronSpec {
    int pp = 4;
    int v = 1;                       // model chunks per rank (interleaved when > 1)
    int microbatches = 8;
    int layers = 16;                 // transformer layers, split evenly over pp * v chunks
    TimeNs layerForwardNs = 400'000; // per microbatch
    double backwardRatio = 2.0;      // backward = ratio x forward
    TimeNs embeddingNs = 150'000;    // forward on the first chunk of rank 0
    TimeNs lossNs = 300'000;         // head and loss forward on the last chunk of the last rank
    int64_t activationBytes = 32 << 20;
    TimeNs p2pLatencyNs = 20'000;
    double p2pBytesPerNs = 200.0;    // 200 GB/s
    TimeNs launchNs = 8'000;         // host launch to kernel start between kernels
    TimeNs syncNs = 30'000;          // after an exchange: synchronize, then launch
    TimeNs optimizerNs = 500'000;
    double jitter = 0.01;            // each step's relative wobble, deterministic
    int iterations = 3;
    // Layers of each virtual stage (chunk c of rank r is c x pp + r); empty:
    // layers / (pp x v) each.
    std::vector<int> chunkLayers;
    // Data-parallel replicas: rank d x pp + r runs stage r of replica d; after
    // its last step each rank all-reduces its gradients with the other
    // replicas of its stage (the all-reduce ends allReduceNs after the last
    // of them joins), then runs the optimizer.
    int dp = 1;
    TimeNs allReduceNs = 2'000'000;
    std::map<int, double> rankSlowdown; // rank -> factor on its compute time
    // Replicas holding other sequences: (replica, microbatch) -> factor on
    // the compute of that microbatch on every stage of that replica.
    std::map<std::pair<int, int>, double> replicaMicrobatchScale;
    // v = 1: torch.distributed.pipelining's ScheduleGPipe instead of
    // Megatron's 1F1B: every forward, then every backward; before each step a
    // batch with its input's receive, waited for; after it a batch with its
    // output's send, not waited for until the phase ends.
    bool gpipe = false;
    // v = 1: torch's ZB1P (ScheduleInterleavedZeroBubble, ZB-H1 for one
    // chunk): p - r - 1 warm-up forwards, then a forward (while any remain)
    // and a backward-input step per round, rank r deferring its first r
    // backward-weight steps to the cool-down; exchanges posted as for gpipe.
    // A backward-input step takes inputShare of the backward, a weight step
    // the rest; steps are labelled as torch records them ("PP:1I0").
    bool zeroBubble = false;
    double inputShare = 0.5;
    // v > 1: Megatron's overlap_p2p_comm (its default for the interleaved
    // schedule; batch_p2p_comm is then off): warm-up and cool-down exchanges
    // as above, but in the steady state each step's sends and the next
    // step's receives are posted without waiting; a step waits for its own
    // receive, and a send is waited for once the next send that way is posted.
    bool overlapP2p = false;
    // The layer ranges the annotation helper records around each module's
    // kernels; false: a trace without them (per-layer costs unattributed).
    bool layerRanges = true;
};

struct MegatronRun {
    Trace trace;
    std::vector<TimeNs> iterationStart, iterationEnd;
};

namespace megatron_detail {

struct Instr {
    bool compute = true;
    // compute
    bool forward = true;
    int chunk = 0, microbatch = 0;
    // exchange: (peer, send?, tag) where tag is 0 for activations, 1 for gradients
    std::vector<std::tuple<int, bool, int>> ops;
    int part = 0;         // backward: 0 whole, 1 input gradient only, 2 weight gradient only
    bool wait = true;     // the compute stream waits for the exchange (false: posted only)
    bool waitAll = false; // waits for every exchange posted without waiting
    int waitRecv = -1;    // >= 0: waits for the oldest receive of this tag posted without waiting
    int waitSend = -1;    // >= 0: waits for every send of this tag posted without waiting but the newest
};

inline double wobble(uint64_t key, double amount)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return 1.0 + amount * (static_cast<double>(key % 20001) / 10000.0 - 1.0);
}

// One rank's program, as Megatron's loop issues it.
inline std::vector<Instr> program(const MegatronSpec& s, int r)
{
    const int p = s.pp, v = s.v, m = s.microbatches;
    std::vector<Instr> out;
    const int prev = (r + p - 1) % p, next = (r + 1) % p;
    auto compute = [&](bool forward, int chunk, int mb) {
        Instr i;
        i.forward = forward;
        i.chunk = chunk;
        i.microbatch = mb;
        out.push_back(i);
    };
    auto comm = [&](std::vector<std::tuple<int, bool, int>> ops) {
        if (ops.empty())
            return;
        Instr i;
        i.compute = false;
        i.ops = std::move(ops);
        out.push_back(i);
    };
    auto firstVirtual = [&](int chunk) { return chunk == 0 && r == 0; };
    auto lastVirtual = [&](int chunk) { return chunk == v - 1 && r == p - 1; };
    using Ops = std::vector<std::tuple<int, bool, int>>;
    auto post = [&](Ops ops) {
        if (ops.empty())
            return;
        Instr i;
        i.compute = false;
        i.ops = std::move(ops);
        i.wait = false;
        out.push_back(i);
    };
    auto waitAll = [&] {
        Instr i;
        i.compute = false;
        i.waitAll = true;
        out.push_back(i);
    };
    if (v == 1 && s.zeroBubble) {
        const bool first = r == 0, last = r == p - 1;
        const int w = std::min(p - 1 - r, m);
        auto part = [&](int which, int mb) {
            Instr i;
            i.forward = false;
            i.part = which;
            i.microbatch = mb;
            out.push_back(i);
        };
        for (int i = 0; i < w; ++i) {
            comm(first ? Ops{} : Ops{{prev, false, 0}});
            compute(true, 0, i);
            post(last ? Ops{} : Ops{{next, true, 0}});
        }
        int weights = 0;
        for (int op = w; op < m + w; ++op) {
            if (op < m) {
                comm(first ? Ops{} : Ops{{prev, false, 0}});
                compute(true, 0, op);
                post(last ? Ops{} : Ops{{next, true, 0}});
            }
            comm(last ? Ops{} : Ops{{next, false, 1}});
            part(1, op - w);
            post(first ? Ops{} : Ops{{prev, true, 1}});
            if (op - w >= r)
                part(2, weights++);
        }
        while (weights < m)
            part(2, weights++);
        waitAll();
        return out;
    }
    if (v == 1 && s.gpipe) {
        const bool first = r == 0, last = r == p - 1;
        for (int i = 0; i < m; ++i) {
            comm(first ? Ops{} : Ops{{prev, false, 0}});
            compute(true, 0, i);
            post(last ? Ops{} : Ops{{next, true, 0}});
        }
        waitAll();
        for (int i = 0; i < m; ++i) {
            comm(last ? Ops{} : Ops{{next, false, 1}});
            compute(false, 0, i);
            post(first ? Ops{} : Ops{{prev, true, 1}});
        }
        waitAll();
        return out;
    }
    if (v == 1) {
        const int w = std::min(p - r - 1, m), R = m - w;
        const bool first = r == 0, last = r == p - 1;
        for (int i = 0; i < w; ++i) {
            comm(first ? Ops{} : Ops{{prev, false, 0}}); // recv_forward
            compute(true, 0, i);
            comm(last ? Ops{} : Ops{{next, true, 0}});   // send_forward
        }
        if (R > 0)
            comm(first ? Ops{} : Ops{{prev, false, 0}});
        for (int i = 0; i < R; ++i) {
            compute(true, 0, w + i);
            comm(last ? Ops{} : Ops{{next, true, 0}, {next, false, 1}}); // send_forward_recv_backward
            compute(false, 0, i);
            Ops o;
            if (!first)
                o.push_back({prev, true, 1});
            if (!first && i + 1 < R)
                o.push_back({prev, false, 0}); // send_backward_recv_forward
            comm(o);
        }
        for (int i = R; i < m; ++i) {
            comm(last ? Ops{} : Ops{{next, false, 1}}); // recv_backward
            compute(false, 0, i);
            comm(first ? Ops{} : Ops{{prev, true, 1}}); // send_backward
        }
        return out;
    }
    const int total = m * v;
    int w = (p - r - 1) * 2 + (v - 1) * p;
    bool allWarm = false;
    if (m == p) {
        w = total;
        allWarm = true;
    } else if (w >= total) {
        w = total;
        allWarm = true;
    }
    const int R = total - w;
    auto chunkF = [&](int k) { return (k % (p * v)) / p; };
    auto chunkB = [&](int k) { return v - 1 - chunkF(k); };
    auto mbOf = [&](int k) { return (k / (p * v)) * p + k % p; };
    auto recvF = [&](Ops& o, int k) {
        if (k < total && !firstVirtual(chunkF(k)))
            o.push_back({prev, false, 0});
    };
    auto recvB = [&](Ops& o, int k) {
        if (k < total && !lastVirtual(chunkB(k)))
            o.push_back({next, false, 1});
    };
    auto sendF = [&](Ops& o, int k) {
        if (!lastVirtual(chunkF(k)))
            o.push_back({next, true, 0});
    };
    auto sendB = [&](Ops& o, int k) {
        if (!firstVirtual(chunkB(k)))
            o.push_back({prev, true, 1});
    };
    {
        Ops o;
        recvF(o, 0);
        comm(o);
    }
    for (int k = 0; k < w; ++k) {
        compute(true, chunkF(k), mbOf(k));
        Ops o;
        sendF(o, k);
        recvF(o, k + 1);
        if (k == w - 1 && !allWarm)
            recvB(o, 0);
        comm(o);
    }
    if (allWarm) {
        Ops o;
        recvB(o, 0);
        comm(o);
    }
    auto waitFor = [&](int recvTag, int sendTag) {
        Instr i;
        i.compute = false;
        i.waitRecv = recvTag;
        i.waitSend = sendTag;
        out.push_back(i);
    };
    if (s.overlapP2p) {
        // The warm-up's last exchange above received the first backward's
        // gradient too; Megatron posts that receive without waiting. Move it.
        if (!allWarm && w > 0) {
            Instr& last = out.back();
            Ops keep, later;
            for (const auto& op : last.ops)
                (std::get<2>(op) == 1 && !std::get<1>(op) ? later : keep).push_back(op);
            last.ops = keep;
            if (last.ops.empty())
                out.pop_back();
            post(later);
        }
        for (int i = 0; i < R; ++i) {
            const int fk = w + i;
            if (!firstVirtual(chunkF(fk)))
                waitFor(0, -1);
            compute(true, chunkF(fk), mbOf(fk));
            Ops f;
            sendF(f, fk);
            if (i + 1 < R)
                recvF(f, fk + 1);
            post(f);
            waitFor(-1, 0);
            if (!lastVirtual(chunkB(i)))
                waitFor(1, -1);
            compute(false, chunkB(i), mbOf(i));
            Ops b;
            sendB(b, i);
            recvB(b, i + 1);
            post(b);
            waitFor(-1, 1);
        }
        for (int k = R; k < total; ++k) {
            if (!lastVirtual(chunkB(k)))
                waitFor(1, -1);
            compute(false, chunkB(k), mbOf(k));
            Ops o;
            sendB(o, k);
            recvB(o, k + 1);
            comm(o);
        }
        waitAll();
        return out;
    }
    for (int i = 0; i < R; ++i) {
        const int fk = w + i;
        compute(true, chunkF(fk), mbOf(fk));
        compute(false, chunkB(i), mbOf(i));
        Ops o;
        sendF(o, fk);
        sendB(o, i);
        recvF(o, fk + 1);
        recvB(o, i + 1);
        comm(o);
    }
    for (int k = R; k < total; ++k) {
        compute(false, chunkB(k), mbOf(k));
        Ops o;
        sendB(o, k);
        recvB(o, k + 1);
        comm(o);
    }
    return out;
}

} // namespace megatron_detail

inline MegatronRun megatronTrace(const MegatronSpec& s)
{
    using megatron_detail::Instr;
    const int p = s.pp, v = s.v, dp = std::max(1, s.dp), world = p * dp;
    std::vector<int> chunkLayers = s.chunkLayers;
    if (chunkLayers.empty()) {
        if (s.layers % (p * v) != 0)
            throw std::invalid_argument("layers must split evenly over the chunks");
        chunkLayers.assign(size_t(p * v), s.layers / (p * v));
    }
    if (static_cast<int>(chunkLayers.size()) != p * v)
        throw std::invalid_argument("chunkLayers needs one count per virtual stage");
    std::vector<int> firstLayer(size_t(p * v), 0);
    for (int c = 1; c < p * v; ++c)
        firstLayer[size_t(c)] = firstLayer[size_t(c - 1)] + chunkLayers[size_t(c - 1)];
    TraceBuilder tb;
    MegatronRun run;
    auto pipelineGroup = [&](int d) {
        std::vector<int> g;
        for (int r = 0; r < p; ++r)
            g.push_back(d * p + r);
        return g;
    };
    auto replicaGroup = [&](int r) {
        std::vector<int> g;
        for (int d = 0; d < dp; ++d)
            g.push_back(d * p + r);
        return g;
    };
    TimeNs t0 = 1'000'000'000;
    for (int iter = 0; iter < s.iterations; ++iter) {
        std::vector<std::vector<Instr>> prog;
        for (int g = 0; g < world; ++g)
            prog.push_back(megatron_detail::program(s, g % p));
        std::vector<size_t> pc(size_t(world), 0);
        std::vector<TimeNs> cursor(size_t(world), t0);
        std::vector<char> posted(size_t(world), 0);
        // channel (src, dst, tag) -> post times of its sends and receives, in order
        std::map<std::tuple<int, int, int>, std::vector<TimeNs>> sendPosts, recvPosts;
        std::vector<std::vector<size_t>> opIndex(static_cast<size_t>(world)); // the current exchange's op positions
        // Exchanges posted without waiting: (peer, send?, tag, index in its channel, posted at).
        std::vector<std::vector<std::tuple<int, bool, int, size_t, TimeNs>>> outstanding(static_cast<size_t>(world));
        auto transferEnd = [&](TimeNs both) {
            return both + s.p2pLatencyNs + TimeNs(double(s.activationBytes) / s.p2pBytesPerNs);
        };
        auto channelOf = [](int self, int peer, bool send, int tag) {
            return send ? std::make_tuple(self, peer, tag) : std::make_tuple(peer, self, tag);
        };
        bool progress = true;
        while (progress) {
            progress = false;
            for (int g = 0; g < world; ++g) {
                const int r = g % p, d = g / p;
                const std::vector<int> group = pipelineGroup(d);
                while (pc[size_t(g)] < prog[size_t(g)].size()) {
                    const Instr& in = prog[size_t(g)][pc[size_t(g)]];
                    TimeNs& t = cursor[size_t(g)];
                    if (in.compute) {
                        // The chunk's modules in forward order (embedding, its layers, the head
                        // and loss), each kernel launched inside its pipescope/layer range, as the
                        // annotation helper records them; backward runs them in reverse.
                        const int virt = in.chunk * p + r;
                        std::vector<std::pair<std::string, double>> parts;
                        if (virt == 0)
                            parts.push_back({"embed", double(s.embeddingNs)});
                        for (int l = 0; l < chunkLayers[size_t(virt)]; ++l)
                            parts.push_back({"layers." + std::to_string(firstLayer[size_t(virt)] + l), double(s.layerForwardNs)});
                        if (virt == p * v - 1)
                            parts.push_back({"lm_head", double(s.lossNs)});
                        if (!in.forward)
                            std::reverse(parts.begin(), parts.end());
                        const uint64_t key = (uint64_t(iter) << 40) ^ (uint64_t(g) << 32) ^ (uint64_t(in.chunk) << 24) ^
                                             (uint64_t(in.microbatch) << 8) ^ uint64_t(in.forward);
                        const auto slow = s.rankSlowdown.find(g);
                        const auto data = s.replicaMicrobatchScale.find({d, in.microbatch});
                        const double share = in.part == 1 ? s.inputShare : in.part == 2 ? 1.0 - s.inputShare : 1.0;
                        const double scale = megatron_detail::wobble(key ^ (uint64_t(in.part) << 4), s.jitter) *
                                             (in.forward ? 1.0 : s.backwardRatio * share) *
                                             (slow != s.rankSlowdown.end() ? slow->second : 1.0) *
                                             (data != s.replicaMicrobatchScale.end() ? data->second : 1.0);
                        const TimeNs start = t + s.launchNs;
                        TimeNs k = start;
                        for (const auto& [module, ns] : parts) {
                            const TimeNs len = TimeNs(ns * scale);
                            const TimeNs launch = k - s.launchNs;
                            tb.kernel(g, 7, in.forward ? "sm90_xmma_gemm_bf16_fprop" : "sm90_xmma_gemm_bf16_dgrad", k, k + len,
                                      launch);
                            if (in.forward && s.layerRanges)
                                tb.range(g, CpuRangeKind::Nvtx, "pipescope/layer " + module, launch - 100, launch + 1'000);
                            k += len;
                        }
                        const std::string label =
                            s.zeroBubble ? "PP:" + std::to_string(r) + (in.forward ? "F" : in.part == 1 ? "I" : "W") +
                                               std::to_string(in.microbatch)
                                         : std::string(in.forward ? "pipescope/forward" : "pipescope/backward") + " mb=" +
                                               std::to_string(in.microbatch) + " stage=" + std::to_string(r) +
                                               " chunk=" + std::to_string(in.chunk);
                        tb.range(g, CpuRangeKind::Nvtx, label, start - s.launchNs - 500, k - s.launchNs + 1);
                        t = k;
                        ++pc[size_t(g)];
                        progress = true;
                        continue;
                    }
                    if (in.waitAll || in.waitRecv >= 0 || in.waitSend >= 0) {
                        // Wait for exchanges posted without waiting: all of them, the oldest
                        // receive of a tag, or every send of a tag but the newest.
                        auto& pending = outstanding[size_t(g)];
                        std::vector<size_t> chosen;
                        for (size_t q = 0; q < pending.size(); ++q) {
                            const bool send = std::get<1>(pending[q]);
                            const int tag = std::get<2>(pending[q]);
                            if (in.waitAll || (send && tag == in.waitSend) || (!send && tag == in.waitRecv))
                                chosen.push_back(q);
                        }
                        if (in.waitRecv >= 0 && chosen.size() > 1)
                            chosen.resize(1);
                        else if (in.waitSend >= 0 && !chosen.empty())
                            chosen.pop_back();
                        // When an outstanding exchange lands; -1 while its peer has not posted.
                        auto landing = [&](size_t q) -> TimeNs {
                            const auto& [peer, send, tag, idx, at] = pending[q];
                            const auto& other = send ? recvPosts[channelOf(g, peer, send, tag)] : sendPosts[channelOf(g, peer, send, tag)];
                            return other.size() <= idx ? -1 : transferEnd(std::max(at, other[idx]));
                        };
                        TimeNs done = t;
                        bool ready = true;
                        for (size_t q : chosen) {
                            const TimeNs end = landing(q);
                            ready = ready && end >= 0;
                            done = std::max(done, end);
                        }
                        if (!ready)
                            break;
                        for (auto q = chosen.rbegin(); q != chosen.rend(); ++q) {
                            const auto& [peer, send, tag, idx, at] = pending[*q];
                            tb.nccl(g, 24, send ? "Send" : "Recv", at, landing(*q), peer, s.activationBytes, group);
                            pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(*q));
                        }
                        t = done;
                        ++pc[size_t(g)];
                        progress = true;
                        continue;
                    }
                    // An exchange: post every op once, then (unless it is only posted) wait for the peers.
                    if (!posted[size_t(g)]) {
                        posted[size_t(g)] = 1;
                        opIndex[size_t(g)].clear();
                        for (const auto& [stagePeer, send, tag] : in.ops) {
                            const int peer = d * p + stagePeer;
                            auto& posts = send ? sendPosts[channelOf(g, peer, send, tag)] : recvPosts[channelOf(g, peer, send, tag)];
                            opIndex[size_t(g)].push_back(posts.size());
                            if (!in.wait)
                                outstanding[size_t(g)].emplace_back(peer, send, tag, posts.size(), t);
                            posts.push_back(t);
                        }
                        progress = true;
                    }
                    if (!in.wait) {
                        posted[size_t(g)] = 0;
                        ++pc[size_t(g)];
                        continue;
                    }
                    bool ready = true;
                    TimeNs done = t;
                    std::vector<TimeNs> ends;
                    for (size_t o = 0; o < in.ops.size(); ++o) {
                        const auto& [stagePeer, send, tag] = in.ops[o];
                        const int peer = d * p + stagePeer;
                        const auto& other = send ? recvPosts[channelOf(g, peer, send, tag)] : sendPosts[channelOf(g, peer, send, tag)];
                        const size_t idx = opIndex[size_t(g)][o];
                        if (other.size() <= idx) {
                            ready = false;
                            break;
                        }
                        const TimeNs end = transferEnd(std::max(t, other[idx]));
                        ends.push_back(end);
                        done = std::max(done, end);
                    }
                    if (!ready)
                        break;
                    for (size_t o = 0; o < in.ops.size(); ++o) {
                        const auto& [stagePeer, send, tag] = in.ops[o];
                        tb.nccl(g, 20 + int64_t(o), send ? "Send" : "Recv", t, ends[o], d * p + stagePeer, s.activationBytes, group);
                    }
                    t = done + s.syncNs - s.launchNs;
                    posted[size_t(g)] = 0;
                    ++pc[size_t(g)];
                    progress = true;
                }
            }
        }
        for (int g = 0; g < world; ++g)
            if (pc[size_t(g)] < prog[size_t(g)].size())
                throw std::logic_error("the Megatron program deadlocks at rank " + std::to_string(g));
        // The gradient all-reduce over each stage's replicas, then the optimizer.
        std::vector<TimeNs> joinAt(static_cast<size_t>(world));
        for (int g = 0; g < world; ++g)
            joinAt[size_t(g)] = cursor[size_t(g)] + s.launchNs;
        if (dp > 1)
            for (int r = 0; r < p; ++r) {
                TimeNs last = 0;
                for (int rr : replicaGroup(r))
                    last = std::max(last, joinAt[size_t(rr)]);
                for (int rr : replicaGroup(r)) {
                    tb.nccl(rr, 22, "AllReduce", joinAt[size_t(rr)], last + s.allReduceNs, std::nullopt,
                            s.activationBytes * 16, replicaGroup(r));
                    joinAt[size_t(rr)] = last + s.allReduceNs + s.launchNs;
                }
            }
        TimeNs end = t0;
        for (int g = 0; g < world; ++g) {
            const TimeNs start = joinAt[size_t(g)];
            tb.kernel(g, 7, "multi_tensor_apply_kernel_adam", start, start + s.optimizerNs, start - s.launchNs);
            end = std::max(end, start + s.optimizerNs);
        }
        for (int g = 0; g < world; ++g)
            tb.range(g, CpuRangeKind::Annotation, "ProfilerStep#" + std::to_string(iter + 1), t0 - 50'000, end + 10'000);
        run.iterationStart.push_back(t0);
        run.iterationEnd.push_back(end);
        t0 = end + 200'000;
    }
    run.trace = tb.build();
    return run;
}

} // namespace pipescope::test
