#include "remote/CostModelWire.h"

#include "util/Format.h"

#include <cmath>
#include <limits>
#include <string>

namespace pipescope::remote {

using nlohmann::json;
using namespace whatif;

namespace {

// ---- writing ---------------------------------------------------------------

// Doubles as JSON numbers (the shortest text that reads back exactly);
// the non-finite, which JSON has not, as strings.
json num(double x)
{
    if (std::isnan(x))
        return "nan";
    if (std::isinf(x))
        return x > 0 ? "inf" : "-inf";
    return x;
}

json nums(const std::vector<double>& v)
{
    json a = json::array();
    for (double x : v)
        a.push_back(num(x));
    return a;
}

template <class T>
json opt(const std::optional<T>& v)
{
    return v ? json(*v) : json(nullptr);
}

json layerWire(const LayerCostModel& l)
{
    return {{"name", l.name}, {"forward_ns", num(l.forwardNs)}, {"backward_ns", num(l.backwardNs)},
            {"backward_input_share", num(l.backwardInputShare)}, {"params", l.params}, {"activation_bytes", l.activationBytes},
            {"frozen", l.frozen}};
}

json sizesWire(const MicrobatchSizes& s)
{
    json f = json::array(), b = json::array();
    for (const auto& row : s.forward)
        f.push_back(nums(row));
    for (const auto& row : s.backward)
        b.push_back(nums(row));
    return {{"source", static_cast<int>(s.source)}, {"forward", f}, {"backward", b}, {"tokens", nums(s.tokens)}};
}

json scheduleWire(const Schedule& s)
{
    json ranks = json::array();
    for (const auto& actions : s.ranks) {
        json a = json::array();
        for (const Action& x : actions)
            a.push_back(json::array({static_cast<int>(x.kind), x.stage, x.microbatch}));
        ranks.push_back(std::move(a));
    }
    return {{"kind", toString(s.kind)}, {"pp", s.pp}, {"stages", s.stages}, {"microbatches", s.microbatches},
            {"rank_of_stage", s.rankOfStage}, {"chunk_of_stage", s.chunkOfStage}, {"ranks", std::move(ranks)}};
}

// ---- reading ---------------------------------------------------------------

[[noreturn]] void bad(const std::string& path, const std::string& what)
{
    throw FormatError("the server's cost model: '" + path + "' " + what + "; the server and this pipescope may differ in version");
}

const json& at(const json& j, const std::string& path, const char* key)
{
    if (!j.is_object() || !j.contains(key))
        bad(path + "." + key, "is missing");
    return j.at(key);
}

double toDouble(const json& v, const std::string& path)
{
    if (v.is_number())
        return v.get<double>();
    if (v.is_string()) {
        const auto& s = v.get_ref<const std::string&>();
        if (s == "nan")
            return std::numeric_limits<double>::quiet_NaN();
        if (s == "inf")
            return std::numeric_limits<double>::infinity();
        if (s == "-inf")
            return -std::numeric_limits<double>::infinity();
    }
    bad(path, "is not a number");
}

int64_t toInt(const json& v, const std::string& path, int64_t lo = std::numeric_limits<int64_t>::min(),
              int64_t hi = std::numeric_limits<int64_t>::max())
{
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())))
        bad(path, "is not a whole number");
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
        bad(path, "is out of range (" + std::to_string(x) + ")");
    return x;
}

int toInt32(const json& v, const std::string& path, int lo = std::numeric_limits<int>::min(), int hi = std::numeric_limits<int>::max())
{
    return static_cast<int>(toInt(v, path, lo, hi));
}

bool toBool(const json& v, const std::string& path)
{
    if (!v.is_boolean())
        bad(path, "is not true or false");
    return v.get<bool>();
}

std::string toStr(const json& v, const std::string& path)
{
    if (!v.is_string())
        bad(path, "is not a string");
    return v.get<std::string>();
}

const json& arr(const json& v, const std::string& path, size_t maxItems = 1'000'000)
{
    if (!v.is_array())
        bad(path, "is not a list");
    if (v.size() > maxItems)
        bad(path, "has too many items (" + std::to_string(v.size()) + ")");
    return v;
}

std::vector<double> doubles(const json& v, const std::string& path)
{
    std::vector<double> out;
    for (const json& x : arr(v, path))
        out.push_back(toDouble(x, path + "[]"));
    return out;
}

template <class T>
std::vector<T> ints(const json& v, const std::string& path)
{
    std::vector<T> out;
    for (const json& x : arr(v, path))
        out.push_back(static_cast<T>(toInt(x, path + "[]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max())));
    return out;
}

std::optional<int64_t> optInt(const json& v, const std::string& path)
{
    if (v.is_null())
        return std::nullopt;
    return toInt(v, path);
}

LayerCostModel layerFrom(const json& j, const std::string& p)
{
    LayerCostModel l;
    l.name = toStr(at(j, p, "name"), p + ".name");
    l.forwardNs = toDouble(at(j, p, "forward_ns"), p + ".forward_ns");
    l.backwardNs = toDouble(at(j, p, "backward_ns"), p + ".backward_ns");
    l.backwardInputShare = toDouble(at(j, p, "backward_input_share"), p + ".backward_input_share");
    l.params = toInt(at(j, p, "params"), p + ".params");
    l.activationBytes = toInt(at(j, p, "activation_bytes"), p + ".activation_bytes");
    l.frozen = toBool(at(j, p, "frozen"), p + ".frozen");
    return l;
}

std::vector<std::vector<double>> rows(const json& v, const std::string& path)
{
    std::vector<std::vector<double>> out;
    for (const json& r : arr(v, path))
        out.push_back(doubles(r, path + "[]"));
    return out;
}

MicrobatchSizes sizesFrom(const json& j, const std::string& p)
{
    MicrobatchSizes s;
    s.source = static_cast<SizeSource>(toInt(at(j, p, "source"), p + ".source", 0, static_cast<int>(SizeSource::Simulated)));
    s.forward = rows(at(j, p, "forward"), p + ".forward");
    s.backward = rows(at(j, p, "backward"), p + ".backward");
    s.tokens = doubles(at(j, p, "tokens"), p + ".tokens");
    if (s.forward.size() != s.backward.size())
        bad(p, "has forward and backward rows of different counts");
    for (size_t i = 0; i < s.forward.size(); ++i)
        if (s.forward[i].size() != s.forward.front().size() || s.backward[i].size() != s.forward.front().size())
            bad(p, "has rows of different lengths");
    return s;
}

Schedule scheduleFrom(const json& j, const std::string& p)
{
    Schedule s;
    const std::string kind = toStr(at(j, p, "kind"), p + ".kind");
    if (kind == toString(ScheduleKind::Custom))
        s.kind = ScheduleKind::Custom;
    else if (auto k = scheduleKindFromString(kind))
        s.kind = *k;
    else
        bad(p + ".kind", "names no schedule ('" + printable(kind, 64) + "')");
    s.pp = toInt32(at(j, p, "pp"), p + ".pp", 1, 1 << 20);
    s.stages = toInt32(at(j, p, "stages"), p + ".stages", 1, 1 << 20);
    s.microbatches = toInt32(at(j, p, "microbatches"), p + ".microbatches", 1, 1 << 20);
    s.rankOfStage = ints<int>(at(j, p, "rank_of_stage"), p + ".rank_of_stage");
    s.chunkOfStage = ints<int>(at(j, p, "chunk_of_stage"), p + ".chunk_of_stage");
    if (s.rankOfStage.size() != size_t(s.stages) || s.chunkOfStage.size() != size_t(s.stages))
        bad(p, "has stage lists of another length than its stages");
    for (int r : s.rankOfStage)
        if (r < 0 || r >= s.pp)
            bad(p + ".rank_of_stage", "names a rank outside the pipeline");
    for (const json& rank : arr(at(j, p, "ranks"), p + ".ranks")) {
        std::vector<Action> actions;
        for (const json& a : arr(rank, p + ".ranks[]")) {
            if (!a.is_array() || a.size() != 3)
                bad(p + ".ranks[][]", "is not [kind, stage, microbatch]");
            Action x;
            x.kind = static_cast<StepKind>(toInt(a[0], p + ".ranks[][0]", 0, 3));
            x.stage = toInt32(a[1], p + ".ranks[][1]", 0, s.stages - 1);
            x.microbatch = toInt32(a[2], p + ".ranks[][2]", 0, s.microbatches - 1);
            actions.push_back(x);
        }
        s.ranks.push_back(std::move(actions));
    }
    if (s.ranks.size() != size_t(s.pp))
        bad(p + ".ranks", "does not have one list per rank");
    return s;
}

} // namespace

json costModelToWire(const CostModel& m)
{
    json layers = json::array();
    for (const auto& l : m.layers)
        layers.push_back(layerWire(l));
    json gaps = json::array(), localGaps = json::array();
    for (const auto& g : m.stepGapNs)
        gaps.push_back(json::array({g[0], g[1]}));
    for (const auto& g : m.localStepGapNs)
        localGaps.push_back(json::array({g[0], g[1]}));
    json frozen = json::array();
    for (const LayerRange& r : m.frozenLayers)
        frozen.push_back(json::array({r.first, r.last}));
    json replicas = json::array();
    for (const MicrobatchSizes& s : m.replicaSizes)
        replicas.push_back(sizesWire(s));
    const MemoryConfig& mem = m.memory;
    return {
        {"name", m.name},
        {"layers", std::move(layers)},
        {"layer_source", static_cast<int>(m.layerSource)},
        {"first_stage_extra", layerWire(m.firstStageExtra)},
        {"last_stage_extra", layerWire(m.lastStageExtra)},
        {"stage_extras_note", m.stageExtrasNote},
        {"p2p_bytes", m.p2pBytes},
        {"p2p_latency_ns", m.p2pLatencyNs},
        {"p2p_bytes_per_ns", num(m.p2pBytesPerNs)},
        {"p2p_eager_bytes", m.p2pEagerBytes},
        {"data_parallel", m.dataParallel},
        {"all_reduce_latency_ns", m.allReduceLatencyNs},
        {"all_reduce_bytes_per_ns", num(m.allReduceBytesPerNs)},
        {"grad_comm_bytes_per_param", num(m.gradCommBytesPerParam)},
        {"measured_all_reduce_ns", opt(m.measuredAllReduceNs)},
        {"measured_optimizer_ns", opt(m.measuredOptimizerNs)},
        {"measured_units", num(m.measuredUnits)},
        {"optimizer_ns_per_param", num(m.optimizerNsPerParam)},
        {"launch_gap_ns", m.launchGapNs},
        {"step_gap_ns", std::move(gaps)},
        {"local_step_gap_ns", std::move(localGaps)},
        {"measured_order", m.measuredOrder ? scheduleWire(*m.measuredOrder) : json(nullptr)},
        {"blocking_exchanges", m.blockingExchanges},
        {"exchange_gap_ns", m.exchangeGapNs},
        {"megatron_exchanges", m.megatronExchanges},
        {"shared_links", m.sharedLinks},
        {"pipeline_sync_ns", m.pipelineSyncNs},
        {"rank_start_ns", m.rankStartNs},
        {"memory",
         {{"weight_bytes_per_param", num(mem.weightBytesPerParam)},
          {"grad_bytes_per_param", num(mem.gradBytesPerParam)},
          {"optimizer_bytes_per_param", num(mem.optimizerBytesPerParam)},
          {"zero_stage", mem.zeroStage},
          {"data_parallel", mem.dataParallel},
          {"reserved_bytes", mem.reservedBytes},
          {"weight_grad_activation_share", num(mem.weightGradActivationShare)},
          {"selective_activation_share", num(mem.selectiveActivationShare)},
          {"selective_forward_share", num(mem.selectiveForwardShare)},
          {"gpu_memory_bytes", opt(mem.gpuMemoryBytes)}}},
        {"reference_microbatches", m.referenceMicrobatches},
        {"keep_global_batch", m.keepGlobalBatch},
        {"measured_iteration_ns", opt(m.measuredIterationNs)},
        {"measured_idle_ns_per_stage", m.measuredIdleNsPerStage},
        {"measured_peak_bytes", m.measuredPeakBytes},
        {"measured_partition", m.measuredPartition ? json(m.measuredPartition->firstLayer) : json(nullptr)},
        {"measured_schedule", m.measuredSchedule ? json(toString(*m.measuredSchedule)) : json(nullptr)},
        {"measured_pp", m.measuredPp},
        {"measured_v", m.measuredV},
        {"measured_microbatches", m.measuredMicrobatches},
        {"stage_speed", nums(m.stageSpeed)},
        {"replica_pace", nums(m.replicaPace)},
        {"measured_costs", m.measuredCosts},
        {"frozen_layers", std::move(frozen)},
        {"microbatch_sizes", m.microbatchSizes ? sizesWire(*m.microbatchSizes) : json(nullptr)},
        {"replica_sizes", std::move(replicas)},
    };
}

CostModel costModelFromWire(const json& w)
{
    const std::string p = "model";
    if (!w.is_object())
        bad(p, "is not an object");
    CostModel m;
    m.name = toStr(at(w, p, "name"), "name");
    for (const json& l : arr(at(w, p, "layers"), "layers", 1'000'000))
        m.layers.push_back(layerFrom(l, "layers[]"));
    m.layerSource = static_cast<LayerSource>(toInt(at(w, p, "layer_source"), "layer_source", 0, static_cast<int>(LayerSource::Trace)));
    m.firstStageExtra = layerFrom(at(w, p, "first_stage_extra"), "first_stage_extra");
    m.lastStageExtra = layerFrom(at(w, p, "last_stage_extra"), "last_stage_extra");
    if (auto note = w.find("stage_extras_note"); note != w.end())
        m.stageExtrasNote = toStr(*note, "stage_extras_note");
    m.p2pBytes = toInt(at(w, p, "p2p_bytes"), "p2p_bytes");
    m.p2pLatencyNs = toInt(at(w, p, "p2p_latency_ns"), "p2p_latency_ns");
    m.p2pBytesPerNs = toDouble(at(w, p, "p2p_bytes_per_ns"), "p2p_bytes_per_ns");
    m.p2pEagerBytes = toInt(at(w, p, "p2p_eager_bytes"), "p2p_eager_bytes");
    m.dataParallel = toInt32(at(w, p, "data_parallel"), "data_parallel", 1);
    m.allReduceLatencyNs = toInt(at(w, p, "all_reduce_latency_ns"), "all_reduce_latency_ns");
    m.allReduceBytesPerNs = toDouble(at(w, p, "all_reduce_bytes_per_ns"), "all_reduce_bytes_per_ns");
    m.gradCommBytesPerParam = toDouble(at(w, p, "grad_comm_bytes_per_param"), "grad_comm_bytes_per_param");
    m.measuredAllReduceNs = optInt(at(w, p, "measured_all_reduce_ns"), "measured_all_reduce_ns");
    m.measuredOptimizerNs = optInt(at(w, p, "measured_optimizer_ns"), "measured_optimizer_ns");
    m.measuredUnits = toDouble(at(w, p, "measured_units"), "measured_units");
    m.optimizerNsPerParam = toDouble(at(w, p, "optimizer_ns_per_param"), "optimizer_ns_per_param");
    m.launchGapNs = toInt(at(w, p, "launch_gap_ns"), "launch_gap_ns");
    for (const json& g : arr(at(w, p, "step_gap_ns"), "step_gap_ns")) {
        if (!g.is_array() || g.size() != 2)
            bad("step_gap_ns[]", "is not [forward, backward]");
        m.stepGapNs.push_back({toInt(g[0], "step_gap_ns[][0]"), toInt(g[1], "step_gap_ns[][1]")});
    }
    // Servers before the local gaps send none: every step then pays step_gap_ns.
    if (w.is_object() && w.contains("local_step_gap_ns"))
        for (const json& g : arr(w.at("local_step_gap_ns"), "local_step_gap_ns")) {
            if (!g.is_array() || g.size() != 2)
                bad("local_step_gap_ns[]", "is not [forward, backward]");
            m.localStepGapNs.push_back({toInt(g[0], "local_step_gap_ns[][0]"), toInt(g[1], "local_step_gap_ns[][1]")});
        }
    if (const json& o = at(w, p, "measured_order"); !o.is_null())
        m.measuredOrder = scheduleFrom(o, "measured_order");
    m.blockingExchanges = toBool(at(w, p, "blocking_exchanges"), "blocking_exchanges");
    m.exchangeGapNs = toInt(at(w, p, "exchange_gap_ns"), "exchange_gap_ns");
    m.megatronExchanges = toBool(at(w, p, "megatron_exchanges"), "megatron_exchanges");
    m.sharedLinks = toBool(at(w, p, "shared_links"), "shared_links");
    m.pipelineSyncNs = toInt(at(w, p, "pipeline_sync_ns"), "pipeline_sync_ns");
    m.rankStartNs = ints<TimeNs>(at(w, p, "rank_start_ns"), "rank_start_ns");
    const json& mem = at(w, p, "memory");
    MemoryConfig& c = m.memory;
    c.weightBytesPerParam = toDouble(at(mem, "memory", "weight_bytes_per_param"), "memory.weight_bytes_per_param");
    c.gradBytesPerParam = toDouble(at(mem, "memory", "grad_bytes_per_param"), "memory.grad_bytes_per_param");
    c.optimizerBytesPerParam = toDouble(at(mem, "memory", "optimizer_bytes_per_param"), "memory.optimizer_bytes_per_param");
    c.zeroStage = toInt32(at(mem, "memory", "zero_stage"), "memory.zero_stage", 0, 3);
    c.dataParallel = toInt32(at(mem, "memory", "data_parallel"), "memory.data_parallel", 1);
    c.reservedBytes = toInt(at(mem, "memory", "reserved_bytes"), "memory.reserved_bytes");
    c.weightGradActivationShare = toDouble(at(mem, "memory", "weight_grad_activation_share"), "memory.weight_grad_activation_share");
    c.selectiveActivationShare = toDouble(at(mem, "memory", "selective_activation_share"), "memory.selective_activation_share");
    c.selectiveForwardShare = toDouble(at(mem, "memory", "selective_forward_share"), "memory.selective_forward_share");
    c.gpuMemoryBytes = optInt(at(mem, "memory", "gpu_memory_bytes"), "memory.gpu_memory_bytes");
    m.referenceMicrobatches = toInt32(at(w, p, "reference_microbatches"), "reference_microbatches", 1);
    m.keepGlobalBatch = toBool(at(w, p, "keep_global_batch"), "keep_global_batch");
    m.measuredIterationNs = optInt(at(w, p, "measured_iteration_ns"), "measured_iteration_ns");
    m.measuredIdleNsPerStage = ints<TimeNs>(at(w, p, "measured_idle_ns_per_stage"), "measured_idle_ns_per_stage");
    m.measuredPeakBytes = ints<int64_t>(at(w, p, "measured_peak_bytes"), "measured_peak_bytes");
    if (const json& part = at(w, p, "measured_partition"); !part.is_null()) {
        Partition pt;
        pt.firstLayer = ints<int>(part, "measured_partition");
        if (pt.firstLayer.size() < 2 || pt.firstLayer.front() != 0)
            bad("measured_partition", "is not a partition (0, first layers..., layer count)");
        for (size_t i = 1; i < pt.firstLayer.size(); ++i)
            if (pt.firstLayer[i] <= pt.firstLayer[i - 1])
                bad("measured_partition", "does not increase");
        m.measuredPartition = std::move(pt);
    }
    if (const json& s = at(w, p, "measured_schedule"); !s.is_null()) {
        const std::string kind = toStr(s, "measured_schedule");
        if (kind == toString(ScheduleKind::Custom))
            m.measuredSchedule = ScheduleKind::Custom;
        else if (auto k = scheduleKindFromString(kind))
            m.measuredSchedule = *k;
        else
            bad("measured_schedule", "names no schedule");
    }
    m.measuredPp = toInt32(at(w, p, "measured_pp"), "measured_pp", 0);
    m.measuredV = toInt32(at(w, p, "measured_v"), "measured_v", 0);
    m.measuredMicrobatches = toInt32(at(w, p, "measured_microbatches"), "measured_microbatches", 0);
    m.stageSpeed = doubles(at(w, p, "stage_speed"), "stage_speed");
    m.replicaPace = doubles(at(w, p, "replica_pace"), "replica_pace");
    m.measuredCosts = toBool(at(w, p, "measured_costs"), "measured_costs");
    for (const json& r : arr(at(w, p, "frozen_layers"), "frozen_layers")) {
        if (!r.is_array() || r.size() != 2)
            bad("frozen_layers[]", "is not [first, last]");
        m.frozenLayers.push_back({toInt32(r[0], "frozen_layers[][0]", 0), toInt32(r[1], "frozen_layers[][1]", 0)});
    }
    if (const json& s = at(w, p, "microbatch_sizes"); !s.is_null())
        m.microbatchSizes = sizesFrom(s, "microbatch_sizes");
    for (const json& s : arr(at(w, p, "replica_sizes"), "replica_sizes"))
        m.replicaSizes.push_back(sizesFrom(s, "replica_sizes[]"));
    return m;
}

} // namespace pipescope::remote
