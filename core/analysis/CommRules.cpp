#include "analysis/CommRules.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"

#include <array>

namespace pipescope {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool globMatch(std::string_view p, std::string_view s)
{
    // Iterative glob with one backtrack point: linear in practice, no recursion.
    size_t pi = 0, si = 0, starP = std::string_view::npos, starS = 0;
    while (si < s.size()) {
        if (pi < p.size() && (p[pi] == '?' || lower(p[pi]) == lower(s[si]))) {
            ++pi;
            ++si;
        } else if (pi < p.size() && p[pi] == '*') {
            starP = pi++;
            starS = si;
        } else if (starP != std::string_view::npos) {
            pi = starP + 1;
            si = ++starS;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*')
        ++pi;
    return pi == p.size();
}

struct BuiltIn {
    std::string_view pattern;
    WorkClass cls;
    std::string_view op;
    std::string_view family;
};

// docs/communication-kernels.md shows this table; keep them together.
constexpr std::array<BuiltIn, 21> kBuiltIn{{
    // DeepEP (expert-parallel all-to-all): dispatch, combine and their notify
    // kernels; published builds name the namespace deep_ep::, DeepSeek's own dpsk::ep::.
    // get_dispatch_layout only computes the routing and stays compute.
    {"*deep_ep::intranode::*", WorkClass::Collective, "AllToAll", "DeepEP"},
    {"*deep_ep::internode::*", WorkClass::Collective, "AllToAll", "DeepEP"},
    {"*deep_ep::internode_ll::*", WorkClass::Collective, "AllToAll", "DeepEP"},
    {"*dpsk::ep::intranode::*", WorkClass::Collective, "AllToAll", "DeepEP"},
    {"*dpsk::ep::internode::*", WorkClass::Collective, "AllToAll", "DeepEP"},
    {"*dpsk::ep::internode_ll::*", WorkClass::Collective, "AllToAll", "DeepEP"},
    // NVSHMEM's device collectives and barriers.
    {"*nvshmem*", WorkClass::Collective, "", "NVSHMEM"},
    // PyTorch symmetric memory (torch.distributed._symmetric_memory).
    {"*multimem_all_reduce*", WorkClass::Collective, "AllReduce", "PyTorch symmetric memory"},
    {"*multimem_one_shot_all_reduce*", WorkClass::Collective, "AllReduce", "PyTorch symmetric memory"},
    {"*multimem_all_gather*", WorkClass::Collective, "AllGather", "PyTorch symmetric memory"},
    {"*one_shot_all_reduce*", WorkClass::Collective, "AllReduce", "PyTorch symmetric memory"},
    {"*two_shot_all_reduce*", WorkClass::Collective, "AllReduce", "PyTorch symmetric memory"},
    // vLLM's custom all-reduce; TensorRT-LLM's.
    {"*cross_device_reduce*", WorkClass::Collective, "AllReduce", "vLLM custom all-reduce"},
    {"*oneShotAllReduceKernel*", WorkClass::Collective, "AllReduce", "TensorRT-LLM custom all-reduce"},
    {"*twoShotAllReduceKernel*", WorkClass::Collective, "AllReduce", "TensorRT-LLM custom all-reduce"},
    {"*lamport*AllReduce*", WorkClass::Collective, "AllReduce", "TensorRT-LLM custom all-reduce"},
    {"*allReduceFusionKernel*", WorkClass::Collective, "AllReduce", "TensorRT-LLM custom all-reduce"},
    // MSCCL and MSCCL++ (collectives outside NCCL's kernel names).
    {"mscclKernel_*", WorkClass::Collective, "", "MSCCL"},
    {"*mscclpp::*", WorkClass::Collective, "", "MSCCL++"},
    // Intel/Habana and Ascend collective libraries seen in PyTorch traces.
    {"hccl*", WorkClass::Collective, "", "HCCL"},
    {"*c10d::symmetric_memory::*", WorkClass::Collective, "", "PyTorch symmetric memory"},
}};

std::optional<std::pair<WorkClass, std::string_view>> parseClass(std::string_view word)
{
    std::string w;
    for (char c : word)
        w.push_back(lower(c));
    if (w == "collective" || w == "comm" || w == "communication")
        return std::pair{WorkClass::Collective, std::string_view()};
    if (w == "all-to-all" || w == "alltoall")
        return std::pair{WorkClass::Collective, std::string_view("AllToAll")};
    if (w == "all-reduce" || w == "allreduce")
        return std::pair{WorkClass::Collective, std::string_view("AllReduce")};
    if (w == "all-gather" || w == "allgather")
        return std::pair{WorkClass::Collective, std::string_view("AllGather")};
    if (w == "reduce-scatter" || w == "reducescatter")
        return std::pair{WorkClass::Collective, std::string_view("ReduceScatter")};
    if (w == "p2p" || w == "send-recv" || w == "sendrecv")
        return std::pair{WorkClass::P2p, std::string_view()};
    if (w == "compute")
        return std::pair{WorkClass::Compute, std::string_view()};
    if (w == "memcpy" || w == "copy")
        return std::pair{WorkClass::Memcpy, std::string_view()};
    return std::nullopt;
}

} // namespace

bool commPatternMatches(std::string_view pattern, std::string_view name)
{
    if (pattern.find_first_of("*?") == std::string_view::npos) {
        if (pattern.size() > name.size())
            return false;
        for (size_t i = 0; i + pattern.size() <= name.size(); ++i) {
            size_t k = 0;
            while (k < pattern.size() && lower(name[i + k]) == lower(pattern[k]))
                ++k;
            if (k == pattern.size())
                return true;
        }
        return false;
    }
    return globMatch(pattern, name);
}

const CommRules& CommRules::builtIn()
{
    static const CommRules rules = [] {
        CommRules r;
        for (const BuiltIn& b : kBuiltIn)
            r.rules_.push_back({std::string(b.pattern), b.cls, std::string(b.op), std::string(b.family)});
        return r;
    }();
    return rules;
}

CommRules CommRules::fromText(std::string_view text, const std::string& source)
{
    CommRules r;
    r.userText_ = std::string(text);
    size_t lineNo = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t nl = text.find('\n', pos);
        std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
        ++lineNo;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
            line.remove_suffix(1);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            line.remove_prefix(1);
        if (line.empty() || line.front() == '#')
            continue;
        const size_t gap = line.find_first_of(" \t");
        const std::string where = source + " line " + std::to_string(lineNo);
        if (gap == std::string_view::npos)
            throw Error(where + ": '" + printable(line, 80) + "' is not CLASS PATTERN (e.g. `all-to-all *my_ep::dispatch*`)");
        auto cls = parseClass(line.substr(0, gap));
        if (!cls)
            throw Error(where + ": unknown class '" + printable(line.substr(0, gap), 40) +
                        "'; use collective, all-to-all, all-reduce, all-gather, reduce-scatter, p2p, compute or memcpy");
        std::string_view pattern = line.substr(gap);
        while (!pattern.empty() && (pattern.front() == ' ' || pattern.front() == '\t'))
            pattern.remove_prefix(1);
        if (pattern.empty() || pattern.find_first_not_of("*?") == std::string_view::npos)
            throw Error(where + ": the pattern matches every kernel; name the kernels the rule is for");
        if (pattern.size() > 4096)
            throw Error(where + ": the pattern is longer than 4,096 characters");
        r.rules_.push_back({std::string(pattern), cls->first, std::string(cls->second), "rule file " + where});
        if (r.rules_.size() > 10000)
            throw Error(source + ": more than 10,000 rules; a rule file names kernel families, not kernels");
    }
    r.userRules_ = r.rules_.size();
    for (const CommRule& b : builtIn().rules_)
        r.rules_.push_back(b);
    return r;
}

CommRules CommRules::fromFile(const std::string& path)
{
    return fromText(InputFile::readAll(path, size_t{4} << 20), path);
}

std::optional<CommMatch> CommRules::matchUser(std::string_view name) const
{
    for (size_t i = 0; i < userRules_; ++i)
        if (commPatternMatches(rules_[i].pattern, name))
            return CommMatch{rules_[i].cls, rules_[i].op, rules_[i].family};
    return std::nullopt;
}

std::optional<CommMatch> CommRules::match(std::string_view name) const
{
    for (const CommRule& r : rules_)
        if (commPatternMatches(r.pattern, name))
            return CommMatch{r.cls, r.op, r.family};
    return std::nullopt;
}

} // namespace pipescope
