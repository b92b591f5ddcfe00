#include "util/TimeParse.h"

#include <limits>

namespace pipescope {

namespace {
__extension__ typedef unsigned __int128 u128;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool isDigit(char c) { return c >= '0' && c <= '9'; }
} // namespace

std::optional<int64_t> parseMicrosToNanos(std::string_view s)
{
    if (s.empty())
        return std::nullopt;
    size_t i = 0;
    bool negative = false;
    if (s[i] == '-' || s[i] == '+') {
        negative = s[i] == '-';
        ++i;
    }
    // Mantissa digits as an integer with a decimal exponent: value = digits * 10^exp10.
    // Up to 18 significant digits are kept exactly; more would not fit int64 anyway.
    u128 digits = 0;
    int exp10 = 0;
    int significant = 0;
    bool anyDigit = false;
    while (i < s.size() && isDigit(s[i])) {
        anyDigit = true;
        if (significant < 36) {
            digits = digits * 10 + unsigned(s[i] - '0');
            if (digits != 0)
                ++significant;
        } else {
            ++exp10;
        }
        ++i;
    }
    if (i < s.size() && s[i] == '.') {
        ++i;
        while (i < s.size() && isDigit(s[i])) {
            anyDigit = true;
            if (significant < 36) {
                digits = digits * 10 + unsigned(s[i] - '0');
                if (digits != 0)
                    ++significant;
                --exp10;
            }
            ++i;
        }
    }
    if (!anyDigit)
        return std::nullopt;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        bool expNeg = false;
        if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
            expNeg = s[i] == '-';
            ++i;
        }
        if (i >= s.size() || !isDigit(s[i]))
            return std::nullopt;
        int e = 0;
        while (i < s.size() && isDigit(s[i])) {
            if (e < 10000)
                e = e * 10 + (s[i] - '0');
            ++i;
        }
        exp10 += expNeg ? -e : e;
    }
    if (i != s.size())
        return std::nullopt;
    // Nanoseconds = digits * 10^(exp10 + 3).
    int shift = exp10 + 3;
    u128 ns = digits;
    if (shift >= 0) {
        for (int k = 0; k < shift; ++k) {
            ns *= 10;
            if (ns > static_cast<u128>(kMax))
                return digits == 0 ? std::optional<int64_t>(0) : std::nullopt;
        }
    } else {
        u128 divisor = 1;
        for (int k = 0; k < -shift; ++k) {
            divisor *= 10;
            if (divisor > ns * 10 + 10)
                break; // result rounds to 0 already
        }
        u128 q = ns / divisor;
        u128 r = ns % divisor;
        if (r * 2 >= divisor)
            ++q;
        ns = q;
    }
    if (ns > static_cast<u128>(kMax))
        return std::nullopt;
    int64_t v = static_cast<int64_t>(ns);
    return negative ? -v : v;
}

} // namespace pipescope
