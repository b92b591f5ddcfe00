// Layer ranges as users write them ("0..3,30..31"), parsed and printed.
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

std::vector<LayerRange> parseLayerRanges(const std::vector<std::string>& items)
{
    auto index = [](const std::string& text, int& out) {
        if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
            return false;
        out = std::stoi(text);
        return true;
    };
    std::vector<LayerRange> out;
    for (const std::string& item : items) {
        const size_t dots = item.find("..");
        LayerRange r;
        const bool ok = dots == std::string::npos
                            ? index(item, r.first) && index(item, r.last)
                            : index(item.substr(0, dots), r.first) && index(item.substr(dots + 2), r.last);
        if (!ok)
            throw ValueError(Setting::Freeze, "'" + printable(item, 64) +
                                           "' is not a layer range; give FIRST..LAST (0-based, inclusive), several "
                                           "comma-separated, e.g. 0..3,30..31");
        if (r.first > r.last)
            throw ValueError(Setting::Freeze, "the range " + item + " runs backwards; give FIRST..LAST with FIRST at most LAST");
        out.push_back(r);
    }
    return out;
}

std::string layerRangesText(const std::vector<LayerRange>& ranges)
{
    std::string out;
    for (const LayerRange& r : ranges) {
        if (!out.empty())
            out += ", ";
        out += std::to_string(r.first);
        if (r.last != r.first)
            out += ".." + std::to_string(r.last);
    }
    return out;
}

} // namespace pipescope::whatif
