// Per-layer costs from PyTorch's module events and autograd sequence numbers
// in the shape a real trace has them (docs/analysis.md section 10): the
// embedding and the output layer beside the decoder, the loss computed in
// the model's own forward, a custom autograd Function whose inner ops carry
// no number, AccumulateGrad nodes without a number. The
// embedding's and the head's backward belong to them, not to their
// neighbours.
#include "SyntheticTrace.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "import/Import.h"
#include "store/Store.h"
#include "store/StoreWriter.h"

#include <QtTest>

using namespace pipescope;
using namespace pipescope::test;

namespace {

constexpr TimeNs kUs = 1'000;

// How a forward kernel's launch is wrapped in ops, as PyTorch records them.
enum class OpChain {
    Embedding, // aten::embedding (EmbeddingBackward0)
    Linear,    // aten::linear > aten::t (TBackward0), aten::matmul > aten::mm (MmBackward0)
    LayerNorm, // aten::layer_norm > aten::native_layer_norm (NativeLayerNormBackward0)
    Function,  // a custom autograd Function (Megatron's linear): its op, named by the class, makes the
               // node; the ops inside carry no number (as in DeepSeek's published training trace)
    Loss,      // aten::cross_entropy_loss > log_softmax (LogSoftmaxBackward0), nll_loss_nd (NllLossBackward0)
};

struct ForwardKernel {
    std::vector<std::string> modules; // outermost first; the kernel's op sits in the last one
    OpChain chain;
    TimeNs dur;
};

struct BackwardKernel {
    int forward; // index of the forward kernel whose node launches it; -1: AccumulateGrad
    TimeNs dur;
};

struct StagePlan {
    std::vector<ForwardKernel> forward;
    std::vector<BackwardKernel> backward; // in the order autograd runs them
};

// A node's numbers: the one whose backward launches the kernel, and a second
// node without kernels (TBackward0 after it, NllLossBackward0 before it).
struct Nodes {
    int64_t main = -1, extra = -1;
    std::string name;
};

class PyTorchShape {
public:
    explicit PyTorchShape(Trace& t) : t_(t) {}

    // A kernel launched at `launch` with this correlation.
    void kernel(int rank, TimeNs launch, int64_t correlation) { correlation_[{rank, launch}] = correlation; }

    // Main thread: the module calls around the step's launches, each launch in its op chain.
    void forward(int rank, int mb, const StagePlan& plan, const std::vector<TimeNs>& launches)
    {
        // Each module's call spans the launches of its kernels, wider the shallower it is.
        std::map<std::vector<std::string>, std::pair<size_t, size_t>> calls;
        for (size_t q = 0; q < plan.forward.size(); ++q)
            for (size_t d = 1; d <= plan.forward[q].modules.size(); ++d) {
                std::vector<std::string> path(plan.forward[q].modules.begin(), plan.forward[q].modules.begin() + long(d));
                auto [it, fresh] = calls.try_emplace(path, q, q);
                it->second.second = q;
            }
        for (const auto& [path, span] : calls) {
            const TimeNs pad = 100 * TimeNs(6 - path.size());
            addRange(t_, rank, 1, CpuRangeKind::Annotation, "nn.Module: " + path.back(), launches[span.first] - 500 - pad,
                     launches[span.second] + 1'500 + pad);
        }
        for (size_t q = 0; q < plan.forward.size(); ++q)
            nodes_[{rank, mb, q}] = forwardOps(rank, plan.forward[q].chain, launches[q]);
    }

    // Autograd's thread: evaluate_function for each node with its forward's number, AccumulateGrad without one.
    void backward(int rank, int mb, const StagePlan& plan, const std::vector<TimeNs>& launches)
    {
        for (size_t q = 0; q < plan.backward.size(); ++q) {
            const TimeNs l = launches[q];
            if (plan.backward[q].forward < 0) {
                evaluate(rank, "torch::autograd::AccumulateGrad", std::nullopt, l, "aten::add_");
                continue;
            }
            const Nodes& n = nodes_.at({rank, mb, size_t(plan.backward[q].forward)});
            if (n.name == "LogSoftmaxBackward0")
                evaluate(rank, "NllLossBackward0", n.extra, l - 3'000, "");
            evaluate(rank, n.name, n.main, l, "aten::mm");
            if (n.name == "MmBackward0")
                evaluate(rank, "TBackward0", n.extra, l + 3'000, "");
        }
    }

private:
    void op(int rank, const std::string& name, std::optional<int64_t> seq, TimeNs start, TimeNs end)
    {
        addRange(t_, rank, 1, CpuRangeKind::CpuOp, name, start, end, seq);
    }

    // The ops around one forward launch at l; returns the nodes they made.
    Nodes forwardOps(int rank, OpChain chain, TimeNs l)
    {
        int64_t& c = counter_[rank];
        Nodes n;
        switch (chain) {
        case OpChain::Embedding:
            op(rank, "aten::embedding", c, l - 200, l + 1'200);
            n = {c, -1, "EmbeddingBackward0"};
            c += 1;
            break;
        case OpChain::Linear:
            op(rank, "aten::linear", c, l - 400, l + 1'300);
            op(rank, "aten::t", c, l - 390, l - 350);
            op(rank, "aten::matmul", c + 1, l - 300, l + 1'200);
            op(rank, "aten::mm", c + 1, l - 200, l + 1'100);
            n = {c + 1, c, "MmBackward0"};
            c += 2;
            break;
        case OpChain::LayerNorm:
            op(rank, "aten::layer_norm", c, l - 300, l + 1'200);
            op(rank, "aten::native_layer_norm", c, l - 200, l + 1'100);
            n = {c, -1, "NativeLayerNormBackward0"};
            c += 1;
            break;
        case OpChain::Function:
            op(rank, "LinearWithGradAccumulationAndAsyncCommunication", c, l - 400, l + 1'300);
            op(rank, "aten::matmul", std::nullopt, l - 300, l + 1'200);
            op(rank, "aten::mm", std::nullopt, l - 200, l + 1'100);
            n = {c, -1, "LinearWithGradAccumulationAndAsyncCommunicationBackward"};
            c += 1;
            break;
        case OpChain::Loss:
            op(rank, "aten::cross_entropy_loss", c, l - 400, l + 1'900);
            op(rank, "aten::log_softmax", c, l - 300, l + 1'200);
            op(rank, "aten::_log_softmax", c, l - 200, l + 1'100);
            op(rank, "aten::nll_loss_nd", c + 1, l + 1'300, l + 1'800);
            op(rank, "aten::nll_loss_forward", c + 1, l + 1'400, l + 1'700);
            n = {c, c + 1, "LogSoftmaxBackward0"};
            c += 2;
            break;
        }
        addRange(t_, rank, 1, CpuRangeKind::Runtime, "cudaLaunchKernel", l, l + 1'000, correlation_.at({rank, l}));
        return n;
    }

    // evaluate_function > the node's op > an aten op > the launch (none when `inner` is empty).
    void evaluate(int rank, const std::string& node, std::optional<int64_t> seq, TimeNs l, const std::string& inner)
    {
        addRange(t_, rank, 2, CpuRangeKind::CpuOp, "autograd::engine::evaluate_function: " + node, l - 300, l + 1'300, seq);
        addRange(t_, rank, 2, CpuRangeKind::CpuOp, node, l - 250, l + 1'250, seq);
        if (inner.empty())
            return;
        addRange(t_, rank, 2, CpuRangeKind::CpuOp, inner, l - 200, l + 1'100);
        addRange(t_, rank, 2, CpuRangeKind::Runtime, "cudaLaunchKernel", l, l + 1'000, correlation_.at({rank, l}));
    }

    Trace& t_;
    std::map<int, int64_t> counter_{{0, 1'000}, {1, 5'000}};
    std::map<std::tuple<int, int, size_t>, Nodes> nodes_;
    std::map<std::pair<int, TimeNs>, int64_t> correlation_; // (rank, launch) -> the kernel's correlation
};

// Megatron-core's GPTModel on two stages: the embedding and the output layer
// are the model's children beside the decoder (TransformerBlock), the final
// norm is the decoder's last child, the loss is computed in GPTModel.forward.
std::vector<StagePlan> gptPlan()
{
    const std::string gpt = "GPTModel_0", dec = "TransformerBlock_0";
    StagePlan s0, s1;
    s0.forward = {{{gpt, "LanguageModelEmbedding_0", "VocabParallelEmbedding_0"}, OpChain::Embedding, 200 * kUs},
                  {{gpt, dec, "TransformerLayer_0"}, OpChain::Linear, 700 * kUs},
                  {{gpt, dec, "TransformerLayer_0"}, OpChain::Linear, 700 * kUs},
                  {{gpt, dec, "TransformerLayer_1"}, OpChain::Linear, 700 * kUs},
                  {{gpt, dec, "TransformerLayer_1"}, OpChain::Linear, 700 * kUs}};
    s0.backward = {{4, 1'400 * kUs}, {3, 1'400 * kUs}, {2, 1'400 * kUs}, {1, 1'400 * kUs}, {0, 300 * kUs}, {-1, 100 * kUs}};
    s1.forward = {{{gpt, dec, "TransformerLayer_0"}, OpChain::Linear, 900 * kUs},
                  {{gpt, dec, "TransformerLayer_1"}, OpChain::Linear, 900 * kUs},
                  {{gpt, dec, "LayerNorm_0"}, OpChain::LayerNorm, 100 * kUs},
                  {{gpt, "ColumnParallelLinear_0"}, OpChain::Function, 800 * kUs},
                  {{gpt}, OpChain::Loss, 300 * kUs}};
    s1.backward = {{4, 400 * kUs}, {3, 1'600 * kUs}, {-1, 200 * kUs}, {2, 100 * kUs}, {1, 1'850 * kUs}, {0, 1'850 * kUs}};
    return {s0, s1};
}

// Two stages, two microbatches, 1F1B, step annotations; each step's kernels
// get the plan's durations and the ranges PyTorch records around them.
Trace gptTrace(const std::vector<StagePlan>& plans)
{
    PipelineSpec spec;
    spec.stages = 2;
    spec.microbatches = 2;
    spec.forwardNs = 3'000 * kUs;
    spec.backwardNs = 6'000 * kUs;
    spec.forwardKernels = 5;
    spec.backwardKernels = 6;
    spec.annotate = true;
    Trace t = pipelineTrace(spec).trace;
    PyTorchShape shape(t);
    std::map<int, std::vector<Activity*>> compute;
    for (Activity& a : t.activities)
        if (t.str(a.name).starts_with("sm90_gemm_"))
            compute[a.rank].push_back(&a);
    struct Step {
        int rank, mb;
        bool forward;
        std::vector<TimeNs> launches;
    };
    std::vector<Step> steps;
    for (auto& [rank, ks] : compute) {
        const StagePlan& plan = plans[size_t(rank)];
        std::map<bool, int> mbs;
        for (size_t i = 0; i < ks.size();) {
            const bool forward = ks[i]->end - ks[i]->start == spec.forwardNs / spec.forwardKernels;
            Step st{rank, mbs[forward]++, forward, {}};
            TimeNs at = ks[i]->start;
            const size_t n = forward ? plan.forward.size() : plan.backward.size();
            for (size_t q = 0; q < n; ++q, ++i) {
                Activity& a = *ks[i];
                a.start = at;
                a.end = at + (forward ? plan.forward[q].dur : plan.backward[q].dur);
                a.launchStart = a.start - 5 * kUs;
                at = a.end;
                shape.kernel(rank, *a.launchStart, *a.correlation);
                st.launches.push_back(*a.launchStart);
            }
            steps.push_back(std::move(st));
        }
    }
    for (const Step& st : steps)
        (shape.*(st.forward ? &PyTorchShape::forward : &PyTorchShape::backward))(st.rank, st.mb, plans[size_t(st.rank)], st.launches);
    std::stable_sort(t.cpuRanges.begin(), t.cpuRanges.end(),
                     [](const CpuRange& x, const CpuRange& y) { return std::tie(x.rank, x.tid, x.start) < std::tie(y.rank, y.tid, y.start); });
    for (size_t i = 0; i < t.cpuRanges.size(); ++i)
        t.cpuRanges[i].id = static_cast<int64_t>(i) + 1;
    return t;
}

void compareLayer(const LayerCost& l, const char* name, int stage, TimeNs f, TimeNs b)
{
    QCOMPARE(l.name, std::string(name));
    QCOMPARE(l.stage, stage);
    QCOMPARE(l.forwardNs, f);
    QCOMPARE(l.backwardNs, b);
}

// What Store::autogradSequences answers for the trace's kernels (the numbers
// of the cpu ops around each launch, innermost first), and the trace as a
// store loads it by default: without cpu ops and launch calls.
std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>&)> storeSequences(const Trace& t)
{
    std::map<std::pair<int, int64_t>, const CpuRange*> launchOf;
    for (const CpuRange& r : t.cpuRanges)
        if (r.kind == CpuRangeKind::Runtime && r.correlation)
            launchOf[{r.rank, *r.correlation}] = &r;
    std::map<int64_t, std::vector<int64_t>> of;
    for (const Activity& a : t.activities) {
        auto l = a.correlation ? launchOf.find({a.rank, *a.correlation}) : launchOf.end();
        if (l == launchOf.end())
            continue;
        std::vector<const CpuRange*> around;
        for (const CpuRange& r : t.cpuRanges)
            if (r.kind == CpuRangeKind::CpuOp && r.correlation && r.rank == a.rank && r.tid == l->second->tid &&
                r.start <= l->second->start && l->second->start < r.end)
                around.push_back(&r);
        std::sort(around.begin(), around.end(), [](const CpuRange* x, const CpuRange* y) { return x->start > y->start; });
        for (const CpuRange* r : around)
            of[a.id].push_back(*r->correlation);
    }
    return [of](const std::vector<int64_t>& ids) {
        std::vector<std::vector<int64_t>> out;
        for (int64_t id : ids)
            out.push_back(of.count(id) ? of.at(id) : std::vector<int64_t>{});
        return out;
    };
}

Trace withoutCpuOpsAndLaunches(Trace t)
{
    std::erase_if(t.cpuRanges, [](const CpuRange& r) { return r.kind == CpuRangeKind::CpuOp || r.kind == CpuRangeKind::Runtime; });
    return t;
}

void compareGptLayers(const AnalysisResult& r)
{
    QCOMPARE(r.pipeline.microbatches, 2);
    QCOMPARE(std::string(toString(r.layers.source)), std::string("modules"));
    QCOMPARE(r.layers.layers.size(), size_t(4));
    compareLayer(r.layers.layers[0], "layers.0", 0, 1'400 * kUs, 2'800 * kUs);
    compareLayer(r.layers.layers[1], "layers.1", 0, 1'400 * kUs, 2'800 * kUs);
    compareLayer(r.layers.layers[2], "layers.2", 1, 900 * kUs, 1'850 * kUs);
    compareLayer(r.layers.layers[3], "layers.3", 1, 900 * kUs, 1'850 * kUs);
    QCOMPARE(r.layers.before.size(), size_t(1));
    compareLayer(r.layers.before[0], "LanguageModelEmbedding", 0, 200 * kUs, 400 * kUs);
    QCOMPARE(r.layers.after.size(), size_t(2));
    compareLayer(r.layers.after[0], "LayerNorm", 1, 100 * kUs, 100 * kUs);
    compareLayer(r.layers.after[1], "ColumnParallelLinear", 1, 1'100 * kUs, 2'200 * kUs);
    QCOMPARE(r.layers.computeNs, TimeNs(2 * 2 * (3'000 + 6'000) * kUs));
    QCOMPARE(r.layers.attributedNs, r.layers.computeNs);
    QCOMPARE(r.layers.note, std::string("4 layers from module ranges, 100% of the compute time attributed"));
}

// What the rules of section 10 read off a real trace, through pipescope's
// importer: for each backward node (evaluate_function), the class of the
// module around the last forward op carrying its sequence number ("-" when
// that op is outside any module, "?" when no forward op carries it); for a
// node without a number, "after " and the same for the node run before it.
std::map<std::string, int> backwardOrigins(const Trace& t)
{
    const std::string prefix = "autograd::engine::evaluate_function: ";
    std::vector<const CpuRange*> rs;
    for (const CpuRange& r : t.cpuRanges)
        if (r.kind == CpuRangeKind::CpuOp || t.str(r.name).starts_with("nn.Module: "))
            rs.push_back(&r);
    std::sort(rs.begin(), rs.end(), [](const CpuRange* a, const CpuRange* b) {
        return std::tie(a->rank, a->tid, a->start, b->end) < std::tie(b->rank, b->tid, b->start, a->end);
    });
    std::vector<int> parent(rs.size(), -1);
    std::vector<int> stack;
    for (size_t i = 0; i < rs.size(); ++i) {
        if (i > 0 && (rs[i]->tid != rs[i - 1]->tid || rs[i]->rank != rs[i - 1]->rank))
            stack.clear();
        while (!stack.empty() && rs[size_t(stack.back())]->end <= rs[i]->start)
            stack.pop_back();
        parent[i] = stack.empty() ? -1 : stack.back();
        stack.push_back(int(i));
    }
    auto isBackward = [&](size_t i) { return t.str(rs[i]->name).starts_with(prefix); };
    auto within = [&](size_t i, auto pred) {
        for (int a = parent[i]; a >= 0; a = parent[size_t(a)])
            if (pred(size_t(a)))
                return a;
        return -1;
    };
    std::map<int64_t, size_t> origin; // sequence number -> last forward op carrying it
    for (size_t i = 0; i < rs.size(); ++i)
        if (rs[i]->kind == CpuRangeKind::CpuOp && rs[i]->correlation && !isBackward(i) && within(i, isBackward) < 0)
            if (auto [o, fresh] = origin.try_emplace(*rs[i]->correlation, i); !fresh && rs[i]->start >= rs[o->second]->start)
                o->second = i;
    auto moduleOf = [&](int64_t seq) {
        auto o = origin.find(seq);
        if (o == origin.end())
            return std::string("?");
        const int m = within(o->second, [&](size_t a) { return rs[a]->kind != CpuRangeKind::CpuOp; });
        if (m < 0)
            return std::string("-");
        std::string cls = t.str(rs[size_t(m)]->name).substr(11);
        return cls.substr(0, cls.rfind('_'));
    };
    std::map<std::string, int> out;
    std::vector<size_t> nodes;
    for (size_t i = 0; i < rs.size(); ++i)
        if (isBackward(i) && within(i, isBackward) < 0)
            nodes.push_back(i);
    for (size_t n = 0; n < nodes.size(); ++n) {
        const CpuRange& r = *rs[nodes[n]];
        const std::string node = t.str(r.name).substr(prefix.size());
        if (r.correlation) {
            ++out[node + " " + moduleOf(*r.correlation)];
            continue;
        }
        size_t j = n;
        while (j > 0 && !rs[nodes[j - 1]]->correlation)
            --j;
        ++out[node + " after " + (j > 0 ? moduleOf(*rs[nodes[j - 1]]->correlation) : std::string("nothing"))];
    }
    return out;
}

} // namespace

class TestLayerAttribution : public QObject {
    Q_OBJECT
private slots:
    void embeddingAndHeadKeepTheirBackward();
    void throughTheStoresSequenceNumbers();
    void realTraceNodesAndTheirModules();
};

// The embedding's backward (run last, its gradient accumulated after it) is
// the embedding's; the head's (the loss's backward first, then the output
// layer's through its autograd Function, then its accumulation) is the
// head's. Before, neither had a unit: the final norm was read as the head
// (0.1 ms of backward against 2.2 ms) and 22% of the compute went nowhere.
void TestLayerAttribution::embeddingAndHeadKeepTheirBackward()
{
    compareGptLayers(analyze(gptTrace(gptPlan())));
}

// What `pipescope analyze` reads: the store loads no cpu ops or launch calls,
// so the numbers come from the store (AnalyzeOptions::autogradSequences).
// Before, the embedding and the output layer had no unit and every backward
// step was split over its forward's layers in proportion to their forward
// time: layers.0 took the embedding's backward (3.2 ms against 2.8), layers.2
// the head's (3.7 ms against 1.85), the final norm 0.4 ms against 0.1.
void TestLayerAttribution::throughTheStoresSequenceNumbers()
{
    const Trace full = gptTrace(gptPlan());
    AnalyzeOptions o;
    o.autogradSequences = storeSequences(full);
    compareGptLayers(analyze(withoutCpuOpsAndLaunches(full), o));
}

// A real trace (AMD-AGI/TraceLens, tests/traces/mi300/resnet_act_checkpoint.json.gz:
// DDP ResNet training on MI300, PyTorch profiler with with_stack, 3 steps):
// every node's number leads to the module that made it, the loss computed
// outside the model leads to no module, and every AccumulateGrad (no number)
// runs right after the node of the module holding its parameter.
void TestLayerAttribution::realTraceNodesAndTheirModules()
{
    const QString file = test::extraTraces("tracelens/resnet_act_checkpoint.json.gz");
    if (file.isEmpty())
        QSKIP("PIPESCOPE_EXTRA_TRACES/tracelens/resnet_act_checkpoint.json.gz not found (docs/testing-real-traces.md)");
    QTemporaryDir dir;
    const std::string store = test::path(dir, "job.pipescope");
    {
        StoreWriter w(store);
        ImportOptions io;
        io.progress = false;
        importKineto(file.toStdString(), w, io);
        w.finish();
    }
    LoadOptions lo;
    lo.cpuOps = true;
    const std::map<std::string, int> origins = backwardOrigins(Store(store).load(lo));
    const std::map<std::string, int> expected{
        {"AddBackward0 BasicBlock", 24},
        {"AddmmBackward0 Linear", 3},
        {"ConvolutionBackward0 Conv2d", 60},
        {"MaxPool2DWithIndicesBackward0 MaxPool2d", 3},
        {"MeanBackward1 AdaptiveAvgPool2d", 3},
        {"MseLossBackward0 -", 3},
        {"NativeBatchNormBackward0 BatchNorm2d", 60},
        {"ReluBackward0 ReLU", 51},
        {"TBackward0 Linear", 3},
        {"ViewBackward0 ResNet", 3},
        {"torch::autograd::AccumulateGrad after BatchNorm2d", 120},
        {"torch::autograd::AccumulateGrad after Conv2d", 60},
        {"torch::autograd::AccumulateGrad after Linear", 6},
    };
    QCOMPARE(origins, expected);
}

QTEST_GUILESS_MAIN(TestLayerAttribution)
#include "tst_layer_attribution.moc"
