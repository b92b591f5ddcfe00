// libFuzzer target for model descriptions (docs/model-format.md): parse,
// build the cost model and predict a small pipeline from it. Each step must
// finish or throw pipescope::Error. Seeds: resources/models/*.json.
#include "util/Error.h"
#include "whatif/CostModel.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <algorithm>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace pipescope::whatif;
    try {
        const ModelDescription md = parseModelDescription(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
        const CostModel model = CostModel::fromModel(md);
        Scenario sc;
        sc.pp = std::clamp(md.pp.value_or(2), 1, 4);
        sc.microbatches = std::clamp(md.microbatches.value_or(4), 1, 8);
        if (model.layerCount() >= sc.pp) {
            (void)predict(model, sc);
            BalanceOptions o;
            o.maxRefineRounds = 2;
            (void)autoBalance(model, sc, o);
        }
    } catch (const pipescope::Error&) {
    }
    return 0;
}
