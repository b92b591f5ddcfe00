#include "util/BoundedJson.h"

#include "util/Error.h"
#include "util/Format.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

namespace pipescope {

size_t jsonDepth(std::string_view text, size_t limit)
{
    size_t depth = 0, deepest = 0;
    bool inString = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                inString = false;
            continue;
        }
        switch (c) {
        case '"':
            inString = true;
            break;
        case '[':
        case '{':
            if (++depth > deepest) {
                deepest = depth;
                if (deepest > limit)
                    return limit + 1;
            }
            break;
        case ']':
        case '}':
            if (depth > 0)
                --depth;
            break;
        default:
            break;
        }
    }
    return deepest;
}

size_t jsonValueEnd(std::string_view text, size_t open)
{
    size_t depth = 0;
    bool inString = false;
    for (size_t i = open; i < text.size(); ++i) {
        const char c = text[i];
        if (inString) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                inString = false;
        } else if (c == '"') {
            inString = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && depth > 0 && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

nlohmann::json parseBoundedJson(std::string_view text, const std::string& what, size_t maxBytes,
                                const std::string& advice, size_t maxDepth)
{
    if (text.size() > maxBytes)
        throw FormatError(what + ": " + formatBytes(static_cast<int64_t>(text.size())) + " is more than the " +
                          formatBytes(static_cast<int64_t>(maxBytes)) + " such a file may hold; " + advice);
    if (jsonDepth(text, maxDepth) > maxDepth)
        throw FormatError(what + ": nested more than " + std::to_string(maxDepth) + " levels deep; " + advice);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded())
        throw FormatError(what + ": not JSON; " + advice);
    return j;
}

std::string readBoundedFile(const std::string& path, size_t maxBytes, const std::string& advice)
{
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0)
        throw FormatError(path + ": cannot open: " + std::strerror(errno) + "; " + advice);
    if (!S_ISREG(st.st_mode)) // a FIFO would block, a device never ends
        throw FormatError(path + ": not a regular file; " + advice);
    if (static_cast<uint64_t>(st.st_size) > maxBytes)
        throw FormatError(path + ": " + formatBytes(static_cast<int64_t>(st.st_size)) + " is more than the " +
                          formatBytes(static_cast<int64_t>(maxBytes)) + " such a file may hold; " + advice);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        throw FormatError(path + ": cannot open: " + std::strerror(errno) + "; " + advice);
    std::string text;
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
        text.append(buf, n);
        if (text.size() > maxBytes) {
            std::fclose(f);
            throw FormatError(path + ": grew past the " + formatBytes(static_cast<int64_t>(maxBytes)) +
                              " such a file may hold while it was read; " + advice);
        }
    }
    const bool bad = std::ferror(f) != 0;
    std::fclose(f);
    if (bad)
        throw FormatError(path + ": read error; " + advice);
    return text;
}

} // namespace pipescope
