#include "whatif/ModelDescription.h"

#include "util/BoundedJson.h"
#include "util/Error.h"
#include "util/InputFile.h"
#include "util/Limits.h"

#include <nlohmann/json.hpp>

#include <cmath>

namespace pipescope::whatif {

using nlohmann::json;

namespace {

constexpr double kMaxGpuMemoryGiB = 1024.0 * 1024.0; // 1 PiB, as `--gpu-memory` allows

class Reader {
public:
    explicit Reader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const
    {
        throw FormatError(source_ + ": " + field + " " + what);
    }

    const json* find(const json& obj, const char* key) const
    {
        auto it = obj.find(key);
        if (it == obj.end() || it->is_null())
            return nullptr;
        return &*it;
    }

    std::optional<double> number(const json& obj, const char* key, const std::string& path, bool positive = false,
                                 bool allowZero = true) const
    {
        const json* v = find(obj, key);
        if (!v)
            return std::nullopt;
        if (!v->is_number())
            fail(path + key, "must be a number");
        const double d = v->get<double>();
        if (!std::isfinite(d) || d < 0 || (positive && !allowZero && d == 0))
            fail(path + key, positive && !allowZero ? "must be a positive number" : "must not be negative");
        return d;
    }

    std::optional<int64_t> integer(const json& obj, const char* key, const std::string& path, int64_t min = 0) const
    {
        const json* v = find(obj, key);
        if (!v)
            return std::nullopt;
        if (!v->is_number())
            fail(path + key, "must be a whole number");
        const double d = v->get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(min) || d > 9.0e18)
            fail(path + key, "must be a whole number of at least " + std::to_string(min));
        return static_cast<int64_t>(d);
    }

    std::optional<std::string> string(const json& obj, const char* key, const std::string& path) const
    {
        const json* v = find(obj, key);
        if (!v)
            return std::nullopt;
        if (!v->is_string())
            fail(path + key, "must be a string");
        return v->get<std::string>();
    }

    const json* object(const json& obj, const char* key, const std::string& path) const
    {
        const json* v = find(obj, key);
        if (v && !v->is_object())
            fail(path + key, "must be an object");
        return v;
    }

    LayerSpec layer(const json& obj, const std::string& path, const std::string& defaultName) const
    {
        if (!obj.is_object())
            fail(path, "must be an object");
        LayerSpec l;
        l.name = string(obj, "name", path + ".").value_or(defaultName);
        l.cost = number(obj, "cost", path + ".").value_or(1.0);
        l.forwardMs = number(obj, "forward_ms", path + ".");
        l.backwardMs = number(obj, "backward_ms", path + ".");
        l.backwardInputShare = number(obj, "backward_input_share", path + ".");
        if (l.backwardInputShare && *l.backwardInputShare > 1.0)
            fail(path + ".backward_input_share", "must be between 0 and 1");
        l.params = integer(obj, "params", path + ".");
        l.activationBytes = integer(obj, "activation_bytes", path + ".");
        return l;
    }

private:
    std::string source_;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

} // namespace

int ModelDescription::dtypeBytes() const
{
    if (dtype == "fp32" || dtype == "float32")
        return 4;
    if (dtype == "fp8" || dtype == "int8")
        return 1;
    return 2;
}

ModelDescription parseModelDescription(const std::string& text, const std::string& source)
{
    // Size and nesting are checked before parsing: "[[[[..." expands a
    // thousandfold in memory. JSON that fails to parse within the bounds is
    // parsed again for the parser's own account of where it fails.
    json doc;
    const std::string advice = "see docs/model-format.md for the model description format";
    try {
        doc = parseBoundedJson(text, source, kMaxDescriptionBytes, advice);
    } catch (const FormatError&) {
        if (text.size() > kMaxDescriptionBytes || jsonDepth(text) > kMaxJsonDepth)
            throw;
        try {
            doc = json::parse(text);
        } catch (const json::exception& e) {
            throw FormatError(source + ": not valid JSON (" + std::string(e.what()) + "); " + advice);
        }
        throw;
    }
    Reader rd(source);
    if (!doc.is_object())
        rd.fail("the document", "must be a JSON object (see docs/model-format.md)");
    ModelDescription m;
    m.source = source;
    if (auto f = rd.string(doc, "format", "")) {
        if (f->rfind("pipescope.model/1", 0) != 0)
            rd.fail("format", "is '" + *f + "'; this pipescope reads pipescope.model/1");
    }
    m.name = rd.string(doc, "name", "").value_or("model");
    m.hiddenSize = static_cast<int>(rd.integer(doc, "hidden_size", "", 0).value_or(0));
    m.attentionHeads = static_cast<int>(rd.integer(doc, "attention_heads", "", 0).value_or(0));
    m.sequenceLength = static_cast<int>(rd.integer(doc, "sequence_length", "", 0).value_or(0));
    m.microbatchSize = static_cast<int>(rd.integer(doc, "microbatch_size", "", 1).value_or(1));
    m.vocabSize = static_cast<int>(rd.integer(doc, "vocab_size", "", 0).value_or(0));
    m.dtype = rd.string(doc, "dtype", "").value_or("bf16");
    m.gpuTflops = rd.number(doc, "gpu_tflops", "", true, false);
    m.layerForwardMs = rd.number(doc, "layer_forward_ms", "");
    m.backwardRatio = rd.number(doc, "backward_ratio", "").value_or(2.0);
    m.backwardInputShare = rd.number(doc, "backward_input_share", "").value_or(0.5);
    if (m.backwardInputShare > 1.0)
        rd.fail("backward_input_share", "must be between 0 and 1");
    m.optimizerMs = rd.number(doc, "optimizer_ms", "");
    m.launchGapUs = rd.number(doc, "launch_gap_us", "");

    const json* layers = rd.find(doc, "layers");
    if (!layers || !layers->is_array() || layers->empty())
        rd.fail("layers", "must be a non-empty array of layers (see docs/model-format.md)");
    for (size_t i = 0; i < layers->size(); ++i) {
        const std::string path = "layers[" + std::to_string(i) + "]";
        const json& l = (*layers)[i];
        LayerSpec spec = rd.layer(l, path, "layer");
        const int64_t count = rd.integer(l, "count", path + ".", 1).value_or(1);
        if (count > 100000 || m.layers.size() + static_cast<size_t>(count) > 100000)
            rd.fail(path + ".count", "makes more than 100000 layers");
        for (int64_t k = 0; k < count; ++k) {
            LayerSpec copy = spec;
            if (count > 1)
                copy.name = spec.name + "." + std::to_string(k);
            m.layers.push_back(std::move(copy));
        }
    }
    if (const json* f = rd.object(doc, "first_stage", "")) {
        m.firstStage = rd.layer(*f, "first_stage", "embedding");
        m.firstStageGiven = true;
    }
    if (const json* l = rd.object(doc, "last_stage", "")) {
        m.lastStage = rd.layer(*l, "last_stage", "head+loss");
        m.lastStageGiven = true;
    }
    if (const json* c = rd.object(doc, "communication", "")) {
        m.p2pLatencyUs = rd.number(*c, "p2p_latency_us", "communication.");
        m.p2pBandwidthGBps = rd.number(*c, "p2p_bandwidth_gbps", "communication.", true, false);
        m.p2pBytes = rd.integer(*c, "p2p_bytes", "communication.");
        m.allReduceLatencyUs = rd.number(*c, "allreduce_latency_us", "communication.");
        m.allReduceBandwidthGBps = rd.number(*c, "allreduce_bandwidth_gbps", "communication.", true, false);
    }
    if (m.hiddenSize > 0 && m.sequenceLength > 0) {
        // Selective recomputation's shares (Korthikanti et al. 2022): the
        // attention core holds 5as/h of a layer's sbh(34 + 5as/h) activation
        // bytes and does 4s^2h of its 24sh^2 + 4s^2h forward FLOPs.
        const double h = m.hiddenSize, s = m.sequenceLength, a = m.attentionHeads;
        if (a > 0)
            m.memory.selectiveActivationShare = (5.0 * a * s / h) / (34.0 + 5.0 * a * s / h);
        m.memory.selectiveForwardShare = s / (6.0 * h + s);
    }
    if (const json* mem = rd.object(doc, "memory", "")) {
        m.memoryGiven = true;
        MemoryConfig& mc = m.memory;
        // Sizes in GiB become bytes in an int64: bounded as the CLI's --gpu-memory is.
        auto bytesOf = [&](double gib, const char* field) {
            if (!(gib >= 0 && gib <= kMaxGpuMemoryGiB))
                rd.fail(field, "must be between 0 and 1,048,576 GiB");
            return static_cast<int64_t>(gib * kGiB);
        };
        if (auto g = rd.number(*mem, "gpu_memory_gib", "memory.", true, false))
            mc.gpuMemoryBytes = bytesOf(*g, "memory.gpu_memory_gib");
        mc.weightBytesPerParam = rd.number(*mem, "weight_bytes_per_param", "memory.").value_or(mc.weightBytesPerParam);
        mc.gradBytesPerParam = rd.number(*mem, "grad_bytes_per_param", "memory.").value_or(mc.gradBytesPerParam);
        mc.optimizerBytesPerParam =
            rd.number(*mem, "optimizer_bytes_per_param", "memory.").value_or(mc.optimizerBytesPerParam);
        mc.zeroStage = static_cast<int>(rd.integer(*mem, "zero_stage", "memory.").value_or(0));
        if (mc.zeroStage > 3)
            rd.fail("memory.zero_stage", "must be 0, 1, 2 or 3");
        if (auto r = rd.number(*mem, "reserved_gib", "memory."))
            mc.reservedBytes = bytesOf(*r, "memory.reserved_gib");
        mc.weightGradActivationShare =
            rd.number(*mem, "weight_grad_activation_share", "memory.").value_or(mc.weightGradActivationShare);
        if (mc.weightGradActivationShare > 1.0)
            rd.fail("memory.weight_grad_activation_share", "must be between 0 and 1");
        mc.selectiveActivationShare =
            rd.number(*mem, "selective_activation_share", "memory.").value_or(mc.selectiveActivationShare);
        if (mc.selectiveActivationShare > 1.0)
            rd.fail("memory.selective_activation_share", "must be between 0 and 1");
        mc.selectiveForwardShare = rd.number(*mem, "selective_forward_share", "memory.").value_or(mc.selectiveForwardShare);
        if (mc.selectiveForwardShare > 1.0)
            rd.fail("memory.selective_forward_share", "must be between 0 and 1");
    }
    if (const json* p = rd.object(doc, "parallel", "")) {
        if (auto v = rd.integer(*p, "pp", "parallel.", 1))
            m.pp = static_cast<int>(*v);
        if (auto v = rd.integer(*p, "dp", "parallel.", 1))
            m.dp = static_cast<int>(*v);
        if (auto v = rd.integer(*p, "v", "parallel.", 1))
            m.v = static_cast<int>(*v);
        if (auto v = rd.integer(*p, "microbatches", "parallel.", 1))
            m.microbatches = static_cast<int>(*v);
        m.schedule = rd.string(*p, "schedule", "parallel.");
    }
    if (m.pp && *m.pp > 4096)
        rd.fail("parallel.pp", "is larger than 4096");
    if (m.microbatches && *m.microbatches > 100000)
        rd.fail("parallel.microbatches", "is larger than 100000");
    if (m.dp)
        m.memory.dataParallel = *m.dp;
    return m;
}

ModelDescription loadModelDescription(const std::string& path)
{
    return parseModelDescription(InputFile::readAll(path), path);
}

} // namespace pipescope::whatif
