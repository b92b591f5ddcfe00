#include "import/kineto/KinetoNames.h"

#include <algorithm>
#include <limits>

#include <array>
#include <cctype>
#include <utility>

namespace pipescope::kineto {

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
bool isAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

bool equalsNoCase(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

} // namespace

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
        if (equalsNoCase(dtype, name))
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

std::optional<int> rankFromFileName(std::string_view path)
{
    size_t slash = path.find_last_of('/');
    std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    std::optional<int> found;
    for (size_t i = 0; i + 4 < base.size(); ++i) {
        if (!equalsNoCase(base.substr(i, 4), "rank"))
            continue;
        // "frank3" is not a rank; "128rank-r0" (a world size) is not one either.
        if (i > 0 && isAlpha(base[i - 1]))
            continue;
        size_t j = i + 4;
        if (j < base.size() && (base[j] == '-' || base[j] == '_'))
            ++j;
        // Every digit counts: a rank too large for int saturates (and is then
        // refused as out of range) instead of being cut to its first digits.
        size_t digits = j;
        int64_t value = 0;
        while (digits < base.size() && isDigit(base[digits])) {
            value = std::min<int64_t>(value * 10 + (base[digits] - '0'), std::numeric_limits<int>::max());
            ++digits;
        }
        if (digits > j)
            found = static_cast<int>(value);
    }
    return found;
}

std::optional<HostAndPid> hostFromFileName(std::string_view path)
{
    size_t slash = path.find_last_of('/');
    std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    for (std::string_view suffix : {std::string_view(".pt.trace.json.gz"), std::string_view(".pt.trace.json")}) {
        if (base.size() > suffix.size() && base.substr(base.size() - suffix.size()) == suffix) {
            base.remove_suffix(suffix.size());
            break;
        }
        if (suffix == ".pt.trace.json")
            return std::nullopt;
    }
    // "<host>_<pid>.<ms>": the last '.' starts the time, the last '_' before it the pid.
    size_t dot = base.find_last_of('.');
    if (dot == std::string_view::npos || dot + 1 == base.size())
        return std::nullopt;
    for (size_t k = dot + 1; k < base.size(); ++k)
        if (!isDigit(base[k]))
            return std::nullopt;
    std::string_view worker = base.substr(0, dot);
    size_t underscore = worker.find_last_of('_');
    if (underscore == std::string_view::npos || underscore == 0 || underscore + 1 == worker.size() ||
        worker.size() - underscore - 1 > 18)
        return std::nullopt;
    int64_t pid = 0;
    for (size_t k = underscore + 1; k < worker.size(); ++k) {
        if (!isDigit(worker[k]))
            return std::nullopt;
        pid = pid * 10 + (worker[k] - '0');
    }
    std::string_view host = worker.substr(0, underscore);
    if (rankFromFileName(host))
        return std::nullopt;
    return HostAndPid{std::string(host), pid};
}

} // namespace pipescope::kineto
