#pragma once
// A streaming, strict JSON (RFC 8259) SAX parser for multi-gigabyte traces.
//
// Why not nlohmann::json::sax_parse, which the rest of pipescope uses: its
// lexer copies every byte into two token buffers and converts every number
// with strtod; on Kineto traces it tops out near 170 MB/s before any work is
// done with the events, below the import's target. This parser scans strings
// with a table, hands them over as views into its window when they have no
// escapes, and gives numbers as their text (which is also what exact
// microsecond timestamps need). Perfetto's trace processor keeps its own JSON
// tokenizer for the same reason. The fuzz target checks it against
// nlohmann::json on every input: same verdict, same values.
//
// The window holds the bytes of the token being read plus one chunk of the
// file, so memory is bounded by the longest token, not by the file.
#include "util/Limits.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pipescope::kineto {

// Handler concept (all return false to stop the parse):
//   bool null(); bool boolean(bool);
//   bool integer(int64_t); bool unsignedInteger(uint64_t); // integers that fit
//   bool floating(std::string_view text);                  // other numbers, as written
//   bool string(std::string_view); bool key(std::string_view);
//   bool startObject(); bool endObject(); bool startArray(); bool endArray();
struct JsonError {
    uint64_t offset = 0; // byte offset (0-based) in the decompressed text
    uint64_t line = 1;   // 1-based
    uint64_t column = 1; // 1-based, in bytes
    std::string what;
};

// The input: a function returning the next chunk (empty at the end), valid
// until the next call; e.g. InputFile::read().
using ChunkReader = std::function<std::string_view()>;

class JsonWindow {
public:
    explicit JsonWindow(ChunkReader read) : read_(std::move(read)) {}

    // Keeps bytes from `keep` on, appends the next chunk. Returns how far
    // positions moved (subtract from indices held), or -1 at the end of input.
    int64_t more(size_t keep)
    {
        if (eof_)
            return -1;
        std::string_view chunk = read_();
        if (chunk.empty()) {
            eof_ = true;
            return -1;
        }
        size_t tail = len_ - keep;
        if (keep > 0 && tail > 0)
            std::memmove(buf_.data(), buf_.data() + keep, tail);
        base_ += keep;
        len_ = tail;
        if (buf_.size() < len_ + chunk.size())
            buf_.resize(len_ + chunk.size());
        std::memcpy(buf_.data() + len_, chunk.data(), chunk.size());
        len_ += chunk.size();
        return static_cast<int64_t>(keep);
    }

    char* data() { return buf_.data(); }
    size_t size() const { return len_; }
    uint64_t base() const { return base_; }
    bool eof() const { return eof_; }

private:
    ChunkReader read_;
    std::vector<char> buf_;
    size_t len_ = 0;
    uint64_t base_ = 0; // absolute offset of buf_[0]
    bool eof_ = false;
};

namespace detail {

// 1 for bytes a string can hold as they are: printable ASCII but '"' and '\\'.
struct PlainTable {
    bool v[256];
    constexpr PlainTable() : v()
    {
        for (int c = 0; c < 256; ++c)
            v[c] = c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
    }
};
inline constexpr PlainTable kPlain{};

// Index of the first byte in [i, n) that a string cannot hold as it is (see
// kPlain), or n. Names in traces run to hundreds of bytes (demangled kernel
// signatures), so plain runs are scanned 16 bytes at a time where SSE2 is
// available (every x86-64).
inline size_t skipPlain(const unsigned char* d, size_t i, size_t n)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (i + 16 <= n) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d + i));
        // A signed compare below 0x20 also catches every byte >= 0x80 (negative as int8).
        const __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                          _mm_cmplt_epi8(v, space));
        const int mask = _mm_movemask_epi8(stop);
        if (mask != 0)
            return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
        i += 16;
    }
#endif
    while (i < n && kPlain.v[d[i]])
        ++i;
    return i;
}

inline int hexValue(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

inline void appendUtf8(std::string& out, uint32_t cp)
{
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

// Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0. `avail` bytes are readable.
inline int utf8Length(const unsigned char* s, size_t avail)
{
    unsigned char c = s[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (avail < static_cast<size_t>(n))
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (int k = 2; k < n; ++k)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return n;
}

} // namespace detail

template <typename Handler>
class JsonParser {
public:
    JsonParser(ChunkReader read, Handler& handler) : w_(std::move(read)), h_(handler) {}

    // True when the whole input is one valid JSON value and the handler never
    // stopped; otherwise error() says where it went wrong (empty what() when
    // the handler stopped).
    bool parse()
    {
        if (!fill(0))
            return fail("unexpected end of input; expected a JSON value");
        // A UTF-8 byte order mark is not JSON, but editors write it.
        if (w_.data()[0] == '\xEF') {
            size_t keep = 0, i = 0;
            ensure(keep, i, 3);
            if (w_.size() >= 3 && std::memcmp(w_.data(), "\xEF\xBB\xBF", 3) == 0)
                pos_ = 3;
        }
        std::vector<char> stack; // 'o' object, 'a' array
        for (;;) {
            // A value.
            if (!skipSpace())
                return fail("unexpected end of input; expected a JSON value");
            char c = w_.data()[pos_];
            switch (c) {
            case '{':
                if (stack.size() >= kMaxDepth)
                    return fail("nested more than 10000 levels deep");
                ++pos_;
                if (!h_.startObject())
                    return stopped();
                if (!skipSpace())
                    return fail("unexpected end of input inside an object");
                if (w_.data()[pos_] == '}') {
                    ++pos_;
                    if (!h_.endObject())
                        return stopped();
                    break;
                }
                stack.push_back('o');
                if (!member())
                    return false;
                continue;
            case '[':
                if (stack.size() >= kMaxDepth)
                    return fail("nested more than 10000 levels deep");
                ++pos_;
                if (!h_.startArray())
                    return stopped();
                if (!skipSpace())
                    return fail("unexpected end of input inside an array");
                if (w_.data()[pos_] == ']') {
                    ++pos_;
                    if (!h_.endArray())
                        return stopped();
                    break;
                }
                stack.push_back('a');
                continue;
            case '"': {
                std::string_view s;
                if (!string(s))
                    return false;
                if (!h_.string(s))
                    return stopped();
                break;
            }
            case 't':
                if (!literal("true", 4))
                    return false;
                if (!h_.boolean(true))
                    return stopped();
                break;
            case 'f':
                if (!literal("false", 5))
                    return false;
                if (!h_.boolean(false))
                    return stopped();
                break;
            case 'n':
                if (!literal("null", 4))
                    return false;
                if (!h_.null())
                    return stopped();
                break;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    if (!number())
                        return false;
                    break;
                }
                return fail(unexpected(c, "a JSON value"));
            }
            // After a value: close containers, or go on to the next element.
            for (;;) {
                if (stack.empty()) {
                    if (skipSpace())
                        return fail(unexpected(w_.data()[pos_], "the end of input after the top-level value"));
                    return true;
                }
                if (!skipSpace())
                    return fail(stack.back() == 'o' ? "unexpected end of input inside an object"
                                                    : "unexpected end of input inside an array");
                char d = w_.data()[pos_++];
                if (stack.back() == 'o') {
                    if (d == ',') {
                        if (!member())
                            return false;
                        break;
                    }
                    if (d == '}') {
                        stack.pop_back();
                        if (!h_.endObject())
                            return stopped();
                        continue;
                    }
                    --pos_;
                    return fail(unexpected(d, "',' or '}' in an object"));
                }
                if (d == ',')
                    break;
                if (d == ']') {
                    stack.pop_back();
                    if (!h_.endArray())
                        return stopped();
                    continue;
                }
                --pos_;
                return fail(unexpected(d, "',' or ']' in an array"));
            }
        }
    }

    const JsonError& error() const { return error_; }

private:
    static constexpr size_t kMaxDepth = 10000;

    // Makes at least one byte available at pos_ (keeping nothing before it).
    bool fill(size_t keep)
    {
        int64_t shift = w_.more(keep);
        if (shift < 0)
            return false;
        pos_ -= static_cast<size_t>(shift);
        return true;
    }

    // Inline fast path: between tokens Kineto writes nothing or one space.
    [[gnu::always_inline]] bool skipSpace()
    {
        const char* d = w_.data();
        size_t n = w_.size();
        if (pos_ < n && static_cast<unsigned char>(d[pos_]) > ' ')
            return true;
        if (pos_ + 1 < n && d[pos_] == ' ' && static_cast<unsigned char>(d[pos_ + 1]) > ' ') {
            ++pos_;
            return true;
        }
        return skipSpaceSlow();
    }

    // Line breaks and indentation (pretty-printed traces put each event on
    // its own indented line).
    [[gnu::noinline]] bool skipSpaceSlow()
    {
        for (;;) {
            const char* d = w_.data();
            size_t n = w_.size();
            while (pos_ < n) {
                char c = d[pos_];
                if (c == ' ' || c == '\t' || c == '\r') {
                    ++pos_;
                } else if (c == '\n') {
                    ++line_;
                    lineStart_ = w_.base() + pos_ + 1;
                    ++pos_;
                    while (pos_ < n && d[pos_] == ' ')
                        ++pos_;
                } else {
                    return true;
                }
            }
            if (!fill(pos_))
                return false;
        }
    }

    // "key": after '{' or ','; leaves pos_ at the value.
    bool member()
    {
        if (!skipSpace())
            return fail("unexpected end of input inside an object");
        char c = w_.data()[pos_];
        if (c != '"')
            return fail(unexpected(c, "a string key in an object"));
        std::string_view k;
        if (!string(k))
            return false;
        if (!h_.key(k))
            return stopped();
        if (pos_ < w_.size() && w_.data()[pos_] == ':') {
            ++pos_;
            return true;
        }
        if (!skipSpace())
            return fail("unexpected end of input inside an object");
        c = w_.data()[pos_];
        if (c != ':')
            return fail(unexpected(c, "':' after an object key"));
        ++pos_;
        return true;
    }

    // Makes `need` bytes from index i readable, keeping from `keep`; adjusts both.
    bool ensure(size_t& keep, size_t& i, size_t need)
    {
        while (w_.size() - i < need) {
            int64_t shift = w_.more(keep);
            if (shift < 0)
                return false;
            keep -= static_cast<size_t>(shift);
            i -= static_cast<size_t>(shift);
        }
        return true;
    }

    // Inline fast path: a string without escapes or non-ASCII bytes that
    // ends inside the window (nearly every key and value of a trace).
    [[gnu::always_inline]] bool string(std::string_view& out)
    {
        const unsigned char* d = reinterpret_cast<const unsigned char*>(w_.data());
        const size_t n = w_.size();
        const size_t i = detail::skipPlain(d, pos_ + 1, n);
        if (i < n && d[i] == '"' && i - pos_ <= kMaxTokenBytes) {
            out = std::string_view(w_.data() + pos_ + 1, i - pos_ - 1);
            pos_ = i + 1;
            return true;
        }
        return stringSlow(out);
    }

    [[gnu::noinline]] bool stringSlow(std::string_view& out)
    {
        size_t open = pos_; // the opening quote
        size_t i = pos_ + 1;
        bool escaped = false;
        for (;;) {
            const unsigned char* d = reinterpret_cast<const unsigned char*>(w_.data());
            size_t n = w_.size();
            i = detail::skipPlain(d, i, n);
            // A string token is held whole while it is read: past this size
            // the file is refused, so a small compressed file cannot make
            // pipescope hold gigabytes (values are kept to kMaxStringBytes).
            if (i - open > kMaxTokenBytes) {
                pos_ = open;
                return fail("a string longer than " + std::to_string(kMaxTokenBytes >> 20) +
                            " MiB (pipescope keeps at most 1 MiB of any value, and refuses strings this long)");
            }
            if (i == n) {
                if (!ensure(open, i, 1)) {
                    pos_ = i;
                    return fail("unexpected end of input inside a string");
                }
                continue;
            }
            unsigned char c = d[i];
            if (c == '"')
                break;
            if (c == '\\') {
                escaped = true;
                if (!ensure(open, i, 2)) {
                    pos_ = w_.size();
                    return fail("unexpected end of input inside a string");
                }
                char e = w_.data()[i + 1];
                if (e == 'u') {
                    if (!unicodeEscape(open, i))
                        return false;
                    continue;
                }
                if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
                    pos_ = i + 1;
                    return fail("invalid escape in a string");
                }
                i += 2;
                continue;
            }
            if (c < 0x20) {
                pos_ = i;
                return fail("control character in a string (it must be escaped)");
            }
            // Non-ASCII: a whole, well-formed UTF-8 sequence.
            ensure(open, i, 4); // may stay shorter at the end of input
            size_t avail = w_.size() - i;
            int len = detail::utf8Length(reinterpret_cast<const unsigned char*>(w_.data()) + i, avail);
            if (len == 0) {
                pos_ = i;
                return fail("invalid UTF-8 in a string");
            }
            i += static_cast<size_t>(len);
        }
        const char* d = w_.data();
        pos_ = i + 1;
        if (!escaped) {
            out = std::string_view(d + open + 1, i - open - 1);
            return true;
        }
        scratch_.clear();
        for (size_t k = open + 1; k < i;) {
            char c = d[k];
            if (c != '\\') {
                scratch_.push_back(c);
                ++k;
                continue;
            }
            char e = d[k + 1];
            switch (e) {
            case 'b': scratch_.push_back('\b'); break;
            case 'f': scratch_.push_back('\f'); break;
            case 'n': scratch_.push_back('\n'); break;
            case 'r': scratch_.push_back('\r'); break;
            case 't': scratch_.push_back('\t'); break;
            case 'u': {
                uint32_t cp = hex4(d + k + 2);
                k += 6;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t low = hex4(d + k + 2);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    k += 6;
                }
                detail::appendUtf8(scratch_, cp);
                continue;
            }
            default: scratch_.push_back(e); break;
            }
            k += 2;
        }
        out = scratch_;
        return true;
    }

    static uint32_t hex4(const char* p)
    {
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k)
            v = v * 16 + static_cast<uint32_t>(detail::hexValue(p[k]));
        return v;
    }

    // \uXXXX at i (validated; a high surrogate must be followed by a low one).
    bool unicodeEscape(size_t& open, size_t& i)
    {
        if (!ensure(open, i, 6) && w_.size() - i < 6) {
            pos_ = w_.size();
            return fail("unexpected end of input inside a string");
        }
        const char* d = w_.data();
        for (int k = 2; k < 6; ++k) {
            if (detail::hexValue(d[i + k]) < 0) {
                pos_ = i + k;
                return fail("invalid \\u escape in a string");
            }
        }
        uint32_t cp = hex4(d + i + 2);
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            pos_ = i;
            return fail("a low surrogate \\u escape without a high one before it");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            // Checked byte by byte, so the error names the first wrong one.
            static constexpr char kPrefix[] = "\\u";
            for (size_t k = 6; k < 12; ++k) {
                if (!ensure(open, i, k + 1)) {
                    pos_ = w_.size();
                    return fail("unexpected end of input inside a string");
                }
                char c = w_.data()[i + k];
                bool ok = k < 8 ? c == kPrefix[k - 6] : detail::hexValue(c) >= 0;
                if (!ok) {
                    pos_ = i + 6;
                    return fail("a high surrogate \\u escape without a low one after it");
                }
            }
            uint32_t low = hex4(w_.data() + i + 8);
            if (low < 0xDC00 || low > 0xDFFF) {
                pos_ = i + 6;
                return fail("a high surrogate \\u escape without a low one after it");
            }
            i += 12;
            return true;
        }
        i += 6;
        return true;
    }

    bool literal(const char* word, size_t len)
    {
        size_t keep = pos_, i = pos_;
        ensure(keep, i, len);
        pos_ = i;
        if (w_.size() - i < len || std::memcmp(w_.data() + i, word, len) != 0)
            return fail("invalid literal; expected a JSON value");
        pos_ = i + len;
        return true;
    }

    // Numbers that end inside the window, as nearly all do: integers of up
    // to 18 digits are converted while they are scanned, decimals
    // (timestamps) are handed over as their text. Anything else, including
    // every malformed number, takes numberSlow(), which also reports errors.
    bool number()
    {
        const char* d = w_.data();
        const size_t n = w_.size();
        const size_t start = pos_;
        size_t i = start;
        const bool negative = d[i] == '-';
        if (negative)
            ++i;
        const size_t first = i;
        uint64_t v = 0;
        while (i < n && d[i] >= '0' && d[i] <= '9') {
            v = v * 10 + static_cast<uint64_t>(d[i] - '0');
            ++i;
        }
        const size_t intDigits = i - first;
        if (i < n && intDigits > 0 && intDigits <= 18 && (d[first] != '0' || intDigits == 1)) {
            const char c = d[i];
            if (c != '.' && c != 'e' && c != 'E') {
                pos_ = i;
                const int64_t value = static_cast<int64_t>(v);
                return h_.integer(negative ? -value : value) || stopped();
            }
            if (c == '.') {
                size_t j = i + 1;
                while (j < n && d[j] >= '0' && d[j] <= '9')
                    ++j;
                if (j < n && j > i + 1 && d[j] != 'e' && d[j] != 'E') {
                    pos_ = j;
                    return h_.floating(std::string_view(d + start, j - start)) || stopped();
                }
            }
        }
        return numberSlow();
    }

    bool numberSlow()
    {
        // One pass: the grammar -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
        // refilling the window when the number reaches its end.
        size_t start = pos_, i = pos_;
        auto peek = [&]() -> int {
            if (i == w_.size() && !ensure(start, i, 1))
                return -1;
            return static_cast<unsigned char>(w_.data()[i]);
        };
        auto isDigit = [](int c) { return c >= '0' && c <= '9'; };
        auto digits = [&] {
            // Counted from `start`, which moves with `i` when the window refills.
            size_t from = i - start;
            for (;;) {
                const char* d = w_.data();
                size_t n = w_.size();
                while (i < n && d[i] >= '0' && d[i] <= '9')
                    ++i;
                if (i < n || !ensure(start, i, 1))
                    return i - start - from;
            }
        };
        bool negative = peek() == '-';
        if (negative)
            ++i;
        int first = peek();
        if (!isDigit(first))
            return failAt(i, "invalid number");
        size_t intDigits = digits();
        bool integral = true;
        int c = peek();
        if (first == '0' && intDigits > 1)
            return failAt(start + (negative ? 2 : 1), "invalid number (leading zero)");
        if (c == '.') {
            ++i;
            integral = false;
            if (digits() == 0)
                return failAt(i, "invalid number (no digits after '.')");
            c = peek();
        }
        if (c == 'e' || c == 'E') {
            ++i;
            integral = false;
            c = peek();
            if (c == '+' || c == '-')
                ++i;
            if (digits() == 0)
                return failAt(i, "invalid number (no digits in the exponent)");
        }
        std::string_view text(w_.data() + start, i - start);
        pos_ = i;
        if (integral) {
            if (negative) {
                int64_t v = 0;
                auto r = std::from_chars(text.data(), text.data() + text.size(), v);
                if (r.ec == std::errc())
                    return h_.integer(v) || stopped();
            } else {
                uint64_t v = 0;
                auto r = std::from_chars(text.data(), text.data() + text.size(), v);
                if (r.ec == std::errc())
                    return (v <= static_cast<uint64_t>(INT64_MAX) ? h_.integer(static_cast<int64_t>(v))
                                                                   : h_.unsignedInteger(v)) ||
                           stopped();
            }
        }
        return h_.floating(text) || stopped();
    }

    std::string unexpected(char c, const char* expected)
    {
        std::string s = "unexpected ";
        if (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F)
            s += std::string("'") + c + "'";
        else {
            char buf[16];
            std::snprintf(buf, sizeof buf, "byte 0x%02X", static_cast<unsigned char>(c));
            s += buf;
        }
        return s + "; expected " + expected;
    }

    bool failAt(size_t index, const char* what)
    {
        pos_ = index;
        return fail(what);
    }

    bool fail(std::string what)
    {
        error_.offset = w_.base() + std::min(pos_, w_.size());
        error_.line = line_;
        error_.column = error_.offset - lineStart_ + 1;
        error_.what = std::move(what);
        return false;
    }

    bool stopped()
    {
        error_ = JsonError();
        return false;
    }

    JsonWindow w_;
    Handler& h_;
    size_t pos_ = 0;
    uint64_t line_ = 1;
    uint64_t lineStart_ = 0;
    std::string scratch_;
    JsonError error_;
};

} // namespace pipescope::kineto
