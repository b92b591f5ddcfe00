// CostModel::fromModel: a cost model from a model description alone
// (docs/model-format.md), for planning without a trace.
#include "whatif/CostModel.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "whatif/detail/CostMath.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

namespace pipescope::whatif {

using namespace detail;

CostModel CostModel::fromModel(const ModelDescription& m)
{
    CostModel c;
    c.name = m.name;
    const bool flopsKnown = m.hiddenSize > 0 && m.sequenceLength > 0;
    const double layerFlops = flopsKnown ? transformerLayerFlops(m) : 0.0;
    // Reference forward time of a layer with cost 1.0.
    std::optional<double> refNs;
    if (m.layerForwardMs)
        refNs = *m.layerForwardMs * 1e6;
    else if (m.gpuTflops && flopsKnown)
        refNs = layerFlops / (*m.gpuTflops * 1e3);
    const double h = m.hiddenSize, s = m.sequenceLength, b = m.microbatchSize;

    // flopsRatio: the layer's FLOPs relative to a transformer layer's, for
    // extras whose time is derived rather than given.
    auto convert = [&](const LayerSpec& spec, const std::string& where, double flopsRatio, int64_t defaultParams,
                       int64_t defaultActivation) {
        LayerCostModel l;
        l.name = spec.name;
        if (spec.forwardMs)
            l.forwardNs = *spec.forwardMs * 1e6;
        else if (refNs)
            l.forwardNs = spec.cost * *refNs * flopsRatio;
        else
            throw FormatError(m.source + ": " + where +
                              " has no forward_ms; give forward_ms, a top-level layer_forward_ms, or gpu_tflops with "
                              "hidden_size and sequence_length");
        l.backwardNs = spec.backwardMs ? *spec.backwardMs * 1e6 : l.forwardNs * m.backwardRatio;
        l.backwardInputShare = spec.backwardInputShare.value_or(m.backwardInputShare);
        l.params = spec.params.value_or(defaultParams);
        l.activationBytes = spec.activationBytes.value_or(defaultActivation);
        return l;
    };
    // Korthikanti et al.: 34 s b h bytes per transformer layer in 16-bit with
    // flash attention (no stored attention matrix), no recomputation.
    const int64_t layerActivation = flopsKnown ? toBytes(34.0 * s * b * h, "activation memory of a layer") : 0;
    const int64_t layerParams = m.hiddenSize > 0 ? toBytes(12.0 * h * h + 13.0 * h, "parameter count of a layer") : 0;
    c.layerSource = LayerSource::Model;
    for (size_t i = 0; i < m.layers.size(); ++i)
        c.layers.push_back(convert(m.layers[i], "layers[" + std::to_string(i) + "] (" + m.layers[i].name + ")", 1.0,
                                   layerParams, layerActivation));

    const double V = m.vocabSize;
    if (m.firstStage) {
        c.firstStageExtra = convert(*m.firstStage, "first_stage", 1.0, 0, 0);
    } else if (V > 0 && h > 0) {
        // Embedding lookup: parameters and one hidden state, negligible compute.
        c.firstStageExtra.name = "embedding";
        c.firstStageExtra.params = toBytes(V * h, "parameter count of the embedding");
        c.firstStageExtra.activationBytes = toBytes(s * b * h * m.dtypeBytes(), "activation memory of the embedding");
    }
    if (m.lastStage) {
        c.lastStageExtra = convert(*m.lastStage, "last_stage", 1.0, 0, 0);
    } else if (V > 0 && h > 0) {
        // Output projection and loss: 2 b s h V FLOPs forward, fp32 logits kept for the loss.
        LayerSpec head;
        head.name = "head+loss";
        c.lastStageExtra = refNs && flopsKnown ? convert(head, "last_stage", 2.0 * b * s * h * V / layerFlops, 0, 0)
                                               : LayerCostModel{};
        c.lastStageExtra.name = "head+loss";
        c.lastStageExtra.params = toBytes(V * h, "parameter count of the output layer");
        c.lastStageExtra.activationBytes = toBytes(s * b * V * 4.0, "activation memory of the output layer");
    }

    c.p2pBytes = m.p2pBytes.value_or(flopsKnown ? toBytes(s * b * h * m.dtypeBytes(), "activation sent between stages") : 0);
    c.p2pLatencyNs = toNs(m.p2pLatencyUs.value_or(kDefaultP2pLatencyUs) * 1e3);
    c.p2pBytesPerNs = m.p2pBandwidthGBps.value_or(kDefaultP2pGBps); // 1 GB/s = 1 byte/ns
    c.allReduceLatencyNs = toNs(m.allReduceLatencyUs.value_or(kDefaultAllReduceLatencyUs) * 1e3);
    c.allReduceBytesPerNs = m.allReduceBandwidthGBps.value_or(kDefaultAllReduceGBps);
    c.gradCommBytesPerParam = m.dtypeBytes();
    c.dataParallel = m.dp.value_or(1);
    c.memory = m.memory;
    c.memory.dataParallel = c.dataParallel;
    int64_t totalParams = c.firstStageExtra.params + c.lastStageExtra.params;
    for (const auto& l : c.layers)
        totalParams += l.params;
    c.optimizerNsPerParam = m.optimizerMs && totalParams > 0 ? *m.optimizerMs * 1e6 / static_cast<double>(totalParams)
                                                             : kDefaultOptimizerNsPerParam;
    c.launchGapNs = toNs(m.launchGapUs.value_or(0.0) * 1e3);
    c.referenceMicrobatches = m.microbatches.value_or(1);
    c.keepGlobalBatch = false;
    return c;
}

} // namespace pipescope::whatif
