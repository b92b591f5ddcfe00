#include "simulate/KinetoEmitter.h"
#include "simulate/detail/KinetoSteps.h"

#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "util/JsonText.h"
#include "util/TraceEventWriter.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <tuple>

namespace pipescope::simulate {

using namespace pipescope::whatif;

namespace {

// Unix time of the simulated run (2024-01-01), so timestamps look real.
constexpr int64_t kBaseTimeNs = 1'704'067'200'000'000'000;
constexpr TimeNs kLeadNs = 20'000;     // the CPU runs this far ahead of the GPU
constexpr TimeNs kKernelGapNs = 1'000; // between kernels of one step
constexpr TimeNs kIterationGapNs = 400'000;
constexpr int kComputeStream = 7;
constexpr int kCommStream = 20;

struct KernelShape {
    const char* name;
    double share;
};

// Kernel mixes of a transformer layer's steps (Hopper, bf16).
const std::vector<KernelShape>& kernelsOf(StepKind k)
{
    static const std::vector<KernelShape> f{
        {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>", 0.06},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 0.38},
        {"flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, true, true, false, false>", 0.22},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 0.29},
        // PyTorch's elementwise kernels carry their functor's lambdas in the name.
        {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
         "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
         "at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::"
         "{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
         0.05}};
    static const std::vector<KernelShape> b{
        {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
         "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, "
         "c10::BFloat16)#1}, at::detail::Array<char*, 3> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
         "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, "
         "c10::BFloat16)#1}, at::detail::Array<char*, 3>)",
         0.05},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 0.33},
        {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, false, false, false, false, false>", 0.25},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 0.31},
        {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>", 0.06}};
    static const std::vector<KernelShape> i{
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 0.55},
        {"flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t>, true, false, false, false, false, false>", 0.35},
        {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>", 0.10}};
    static const std::vector<KernelShape> w{
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 0.9},
        {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >", 0.1}};
    switch (k) {
    case StepKind::F: return f;
    case StepKind::B: return b;
    case StepKind::I: return i;
    case StepKind::W: return w;
    }
    return f;
}

const char* annotationOf(StepKind k)
{
    switch (k) {
    case StepKind::F: return "forward_step";
    case StepKind::B: return "backward_step";
    case StepKind::I: return "backward_input_step";
    case StepKind::W: return "backward_weight_step";
    }
    return "forward_step";
}

class Rng {
public:
    explicit Rng(uint64_t seed) : g_(seed) {}
    double uniform() { return static_cast<double>(g_() >> 11) * (1.0 / 9007199254740992.0); } // [0, 1)
    double symmetric() { return 2.0 * uniform() - 1.0; }

private:
    std::mt19937_64 g_;
};

// The prediction's memory over time moved onto one replayed iteration: the
// step function's times are carried from the prediction's replay to this one
// by the rank's steps (same steps, same order; between two step edges
// linearly), its bytes unchanged.
std::vector<MemoryPoint> memoryOn(const RankMemory& m, const RankReplay& predicted, const RankReplay& replayed)
{
    std::vector<std::pair<TimeNs, TimeNs>> anchors{{0, 0}};
    if (predicted.actions.size() == replayed.actions.size())
        for (size_t i = 0; i < predicted.actions.size(); ++i) {
            anchors.emplace_back(predicted.actions[i].start, replayed.actions[i].start);
            anchors.emplace_back(predicted.actions[i].end, replayed.actions[i].end);
        }
    std::vector<MemoryPoint> out;
    out.reserve(m.overTime.size());
    TimeNs last = 0;
    for (const MemoryPoint& pt : m.overTime) {
        auto hi = std::lower_bound(anchors.begin(), anchors.end(), pt.t,
                                   [](const std::pair<TimeNs, TimeNs>& a, TimeNs t) { return a.first < t; });
        TimeNs t;
        if (hi != anchors.end() && hi->first == pt.t) {
            t = hi->second;
        } else {
            const auto& lo = *std::prev(hi); // anchors[0] is at 0 and points are not before it
            if (hi == anchors.end() || hi->first == lo.first)
                t = lo.second + (pt.t - lo.first);
            else
                t = lo.second + static_cast<TimeNs>(std::llround(static_cast<double>(pt.t - lo.first) *
                                                                 static_cast<double>(hi->second - lo.second) /
                                                                 static_cast<double>(hi->first - lo.first)));
        }
        last = std::max(last, t); // keep the order of the points
        out.push_back({last, pt.bytes});
    }
    return out;
}

// A complete event as the profiler writes it: always with an args object
// (empty when there are none) and never with a negative duration. `args`
// writes the args' members.
template <class WriteArgs>
void complete(TraceEventWriter& w, std::string_view cat, std::string_view name, int pid, int tid, TimeNs ts, TimeNs dur,
              WriteArgs&& args)
{
    w.beginComplete(cat, name, pid, tid, ts, std::max<TimeNs>(dur, 0));
    w.beginArgs();
    args();
    w.endArgs();
    w.endEvent();
}

void complete(TraceEventWriter& w, std::string_view cat, std::string_view name, int pid, int tid, TimeNs ts, TimeNs dur)
{
    complete(w, cat, name, pid, tid, ts, dur, [] {});
}

// The CPU side of a kernel launch: the runtime call, and the start of the
// flow that links it to its kernel.
void writeLaunch(TraceEventWriter& w, int pid, int tid, TimeNs ts, TimeNs dur, int64_t id)
{
    complete(w, "cuda_runtime", "cudaLaunchKernel", pid, tid, ts, dur, [&] { w.arg("correlation", id); });
    w.flowStart("ac2g", "ac2g", id, pid, tid, ts);
}

// A kernel on device `pid`'s stream, with the end of its launch's flow;
// `comm`: the NCCL args of a communication kernel.
void writeKernel(TraceEventWriter& w, std::string_view name, int pid, int stream, TimeNs ts, TimeNs dur, int64_t id,
                 const detail::CommArgs* comm)
{
    complete(w, "kernel", name, pid, stream, ts, dur, [&] {
        w.arg("device", pid);
        w.arg("stream", stream);
        w.arg("correlation", id);
        if (comm)
            detail::writeCommArgs(w, *comm);
    });
    w.flowEnd("ac2g", "ac2g", id, pid, stream, ts);
}

// What PyTorch's profiler writes with with_stack=True around a step's
// kernels: on the main thread (tid 1) the stage's model and its modules as
// python_function events ("nn.Module: <Class>_<n>", with Python id and
// parent id), each kernel launched from an op carrying autograd's sequence
// number; on the autograd thread (tid 2) each backward kernel launched from
// evaluate_function with the number of the forward op it differentiates, and
// a fwdbwd flow from that op. Layers run in the partition's order with the
// cost model's per-layer times; the first and last stage's extras are the
// embedding and the head.
class ModuleWriter {
public:
    ModuleWriter(TraceEventWriter& w, const CostModel* cm, const Prediction& p, int pid, int64_t& corr, int64_t& kernels)
        : w_(w), cm_(cm), p_(p), pid_(pid), corr_(corr), kernels_(kernels)
    {
    }
    void newIteration() { forward_.clear(); }
    void step(const TimedAction& a, TimeNs g0, TimeNs g1);

private:
    struct Unit {
        std::string cls;
        int instance = 0;
        double weight = 0;
    };
    struct Kernel {
        size_t unit;
        size_t mixIndex;
        TimeNs start, dur;
    };
    struct ForwardOp {
        int64_t seq, flow;
        bool linked = false;
    };
    std::vector<Unit> units(const TimedAction& a) const;
    static std::vector<Kernel> layout(const std::vector<Unit>& us, const std::vector<KernelShape>& mix, size_t perUnit,
                                      bool forward, TimeNs g0, TimeNs g1);
    static TimeNs launchAt(const Kernel& k) { return k.start - kLeadNs + 3'000; }
    void moduleCalls(const TimedAction& a, const std::vector<Unit>& us, const std::vector<Kernel>& ks);
    void autogradOp(const TimedAction& a, const Kernel& k, int tid);
    void fwdbwd(bool start, int64_t id, int tid, TimeNs ts)
    {
        if (start)
            w_.flowStart("fwdbwd", "fwdbwd", id, pid_, tid, ts);
        else
            w_.flowEnd("fwdbwd", "fwdbwd", id, pid_, tid, ts);
    }
    int64_t python(const std::string& name, TimeNs start, TimeNs end, int64_t parent, std::optional<int> moduleId)
    {
        const int64_t id = ++pythonId_;
        complete(w_, "python_function", name, pid_, 1, start, end - start, [&] {
            if (parent > 0)
                w_.arg("Python parent id", parent);
            else
                w_.arg("Python parent id", RawJson{"null"});
            w_.arg("Python id", id);
            if (moduleId)
                w_.arg("Python module id", *moduleId);
        });
        return id;
    }

    TraceEventWriter& w_;
    const CostModel* cm_;
    const Prediction& p_;
    int pid_;
    int64_t& corr_;
    int64_t& kernels_;
    int64_t pythonId_ = 0, seq_ = 0, flow_ = 0, external_ = 0;
    // (chunk, microbatch, unit, kernel of the unit's forward) -> its op
    std::map<std::tuple<int, int, size_t, size_t>, ForwardOp> forward_;
    std::map<std::tuple<int, int, size_t>, size_t> forwardKernels_;
};

std::vector<ModuleWriter::Unit> ModuleWriter::units(const TimedAction& a) const
{
    const Partition& part = p_.partition;
    const int S = part.stages();
    auto weight = [&](const LayerCostModel& l) {
        switch (a.kind) {
        case StepKind::F: return l.forwardNs;
        case StepKind::B: return l.backwardNs;
        case StepKind::I: return l.backwardNs * l.backwardInputShare;
        case StepKind::W: return l.backwardNs * (1.0 - l.backwardInputShare);
        }
        return l.forwardNs;
    };
    std::vector<Unit> u;
    if (a.stage == 0 && weight(cm_->firstStageExtra) > 0)
        u.push_back({"Embedding", 0, weight(cm_->firstStageExtra)});
    // Module instances are numbered per class over the process: a rank's
    // earlier chunks hold the first blocks.
    int base = 0;
    for (int s = 0; s < a.stage; ++s)
        if (p_.schedule.rankOfStage[size_t(s)] == p_.schedule.rankOfStage[size_t(a.stage)])
            base += part.layersOf(s);
    for (int l = part.firstLayer[size_t(a.stage)]; l < part.firstLayer[size_t(a.stage) + 1]; ++l)
        u.push_back({"TransformerBlock", base + l - part.firstLayer[size_t(a.stage)], weight(cm_->layers[size_t(l)])});
    if (a.stage == S - 1 && weight(cm_->lastStageExtra) > 0)
        u.push_back({"Linear", 0, weight(cm_->lastStageExtra)});
    return u;
}

// The step's kernels in [g0, g1]: each unit (in reverse for a backward) runs
// `perUnit` kernels of the mix, in its share of the time by the units'
// weights and the mix's shares, at least 3 us each, kKernelGapNs apart.
std::vector<ModuleWriter::Kernel> ModuleWriter::layout(const std::vector<Unit>& us, const std::vector<KernelShape>& mix,
                                                       size_t perUnit, bool forward, TimeNs g0, TimeNs g1)
{
    double total = 0;
    for (const Unit& u : us)
        total += u.weight;
    std::vector<size_t> order(us.size());
    for (size_t i = 0; i < us.size(); ++i)
        order[i] = forward ? i : us.size() - 1 - i; // the backward runs the layers in reverse
    std::vector<Kernel> ks;
    std::vector<double> weights;
    for (size_t u : order)
        for (size_t k = 0; k < perUnit; ++k) {
            ks.push_back({u, k, 0, 0});
            weights.push_back(total > 0 ? us[u].weight * (perUnit == 1 ? 1.0 : mix[k].share) : 1.0);
        }
    const TimeNs gaps = kKernelGapNs * static_cast<TimeNs>(ks.size() - 1);
    const TimeNs work = std::max<TimeNs>(g1 - g0 - gaps, static_cast<TimeNs>(ks.size()) * 3'000);
    double wsum = 0;
    for (double x : weights)
        wsum += x;
    double cum = 0;
    TimeNs at = 0;
    for (size_t i = 0; i < ks.size(); ++i) {
        cum += weights[i];
        const TimeNs next = i + 1 == ks.size() ? work : static_cast<TimeNs>(std::llround(cum / wsum * static_cast<double>(work)));
        ks[i].start = g0 + at + static_cast<TimeNs>(i) * kKernelGapNs;
        ks[i].dur = std::max<TimeNs>(next - at, 3'000);
        at = std::max(next, at + 3'000);
    }
    return ks;
}

// A forward's module calls on the main thread: the stage's model and its
// forward frame around all the step's launches, and one call per unit around
// the launches of its kernels.
void ModuleWriter::moduleCalls(const TimedAction& a, const std::vector<Unit>& us, const std::vector<Kernel>& ks)
{
    const TimeNs rootStart = launchAt(ks.front()) - 600, rootEnd = launchAt(ks.back()) + 2'500 + 600;
    const int64_t root = python("nn.Module: TransformerModel_" + std::to_string(a.chunk), rootStart, rootEnd, 0, a.chunk);
    const int64_t frame = python("pipeline_model.py(88): forward", rootStart + 100, rootEnd - 100, root, std::nullopt);
    for (size_t i = 0; i < ks.size();) {
        size_t j = i;
        while (j < ks.size() && ks[j].unit == ks[i].unit)
            ++j;
        const Unit& u = us[ks[i].unit];
        python("nn.Module: " + u.cls + "_" + std::to_string(u.instance), launchAt(ks[i]) - 300,
               launchAt(ks[j - 1]) + 2'500 + 300, frame, u.instance);
        forwardKernels_[{a.chunk, a.microbatch, ks[i].unit}] = j - i;
        i = j;
    }
}

// The op a kernel is launched from: a forward's aten::linear with the next
// sequence number and the start of its fwdbwd flow; a backward's
// evaluate_function with its forward op's number, which ends that flow the
// first time.
void ModuleWriter::autogradOp(const TimedAction& a, const Kernel& k, int tid)
{
    const TimeNs l = launchAt(k);
    if (a.kind == StepKind::F) {
        const ForwardOp op{++seq_, ++flow_};
        forward_[{a.chunk, a.microbatch, k.unit, k.mixIndex}] = op;
        const int64_t external = ++external_;
        complete(w_, "cpu_op", "aten::linear", pid_, tid, l - 150, 2'800, [&] {
            w_.arg("External id", external);
            w_.arg("Sequence number", op.seq);
            w_.arg("Fwd thread id", 0);
        });
        fwdbwd(true, op.flow, tid, l - 150);
        return;
    }
    const auto n = forwardKernels_.find({a.chunk, a.microbatch, k.unit});
    const size_t fk = n == forwardKernels_.end() || n->second == 0 ? 0 : k.mixIndex % n->second;
    auto f = forward_.find({a.chunk, a.microbatch, k.unit, fk});
    if (f == forward_.end())
        return;
    const int64_t external = ++external_;
    complete(w_, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", pid_, tid, l - 150, 2'800, [&] {
        w_.arg("External id", external);
        w_.arg("Sequence number", f->second.seq);
        w_.arg("Fwd thread id", 1);
    });
    if (!f->second.linked) {
        fwdbwd(false, f->second.flow, tid, l - 150);
        f->second.linked = true;
    }
}

void ModuleWriter::step(const TimedAction& a, TimeNs g0, TimeNs g1)
{
    const std::vector<Unit> us = units(a);
    const bool forward = a.kind == StepKind::F;
    const auto& mix = kernelsOf(a.kind);
    // Every unit runs the step's kernel mix in its share of the time; with too
    // little time for that, one kernel each.
    size_t perUnit = mix.size();
    if (g1 - g0 < static_cast<TimeNs>(us.size() * perUnit) * (3'000 + kKernelGapNs))
        perUnit = 1;
    const std::vector<Kernel> ks = layout(us, mix, perUnit, forward, g0, g1);
    const int tid = forward ? 1 : 2;
    if (forward)
        moduleCalls(a, us, ks);
    for (const Kernel& k : ks) {
        autogradOp(a, k, tid);
        const int64_t id = corr_++;
        writeLaunch(w_, pid_, tid, launchAt(k), 2'500, id);
        writeKernel(w_, mix[perUnit == 1 ? 0 : k.mixIndex].name, pid_, kComputeStream, k.start, k.dur, id, nullptr);
        ++kernels_;
    }
}

std::string ranksText(const std::vector<int>& ranks)
{
    std::string s = "[";
    for (size_t i = 0; i < ranks.size(); ++i)
        s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s + "]";
}

namespace fs = std::filesystem;

// Where the job is written: a private folder beside DIR (tempDir), renamed
// into place whole, so that an interrupted or failed write leaves no partial
// job and files of an earlier job in DIR are never mixed with this one.
struct JobFolder {
    fs::path finalDir, dirName, parent, tempDir;
};

// Removes the private folder unless the job was swapped in, and stops
// tracking it for the signal handlers either way.
struct TempDir {
    fs::path path;
    int tracked;
    bool keep = false;
    ~TempDir()
    {
        std::error_code e;
        if (!keep)
            fs::remove_all(path, e);
        AtomicOutput::untrackTemporary(tracked);
    }
};

// Checks that DIR is new or holds only simulated traces, and creates the
// private folder beside it.
JobFolder prepareJobFolder(const std::string& dir)
{
    std::error_code ec;
    JobFolder f;
    f.finalDir = fs::path(dir).lexically_normal();
    f.dirName = f.finalDir.filename().empty() ? f.finalDir.parent_path().filename() : f.finalDir.filename();
    f.parent = fs::absolute(f.finalDir, ec).parent_path();
    if (fs::exists(f.finalDir, ec)) {
        if (!fs::is_directory(f.finalDir, ec))
            throw Error(dir + ": exists and is not a folder; choose a new folder for --emit-kineto");
        for (const auto& entry : fs::directory_iterator(f.finalDir, ec)) {
            const std::string name = entry.path().filename().string();
            const bool ours = entry.is_regular_file() && name.starts_with("rank-") && name.ends_with(".json");
            if (!ours)
                throw Error(dir + ": holds files other than simulated traces (" + name +
                            "); choose an empty or new folder for --emit-kineto");
        }
    }
    fs::create_directories(f.parent, ec);
    AtomicOutput::removeStaleTemporaries(f.parent.string(), f.dirName.string());
    f.tempDir = f.parent / ("." + f.dirName.string() + ".tmp-" + std::to_string(::getpid()));
    fs::remove_all(f.tempDir, ec);
    if (!fs::create_directory(f.tempDir, ec))
        throw Error("cannot create the output folder " + dir + " (" + ec.message() + "); choose a writable path");
    return f;
}

// Swaps the finished job in; an earlier job's folder (simulated traces
// only, checked before writing) goes away as a whole.
void swapJobIn(const JobFolder& f, TempDir& temp, const std::string& dir)
{
    std::error_code ec;
    const fs::path old = f.parent / ("." + f.dirName.string() + ".old-" + std::to_string(::getpid()));
    const bool hadOld = fs::exists(f.finalDir, ec);
    if (hadOld) {
        fs::remove_all(old, ec);
        fs::rename(f.finalDir, old, ec);
        if (ec)
            throw Error(dir + ": cannot replace the earlier simulated job (" + ec.message() + "); choose a new folder");
    }
    fs::rename(f.tempDir, f.finalDir, ec);
    if (ec) {
        std::error_code back;
        if (hadOld)
            fs::rename(old, f.finalDir, back);
        throw Error(dir + ": cannot write the simulated job (" + ec.message() + "); choose a writable folder");
    }
    temp.keep = true;
    if (hadOld)
        fs::remove_all(old, ec);
}

// The job's parallel layout: P pipeline stages, D data-parallel replicas, W ranks.
struct JobShape {
    int P = 1, D = 1, W = 1;
};

// The layout, refused when the job would be too large to write.
JobShape checkJobSize(const Prediction& p, const KinetoEmitOptions& options)
{
    const Schedule& s = p.schedule;
    JobShape shape;
    shape.P = s.pp;
    shape.D = std::max(1, p.dataParallel);
    shape.W = shape.P * shape.D;
    if (shape.W > kMaxEmittedRanks)
        throw Error("the simulated job would have more than " + formatCount(kMaxEmittedRanks) +
                    " ranks; reduce --pp or the data-parallel degree");
    const int64_t emitted = static_cast<int64_t>(s.actionCount()) * options.iterations * shape.D;
    if (emitted > options.maxSteps)
        throw Error("the simulated traces would hold " + formatCount(emitted) +
                    " steps (steps x iterations x data-parallel replicas), about " +
                    formatBytes(emitted * kEmittedBytesPerStep) + "; pipescope emits at most " +
                    formatCount(options.maxSteps) + " steps, so choose fewer microbatches, iterations or replicas");
    return shape;
}

// The iterations as replayed: each with its own jittered step times, one
// after another on the GPU clock.
struct ReplayedIterations {
    std::vector<ReplayResult> results;
    std::vector<TimeNs> starts;      // where each begins
    std::vector<TimeNs> iterationNs; // and its length
};

// Scales each of an iteration's step and all-reduce times by 1 + jitter x
// [-1, 1); optimizer steps take at least 50 us.
void jitterCosts(ReplayCosts& c, Rng& rng, double spread)
{
    auto jitter = [&](TimeNs& t) {
        t = std::max<TimeNs>(0, static_cast<TimeNs>(static_cast<double>(t) * (1.0 + spread * rng.symmetric())));
    };
    for (StageCost& sc : c.stages) {
        jitter(sc.forward);
        jitter(sc.backward);
        jitter(sc.backwardInput);
        jitter(sc.backwardWeight);
    }
    // Uneven microbatches keep their sizes, each with its own jitter.
    for (StageCost& sc : c.microbatchCosts) {
        jitter(sc.forward);
        jitter(sc.backward);
        jitter(sc.backwardInput);
        jitter(sc.backwardWeight);
    }
    for (TimeNs& t : c.allReduceNs)
        jitter(t);
    for (TimeNs& t : c.optimizerNs)
        t = std::max<TimeNs>(t, 50'000);
}

// Replays each iteration with jittered step times; every data-parallel
// replica shares it (their all-reduce keeps them in step).
ReplayedIterations replayIterations(const Prediction& p, const KinetoEmitOptions& options)
{
    Rng rng(options.seed);
    Replay replay;
    ReplayedIterations out;
    out.results.resize(static_cast<size_t>(options.iterations));
    TimeNs cursor = 1'000'000; // leave room before the first step for the CPU lead
    for (int it = 0; it < options.iterations; ++it) {
        ReplayCosts c = p.costs;
        c.launchGapNs = std::max(c.launchGapNs, options.launchGapNs);
        jitterCosts(c, rng, options.jitter);
        replay.run(p.schedule, c, out.results[size_t(it)]);
        out.starts.push_back(cursor);
        out.iterationNs.push_back(out.results[size_t(it)].iterationNs);
        cursor += out.results[size_t(it)].iterationNs + kIterationGapNs;
    }
    return out;
}

// The job id names this job's traces so that import refuses to mix them
// with another job's; it follows from what was simulated, so one seed
// still gives identical files.
std::string jobIdOf(const Schedule& s, const KinetoEmitOptions& options, const JobShape& shape,
                    const std::vector<TimeNs>& iterationNs)
{
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const std::string& v) {
        for (unsigned char c : v + '\x1f')
            h = (h ^ c) * 1099511628211ull;
    };
    mix(options.modelName);
    mix(s.name());
    for (int64_t v : {int64_t{shape.P}, int64_t{s.chunks()}, int64_t{shape.D}, int64_t{s.microbatches},
                      int64_t{options.iterations}, static_cast<int64_t>(options.seed)})
        mix(std::to_string(v));
    for (TimeNs t : iterationNs)
        mix(std::to_string(t));
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

// What every rank's trace is written from.
struct JobContext {
    const Prediction& p;
    const KinetoEmitOptions& options;
    JobShape shape;
    const ReplayedIterations& replayed;
    std::string jobId;
    std::vector<int> allRanks;
    std::string scheduleName;
};

// A rank's place in the job, Megatron's layout with tensor parallelism 1:
// rank g = stage r * D + replica; its pipeline and data-parallel groups.
struct RankPlace {
    int g = 0, r = 0, replica = 0;
    std::vector<int> ppRanks, dpRanks;
    std::string ppText, dpText; // the groups as "[0, 2]"
};

RankPlace placeOf(int g, const JobShape& shape)
{
    RankPlace place;
    place.g = g;
    place.r = g / shape.D;
    place.replica = g % shape.D;
    for (int q = 0; q < shape.P; ++q)
        place.ppRanks.push_back(q * shape.D + place.replica);
    for (int d = 0; d < shape.D; ++d)
        place.dpRanks.push_back(place.r * shape.D + d);
    place.ppText = ranksText(place.ppRanks);
    place.dpText = ranksText(place.dpRanks);
    return place;
}

// The document's members ahead of its events, as the profiler writes them
// (indented one space, keys in order), with the simulator's mark: the
// device, the process groups, and what was simulated.
std::string headMembers(const JobContext& job, const RankPlace& place)
{
    const int P = job.shape.P, D = job.shape.D, W = job.shape.W, g = place.g;
    const Schedule& s = job.p.schedule;
    nlohmann::json pg = nlohmann::json::array();
    pg.push_back({{"pg_name", "0"}, {"pg_desc", "default_pg"}, {"backend_config", "cuda:nccl"}, {"pg_size", W}, {"ranks", job.allRanks}});
    pg.push_back({{"pg_name", "1"}, {"pg_desc", "pp"}, {"backend_config", "cuda:nccl"}, {"pg_size", P}, {"ranks", place.ppRanks}});
    if (D > 1)
        pg.push_back({{"pg_name", "2"}, {"pg_desc", "dp"}, {"backend_config", "cuda:nccl"}, {"pg_size", D}, {"ranks", place.dpRanks}});
    nlohmann::json head{{"schemaVersion", 1},
                        {"deviceProperties",
                         {{{"id", g}, {"name", job.options.gpuName}, {"totalGlobalMem", job.p.gpuMemoryBytes.value_or(85'520'809'984)}}}},
                        {"distributedInfo",
                         {{"backend", "nccl"}, {"rank", g}, {"world_size", W}, {"pg_count", pg.size()}, {"pg_config", pg}}},
                        {"pipescope",
                         {{"simulated", true},
                          {"generator", "pipescope simulate"},
                          {"model", job.options.modelName},
                          {"schedule", job.scheduleName},
                          {"pp", P},
                          {"v", s.chunks()},
                          {"dp", D},
                          {"microbatches", s.microbatches},
                          {"job", job.jobId}}},
                        {"baseTimeNanoseconds", kBaseTimeNs}};
    const std::string headText = jsonText(head, 1);
    return headText.substr(2, headText.size() - 4); // the members, without the braces
}

// One rank's events, iteration by iteration: the profiler step, each step's
// annotation, receives, compute kernels and sends (or, with blocking
// exchanges, the batches), the all-reduce, the optimizer step and the
// allocator's events.
class RankEmitter {
public:
    RankEmitter(TraceEventWriter& w, const JobContext& job, const RankPlace& place);
    void iteration(int it);
    int64_t kernels() const { return kernels_; }

private:
    void launch(TimeNs ts, TimeNs dur, int64_t id) { writeLaunch(w_, place_.g, 1, ts, dur, id); }
    void kernel(std::string_view name, int stream, TimeNs ts, TimeNs dur, int64_t id, const detail::CommArgs* comm)
    {
        writeKernel(w_, name, place_.g, stream, ts, dur, id, comm);
        ++kernels_;
    }
    detail::CommArgs p2p(bool send, int peerStage, int64_t bytes) const;
    detail::CommArgs coalesced() const;
    void step(const ReplayResult& res, const TimedAction& a, TimeNs base, TimeNs previousEnd);
    void receives(const ReplayResult& res, const TimedAction& a, TimeNs base, TimeNs previousEnd);
    void computeKernels(const TimedAction& a, TimeNs g0, TimeNs g1);
    void sends(const ReplayResult& res, const TimedAction& a, TimeNs base, TimeNs g1);
    void blockingBatches(const ReplayResult& res, TimeNs base);
    void allReduce(const RankReplay& rr, TimeNs base, TimeNs end);
    void optimizer(const RankReplay& rr, TimeNs base, TimeNs end);
    void memoryEvents(const RankReplay& replayed, TimeNs base);

    TraceEventWriter& w_;
    const JobContext& job_;
    const RankPlace& place_;
    Rng kr_;
    int64_t corr_ = 1000;
    int64_t kernels_ = 0;
    const std::string sendRecv_ = ncclKernelName(Collective::SendRecv);
    detail::CommStreams commStreams_;
    // PyTorch's allocator events (profile_memory=True): the predicted
    // memory's changes with the allocator's totals after each. What the
    // step function starts from (weights, gradients, optimizer state) was
    // allocated before recording began. Addresses follow a bump allocator.
    const RankMemory* memory_;
    int64_t allocated_ = 0, reserved_ = 0;
    ModuleWriter modules_;
    // Without module events, each kernel is still launched from an op
    // carrying autograd's sequence number, as PyTorch records every op: a
    // forward's from aten::linear with the next number, a backward's from
    // evaluate_function with the number of its forward's op.
    int64_t sequence_ = 0, external_ = 0;
    std::map<std::tuple<int, int, size_t>, int64_t> forwardSequence_; // (stage, microbatch, kernel) -> number
};

constexpr int64_t kReserveBlock = int64_t(2) << 20;

RankEmitter::RankEmitter(TraceEventWriter& w, const JobContext& job, const RankPlace& place)
    : w_(w), job_(job), place_(place), kr_(job.options.seed * 7919 + static_cast<uint64_t>(place.g) + 1),
      memory_(size_t(place.r) < job.p.memory.size() && size_t(place.r) < job.p.replay.ranks.size() &&
                      !job.p.memory[size_t(place.r)].overTime.empty()
                  ? &job.p.memory[size_t(place.r)]
                  : nullptr),
      allocated_(memory_ ? memory_->staticBytes : 0),
      reserved_((allocated_ + kReserveBlock - 1) / kReserveBlock * kReserveBlock),
      modules_(w, job.options.costModel, job.p, place.g, corr_, kernels_)
{
}

detail::CommArgs RankEmitter::p2p(bool send, int peerStage, int64_t bytes) const
{
    detail::CommArgs c;
    c.collective = torchCollectiveName(send ? Collective::Send : Collective::Recv);
    c.nelems = bytes / 2;
    c.groupSize = job_.shape.P;
    c.groupName = "1";
    c.groupDesc = "pp";
    c.groupRanks = place_.ppText;
    c.peerKey = send ? "Dst Rank" : "Src Rank";
    c.peer = peerStage * job_.shape.D + place_.replica;
    return c;
}

detail::CommArgs RankEmitter::coalesced() const
{
    detail::CommArgs c;
    c.collective = "coalesced";
    c.groupSize = job_.shape.P;
    c.groupName = "1";
    c.groupDesc = "pp";
    c.groupRanks = place_.ppText;
    return c;
}

void RankEmitter::iteration(int it)
{
    modules_.newIteration();
    forwardSequence_.clear();
    const ReplayResult& res = job_.replayed.results[size_t(it)];
    const RankReplay& rr = res.ranks[size_t(place_.r)];
    const TimeNs base = job_.replayed.starts[size_t(it)];
    complete(w_, "user_annotation", "ProfilerStep#" + std::to_string(job_.options.firstStepNumber + it), place_.g, 1,
             base - kLeadNs - 100'000, res.iterationNs + 200'000);
    TimeNs previousEnd = -1; // GPU end of the rank's previous step; the receive is posted then
    for (const TimedAction& a : rr.actions) {
        step(res, a, base, previousEnd);
        previousEnd = base + a.end;
    }
    if (res.blockingExchanges)
        blockingBatches(res, base);
    const TimeNs end = base + rr.computeEnd;
    if (job_.shape.D > 1 && rr.allReduceEnd > rr.allReduceStart)
        allReduce(rr, base, end);
    optimizer(rr, base, end);
    if (memory_)
        memoryEvents(rr, base);
}

// A step: its annotation, the receives it waits for, its compute kernels
// (per layer, inside module calls, when the layers are known) and the sends
// it produces. Transfers are written here as the replay ran them, unless the
// exchanges block (then as batches, after the steps): an order no batching
// fits overlaps its sends.
void RankEmitter::step(const ReplayResult& res, const TimedAction& a, TimeNs base, TimeNs previousEnd)
{
    const TimeNs g0 = base + a.start, g1 = base + a.end;
    if (job_.options.stepAnnotations)
        complete(w_, "user_annotation", annotationOf(a.kind), place_.g, 1, g0 - kLeadNs, g1 - g0 + 3'000, [&] {
            w_.arg("microbatch", a.microbatch);
            w_.arg("chunk", a.chunk);
            if (a.kind == StepKind::I)
                w_.arg("part", "input");
        });
    receives(res, a, base, previousEnd);
    if (job_.options.costModel)
        modules_.step(a, g0, g1);
    else
        computeKernels(a, g0, g1);
    sends(res, a, base, g1);
}

// Receives this step waits for, posted as the previous step ends (so the
// kernel shows the wait) or as this one starts.
void RankEmitter::receives(const ReplayResult& res, const TimedAction& a, TimeNs base, TimeNs previousEnd)
{
    if (res.blockingExchanges)
        return; // written as batches
    for (const TimedTransfer& t : res.transfers) {
        // A weight-gradient step (W) needs nothing from a neighbour: its I received it.
        if (t.dstRank != place_.r || t.dstStage != a.stage || t.microbatch != a.microbatch ||
            t.backward != (a.kind != StepKind::F) || a.kind == StepKind::W)
            continue;
        // Before the rank's first step the receive is posted as the iteration begins.
        const TimeNs l = previousEnd >= 0 ? previousEnd - kLeadNs + 2'200 : base - kLeadNs - 50'000;
        const int64_t id = corr_++;
        launch(l, 500, id);
        // PyTorch orders NCCL work after the compute stream's
        // current work; the kernel then waits for the sender.
        const TimeNs ks = std::max(l + 5'000, previousEnd >= 0 ? previousEnd : base);
        const TimeNs ke = std::max(base + t.end, ks + 1'000);
        const detail::CommArgs comm = p2p(false, job_.p.schedule.rankOfStage[size_t(t.srcStage)], t.bytes);
        kernel(sendRecv_, commStreams_.pick(ks, ke), ks, ke - ks, id, &comm);
    }
}

// Without the layers: the step's time split by the kernel mix, with shares
// jittered per kernel, each kernel launched from its autograd op.
void RankEmitter::computeKernels(const TimedAction& a, TimeNs g0, TimeNs g1)
{
    const int g = place_.g;
    const auto& mix = kernelsOf(a.kind);
    const TimeNs gaps = kKernelGapNs * static_cast<TimeNs>(mix.size() - 1);
    const TimeNs work = std::max<TimeNs>(g1 - g0 - gaps, static_cast<TimeNs>(mix.size()) * 3'000);
    std::vector<double> shares;
    double total = 0;
    for (const KernelShape& k : mix) {
        shares.push_back(k.share * (1.0 + 0.1 * kr_.symmetric()));
        total += shares.back();
    }
    TimeNs ks = g0;
    for (size_t k = 0; k < mix.size(); ++k) {
        TimeNs dur = k + 1 == mix.size() ? std::max<TimeNs>(g0 + gaps + work - ks, 3'000)
                                         : std::max<TimeNs>(static_cast<TimeNs>(static_cast<double>(work) * shares[k] / total), 3'000);
        const int64_t id = corr_++;
        const TimeNs l = ks - kLeadNs + 3'000;
        if (a.kind == StepKind::F) {
            forwardSequence_[{a.stage, a.microbatch, k}] = ++sequence_;
            const int64_t external = ++external_;
            complete(w_, "cpu_op", "aten::linear", g, 1, l - 150, 2'800, [&] {
                w_.arg("External id", external);
                w_.arg("Sequence number", sequence_);
                w_.arg("Fwd thread id", 0);
            });
        } else if (auto f = forwardSequence_.find({a.stage, a.microbatch, k % kernelsOf(StepKind::F).size()});
                   f != forwardSequence_.end()) {
            const int64_t external = ++external_;
            complete(w_, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", g, 1, l - 150, 2'800, [&] {
                w_.arg("External id", external);
                w_.arg("Sequence number", f->second);
                w_.arg("Fwd thread id", 1);
            });
        }
        launch(l, 2'500, id);
        kernel(mix[k].name, kComputeStream, ks, dur, id, nullptr);
        ks += dur + kKernelGapNs;
    }
}

// Sends this step produces, launched as it ends.
void RankEmitter::sends(const ReplayResult& res, const TimedAction& a, TimeNs base, TimeNs g1)
{
    if (res.blockingExchanges)
        return; // written as batches
    for (const TimedTransfer& t : res.transfers) {
        if (t.srcRank != place_.r || t.srcStage != a.stage || t.microbatch != a.microbatch ||
            t.backward != (a.kind != StepKind::F) || a.kind == StepKind::W)
            continue;
        const TimeNs l = g1 - kLeadNs + 1'000;
        const int64_t id = corr_++;
        launch(l, 1'000, id);
        const TimeNs kst = std::max(g1, l + 5'000); // posted as the step ends, waits for the receiver
        const TimeNs ke = std::max(base + t.end, kst + 2'000);
        const detail::CommArgs comm = p2p(true, job_.p.schedule.rankOfStage[size_t(t.dstStage)], t.bytes);
        kernel(sendRecv_, commStreams_.pick(kst, ke), kst, ke - kst, id, &comm);
    }
}

// Blocking exchanges: one coalesced batch per post, as batch_isend_irecv
// records it: each op's record_param_comms (nccl:send / nccl:recv), then
// nccl:coalesced, whose launch runs one SendRecv kernel for all of them.
void RankEmitter::blockingBatches(const ReplayResult& res, TimeNs base)
{
    const int g = place_.g;
    const Schedule& s = job_.p.schedule;
    struct Op {
        bool send;
        int peerStage;
        int64_t bytes;
        TimeNs end;
    };
    std::map<TimeNs, std::vector<Op>> batches; // by post time
    for (const TimedTransfer& t : res.transfers) {
        if (t.srcRank == place_.r)
            batches[t.sendPost].push_back({true, s.rankOfStage[size_t(t.dstStage)], t.bytes, t.end});
        if (t.dstRank == place_.r)
            batches[t.recvPost].push_back({false, s.rankOfStage[size_t(t.srcStage)], t.bytes, t.end});
    }
    const detail::CommArgs batch = coalesced();
    for (const auto& [post, ops] : batches) {
        const TimeNs ks = base + post;
        TimeNs ke = ks + 1'000;
        for (const Op& op : ops)
            ke = std::max(ke, base + op.end);
        TimeNs l = ks - kLeadNs + 1'000;
        for (const Op& op : ops) {
            const detail::CommArgs comm = p2p(op.send, op.peerStage, op.bytes);
            complete(w_, "cpu_op", op.send ? "nccl:send" : "nccl:recv", g, 1, l, 3'000);
            complete(w_, "cpu_op", "record_param_comms", g, 1, l + 500, 2'000, [&] { detail::writeCommArgs(w_, comm); });
            l += 4'000;
        }
        const int64_t id = corr_++;
        complete(w_, "cpu_op", "nccl:coalesced", g, 1, l, 4'000);
        complete(w_, "cpu_op", "record_param_comms", g, 1, l + 200, 3'600, [&] { detail::writeCommArgs(w_, batch); });
        launch(l + 1'000, 2'000, id);
        kernel(sendRecv_, commStreams_.pick(ks, ke), ks, ke - ks, id, &batch);
    }
}

// The data-parallel all-reduce of the gradients, launched as the compute ends.
void RankEmitter::allReduce(const RankReplay& rr, TimeNs base, TimeNs end)
{
    const int64_t id = corr_++;
    const TimeNs l = end - kLeadNs + 5'000;
    launch(l, 2'000, id);
    const int64_t nelems = job_.p.memory.size() > size_t(place_.r) ? job_.p.memory[size_t(place_.r)].parameters : 0;
    const TimeNs ks = std::max(base + rr.allReduceStart, l + 5'000);
    const TimeNs ke = std::max<TimeNs>(base + rr.allReduceEnd, ks + 2'000);
    detail::CommArgs comm;
    comm.collective = torchCollectiveName(Collective::AllReduce);
    comm.nelems = nelems;
    comm.groupSize = job_.shape.D;
    comm.groupName = "2";
    comm.groupDesc = "dp";
    comm.groupRanks = place_.dpText;
    kernel(ncclKernelName(Collective::AllReduce, "Sum_bf16_RING_LL"), commStreams_.pick(ks, ke), ks, ke - ks, id, &comm);
}

// The optimizer step: its annotation, launch and fused AdamW kernel.
void RankEmitter::optimizer(const RankReplay& rr, TimeNs base, TimeNs end)
{
    const TimeNs l = std::max(base + rr.optimizerStart - kLeadNs + 8'000, end - kLeadNs + 8'000);
    const int64_t id = corr_++;
    complete(w_, "user_annotation", "Optimizer.step#AdamW.step", place_.g, 1, l - 1'000, 6'000);
    launch(l, 2'000, id);
    const TimeNs ks = std::max(base + rr.optimizerStart, l + 5'000);
    kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>",
           kComputeStream, ks, std::max<TimeNs>(base + rr.optimizerEnd - ks, 2'000), id, nullptr);
}

// The allocator's [memory] events of one iteration: one per change of the
// predicted memory, carried onto this replay, with the totals after it.
void RankEmitter::memoryEvents(const RankReplay& replayed, TimeNs base)
{
    const int g = place_.g;
    for (const MemoryPoint& pt : memoryOn(*memory_, job_.p.replay.ranks[size_t(place_.r)], replayed)) {
        const int64_t bytes = pt.bytes - allocated_;
        if (bytes == 0)
            continue;
        const int64_t addr = 0x7f2a00000000 + std::min(allocated_, pt.bytes);
        allocated_ = pt.bytes;
        reserved_ = std::max(reserved_, (allocated_ + kReserveBlock - 1) / kReserveBlock * kReserveBlock);
        w_.beginInstant("cpu_instant_event", "t", "[memory]", g, 1, base + pt.t);
        w_.beginArgs();
        w_.arg("Total Reserved", reserved_);
        w_.arg("Total Allocated", allocated_);
        w_.arg("Bytes", bytes);
        w_.arg("Addr", addr);
        w_.arg("Device Id", g);
        w_.arg("Device Type", 1);
        w_.endArgs();
        w_.endEvent();
    }
}

// One rank's trace file, DIR/rank-<g>.json: the head, then every
// iteration's events. Returns the kernels written.
int64_t writeRankTrace(std::string& out, const JobContext& job, const RankPlace& place)
{
    TraceEventWriter w(out, TraceEventStyle::kineto());
    w.beginDocument();
    w.raw(headMembers(job, place));
    w.raw(",\n");
    w.beginEvents();
    RankEmitter rank(w, job, place);
    for (int it = 0; it < job.options.iterations; ++it)
        rank.iteration(it);
    w.endDocument();
    return rank.kernels();
}

} // namespace

namespace detail {

void writeCommArgs(TraceEventWriter& w, const CommArgs& c)
{
    w.arg("Collective name", c.collective);
    if (c.nelems) {
        w.arg("In msg nelems", *c.nelems);
        w.arg("Out msg nelems", *c.nelems);
        w.arg("dtype", "BFloat16");
    }
    w.arg("Group size", c.groupSize);
    w.arg("Process Group Name", c.groupName);
    w.arg("Process Group Description", c.groupDesc);
    w.arg("Process Group Ranks", c.groupRanks);
    if (!c.peerKey.empty())
        w.arg(c.peerKey, c.peer);
}

int CommStreams::pick(TimeNs start, TimeNs end)
{
    for (size_t i = 0;; ++i) {
        if (i == busyUntil_.size())
            busyUntil_.push_back(std::numeric_limits<TimeNs>::min());
        if (busyUntil_[i] <= start) {
            busyUntil_[i] = end;
            return kCommStream + static_cast<int>(i);
        }
    }
}

} // namespace detail

KinetoEmitSummary emitKineto(const Prediction& p, const KinetoEmitOptions& options, const std::string& dir)
{
    if (options.iterations < 1 || options.iterations > 1000)
        throw Error("--iterations must be between 1 and 1000");
    const JobFolder folder = prepareJobFolder(dir);
    TempDir temp{folder.tempDir, AtomicOutput::trackTemporary(folder.tempDir.string())};
    const JobShape shape = checkJobSize(p, options);
    const ReplayedIterations replayed = replayIterations(p, options);

    KinetoEmitSummary summary;
    summary.iterationNs = replayed.iterationNs;
    JobContext job{p, options, shape, replayed, jobIdOf(p.schedule, options, shape, replayed.iterationNs), {}, p.schedule.name()};
    job.allRanks.resize(static_cast<size_t>(shape.W));
    for (int g = 0; g < shape.W; ++g)
        job.allRanks[size_t(g)] = g;

    for (int g = 0; g < shape.W; ++g) {
        const RankPlace place = placeOf(g, shape);
        std::string out;
        const int64_t kernels = writeRankTrace(out, job, place);
        const std::string file = "rank-" + std::to_string(g) + ".json";
        AtomicOutput::writeFile((folder.tempDir / file).string(), out);
        summary.files.push_back((fs::path(dir) / file).string());
        summary.kernelsPerRank.push_back(kernels);
    }
    swapJobIn(folder, temp, dir);
    return summary;
}

} // namespace pipescope::simulate
