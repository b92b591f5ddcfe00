#pragma once
// Tick labels for time axes (the timeline, the pipeline diagram): in the unit
// the ticks' spacing calls for, with exactly the decimals that spacing needs,
// so ticks 2.5 s apart read 0, 2.5, 5, 7.5 s and ticks 10 ms apart read
// 10 ms, not 10.000 ms.
#include <QString>

#include <algorithm>
#include <cmath>

namespace pipescope::gui {

struct TimeUnit {
    double ns;
    const char* name;
};

// The largest unit of which the step is at least one.
inline TimeUnit timeUnitFor(double stepNs)
{
    static constexpr TimeUnit units[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "µs"}, {1, "ns"}};
    for (const TimeUnit& u : units)
        if (std::abs(stepNs) >= u.ns)
            return u;
    return units[3];
}

// Decimals that write every multiple of `step` exactly (at most 6).
inline int decimalsFor(double step)
{
    for (int d = 0; d < 6; ++d) {
        const double scaled = step * std::pow(10.0, d);
        if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled))
            return d;
    }
    return 6;
}

// The label of the tick at `ns` on an axis whose ticks are `stepNs` apart.
inline QString timeTickLabel(double ns, double stepNs)
{
    const TimeUnit u = timeUnitFor(stepNs);
    const int decimals = decimalsFor(stepNs / u.ns);
    double v = ns / u.ns;
    if (std::abs(v) < 0.5 * std::pow(10.0, -decimals))
        v = 0; // no "-0"
    return QString::number(v, 'f', decimals) + QString::fromUtf8(" ") + QString::fromUtf8(u.name);
}

} // namespace pipescope::gui
