#include "model/Trace.h"

#include <algorithm>

namespace pipescope {

const StreamInfo* Trace::stream(int64_t id) const
{
    auto it = std::lower_bound(streams.begin(), streams.end(), id,
                               [](const StreamInfo& s, int64_t v) { return s.id < v; });
    return it != streams.end() && it->id == id ? &*it : nullptr;
}

bool Trace::simulated() const
{
    auto it = meta.find("simulated");
    return it != meta.end() && it->second == "1";
}

} // namespace pipescope
