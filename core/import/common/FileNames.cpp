#include "import/common/FileNames.h"

#include "util/Text.h"

#include <cctype>
#include <limits>

namespace pipescope {

namespace {

bool isAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

} // namespace

std::optional<int> rankFromFileName(std::string_view path)
{
    size_t slash = path.find_last_of('/');
    std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
    std::optional<int> found;
    for (size_t i = 0; i + 4 < base.size(); ++i) {
        if (!equalsIgnoringCase(base.substr(i, 4), "rank"))
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

} // namespace pipescope
