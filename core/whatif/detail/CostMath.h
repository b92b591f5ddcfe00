#pragma once
// Arithmetic the cost model's estimators share (CostModel.cpp,
// CostModelFromModel.cpp, CostModelFromMeasured.cpp): checked conversions to
// nanoseconds and bytes, a median, the planning defaults. Internal to whatif/.
#include "model/Types.h"
#include "util/Error.h"
#include "util/Limits.h"
#include "whatif/ModelDescription.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace pipescope::whatif::detail {


// Defaults for planning without a trace: an InfiniBand-class link between
// pipeline stages and a ring all-reduce over the same fabric.
inline constexpr double kDefaultP2pLatencyUs = 20.0;
inline constexpr double kDefaultP2pGBps = 25.0;
inline constexpr double kDefaultAllReduceLatencyUs = 30.0;
inline constexpr double kDefaultAllReduceGBps = 40.0;
// Adam touches ~36 bytes per parameter; at ~2 TB/s that is ~0.02 ns each.
inline constexpr double kDefaultOptimizerNsPerParam = 0.02;

// A value as the user wrote it, for messages ("nan", "inf", "1e+30").
inline std::string formatNumber(double v)
{
    if (std::isnan(v))
        return "nan";
    if (std::isinf(v))
        return v < 0 ? "-inf" : "inf";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// Costs become int64 nanoseconds and bytes; a value that does not fit is
// refused by name rather than wrapped (a wrapped time looks like a deadlock).
inline TimeNs toNs(double ns)
{
    if (std::isnan(ns) || ns > static_cast<double>(kMaxTimeNs))
        throw Error("a stage's step time (" + formatNumber(ns) +
                    " ns) does not fit the nanosecond clock (about 146 years); check the layer costs and weights");
    return static_cast<TimeNs>(std::llround(std::max(0.0, ns)));
}

inline int64_t toBytes(double bytes, const char* what)
{
    if (std::isnan(bytes) || bytes > static_cast<double>(std::numeric_limits<int64_t>::max() / 4))
        throw Error(std::string("the ") + what + " (" + formatNumber(bytes) + " bytes) is too large to count; check the model sizes");
    return static_cast<int64_t>(std::llround(std::max(0.0, bytes)));
}

inline double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Megatron's per-layer forward FLOPs of a transformer layer.
inline double transformerLayerFlops(const ModelDescription& m)
{
    const double b = m.microbatchSize, s = m.sequenceLength, h = m.hiddenSize;
    return 24.0 * b * s * h * h + 4.0 * b * s * s * h;
}

} // namespace pipescope::whatif::detail
