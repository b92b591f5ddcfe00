#include "import/kineto/KinetoNames.h"

#include "util/Text.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

namespace pipescope::kineto {

std::optional<int> dtypeSize(std::string_view dtype)
{
    if (dtype.rfind("c10::", 0) == 0)
        dtype.remove_prefix(5);
    if (dtype.rfind("torch.", 0) == 0)
        dtype.remove_prefix(6);
    static const std::array<std::pair<std::string_view, int>, 28> sizes{{
        {"float", 4},          {"float32", 4},        {"double", 8},      {"float64", 8},
        {"half", 2},           {"float16", 2},        {"bfloat16", 2},    {"long", 8},
        {"int64", 8},          {"int", 4},            {"int32", 4},       {"short", 2},
        {"int16", 2},          {"char", 1},           {"int8", 1},        {"byte", 1},
        {"uint8", 1},          {"bool", 1},           {"complexfloat", 8}, {"complexdouble", 16},
        {"complexhalf", 4},    {"float8_e4m3fn", 1},  {"float8_e5m2", 1}, {"float8_e4m3fnuz", 1},
        {"float8_e5m2fnuz", 1}, {"uint16", 2},        {"uint32", 4},      {"uint64", 8},
    }};
    for (const auto& [name, size] : sizes) {
        if (equalsIgnoringCase(dtype, name))
            return size;
    }
    return std::nullopt;
}

CopyKind copyKindFromName(std::string_view name)
{
    std::string_view word = name;
    if (word.rfind("Memcpy ", 0) == 0) {
        word.remove_prefix(7);
        size_t space = word.find(' ');
        if (space != std::string_view::npos)
            word = word.substr(0, space);
    }
    static const std::array<std::pair<std::string_view, CopyKind>, 10> kinds{{
        {"HtoD", CopyKind::HtoD}, {"DtoH", CopyKind::DtoH}, {"HtoA", CopyKind::HtoA}, {"AtoH", CopyKind::AtoH},
        {"AtoA", CopyKind::AtoA}, {"AtoD", CopyKind::AtoD}, {"DtoA", CopyKind::DtoA}, {"DtoD", CopyKind::DtoD},
        {"HtoH", CopyKind::HtoH}, {"PtoP", CopyKind::PtoP},
    }};
    for (const auto& [text, kind] : kinds) {
        if (word == text)
            return kind;
    }
    return CopyKind::Unknown;
}

} // namespace pipescope::kineto
