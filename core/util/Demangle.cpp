#include "util/Demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace pipescope {

std::optional<std::string> demangle(std::string_view name)
{
    if (name.size() < 3 || name.substr(0, 2) != "_Z")
        return std::nullopt;
    const std::string z(name); // NUL-terminated
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status), std::free);
    if (status != 0 || !out)
        return std::nullopt;
    return std::string(out.get());
}

} // namespace pipescope
