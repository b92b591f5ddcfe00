// Per-layer costs from the trace: every compute kernel of the selected
// iteration goes to the module (or pipescope/layer range) whose CPU range
// launched it; backward kernels go to the forward module through autograd's
// sequence number, else by the reverse order of the forward. The layers are
// the repeated children of the model plus what stands before and after them.
// docs/analysis.md, section 10, states the rules.
#include "analysis/detail/Context.h"

#include <charconv>
#include <cmath>
#include <unordered_map>

namespace pipescope::detail {

namespace {

constexpr std::string_view kModulePrefix = "nn.Module: "; // PyTorch's name of a module's forward call
constexpr std::string_view kLayerPrefix = "pipescope/layer ";
constexpr std::string_view kBackwardOpPrefix = "autograd::engine::evaluate_function: ";

bool isModuleRange(const Trace& t, const CpuRange& r)
{
    return (r.kind == CpuRangeKind::Other || r.kind == CpuRangeKind::Annotation || r.kind == CpuRangeKind::CpuOp) &&
           t.str(r.name).starts_with(kModulePrefix);
}

bool isLayerRange(const Trace& t, const CpuRange& r)
{
    return (r.kind == CpuRangeKind::Annotation || r.kind == CpuRangeKind::Nvtx) && t.str(r.name).starts_with(kLayerPrefix);
}

// "nn.Module: TransformerBlock_12" -> "TransformerBlock".
std::string_view moduleClass(std::string_view name)
{
    name.remove_prefix(std::min(name.size(), kModulePrefix.size()));
    size_t u = name.rfind('_');
    if (u != std::string_view::npos && u + 1 < name.size() &&
        name.find_first_not_of("0123456789", u + 1) == std::string_view::npos)
        name = name.substr(0, u);
    return name;
}

// "layers.12" -> "layers"; empty when the name does not end in ".<number>".
std::string_view indexedPrefix(std::string_view name)
{
    size_t dot = name.rfind('.');
    if (dot == std::string_view::npos || dot == 0 || dot + 1 >= name.size() ||
        name.find_first_not_of("0123456789", dot + 1) != std::string_view::npos)
        return {};
    return name.substr(0, dot);
}

// Ranges of one rank that nest: sorted by (tid, start, longer first), each
// with the index of its innermost enclosing range on the same thread.
struct Forest {
    struct Node {
        int64_t tid;
        TimeNs start, end;
        int parent; // -1: outermost
        int key;    // what the caller attaches (a scope node, a sequence number slot)
    };
    std::vector<Node> nodes;

    void finish()
    {
        std::sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) {
            return std::tie(a.tid, a.start, b.end) < std::tie(b.tid, b.start, a.end);
        });
        std::vector<int> stack;
        for (size_t i = 0; i < nodes.size(); ++i) {
            Node& n = nodes[i];
            if (i > 0 && nodes[i - 1].tid != n.tid)
                stack.clear();
            while (!stack.empty() && nodes[size_t(stack.back())].end <= n.start)
                stack.pop_back();
            while (!stack.empty() && n.end > nodes[size_t(stack.back())].end) // partial overlap: a sibling
                stack.pop_back();
            n.parent = stack.empty() ? -1 : stack.back();
            stack.push_back(static_cast<int>(i));
        }
    }
    // Innermost range of thread `tid` containing t; -1 when none.
    int innermost(int64_t tid, TimeNs t) const
    {
        auto it = std::upper_bound(nodes.begin(), nodes.end(), std::make_pair(tid, t), [](const auto& v, const Node& n) {
            return v.first != n.tid ? v.first < n.tid : v.second < n.start;
        });
        if (it == nodes.begin())
            return -1;
        int i = static_cast<int>(std::prev(it) - nodes.begin());
        if (nodes[size_t(i)].tid != tid)
            return -1;
        while (i >= 0 && nodes[size_t(i)].end <= t)
            i = nodes[size_t(i)].parent;
        return i;
    }
    // The same on any thread (a launch known only by its time): the latest-starting container.
    int innermostAnyThread(TimeNs t) const
    {
        int best = -1;
        for (size_t k = 0; k < nodes.size();) {
            const int64_t tid = nodes[k].tid;
            int i = innermost(tid, t);
            if (i >= 0 && (best < 0 || nodes[size_t(i)].start > nodes[size_t(best)].start))
                best = i;
            while (k < nodes.size() && nodes[k].tid == tid)
                ++k;
        }
        return best;
    }
};

enum class Part : uint8_t { F, B, I, W };

// One module instance or one layer name on a rank, over all its calls.
struct ScopeNode {
    StringId name = 0;
    int parent = -1;   // enclosing scope node
    TimeNs firstCall = 0;
    std::array<TimeNs, 4> ns{}; // per Part
    std::map<int, TimeNs> stageVotes; // virtual stage -> forward time seen there
};

struct Role {
    enum Kind : uint8_t { None, Before, Block, After } kind = None;
    int unit = -1; // index into the rank's units
};

struct Unit {
    int node = -1; // the scope node that is the layer
    Role::Kind kind = Role::None;
    std::array<TimeNs, 4> ns{};
    std::map<int, TimeNs> stageVotes;
    TimeNs firstCall = 0;
};

struct KernelAttr {
    int node = -1;      // scope node, -1 unattributed
    int range = -1;     // the scope range (call) it came from, in RankLayers::scopes
    TimeNs at = 0;      // when, in that call: the launch, or the forward op that made its autograd node
    int step = -1;      // index into the rank's steps
    bool backwardOp = false; // launched inside autograd's evaluate_function: backward work in any step
    int unitByTime = -1;     // set where the module is on the path to the blocks (unitsByTime)
    TimeNs start = 0, dur = 0;
};

struct RankLayers {
    int rank = 0;
    std::vector<ScopeNode> nodes;
    std::vector<Unit> units;
    std::vector<KernelAttr> kernels;
    Forest scopes; // the rank's module or layer ranges (calls), keyed by scope node
    std::vector<const Step*> steps; // start order
    std::map<int, int> microbatchesOfChunk;
    TimeNs computeNs = 0;

    // Makes scope node n a unit of the given kind; returns its index.
    int addUnit(int n, Role::Kind kind)
    {
        Unit u;
        u.node = n;
        u.kind = kind;
        u.firstCall = nodes[size_t(n)].firstCall;
        units.push_back(u);
        return static_cast<int>(units.size()) - 1;
    }
};

// A unit of one rank as a layer of the model: its costs per microbatch, on
// the virtual stage that ran most of its forward.
struct FoundLayer {
    LayerCost cost;
    Role::Kind kind;
    TimeNs firstCall;
    std::string cls;
};

// A rank's module tree: each scope node's children and the outermost
// modules, in call order.
struct ModuleTree {
    std::vector<std::vector<int>> children;
    std::vector<int> roots;
};

ModuleTree moduleTree(const RankLayers& rl)
{
    ModuleTree tree;
    tree.children.resize(rl.nodes.size());
    for (size_t i = 0; i < rl.nodes.size(); ++i)
        (rl.nodes[i].parent >= 0 ? tree.children[size_t(rl.nodes[i].parent)] : tree.roots).push_back(static_cast<int>(i));
    auto byCall = [&](int a, int b) { return rl.nodes[size_t(a)].firstCall < rl.nodes[size_t(b)].firstCall; };
    for (auto& c : tree.children)
        std::sort(c.begin(), c.end(), byCall);
    std::sort(tree.roots.begin(), tree.roots.end(), byCall);
    return tree;
}

// The children of a level of the tree, one level down.
std::vector<int> nextLevel(const ModuleTree& tree, const std::vector<int>& level)
{
    std::vector<int> next;
    for (int n : level)
        next.insert(next.end(), tree.children[size_t(n)].begin(), tree.children[size_t(n)].end());
    return next;
}

// Below `root`, the class that the shallowest level's modules repeat among
// their children: the one repeated most often there, the first in name
// order on a tie; empty when no module of the subtree repeats a class.
std::string repeatedChildClass(const Trace& t, const RankLayers& rl, const ModuleTree& tree, int root)
{
    std::vector<int> level{root};
    while (!level.empty()) {
        std::string found;
        int most = 1;
        for (int n : level) {
            std::map<std::string_view, int> count;
            for (int c : tree.children[size_t(n)])
                ++count[moduleClass(t.str(rl.nodes[size_t(c)].name))];
            for (const auto& [cls, k] : count)
                if (k > most) {
                    most = k;
                    found = std::string(cls);
                }
        }
        if (!found.empty())
            return found;
        level = nextLevel(tree, level);
    }
    return {};
}

// Votes for the block class, one per outermost module of every rank: the
// class its subtree repeats. When no module repeats a child class, every
// chunk holds a single block (p = 8, v = 4 on 32 layers): the block class is
// then the class called most often as a child of the outermost modules, over
// all of them, if more than once.
std::map<std::string, int> blockClassVotes(const Trace& t, const std::vector<RankLayers>& ranks, const std::vector<ModuleTree>& trees)
{
    std::map<std::string, int> votes;
    for (size_t r = 0; r < ranks.size(); ++r)
        for (int root : trees[r].roots)
            if (std::string found = repeatedChildClass(t, ranks[r], trees[r], root); !found.empty())
                ++votes[found];
    if (votes.empty()) {
        for (size_t r = 0; r < ranks.size(); ++r)
            for (int root : trees[r].roots)
                for (int c : trees[r].children[size_t(root)])
                    ++votes[std::string(moduleClass(t.str(ranks[r].nodes[size_t(c)].name)))];
        std::erase_if(votes, [](const auto& v) { return v.second < 2; });
    }
    return votes;
}

// The shallowest module below `root` (itself included) with a child of the
// block class: the block list; -1 when there is none.
template <class IsBlock>
int blockListOf(const ModuleTree& tree, int root, const IsBlock& isBlock)
{
    std::vector<int> level{root};
    while (!level.empty()) {
        for (int n : level)
            for (int c : tree.children[size_t(n)])
                if (isBlock(c))
                    return n;
        level = nextLevel(tree, level);
    }
    return -1;
}

// The block list's children become units: each block, and what stands
// before the first block and after the last. A module between two blocks
// belongs to the block before it.
template <class IsBlock>
void unitsOfBlockList(RankLayers& rl, const std::vector<int>& kids, const IsBlock& isBlock, std::vector<Role>& role)
{
    int firstBlock = -1, lastBlock = -1;
    for (size_t i = 0; i < kids.size(); ++i)
        if (isBlock(kids[i])) {
            if (firstBlock < 0)
                firstBlock = static_cast<int>(i);
            lastBlock = static_cast<int>(i);
        }
    int current = -1;
    for (int i = 0; i < static_cast<int>(kids.size()); ++i) {
        const int n = kids[size_t(i)];
        const bool block = isBlock(n);
        if (block || i < firstBlock || i > lastBlock)
            current = rl.addUnit(n, block ? Role::Block : i < firstBlock ? Role::Before : Role::After);
        role[size_t(n)] = {rl.units[size_t(current)].kind, current};
    }
}

// Below the root, the modules beside the path down to the block list (the
// embedding and the output layer next to the decoder, as Megatron's GPTModel
// and Hugging Face's *ForCausalLM call them): before or after the blocks by
// call, each a unit; those holding blocks themselves stay out. Returns the
// path's modules.
template <class IsBlock>
std::vector<int> unitsBesidePath(RankLayers& rl, const ModuleTree& tree, int root, int body, const IsBlock& isBlock,
                                 std::vector<Role>& role)
{
    auto holdsBlocks = [&](int n) {
        std::vector<int> level{n};
        for (; !level.empty(); level = nextLevel(tree, level))
            for (int c : level)
                if (isBlock(c))
                    return true;
        return false;
    };
    std::vector<int> path{body};
    for (int c = body; c != root && rl.nodes[size_t(c)].parent >= 0; c = rl.nodes[size_t(c)].parent) {
        const int a = rl.nodes[size_t(c)].parent;
        for (int k : tree.children[size_t(a)]) {
            if (k == c || holdsBlocks(k))
                continue;
            const Role::Kind kind = rl.nodes[size_t(k)].firstCall < rl.nodes[size_t(c)].firstCall ? Role::Before : Role::After;
            role[size_t(k)] = {kind, rl.addUnit(k, kind)};
        }
        path.push_back(a);
    }
    return path;
}

// A kernel whose innermost module is on a path to the block list (work in the
// model's own forward, such as a loss computed there) belongs to the unit
// called last before it in the same outermost call, else the first after it.
void unitsByTime(RankLayers& rl, const std::vector<char>& onPath, const std::vector<Role>& role)
{
    struct Call {
        int64_t tid;
        TimeNs start;
        int unit;
    };
    std::vector<Call> calls;
    for (const Forest::Node& n : rl.scopes.nodes)
        if (const int u = role[size_t(n.key)].unit; u >= 0 && rl.units[size_t(u)].node == n.key)
            calls.push_back({n.tid, n.start, u});
    std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return std::tie(a.tid, a.start) < std::tie(b.tid, b.start); });
    for (KernelAttr& k : rl.kernels) {
        if (k.node < 0 || !onPath[size_t(k.node)] || k.range < 0)
            continue;
        int outer = k.range;
        while (rl.scopes.nodes[size_t(outer)].parent >= 0)
            outer = rl.scopes.nodes[size_t(outer)].parent;
        const Forest::Node& o = rl.scopes.nodes[size_t(outer)];
        auto it = std::upper_bound(calls.begin(), calls.end(), std::make_pair(o.tid, k.at), [](const auto& v, const Call& c) {
            return std::tie(v.first, v.second) < std::tie(c.tid, c.start);
        });
        if (it != calls.begin() && std::prev(it)->tid == o.tid && std::prev(it)->start >= o.start)
            k.unitByTime = std::prev(it)->unit;
        else if (it != calls.end() && it->tid == o.tid && it->start < o.end)
            k.unitByTime = it->unit;
    }
}

// The rank's units with the block class known; its kernels then name their unit.
void assignModuleUnits(const Trace& t, RankLayers& rl, const ModuleTree& tree, const std::string& blockClass)
{
    auto isBlock = [&](int n) { return moduleClass(t.str(rl.nodes[size_t(n)].name)) == blockClass; };
    std::vector<Role> role(rl.nodes.size());
    std::vector<char> onPath(rl.nodes.size(), 0);
    TimeNs firstBody = std::numeric_limits<TimeNs>::max();
    std::vector<int> bodyless;
    for (int root : tree.roots) {
        const int body = blockListOf(tree, root, isBlock);
        if (body < 0) {
            bodyless.push_back(root);
            continue;
        }
        firstBody = std::min(firstBody, rl.nodes[size_t(root)].firstCall);
        unitsOfBlockList(rl, tree.children[size_t(body)], isBlock, role);
        for (int n : unitsBesidePath(rl, tree, root, body, isBlock, role))
            onPath[size_t(n)] = 1;
    }
    // Modules called outside the model (a loss module): before or after it.
    for (int root : bodyless) {
        const Role::Kind kind = rl.nodes[size_t(root)].firstCall < firstBody ? Role::Before : Role::After;
        role[size_t(root)] = {kind, rl.addUnit(root, kind)};
    }
    // Every other module belongs to the unit of its nearest ancestor that has one.
    for (size_t i = 0; i < rl.nodes.size(); ++i) {
        if (role[i].unit >= 0)
            continue;
        for (int a = rl.nodes[i].parent; a >= 0; a = rl.nodes[size_t(a)].parent)
            if (role[size_t(a)].unit >= 0) {
                role[i] = role[size_t(a)];
                break;
            }
    }
    unitsByTime(rl, onPath, role);
    for (KernelAttr& k : rl.kernels)
        k.node = k.unitByTime >= 0 ? k.unitByTime : k.node >= 0 ? role[size_t(k.node)].unit : -1;
}

class LayerFinder {
public:
    LayerFinder(Context& ctx, AnalysisResult& out, const std::vector<Step>& steps) : ctx_(ctx), out_(out), steps_(steps) {}
    void run();

private:
    bool pickSource();
    std::vector<RankLayers> measureRanks();
    void attributeRank(const RankData& rd, RankLayers& rl);
    void askSequences(const std::vector<const RankData*>& measured);
    void backwardBySequences(RankLayers& rl, const std::vector<const std::vector<int64_t>*>& chains);
    void chooseModuleUnits(std::vector<RankLayers>& ranks);
    void chooseAnnotationUnits(RankLayers& rl);
    void backwardByReverseOrder(RankLayers& rl);
    void addUnitTimes(RankLayers& rl);
    std::vector<FoundLayer> layersInModelOrder(const std::vector<RankLayers>& ranks) const;
    void nameLayers(std::vector<FoundLayer>& found);
    void describeLayers();
    int virtualStage(const Step& s) const;
    bool isScope(const CpuRange& r) const { return annotations_ ? isLayerRange(ctx_.trace, r) : isModuleRange(ctx_.trace, r); }

    Context& ctx_;
    AnalysisResult& out_;
    const std::vector<Step>& steps_;
    bool annotations_ = false;
    bool rangesByRank_ = true;
    TimeNs ws_ = 0, we_ = 0;
    // Without the launch calls and cpu ops in the trace (a store's default
    // load): activity id -> the sequence numbers of the ops around its
    // launch, innermost first (AnalyzeOptions::autogradSequences).
    std::unordered_map<int64_t, std::vector<int64_t>> sequencesOf_;
};

int LayerFinder::virtualStage(const Step& s) const
{
    const int p = out_.pipeline.pp, v = out_.pipeline.chunks;
    if (v <= 1 || s.stage >= p)
        return s.stage;
    if (ctx_.vShape)
        return s.chunk == 0 ? s.stage : 2 * p - 1 - s.stage;
    return s.chunk * p + s.stage;
}

bool LayerFinder::pickSource()
{
    bool modules = false, layers = false;
    for (const CpuRange& r : ctx_.trace.cpuRanges) {
        layers = layers || isLayerRange(ctx_.trace, r);
        modules = modules || isModuleRange(ctx_.trace, r);
        if (layers)
            break;
    }
    // The user's own layer ranges say what a layer is; module calls are the fallback.
    annotations_ = layers;
    return layers || modules;
}

void LayerFinder::attributeRank(const RankData& rd, RankLayers& rl)
{
    const Trace& t = ctx_.trace;
    rl.rank = rd.rank;
    for (const Step& s : steps_)
        if (s.rank == rd.rank)
            rl.steps.push_back(&s);
    std::sort(rl.steps.begin(), rl.steps.end(), [](const Step* a, const Step* b) { return a->start < b->start; });
    for (const Step* s : rl.steps)
        if (s->kind == StepKind::F)
            ++rl.microbatchesOfChunk[s->chunk];

    // The rank's CPU ranges (the trace keeps them sorted by rank first).
    auto lo = t.cpuRanges.begin(), hi = t.cpuRanges.end();
    if (rangesByRank_) {
        lo = std::lower_bound(t.cpuRanges.begin(), t.cpuRanges.end(), rd.rank,
                              [](const CpuRange& r, int rank) { return r.rank < rank; });
        hi = std::upper_bound(lo, t.cpuRanges.end(), rd.rank, [](int rank, const CpuRange& r) { return rank < r.rank; });
    }

    Forest& scopes = rl.scopes;
    Forest backwardOps, forwardOps;
    std::unordered_map<StringId, int> nodeOf;
    std::vector<int64_t> seqs; // forwardOps/backwardOps key -> sequence number, -1 when none
    std::unordered_map<int64_t, std::pair<int64_t, TimeNs>> launchOf; // correlation -> (tid, start)
    for (auto it = lo; it != hi; ++it) {
        const CpuRange& r = *it;
        if (r.rank != rd.rank)
            continue;
        if (isScope(r)) {
            auto [n, fresh] = nodeOf.try_emplace(r.name, static_cast<int>(rl.nodes.size()));
            if (fresh) {
                rl.nodes.push_back({});
                rl.nodes.back().name = r.name;
                rl.nodes.back().firstCall = r.start;
            }
            rl.nodes[size_t(n->second)].firstCall = std::min(rl.nodes[size_t(n->second)].firstCall, r.start);
            scopes.nodes.push_back({r.tid, r.start, r.end, -1, n->second});
        } else if ((r.kind == CpuRangeKind::Runtime || r.kind == CpuRangeKind::Driver) && r.correlation) {
            launchOf.try_emplace(*r.correlation, r.tid, r.start);
        } else if (r.kind == CpuRangeKind::CpuOp) {
            // Backward nodes without a number (AccumulateGrad) are kept: their kernels follow the node before.
            const bool backward = t.str(r.name).starts_with(kBackwardOpPrefix);
            if (!backward && !r.correlation)
                continue;
            (backward ? backwardOps : forwardOps).nodes.push_back({r.tid, r.start, r.end, -1, static_cast<int>(seqs.size())});
            seqs.push_back(r.correlation.value_or(-1));
        }
    }
    scopes.finish();
    backwardOps.finish();
    forwardOps.finish();
    // A scope node's parent: the node of the range enclosing its first call.
    for (const Forest::Node& n : scopes.nodes) {
        ScopeNode& sn = rl.nodes[size_t(n.key)];
        if (n.start == sn.firstCall && n.parent >= 0 && scopes.nodes[size_t(n.parent)].key != n.key)
            sn.parent = scopes.nodes[size_t(n.parent)].key;
    }
    // Sequence number -> the last forward op carrying it (ops that made no
    // autograd node share the number of the next one), with its scope range.
    std::unordered_map<int64_t, std::pair<TimeNs, int>> originOfSeq;
    for (const Forest::Node& op : forwardOps.nodes) {
        if (backwardOps.innermost(op.tid, op.start) >= 0) // the backward node's own op (XBackward0)
            continue;
        const int s = scopes.innermost(op.tid, op.start);
        if (s < 0)
            continue;
        auto [e, fresh] = originOfSeq.try_emplace(seqs[size_t(op.key)], op.start, s);
        if (!fresh && op.start >= e->second.first)
            e->second = {op.start, s};
    }
    // The sequence number a backward op answers for: its own, or for a node
    // without one (AccumulateGrad, which autograd's engine runs right after
    // the node that produced its gradient) that of the node run before it.
    auto seqOfBackwardOp = [&](int op) {
        for (int j = op; j >= 0 && backwardOps.nodes[size_t(j)].tid == backwardOps.nodes[size_t(op)].tid; --j) {
            const Forest::Node& n = backwardOps.nodes[size_t(j)];
            if (j != op && n.end > backwardOps.nodes[size_t(op)].start)
                continue; // an enclosing op (a reentrant backward), not the one before
            if (seqs[size_t(n.key)] >= 0)
                return seqs[size_t(n.key)];
        }
        return int64_t(-1);
    };

    std::vector<const std::vector<int64_t>*> chains; // per kernel, with sequencesOf_
    size_t stepAt = 0;
    for (uint32_t k : rd.compute) {
        const Activity& a = ctx_.act(k);
        if (a.start < ws_ || a.start >= we_)
            continue;
        KernelAttr ka;
        ka.start = a.start;
        ka.dur = a.end - a.start;
        rl.computeNs += ka.dur;
        while (stepAt < rl.steps.size() && rl.steps[stepAt]->end <= a.start)
            ++stepAt;
        if (stepAt < rl.steps.size() && rl.steps[stepAt]->start <= a.start)
            ka.step = static_cast<int>(stepAt);
        std::optional<std::pair<int64_t, TimeNs>> launch;
        if (a.correlation)
            if (auto l = launchOf.find(*a.correlation); l != launchOf.end())
                launch = l->second;
        const int op = launch ? backwardOps.innermost(launch->first, launch->second) : -1;
        ka.backwardOp = op >= 0;
        if (launch) {
            ka.range = scopes.innermost(launch->first, launch->second);
            ka.at = launch->second;
        } else if (a.launchStart) {
            ka.range = scopes.innermostAnyThread(*a.launchStart);
            ka.at = *a.launchStart;
        }
        // Outside any module (autograd's thread): the forward op that made the node.
        if (ka.range < 0 && op >= 0)
            if (auto o = originOfSeq.find(seqOfBackwardOp(op)); o != originOfSeq.end()) {
                ka.at = o->second.first;
                ka.range = o->second.second;
            }
        if (ka.range >= 0)
            ka.node = scopes.nodes[size_t(ka.range)].key;
        rl.kernels.push_back(ka);
        if (!sequencesOf_.empty()) {
            auto c = sequencesOf_.find(a.id);
            chains.push_back(c != sequencesOf_.end() ? &c->second : nullptr);
        }
    }
    if (!sequencesOf_.empty())
        backwardBySequences(rl, chains);
}

// The same through the store (no launch calls or cpu ops loaded): a kernel
// launched inside a module carries its forward ops' numbers to that module
// (the last launch carrying a number wins); a kernel launched outside any
// module whose innermost number one of them carries is that node's backward;
// one launched with no number around it (AccumulateGrad) in a backward step
// joins the backward kernel before it there.
void LayerFinder::backwardBySequences(RankLayers& rl, const std::vector<const std::vector<int64_t>*>& chains)
{
    std::unordered_map<int64_t, size_t> originOfSeq; // number -> the kernel launched last in an op carrying it
    for (size_t i = 0; i < rl.kernels.size(); ++i)
        if (const KernelAttr& k = rl.kernels[i]; k.range >= 0 && chains[i])
            for (int64_t s : *chains[i])
                if (auto [e, fresh] = originOfSeq.try_emplace(s, i); !fresh && k.at >= rl.kernels[e->second].at)
                    e->second = i;
    const KernelAttr* before = nullptr; // the last backward kernel attributed by its number, in this step
    for (size_t i = 0; i < rl.kernels.size(); ++i) {
        KernelAttr& k = rl.kernels[i];
        if (before && before->step != k.step)
            before = nullptr;
        if (k.range >= 0)
            continue;
        if (chains[i] && !chains[i]->empty()) {
            // In the same step as the op it matches, a forward kernel outside any module (a loss).
            if (auto o = originOfSeq.find(chains[i]->front()); o != originOfSeq.end() && rl.kernels[o->second].step != k.step) {
                k.at = rl.kernels[o->second].at;
                k.range = rl.kernels[o->second].range;
                k.backwardOp = true;
                before = &k;
            }
        } else if (before && k.step >= 0 && rl.steps[size_t(k.step)]->kind != StepKind::F) {
            k.at = before->at;
            k.range = before->range;
            k.backwardOp = true;
        }
        if (k.range >= 0)
            k.node = rl.scopes.nodes[size_t(k.range)].key;
    }
}

// Asks the store once for the sequence numbers around the measured ranks'
// kernels when the trace holds no launch calls to find them by.
void LayerFinder::askSequences(const std::vector<const RankData*>& measured)
{
    if (!ctx_.options.autogradSequences || annotations_)
        return;
    for (const CpuRange& r : ctx_.trace.cpuRanges)
        if ((r.kind == CpuRangeKind::Runtime || r.kind == CpuRangeKind::Driver) && r.correlation)
            return;
    std::vector<int64_t> ids;
    for (const RankData* rd : measured)
        for (uint32_t k : rd->compute)
            if (const Activity& a = ctx_.act(k); a.start >= ws_ && a.start < we_)
                ids.push_back(a.id);
    std::vector<std::vector<int64_t>> seqs;
    try {
        seqs = ctx_.options.autogradSequences(ids);
    } catch (const std::exception&) {
        return; // the store could not be read again: backward by reverse order
    }
    if (seqs.size() != ids.size())
        return;
    for (size_t i = 0; i < ids.size(); ++i)
        sequencesOf_[ids[i]] = std::move(seqs[i]);
}

// The module tree's layers: below the shallowest module whose children repeat
// a class (the block list), those children; before and after them, the
// embedding and the head. The block class is the one most ranks agree on, so
// a rank holding a single block still finds it.
void LayerFinder::chooseModuleUnits(std::vector<RankLayers>& ranks)
{
    const Trace& t = ctx_.trace;
    std::vector<ModuleTree> trees;
    for (const RankLayers& rl : ranks)
        trees.push_back(moduleTree(rl));
    const std::map<std::string, int> votes = blockClassVotes(t, ranks, trees);
    if (votes.empty()) {
        // Nothing to call a layer: the kernels' scope nodes are not units.
        for (RankLayers& rl : ranks)
            for (KernelAttr& k : rl.kernels)
                k.node = -1;
        return;
    }
    std::string blockClass;
    int best = 0;
    for (const auto& [cls, k] : votes)
        if (k > best) {
            best = k;
            blockClass = cls;
        }
    for (size_t r = 0; r < ranks.size(); ++r)
        assignModuleUnits(t, ranks[r], trees[r], blockClass);
}

// pipescope/layer ranges name the layers themselves: those named
// "<list>.<i>" for the most common list are the blocks.
void LayerFinder::chooseAnnotationUnits(RankLayers& rl)
{
    const Trace& t = ctx_.trace;
    std::vector<int> top;
    for (size_t i = 0; i < rl.nodes.size(); ++i)
        if (rl.nodes[i].parent < 0)
            top.push_back(static_cast<int>(i));
    std::sort(top.begin(), top.end(), [&](int a, int b) { return rl.nodes[size_t(a)].firstCall < rl.nodes[size_t(b)].firstCall; });
    auto label = [&](int n) { return std::string_view(t.str(rl.nodes[size_t(n)].name)).substr(kLayerPrefix.size()); };
    std::map<std::string_view, int> lists;
    for (int n : top)
        if (auto p = indexedPrefix(label(n)); !p.empty())
            ++lists[p];
    std::string_view list;
    int most = 0;
    for (const auto& [p, k] : lists)
        if (k > most) {
            most = k;
            list = p;
        }
    int firstBlock = -1, lastBlock = -1;
    for (size_t i = 0; i < top.size(); ++i)
        if (list.empty() || indexedPrefix(label(top[i])) == list) {
            if (firstBlock < 0)
                firstBlock = static_cast<int>(i);
            lastBlock = static_cast<int>(i);
        }
    std::vector<int> unitOf(rl.nodes.size(), -1);
    int current = -1;
    for (int i = 0; i < static_cast<int>(top.size()); ++i) {
        const int n = top[size_t(i)];
        const bool block = list.empty() || indexedPrefix(label(n)) == list;
        if (block || i < firstBlock || i > lastBlock)
            current = rl.addUnit(n, block ? Role::Block : i < firstBlock ? Role::Before : Role::After);
        unitOf[size_t(n)] = current;
    }
    for (size_t i = 0; i < rl.nodes.size(); ++i)
        if (unitOf[i] < 0)
            for (int a = rl.nodes[i].parent; a >= 0; a = rl.nodes[size_t(a)].parent)
                if (unitOf[size_t(a)] >= 0) {
                    unitOf[i] = unitOf[size_t(a)];
                    break;
                }
    for (KernelAttr& k : rl.kernels)
        k.node = k.node >= 0 ? unitOf[size_t(k.node)] : -1;
}

// A backward step none of whose kernels could be attributed (no sequence
// numbers, or layer ranges around the forward only) runs its microbatch's
// forward layers in reverse: its kernels are split over them in that order,
// in proportion to their forward time.
void LayerFinder::backwardByReverseOrder(RankLayers& rl)
{
    std::map<int, std::vector<size_t>> kernelsOfStep;
    for (size_t i = 0; i < rl.kernels.size(); ++i)
        if (rl.kernels[i].step >= 0)
            kernelsOfStep[rl.kernels[i].step].push_back(i);
    std::map<std::pair<int, int>, int> forwardStep; // (chunk, microbatch) -> step
    for (size_t s = 0; s < rl.steps.size(); ++s)
        if (rl.steps[s]->kind == StepKind::F)
            forwardStep.try_emplace({rl.steps[s]->chunk, rl.steps[s]->microbatch}, static_cast<int>(s));
    for (auto& [step, ks] : kernelsOfStep) {
        const Step& st = *rl.steps[size_t(step)];
        if (st.kind == StepKind::F)
            continue;
        bool any = false;
        for (size_t i : ks)
            any = any || rl.kernels[i].node >= 0;
        auto f = forwardStep.find({st.chunk, st.microbatch});
        if (any || f == forwardStep.end())
            continue;
        // The forward's layers in the order it ran them, with their time.
        std::vector<std::pair<int, TimeNs>> order;
        TimeNs total = 0;
        for (size_t i : kernelsOfStep[f->second]) {
            const KernelAttr& k = rl.kernels[i];
            if (k.node < 0)
                continue;
            if (order.empty() || order.back().first != k.node)
                order.push_back({k.node, 0});
            order.back().second += k.dur;
            total += k.dur;
        }
        TimeNs backward = 0;
        for (size_t i : ks)
            backward += rl.kernels[i].dur;
        if (order.empty() || total <= 0 || backward <= 0)
            continue;
        std::reverse(order.begin(), order.end());
        TimeNs done = 0;
        size_t at = 0;
        TimeNs bound = order[0].second;
        for (size_t i : ks) {
            KernelAttr& k = rl.kernels[i];
            // The kernel's midpoint, on the forward's time scale.
            const double mid = (static_cast<double>(done) + static_cast<double>(k.dur) / 2.0) * static_cast<double>(total) /
                               static_cast<double>(backward);
            while (at + 1 < order.size() && mid >= static_cast<double>(bound)) {
                ++at;
                bound += order[at].second;
            }
            k.node = order[at].first;
            done += k.dur;
        }
    }
}

// One measured rank per stage, its first replica, with its kernels attributed.
std::vector<RankLayers> LayerFinder::measureRanks()
{
    rangesByRank_ = std::is_sorted(ctx_.trace.cpuRanges.begin(), ctx_.trace.cpuRanges.end(),
                                   [](const CpuRange& a, const CpuRange& b) { return a.rank < b.rank; });
    std::map<int, const RankData*> rankOfStage;
    for (const RankData& rd : ctx_.ranks)
        if (rd.stage >= 0 && !rankOfStage.count(rd.stage))
            rankOfStage[rd.stage] = &rd;
    std::vector<const RankData*> measured;
    for (const auto& [stage, rd] : rankOfStage)
        measured.push_back(rd);
    askSequences(measured);
    std::vector<RankLayers> ranks;
    for (const auto& [stage, rd] : rankOfStage) {
        ranks.emplace_back();
        attributeRank(*rd, ranks.back());
        out_.layers.computeNs += ranks.back().computeNs;
    }
    return ranks;
}

// Adds each attributed kernel's time to its unit, by the part of the step it
// ran in (what autograd launched is backward even where a forward step's
// boundary took it in); forward time also votes for the unit's virtual stage.
void LayerFinder::addUnitTimes(RankLayers& rl)
{
    for (const KernelAttr& k : rl.kernels) {
        if (k.node < 0)
            continue;
        Unit& u = rl.units[size_t(k.node)];
        out_.layers.attributedNs += k.dur;
        Part part = Part::F;
        if (k.step >= 0) {
            const Step& st = *rl.steps[size_t(k.step)];
            part = static_cast<Part>(st.kind);
            if (st.kind == StepKind::F && !k.backwardOp)
                u.stageVotes[virtualStage(st)] += k.dur;
        }
        // Autograd's own launches are backward wherever a step boundary fell.
        if (k.backwardOp && part == Part::F)
            part = Part::B;
        u.ns[size_t(part)] += k.dur;
    }
}

// The layers of all stages, in model order: by virtual stage, then as called.
std::vector<FoundLayer> LayerFinder::layersInModelOrder(const std::vector<RankLayers>& ranks) const
{
    std::vector<FoundLayer> found;
    for (const RankLayers& rl : ranks)
        for (const Unit& u : rl.units) {
            if (u.stageVotes.empty())
                continue; // never ran a forward in this iteration
            int stage = u.stageVotes.begin()->first;
            for (const auto& [s, ns] : u.stageVotes)
                if (ns > u.stageVotes.at(stage))
                    stage = s;
            const Step* any = nullptr;
            for (const Step* s : rl.steps)
                if (virtualStage(*s) == stage) {
                    any = s;
                    break;
                }
            int m = any ? rl.microbatchesOfChunk.count(any->chunk) ? rl.microbatchesOfChunk.at(any->chunk) : 0 : 0;
            if (m <= 0)
                m = std::max(1, out_.pipeline.microbatches);
            auto perMb = [&](TimeNs v) { return static_cast<TimeNs>(std::llround(static_cast<double>(v) / m)); };
            FoundLayer f;
            const std::string& name = ctx_.trace.str(rl.nodes[size_t(u.node)].name);
            f.cls = annotations_ ? name.substr(kLayerPrefix.size()) : std::string(moduleClass(name));
            f.cost.name = annotations_ ? f.cls : name.substr(kModulePrefix.size());
            f.cost.stage = stage;
            f.cost.forwardNs = perMb(u.ns[size_t(Part::F)]);
            const TimeNs in = u.ns[size_t(Part::I)], w = u.ns[size_t(Part::W)];
            f.cost.backwardNs = perMb(u.ns[size_t(Part::B)] + in + w);
            if (in > 0 || w > 0) {
                f.cost.backwardInputNs = perMb(in);
                f.cost.backwardWeightNs = perMb(w);
            }
            f.kind = u.kind;
            f.firstCall = u.firstCall;
            found.push_back(std::move(f));
        }
    std::stable_sort(found.begin(), found.end(), [](const FoundLayer& a, const FoundLayer& b) {
        return std::tie(a.cost.stage, a.firstCall) < std::tie(b.cost.stage, b.firstCall);
    });
    return found;
}

// Names the layers and files them as blocks, before or after.
void LayerFinder::nameLayers(std::vector<FoundLayer>& found)
{
    LayerAttribution& la = out_.layers;
    int blocks = 0;
    std::map<std::string, int> classCount, blockNames;
    for (const FoundLayer& f : found)
        ++(f.kind != Role::Block ? classCount[f.cls] : blockNames[f.cost.name]);
    for (FoundLayer& f : found) {
        if (f.kind == Role::Block) {
            // Module calls name classes, not attributes: blocks are numbered in model order.
            if (!annotations_)
                f.cost.name = "layers." + std::to_string(blocks);
            else if (blockNames[f.cost.name] > 1) // each stage named its own layers from 0
                f.cost.name = "stage" + std::to_string(f.cost.stage) + "/" + f.cost.name;
            ++blocks;
            la.layers.push_back(f.cost);
        } else {
            if (!annotations_ && classCount[f.cls] == 1)
                f.cost.name = f.cls;
            (f.kind == Role::Before ? la.before : la.after).push_back(f.cost);
        }
    }
}

// The note on the layers found; a partition needs a layer on every virtual
// stage, so without one the layers are dropped.
void LayerFinder::describeLayers()
{
    LayerAttribution& la = out_.layers;
    const int S = out_.pipeline.pp * std::max(1, out_.pipeline.chunks);
    std::vector<int> perStage(size_t(std::max(S, 0)), 0);
    for (const LayerCost& l : la.layers)
        if (l.stage >= 0 && l.stage < S)
            ++perStage[size_t(l.stage)];
    std::string missing;
    for (int s = 0; s < S; ++s)
        if (perStage[size_t(s)] == 0)
            missing += (missing.empty() ? "" : ", ") + std::to_string(s);
    const double share = la.computeNs > 0 ? static_cast<double>(la.attributedNs) / static_cast<double>(la.computeNs) : 0.0;
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.0f%%", share * 100.0);
    if (la.layers.empty() || !missing.empty()) {
        la.note = std::string(annotations_ ? "pipescope/layer ranges" : "module ranges") + " attribute " + pct +
                  " of the compute time, but " +
                  (la.layers.empty() ? std::string("no repeated layers were found")
                                     : "no layer was found on stage " + missing);
        la.layers.clear();
        la.source = LayerRangeKind::None;
        return;
    }
    la.note = std::to_string(la.layers.size()) + " layers from " +
              (annotations_ ? "pipescope/layer ranges" : "module ranges") + ", " + pct + " of the compute time attributed";
}

void LayerFinder::run()
{
    LayerAttribution& la = out_.layers;
    if (!out_.pipeline.found || out_.selectedIteration < 0) {
        la.note = "no pipeline was found, so no layer costs";
        return;
    }
    if (!pickSource()) {
        la.note = "the trace has neither module ranges (record with with_stack=True or with_modules=True) nor "
                  "pipescope/layer ranges (the annotation helper)";
        return;
    }
    const Iteration& it = out_.iterations[size_t(out_.selectedIteration)];
    ws_ = it.start;
    we_ = it.end;

    std::vector<RankLayers> ranks = measureRanks();
    if (annotations_)
        for (RankLayers& rl : ranks)
            chooseAnnotationUnits(rl);
    else
        chooseModuleUnits(ranks);
    for (RankLayers& rl : ranks) {
        backwardByReverseOrder(rl);
        addUnitTimes(rl);
    }
    std::vector<FoundLayer> found = layersInModelOrder(ranks);
    nameLayers(found);
    la.source = annotations_ ? LayerRangeKind::Annotations : LayerRangeKind::Modules;
    describeLayers();
}

} // namespace

void attributeLayers(Context& ctx, AnalysisResult& out, const std::vector<Step>& selectedSteps)
{
    LayerFinder(ctx, out, selectedSteps).run();
}

} // namespace pipescope::detail
