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
    const int p = s.pp, v = s.v;
    if (s.layers % (p * v) != 0)
        throw std::invalid_argument("layers must split evenly over the chunks");
    const int perChunk = s.layers / (p * v);
    TraceBuilder tb;
    MegatronRun run;
    std::vector<int> group;
    for (int r = 0; r < p; ++r)
        group.push_back(r);
    TimeNs t0 = 1'000'000'000;
    for (int iter = 0; iter < s.iterations; ++iter) {
        std::vector<std::vector<Instr>> prog;
        for (int r = 0; r < p; ++r)
            prog.push_back(megatron_detail::program(s, r));
        std::vector<size_t> pc(size_t(p), 0);
        std::vector<TimeNs> cursor(size_t(p), t0);
        std::vector<char> posted(size_t(p), 0);
        // channel (src, dst, tag) -> post times of its sends and receives, in order
        std::map<std::tuple<int, int, int>, std::vector<TimeNs>> sendPosts, recvPosts;
        std::map<std::tuple<int, int, int>, size_t> sendCount, recvCount; // ops posted so far per channel
        std::vector<std::vector<size_t>> opIndex(static_cast<size_t>(p)); // the current exchange's op positions
        bool progress = true;
        while (progress) {
            progress = false;
            for (int r = 0; r < p; ++r) {
                while (pc[size_t(r)] < prog[size_t(r)].size()) {
                    const Instr& in = prog[size_t(r)][pc[size_t(r)]];
                    TimeNs& t = cursor[size_t(r)];
                    if (in.compute) {
                        // The chunk's modules in forward order (embedding, its layers, the head
                        // and loss), each kernel launched inside its pipescope/layer range, as the
                        // annotation helper records them; backward runs them in reverse.
                        const int virt = in.chunk * p + r;
                        std::vector<std::pair<std::string, double>> parts;
                        if (virt == 0)
                            parts.push_back({"embed", double(s.embeddingNs)});
                        for (int l = 0; l < perChunk; ++l)
                            parts.push_back({"layers." + std::to_string(virt * perChunk + l), double(s.layerForwardNs)});
                        if (virt == p * v - 1)
                            parts.push_back({"lm_head", double(s.lossNs)});
                        if (!in.forward)
                            std::reverse(parts.begin(), parts.end());
                        const uint64_t key = (uint64_t(iter) << 40) ^ (uint64_t(r) << 32) ^ (uint64_t(in.chunk) << 24) ^
                                             (uint64_t(in.microbatch) << 8) ^ uint64_t(in.forward);
                        const double scale = megatron_detail::wobble(key, s.jitter) * (in.forward ? 1.0 : s.backwardRatio);
                        const TimeNs start = t + s.launchNs;
                        TimeNs k = start;
                        for (const auto& [module, ns] : parts) {
                            const TimeNs len = TimeNs(ns * scale);
                            const TimeNs launch = k - s.launchNs;
                            tb.kernel(r, 7, in.forward ? "sm90_xmma_gemm_bf16_fprop" : "sm90_xmma_gemm_bf16_dgrad", k, k + len,
                                      launch);
                            if (in.forward)
                                tb.range(r, CpuRangeKind::Nvtx, "pipescope/layer " + module, launch - 100, launch + 1'000);
                            k += len;
                        }
                        const std::string label = std::string(in.forward ? "pipescope/forward" : "pipescope/backward") +
                                                  " mb=" + std::to_string(in.microbatch) + " stage=" + std::to_string(r) +
                                                  " chunk=" + std::to_string(in.chunk);
                        tb.range(r, CpuRangeKind::Nvtx, label, start - s.launchNs - 500, k - s.launchNs + 1);
                        t = k;
                        ++pc[size_t(r)];
                        progress = true;
                        continue;
                    }
                    // An exchange: post every op once, then wait for the peers.
                    if (!posted[size_t(r)]) {
                        posted[size_t(r)] = 1;
                        opIndex[size_t(r)].clear();
                        for (const auto& [peer, send, tag] : in.ops) {
                            const auto ch = send ? std::make_tuple(r, peer, tag) : std::make_tuple(peer, r, tag);
                            auto& posts = send ? sendPosts[ch] : recvPosts[ch];
                            opIndex[size_t(r)].push_back(posts.size());
                            posts.push_back(t);
                        }
                        progress = true;
                    }
                    bool ready = true;
                    TimeNs done = t;
                    std::vector<TimeNs> ends;
                    for (size_t o = 0; o < in.ops.size(); ++o) {
                        const auto& [peer, send, tag] = in.ops[o];
                        const auto ch = send ? std::make_tuple(r, peer, tag) : std::make_tuple(peer, r, tag);
                        const auto& other = send ? recvPosts[ch] : sendPosts[ch];
                        const size_t idx = opIndex[size_t(r)][o];
                        if (other.size() <= idx) {
                            ready = false;
                            break;
                        }
                        const TimeNs both = std::max(t, other[idx]);
                        const TimeNs end = both + s.p2pLatencyNs + TimeNs(double(s.activationBytes) / s.p2pBytesPerNs);
                        ends.push_back(end);
                        done = std::max(done, end);
                    }
                    if (!ready)
                        break;
                    for (size_t o = 0; o < in.ops.size(); ++o) {
                        const auto& [peer, send, tag] = in.ops[o];
                        tb.nccl(r, 20 + int64_t(o), send ? "Send" : "Recv", t, ends[o], peer, s.activationBytes, group);
                    }
                    t = done + s.syncNs - s.launchNs;
                    posted[size_t(r)] = 0;
                    ++pc[size_t(r)];
                    progress = true;
                }
            }
        }
        for (int r = 0; r < p; ++r)
            if (pc[size_t(r)] < prog[size_t(r)].size())
                throw std::logic_error("the Megatron program deadlocks at rank " + std::to_string(r));
        TimeNs end = t0;
        for (int r = 0; r < p; ++r) {
            const TimeNs start = cursor[size_t(r)] + s.launchNs;
            tb.kernel(r, 7, "multi_tensor_apply_kernel_adam", start, start + s.optimizerNs, start - s.launchNs);
            end = std::max(end, start + s.optimizerNs);
        }
        for (int r = 0; r < p; ++r)
            tb.range(r, CpuRangeKind::Annotation, "ProfilerStep#" + std::to_string(iter + 1), t0 - 50'000, end + 10'000);
        run.iterationStart.push_back(t0);
        run.iterationEnd.push_back(end);
        t0 = end + 200'000;
    }
    run.trace = tb.build();
    return run;
}

} // namespace pipescope::test
