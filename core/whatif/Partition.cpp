// Partitions of layers over stages: even, or from user boundaries.
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

Partition evenPartition(int layers, int stages)
{
    if (stages < 1)
        throw Error("a pipeline needs at least one stage");
    if (layers < stages)
        throw Error(std::to_string(layers) + " layers cannot fill " + std::to_string(stages) +
                    " stages; use fewer stages (--pp, --v)");
    if (layers % stages != 0)
        throw Error(std::to_string(layers) + " layers do not split evenly over " + std::to_string(stages) +
                    " stages (pp x v); give stage boundaries, auto-balance, or choose a pipeline degree and v that divide the layers");
    Partition p;
    for (int s = 0; s <= stages; ++s)
        p.firstLayer.push_back(s * (layers / stages));
    return p;
}

Partition partitionFromBoundaries(const std::vector<int>& boundaries, int layers, int stages)
{
    if (static_cast<int>(boundaries.size()) != stages - 1)
        throw ValueError(Setting::Boundaries, std::to_string(boundaries.size()) + " stage boundaries given; " +
                                           std::to_string(stages) + " stages (pp x v) need " + std::to_string(stages - 1) +
                                           ", the first layer of each stage after the first");
    Partition p;
    p.firstLayer.push_back(0);
    for (size_t i = 0; i < boundaries.size(); ++i) {
        const int b = boundaries[i];
        if (b <= p.firstLayer.back())
            throw ValueError(Setting::Boundaries, "stage boundaries must increase and be above 0: boundary " + std::to_string(i + 1) +
                                               " (" + std::to_string(b) + ") does not exceed " +
                                               std::to_string(p.firstLayer.back()));
        if (b >= layers)
            throw ValueError(Setting::Boundaries, "stage boundary " + std::to_string(b) +
                                               " leaves no layer for the last stage (the model has " + std::to_string(layers) +
                                               " layers, numbered 0.." + std::to_string(layers - 1) + ")");
        p.firstLayer.push_back(b);
    }
    p.firstLayer.push_back(layers);
    return p;
}

} // namespace pipescope::whatif
