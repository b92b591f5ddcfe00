#pragma once
// The calibrated cost model as the remote protocol sends it (a costmodel
// response, docs/remote.md): every field of whatif::CostModel, so that a
// client replays predictions locally and gets the server's answers exactly.
// whatif::costModelToJson (the what-if JSON's "cost_model") is a summary for
// people and leaves out what a replay needs (the measured step order, the
// replicas' pace and sizes, the measured run); this is the whole value.
#include "util/Error.h"
#include "whatif/CostModel.h"

#include <nlohmann/json.hpp>

namespace pipescope::remote {

inline constexpr const char* kCostModelWireSchema = "pipescope.costmodel-wire/1";

nlohmann::json costModelToWire(const whatif::CostModel& model);

// Throws FormatError naming the first field that is missing, of the wrong
// type or out of range. The result replays as the model that was sent.
whatif::CostModel costModelFromWire(const nlohmann::json& wire);

} // namespace pipescope::remote
