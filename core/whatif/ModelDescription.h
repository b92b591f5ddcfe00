#pragma once
// A model description file (JSON, format "pipescope.model/1", see
// docs/model-format.md): the layers with their costs, parameters and
// activation sizes, the first and last stage extras, communication, memory
// and a default parallel layout. It lets `pipescope simulate` plan a run
// without a trace, and supplies or overrides what a trace cannot show.
#include "whatif/Memory.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope::whatif {

struct LayerSpec {
    std::string name;
    double cost = 1.0;                       // relative cost (weight when times come from a trace)
    std::optional<double> forwardMs;         // per microbatch
    std::optional<double> backwardMs;        // full backward (I + W)
    std::optional<double> backwardInputShare; // I / (I + W)
    std::optional<int64_t> params;
    std::optional<int64_t> activationBytes;  // stored per microbatch until the backward
};

struct ModelDescription {
    std::string source; // path, for messages
    std::string name;
    int hiddenSize = 0;
    int attentionHeads = 0;
    int sequenceLength = 0;
    int microbatchSize = 1;
    int vocabSize = 0;
    std::string dtype = "bf16";
    std::optional<double> gpuTflops;       // achieved TFLOP/s: derive layer times from FLOPs
    std::optional<double> layerForwardMs;  // reference time of a layer with cost 1.0
    double backwardRatio = 2.0;            // backward / forward when only forward is known
    double backwardInputShare = 0.5;       // I / (I + W) default
    std::vector<LayerSpec> layers;         // expanded ("count" repeats)
    std::optional<LayerSpec> firstStage;   // embedding etc.
    std::optional<LayerSpec> lastStage;    // head and loss
    bool lastStageGiven = false, firstStageGiven = false;

    std::optional<double> p2pLatencyUs;
    std::optional<double> p2pBandwidthGBps;
    std::optional<int64_t> p2pBytes;       // activation crossing a stage boundary per microbatch
    std::optional<double> allReduceLatencyUs;
    std::optional<double> allReduceBandwidthGBps; // bus bandwidth
    std::optional<double> optimizerMs;     // whole optimizer step of one rank holding everything
    std::optional<double> launchGapUs;

    MemoryConfig memory;
    bool memoryGiven = false;

    // Default layout for `simulate`.
    std::optional<int> pp, dp, v, microbatches;
    std::optional<std::string> schedule;

    int dtypeBytes() const;
};

// Throws FormatError naming the file and the field on bad input.
ModelDescription parseModelDescription(const std::string& jsonText, const std::string& source);
ModelDescription loadModelDescription(const std::string& path);

} // namespace pipescope::whatif
