#pragma once
// Kernel names as people read them. CUPTI and Nsight record many kernels by
// their mangled C++ names ("_ZN2at6native29vectorized_elementwise_kernel..."):
// the views show them demangled, with the name as recorded kept for hover
// and copying.
#include <optional>
#include <string>
#include <string_view>

namespace pipescope {

// The demangled form of an Itanium-ABI mangled name ("_Z..."); nothing when
// the name is not mangled or does not demangle.
std::optional<std::string> demangle(std::string_view name);

} // namespace pipescope
