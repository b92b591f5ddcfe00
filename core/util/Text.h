#pragma once
// Small text helpers that importers share.
#include <cctype>
#include <string_view>

namespace pipescope {

// ASCII letters compared without regard to case ("RANK" equals "rank").
inline bool equalsIgnoringCase(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

} // namespace pipescope
