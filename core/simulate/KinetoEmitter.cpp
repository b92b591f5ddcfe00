#include "whatif/KinetoEmitter.h"

#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "util/JsonText.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <tuple>

namespace pipescope::whatif {

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

std::string us(TimeNs ns)
{
    char buf[40];
    const bool neg = ns < 0;
    const int64_t a = neg ? -ns : ns;
    std::snprintf(buf, sizeof buf, "%s%" PRId64 ".%03" PRId64, neg ? "-" : "", a / 1000, a % 1000);
    return buf;
}

std::string quoted(const std::string& s) { return jsonText(nlohmann::json(s)); }

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

class EventWriter {
public:
    void begin() { out_ = "{\n"; }
    std::string& raw() { return out_; }

    void event(const std::string& body)
    {
        out_ += first_ ? "  " : ",\n  ";
        first_ = false;
        out_ += body;
    }
    void complete(const std::string& cat, const std::string& name, int pid, int tid, TimeNs ts, TimeNs dur,
                  const std::string& args)
    {
        event("{\"ph\": \"X\", \"cat\": " + quoted(cat) + ", \"name\": " + quoted(name) + ", \"pid\": " +
              std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + us(ts) + ", \"dur\": " +
              us(std::max<TimeNs>(dur, 0)) + ", \"args\": {" + args + "}}");
    }
    void flow(char ph, int64_t id, int pid, int tid, TimeNs ts)
    {
        event(std::string("{\"ph\": \"") + ph + "\", \"id\": " + std::to_string(id) + ", \"pid\": " +
              std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + us(ts) +
              ", \"cat\": \"ac2g\", \"name\": \"ac2g\"" + (ph == 'f' ? ", \"bp\": \"e\"" : "") + "}");
    }

private:
    std::string out_;
    bool first_ = true;
};

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
    ModuleWriter(EventWriter& w, const CostModel* cm, const Prediction& p, int pid, int64_t& corr, int64_t& kernels)
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
    void launch(int tid, TimeNs ts, int64_t id)
    {
        w_.complete("cuda_runtime", "cudaLaunchKernel", pid_, tid, ts, 2'500, "\"correlation\": " + std::to_string(id));
        w_.flow('s', id, pid_, tid, ts);
    }
    void fwdbwd(char ph, int64_t id, int tid, TimeNs ts)
    {
        w_.event(std::string("{\"ph\": \"") + ph + "\", \"id\": " + std::to_string(id) + ", \"pid\": " +
                 std::to_string(pid_) + ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + us(ts) +
                 ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"" + (ph == 'f' ? ", \"bp\": \"e\"" : "") + "}");
    }
    int64_t python(const std::string& name, TimeNs start, TimeNs end, int64_t parent, std::optional<int> moduleId)
    {
        const int64_t id = ++pythonId_;
        std::string args = "\"Python parent id\": " + (parent > 0 ? std::to_string(parent) : std::string("null")) +
                           ", \"Python id\": " + std::to_string(id);
        if (moduleId)
            args += ", \"Python module id\": " + std::to_string(*moduleId);
        w_.complete("python_function", name, pid_, 1, start, end - start, args);
        return id;
    }

    EventWriter& w_;
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

void ModuleWriter::step(const TimedAction& a, TimeNs g0, TimeNs g1)
{
    const std::vector<Unit> us = units(a);
    const bool forward = a.kind == StepKind::F;
    const auto& mix = kernelsOf(a.kind);
    // Every unit runs the step's kernel mix in its share of the time; with too
    // little time for that, one kernel each.
    double total = 0;
    for (const Unit& u : us)
        total += u.weight;
    size_t perUnit = mix.size();
    if (g1 - g0 < static_cast<TimeNs>(us.size() * perUnit) * (3'000 + kKernelGapNs))
        perUnit = 1;
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
    auto launchAt = [&](const Kernel& k) { return k.start - kLeadNs + 3'000; };
    const int tid = forward ? 1 : 2;
    if (forward) {
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
    for (const Kernel& k : ks) {
        const TimeNs l = launchAt(k);
        if (forward) {
            const ForwardOp op{++seq_, ++flow_};
            forward_[{a.chunk, a.microbatch, k.unit, k.mixIndex}] = op;
            w_.complete("cpu_op", "aten::linear", pid_, tid, l - 150, 2'800,
                        "\"External id\": " + std::to_string(++external_) + ", \"Sequence number\": " +
                            std::to_string(op.seq) + ", \"Fwd thread id\": 0");
            fwdbwd('s', op.flow, tid, l - 150);
        } else {
            const auto n = forwardKernels_.find({a.chunk, a.microbatch, k.unit});
            const size_t fk = n == forwardKernels_.end() || n->second == 0 ? 0 : k.mixIndex % n->second;
            auto f = forward_.find({a.chunk, a.microbatch, k.unit, fk});
            if (f != forward_.end()) {
                w_.complete("cpu_op", "autograd::engine::evaluate_function: MmBackward0", pid_, tid, l - 150, 2'800,
                            "\"External id\": " + std::to_string(++external_) + ", \"Sequence number\": " +
                                std::to_string(f->second.seq) + ", \"Fwd thread id\": 1");
                if (!f->second.linked) {
                    fwdbwd('f', f->second.flow, tid, l - 150);
                    f->second.linked = true;
                }
            }
        }
        const int64_t id = corr_++;
        launch(tid, l, id);
        w_.complete("kernel", mix[perUnit == 1 ? 0 : k.mixIndex].name, pid_, kComputeStream, k.start, k.dur,
                    "\"device\": " + std::to_string(pid_) + ", \"stream\": " + std::to_string(kComputeStream) +
                        ", \"correlation\": " + std::to_string(id));
        w_.flow('f', id, pid_, kComputeStream, k.start);
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

} // namespace

KinetoEmitSummary emitKineto(const Prediction& p, const KinetoEmitOptions& options, const std::string& dir)
{
    if (options.iterations < 1 || options.iterations > 1000)
        throw Error("--iterations must be between 1 and 1000");
    // The job is written into a private folder beside DIR and renamed into
    // place whole: an interrupted or failed write leaves no partial job, and
    // files of an earlier job in DIR are never mixed with this one.
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path finalDir = fs::path(dir).lexically_normal();
    const fs::path dirName = finalDir.filename().empty() ? finalDir.parent_path().filename() : finalDir.filename();
    const fs::path parent = fs::absolute(finalDir, ec).parent_path();
    if (fs::exists(finalDir, ec)) {
        if (!fs::is_directory(finalDir, ec))
            throw Error(dir + ": exists and is not a folder; choose a new folder for --emit-kineto");
        for (const auto& entry : fs::directory_iterator(finalDir, ec)) {
            const std::string f = entry.path().filename().string();
            const bool ours = entry.is_regular_file() && f.starts_with("rank-") && f.ends_with(".json");
            if (!ours)
                throw Error(dir + ": holds files other than simulated traces (" + f +
                            "); choose an empty or new folder for --emit-kineto");
        }
    }
    fs::create_directories(parent, ec);
    AtomicOutput::removeStaleTemporaries(parent.string(), dirName.string());
    const fs::path tempDir = parent / ("." + dirName.string() + ".tmp-" + std::to_string(::getpid()));
    fs::remove_all(tempDir, ec);
    if (!fs::create_directory(tempDir, ec))
        throw Error("cannot create the output folder " + dir + " (" + ec.message() + "); choose a writable path");
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
    } temp{tempDir, AtomicOutput::trackTemporary(tempDir.string())};

    const Schedule& s = p.schedule;
    const int P = s.pp, D = std::max(1, p.dataParallel), W = P * D;
    if (W > 4096)
        throw Error("the simulated job would have more than 4096 ranks; reduce --pp or the data-parallel degree");
    const int64_t emitted = static_cast<int64_t>(s.actionCount()) * options.iterations * D;
    if (emitted > kMaxEmittedSteps)
        throw Error("the simulated traces would hold " + formatCount(emitted) +
                    " steps (steps x iterations x data-parallel replicas), about " +
                    formatBytes(emitted * kEmittedBytesPerStep) + "; pipescope emits at most " +
                    formatCount(kMaxEmittedSteps) + " steps, so choose fewer microbatches, iterations or replicas");

    // Replay each iteration with jittered step times; every data-parallel
    // replica shares it (their all-reduce keeps them in step).
    Rng rng(options.seed);
    Replay replay;
    std::vector<ReplayResult> iterations(static_cast<size_t>(options.iterations));
    std::vector<TimeNs> starts;
    KinetoEmitSummary summary;
    TimeNs cursor = 1'000'000; // leave room before the first step for the CPU lead
    for (int it = 0; it < options.iterations; ++it) {
        ReplayCosts c = p.costs;
        c.launchGapNs = std::max(c.launchGapNs, options.launchGapNs);
        auto jitter = [&](TimeNs& t) {
            t = std::max<TimeNs>(0, static_cast<TimeNs>(static_cast<double>(t) * (1.0 + options.jitter * rng.symmetric())));
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
        replay.run(s, c, iterations[size_t(it)]);
        starts.push_back(cursor);
        summary.iterationNs.push_back(iterations[size_t(it)].iterationNs);
        cursor += iterations[size_t(it)].iterationNs + kIterationGapNs;
    }

    // The job id names this job's traces so that import refuses to mix them
    // with another job's; it follows from what was simulated, so one seed
    // still gives identical files.
    std::string jobId;
    {
        uint64_t h = 1469598103934665603ull;
        auto mix = [&](const std::string& v) {
            for (unsigned char c : v + '\x1f')
                h = (h ^ c) * 1099511628211ull;
        };
        mix(options.modelName);
        mix(s.name());
        for (int64_t v : {int64_t{P}, int64_t{s.chunks()}, int64_t{D}, int64_t{s.microbatches},
                          int64_t{options.iterations}, static_cast<int64_t>(options.seed)})
            mix(std::to_string(v));
        for (TimeNs t : summary.iterationNs)
            mix(std::to_string(t));
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
        jobId = buf;
    }
    std::vector<int> allRanks(static_cast<size_t>(W));
    for (int g = 0; g < W; ++g)
        allRanks[size_t(g)] = g;
    const std::string scheduleName = s.name();
    for (int g = 0; g < W; ++g) {
        // Megatron's layout with tensor parallelism 1: rank = stage * dp + replica.
        const int r = g / D, replica = g % D;
        std::vector<int> ppRanks, dpRanks;
        for (int q = 0; q < P; ++q)
            ppRanks.push_back(q * D + replica);
        for (int d = 0; d < D; ++d)
            dpRanks.push_back(r * D + d);
        const std::string ppText = ranksText(ppRanks);
        Rng kr(options.seed * 7919 + static_cast<uint64_t>(g) + 1);
        int64_t corr = 1000;
        int64_t kernels = 0;

        EventWriter w;
        w.begin();
        std::string& out = w.raw();
        nlohmann::json pg = nlohmann::json::array();
        pg.push_back({{"pg_name", "0"}, {"pg_desc", "default_pg"}, {"backend_config", "cuda:nccl"}, {"pg_size", W}, {"ranks", allRanks}});
        pg.push_back({{"pg_name", "1"}, {"pg_desc", "pp"}, {"backend_config", "cuda:nccl"}, {"pg_size", P}, {"ranks", ppRanks}});
        if (D > 1)
            pg.push_back({{"pg_name", "2"}, {"pg_desc", "dp"}, {"backend_config", "cuda:nccl"}, {"pg_size", D}, {"ranks", dpRanks}});
        nlohmann::json head{{"schemaVersion", 1},
                            {"deviceProperties",
                             {{{"id", g}, {"name", options.gpuName}, {"totalGlobalMem", p.gpuMemoryBytes.value_or(85'520'809'984)}}}},
                            {"distributedInfo",
                             {{"backend", "nccl"}, {"rank", g}, {"world_size", W}, {"pg_count", pg.size()}, {"pg_config", pg}}},
                            {"pipescope",
                             {{"simulated", true},
                              {"generator", "pipescope simulate"},
                              {"model", options.modelName},
                              {"schedule", scheduleName},
                              {"pp", P},
                              {"v", s.chunks()},
                              {"dp", D},
                              {"microbatches", s.microbatches},
                              {"job", jobId}}},
                            {"baseTimeNanoseconds", kBaseTimeNs}};
        const std::string headText = jsonText(head, 1);
        out += headText.substr(2, headText.size() - 4); // the members, without the braces
        out += ",\n  \"traceEvents\": [\n";

        auto launch = [&](TimeNs ts, TimeNs dur, int64_t id) {
            w.complete("cuda_runtime", "cudaLaunchKernel", g, 1, ts, dur, "\"correlation\": " + std::to_string(id));
            w.flow('s', id, g, 1, ts);
        };
        auto kernel = [&](const std::string& name, int stream, TimeNs ts, TimeNs dur, int64_t id, const std::string& extra) {
            w.complete("kernel", name, g, stream, ts, dur,
                       "\"device\": " + std::to_string(g) + ", \"stream\": " + std::to_string(stream) +
                           ", \"correlation\": " + std::to_string(id) + extra);
            w.flow('f', id, g, stream, ts);
            ++kernels;
        };
        auto p2p = [&](bool send, int peerStage, int64_t bytes) {
            const int peer = peerStage * D + replica;
            const int64_t nelems = bytes / 2;
            return std::string(", \"Collective name\": \"") +
                   std::string(torchCollectiveName(send ? Collective::Send : Collective::Recv)) + "\", \"In msg nelems\": " +
                   std::to_string(nelems) + ", \"Out msg nelems\": " + std::to_string(nelems) +
                   ", \"dtype\": \"BFloat16\", \"Group size\": " + std::to_string(P) +
                   ", \"Process Group Name\": \"1\", \"Process Group Description\": \"pp\", \"Process Group Ranks\": \"" +
                   ppText + "\", \"" + (send ? "Dst Rank" : "Src Rank") + "\": " + std::to_string(peer);
        };
        const std::string sendRecv = ncclKernelName(Collective::SendRecv);
        // NCCL kernels go on stream 20; one that would overlap a running one
        // (a send and a receive with different peers) takes the next free stream.
        std::vector<TimeNs> commBusyUntil;
        auto commStream = [&](TimeNs start, TimeNs end) {
            for (size_t i = 0;; ++i) {
                if (i == commBusyUntil.size())
                    commBusyUntil.push_back(std::numeric_limits<TimeNs>::min());
                if (commBusyUntil[i] <= start) {
                    commBusyUntil[i] = end;
                    return kCommStream + static_cast<int>(i);
                }
            }
        };

        // PyTorch's allocator events (profile_memory=True): the predicted
        // memory's changes with the allocator's totals after each. What the
        // step function starts from (weights, gradients, optimizer state) was
        // allocated before recording began. Addresses follow a bump allocator.
        const RankMemory* memory = size_t(r) < p.memory.size() && size_t(r) < p.replay.ranks.size() &&
                                           !p.memory[size_t(r)].overTime.empty()
                                       ? &p.memory[size_t(r)]
                                       : nullptr;
        const int64_t kReserveBlock = int64_t(2) << 20;
        int64_t allocated = memory ? memory->staticBytes : 0;
        int64_t reserved = (allocated + kReserveBlock - 1) / kReserveBlock * kReserveBlock;
        auto memoryEvents = [&](const RankReplay& replayed, TimeNs base) {
            for (const MemoryPoint& pt : memoryOn(*memory, p.replay.ranks[size_t(r)], replayed)) {
                const int64_t bytes = pt.bytes - allocated;
                if (bytes == 0)
                    continue;
                const int64_t addr = 0x7f2a00000000 + std::min(allocated, pt.bytes);
                allocated = pt.bytes;
                reserved = std::max(reserved, (allocated + kReserveBlock - 1) / kReserveBlock * kReserveBlock);
                w.event("{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": " +
                        std::to_string(g) + ", \"tid\": 1, \"ts\": " + us(base + pt.t) + ", \"args\": {\"Total Reserved\": " +
                        std::to_string(reserved) + ", \"Total Allocated\": " + std::to_string(allocated) +
                        ", \"Bytes\": " + std::to_string(bytes) + ", \"Addr\": " + std::to_string(addr) +
                        ", \"Device Id\": " + std::to_string(g) + ", \"Device Type\": 1}}");
            }
        };

        ModuleWriter modules{w, options.costModel, p, g, corr, kernels};
        // Without module events, each kernel is still launched from an op
        // carrying autograd's sequence number, as PyTorch records every op: a
        // forward's from aten::linear with the next number, a backward's from
        // evaluate_function with the number of its forward's op.
        int64_t sequence = 0, external = 0;
        std::map<std::tuple<int, int, size_t>, int64_t> forwardSequence; // (stage, microbatch, kernel) -> number
        for (int it = 0; it < options.iterations; ++it) {
            modules.newIteration();
            forwardSequence.clear();
            const ReplayResult& res = iterations[size_t(it)];
            const RankReplay& rr = res.ranks[size_t(r)];
            const TimeNs base = starts[size_t(it)];
            w.complete("user_annotation", "ProfilerStep#" + std::to_string(options.firstStepNumber + it), g, 1,
                       base - kLeadNs - 100'000, res.iterationNs + 200'000, "");
            // Transfers this rank sends and receives, by producing / consuming step.
            // As the replay ran them: an order no batching fits overlaps its sends.
            const bool blocking = res.blockingExchanges;
            TimeNs previousEnd = -1; // GPU end of the rank's previous step; the receive is posted then
            for (const TimedAction& a : rr.actions) {
                const TimeNs g0 = base + a.start, g1 = base + a.end;
                std::string args = "\"microbatch\": " + std::to_string(a.microbatch) + ", \"chunk\": " + std::to_string(a.chunk);
                if (a.kind == StepKind::I)
                    args += ", \"part\": \"input\"";
                if (options.stepAnnotations)
                    w.complete("user_annotation", annotationOf(a.kind), g, 1, g0 - kLeadNs, g1 - g0 + 3'000, args);
                // Receives this step waits for, posted as the previous step ends
                // (so the kernel shows the wait) or as this one starts.
                for (const TimedTransfer& t : res.transfers) {
                    if (blocking)
                        break; // written as batches below
                    // A weight-gradient step (W) needs nothing from a neighbour: its I received it.
                    if (t.dstRank != r || t.dstStage != a.stage || t.microbatch != a.microbatch ||
                        t.backward != (a.kind != StepKind::F) || a.kind == StepKind::W)
                        continue;
                    // Before the rank's first step the receive is posted as the iteration begins.
                    const TimeNs l = previousEnd >= 0 ? previousEnd - kLeadNs + 2'200 : base - kLeadNs - 50'000;
                    const int64_t id = corr++;
                    launch(l, 500, id);
                    // PyTorch orders NCCL work after the compute stream's
                    // current work; the kernel then waits for the sender.
                    const TimeNs ks = std::max(l + 5'000, previousEnd >= 0 ? previousEnd : base);
                    const TimeNs ke = std::max(base + t.end, ks + 1'000);
                    kernel(sendRecv, commStream(ks, ke), ks, ke - ks, id,
                           p2p(false, s.rankOfStage[size_t(t.srcStage)], t.bytes));
                }
                // Compute kernels: the step's time split by the kernel mix
                // (per layer, inside module calls, when the layers are known).
                if (options.costModel) {
                    modules.step(a, g0, g1);
                } else {
                    const auto& mix = kernelsOf(a.kind);
                    const TimeNs gaps = kKernelGapNs * static_cast<TimeNs>(mix.size() - 1);
                    const TimeNs work = std::max<TimeNs>(g1 - g0 - gaps, static_cast<TimeNs>(mix.size()) * 3'000);
                    std::vector<double> shares;
                    double total = 0;
                    for (const KernelShape& k : mix) {
                        shares.push_back(k.share * (1.0 + 0.1 * kr.symmetric()));
                        total += shares.back();
                    }
                    TimeNs ks = g0;
                    for (size_t k = 0; k < mix.size(); ++k) {
                        TimeNs dur = k + 1 == mix.size() ? std::max<TimeNs>(g0 + gaps + work - ks, 3'000)
                                                         : std::max<TimeNs>(static_cast<TimeNs>(static_cast<double>(work) * shares[k] / total), 3'000);
                        const int64_t id = corr++;
                        const TimeNs l = ks - kLeadNs + 3'000;
                        if (a.kind == StepKind::F) {
                            forwardSequence[{a.stage, a.microbatch, k}] = ++sequence;
                            w.complete("cpu_op", "aten::linear", g, 1, l - 150, 2'800,
                                       "\"External id\": " + std::to_string(++external) + ", \"Sequence number\": " +
                                           std::to_string(sequence) + ", \"Fwd thread id\": 0");
                        } else if (auto f = forwardSequence.find({a.stage, a.microbatch, k % kernelsOf(StepKind::F).size()});
                                   f != forwardSequence.end()) {
                            w.complete("cpu_op", "autograd::engine::evaluate_function: MmBackward0", g, 1, l - 150, 2'800,
                                       "\"External id\": " + std::to_string(++external) + ", \"Sequence number\": " +
                                           std::to_string(f->second) + ", \"Fwd thread id\": 1");
                        }
                        launch(l, 2'500, id);
                        kernel(mix[k].name, kComputeStream, ks, dur, id, "");
                        ks += dur + kKernelGapNs;
                    }
                }
                // Sends this step produces, launched as it ends.
                for (const TimedTransfer& t : res.transfers) {
                    if (blocking)
                        break;
                    if (t.srcRank != r || t.srcStage != a.stage || t.microbatch != a.microbatch ||
                        t.backward != (a.kind != StepKind::F) || a.kind == StepKind::W)
                        continue;
                    const TimeNs l = g1 - kLeadNs + 1'000;
                    const int64_t id = corr++;
                    launch(l, 1'000, id);
                    const TimeNs kst = std::max(g1, l + 5'000); // posted as the step ends, waits for the receiver
                    const TimeNs ke = std::max(base + t.end, kst + 2'000);
                    kernel(sendRecv, commStream(kst, ke), kst, ke - kst, id,
                           p2p(true, s.rankOfStage[size_t(t.dstStage)], t.bytes));
                }
                previousEnd = g1;
            }
            // Blocking exchanges: one coalesced batch per post, as batch_isend_irecv
            // records it: each op's record_param_comms (nccl:send / nccl:recv),
            // then nccl:coalesced, whose launch runs one SendRecv kernel for all of them.
            if (blocking) {
                struct Op {
                    bool send;
                    int peerStage;
                    int64_t bytes;
                    TimeNs end;
                };
                std::map<TimeNs, std::vector<Op>> batches; // by post time
                for (const TimedTransfer& t : res.transfers) {
                    if (t.srcRank == r)
                        batches[t.sendPost].push_back({true, s.rankOfStage[size_t(t.dstStage)], t.bytes, t.end});
                    if (t.dstRank == r)
                        batches[t.recvPost].push_back({false, s.rankOfStage[size_t(t.srcStage)], t.bytes, t.end});
                }
                for (const auto& [post, ops] : batches) {
                    const TimeNs ks = base + post;
                    TimeNs ke = ks + 1'000;
                    for (const Op& op : ops)
                        ke = std::max(ke, base + op.end);
                    TimeNs l = ks - kLeadNs + 1'000;
                    for (const Op& op : ops) {
                        const std::string args = p2p(op.send, op.peerStage, op.bytes).substr(2);
                        w.complete("cpu_op", op.send ? "nccl:send" : "nccl:recv", g, 1, l, 3'000, "");
                        w.complete("cpu_op", "record_param_comms", g, 1, l + 500, 2'000, args);
                        l += 4'000;
                    }
                    const int64_t id = corr++;
                    w.complete("cpu_op", "nccl:coalesced", g, 1, l, 4'000, "");
                    w.complete("cpu_op", "record_param_comms", g, 1, l + 200, 3'600,
                               "\"Collective name\": \"coalesced\", \"Group size\": " + std::to_string(P) +
                                   ", \"Process Group Name\": \"1\", \"Process Group Description\": \"pp\", "
                                   "\"Process Group Ranks\": \"" + ppText + "\"");
                    launch(l + 1'000, 2'000, id);
                    kernel(sendRecv, commStream(ks, ke), ks, ke - ks, id,
                           ", \"Collective name\": \"coalesced\", \"Group size\": " + std::to_string(P) +
                               ", \"Process Group Name\": \"1\", \"Process Group Description\": \"pp\", "
                               "\"Process Group Ranks\": \"" + ppText + "\"");
                }
            }
            const TimeNs end = base + rr.computeEnd;
            if (D > 1 && rr.allReduceEnd > rr.allReduceStart) {
                const int64_t id = corr++;
                const TimeNs l = end - kLeadNs + 5'000;
                launch(l, 2'000, id);
                const int64_t nelems = p.memory.size() > size_t(r) ? p.memory[size_t(r)].parameters : 0;
                const TimeNs ks = std::max(base + rr.allReduceStart, l + 5'000);
                const TimeNs ke = std::max<TimeNs>(base + rr.allReduceEnd, ks + 2'000);
                kernel(ncclKernelName(Collective::AllReduce, "Sum_bf16_RING_LL"), commStream(ks, ke), ks, ke - ks, id,
                       ", \"Collective name\": \"" + std::string(torchCollectiveName(Collective::AllReduce)) +
                           "\", \"In msg nelems\": " + std::to_string(nelems) +
                           ", \"Out msg nelems\": " + std::to_string(nelems) + ", \"dtype\": \"BFloat16\", \"Group size\": " +
                           std::to_string(D) + ", \"Process Group Name\": \"2\", \"Process Group Description\": \"dp\", "
                           "\"Process Group Ranks\": \"" + ranksText(dpRanks) + "\"");
            }
            {
                const TimeNs l = std::max(base + rr.optimizerStart - kLeadNs + 8'000, end - kLeadNs + 8'000);
                const int64_t id = corr++;
                w.complete("user_annotation", "Optimizer.step#AdamW.step", g, 1, l - 1'000, 6'000, "");
                launch(l, 2'000, id);
                const TimeNs ks = std::max(base + rr.optimizerStart, l + 5'000);
                kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, double*, double*>",
                       kComputeStream, ks, std::max<TimeNs>(base + rr.optimizerEnd - ks, 2'000), id, "");
            }
            if (memory)
                memoryEvents(rr, base);
        }
        out += "\n  ]\n}\n";
        const std::string file = "rank-" + std::to_string(g) + ".json";
        AtomicOutput::writeFile((tempDir / file).string(), out);
        summary.files.push_back((fs::path(dir) / file).string());
        summary.kernelsPerRank.push_back(kernels);
    }
    // Swap the finished job in; an earlier job's folder (simulated traces
    // only, checked above) goes away as a whole.
    const fs::path old = parent / ("." + dirName.string() + ".old-" + std::to_string(::getpid()));
    const bool hadOld = fs::exists(finalDir, ec);
    if (hadOld) {
        fs::remove_all(old, ec);
        fs::rename(finalDir, old, ec);
        if (ec)
            throw Error(dir + ": cannot replace the earlier simulated job (" + ec.message() + "); choose a new folder");
    }
    fs::rename(tempDir, finalDir, ec);
    if (ec) {
        std::error_code back;
        if (hadOld)
            fs::rename(old, finalDir, back);
        throw Error(dir + ": cannot write the simulated job (" + ec.message() + "); choose a writable folder");
    }
    temp.keep = true;
    if (hadOld)
        fs::remove_all(old, ec);
    return summary;
}

} // namespace pipescope::whatif
