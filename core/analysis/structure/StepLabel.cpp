// Step names: what an annotation's name says about its step (kind,
// microbatch, stage, chunk) in pipescope's, torch.distributed.pipelining's
// and Megatron's spellings.
#include "analysis/detail/Context.h"

#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace pipescope::detail {

namespace {

std::optional<int> numberAfter(std::string_view s, std::string_view key)
{
    auto at = s.find(key);
    if (at == std::string_view::npos)
        return std::nullopt;
    at += key.size();
    size_t e = at;
    while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e])))
        ++e;
    if (e == at || e - at > 9)
        return std::nullopt;
    return std::stoi(std::string(s.substr(at, e - at)));
}

} // namespace

std::optional<StepLabel> parseStepLabel(std::string_view raw)
{
    if (raw.size() > 200 || raw.find("::") != std::string_view::npos)
        return std::nullopt;
    std::string s(raw);
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view v(s);
    if (v.substr(0, 10) == "pipescope/")
        v.remove_prefix(10);
    if (v.substr(0, 3) == "pp:")
        v.remove_prefix(3);

    StepLabel l;
    // torch.distributed.pipelining actions: "<stage><F|B|I|W><microbatch>", e.g. "2F0".
    {
        size_t i = 0;
        while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])))
            ++i;
        if (i > 0 && i + 1 < v.size() && std::string_view("fbiw").find(v[i]) != std::string_view::npos) {
            size_t j = i + 1;
            while (j < v.size() && std::isdigit(static_cast<unsigned char>(v[j])))
                ++j;
            if (j == v.size() && j > i + 1 && i < 6 && j - i < 8) {
                l.stage = std::stoi(std::string(v.substr(0, i)));
                l.kind = v[i] == 'f' ? StepKind::F : v[i] == 'b' ? StepKind::B : v[i] == 'i' ? StepKind::I : StepKind::W;
                l.microbatch = std::stoi(std::string(v.substr(i + 1)));
                l.explicitKind = true;
                return l;
            }
        }
    }
    auto word = [&](std::string_view w) {
        if (v.substr(0, w.size()) != w)
            return false;
        if (v.size() == w.size())
            return true;
        char c = v[w.size()];
        return !std::isalpha(static_cast<unsigned char>(c)) || c == '_';
    };
    if (word("backward_input") || word("backward-input") || word("backward input") || word("backward_i"))
        l.kind = StepKind::I, l.explicitKind = true;
    else if (word("backward_weight") || word("backward-weight") || word("backward weight") || word("backward_w"))
        l.kind = StepKind::W, l.explicitKind = true;
    else if (word("backward"))
        l.kind = StepKind::B;
    else if (word("forward"))
        l.kind = StepKind::F;
    else
        return std::nullopt;
    // "forward_backward_step" and the like are not one step.
    if (v.find("forward", 1) != std::string_view::npos && l.kind != StepKind::F)
        return std::nullopt;
    if (l.kind == StepKind::F && v.find("backward") != std::string_view::npos)
        return std::nullopt;
    if (auto n = numberAfter(v, "mb="))
        l.microbatch = *n;
    else if (auto n2 = numberAfter(v, "microbatch="))
        l.microbatch = *n2;
    else if (auto n3 = numberAfter(v, "microbatch "))
        l.microbatch = *n3;
    else {
        // "Forward 3"
        size_t e = v.size(), b = e;
        while (b > 0 && std::isdigit(static_cast<unsigned char>(v[b - 1])))
            --b;
        if (b < e && b > 0 && v[b - 1] == ' ' && e - b < 9)
            l.microbatch = std::stoi(std::string(v.substr(b)));
    }
    if (auto n = numberAfter(v, "stage="))
        l.stage = *n;
    if (auto n = numberAfter(v, "chunk="))
        l.chunk = *n;
    return l;
}

} // namespace pipescope::detail
