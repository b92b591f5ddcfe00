#include "util/Error.h"

namespace pipescope {

std::string_view toString(Setting s)
{
    switch (s) {
    case Setting::Boundaries: return "boundaries";
    case Setting::Pp: return "pp";
    case Setting::V: return "v";
    case Setting::Microbatches: return "microbatches";
    case Setting::Schedule: return "schedule";
    case Setting::Weights: return "weights";
    case Setting::Layers: return "layers";
    case Setting::StageSpeed: return "stage-speed";
    case Setting::GpuTypes: return "gpu-types";
    case Setting::GpuThroughput: return "gpu-throughput";
    case Setting::FixStraggler: return "fix-straggler";
    case Setting::Freeze: return "freeze";
    case Setting::MicrobatchSizes: return "microbatch-sizes";
    case Setting::MicrobatchTokens: return "microbatch-tokens";
    case Setting::Recompute: return "recompute";
    case Setting::Prediction: return "prediction";
    }
    return "boundaries";
}

} // namespace pipescope
