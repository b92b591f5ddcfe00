#include "analysis/CommRules.h"

#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace pipescope {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

constexpr size_t npos = std::string_view::npos;

// One pattern character against one name character: `?` is any one
// character (byte); letters compare case-insensitively.
bool same(char p, char s) { return p == '?' || lower(p) == lower(s); }

// p matches s at `at`, character by character (at + p.size() <= s.size()).
bool matchesAt(std::string_view p, std::string_view s, size_t at)
{
    for (size_t k = 0; k < p.size(); ++k)
        if (!same(p[k], s[at + k]))
            return false;
    return true;
}

// The leftmost place at or after `from` where p (no wildcard) occurs in s:
// Knuth-Morris-Pratt over case-folded characters, O(|p| + |s|).
size_t findLiteralLinear(std::string_view p, std::string_view s, size_t from)
{
    const size_t m = p.size();
    std::vector<size_t> fail(m, 0);
    for (size_t i = 1, k = 0; i < m; ++i) {
        while (k > 0 && lower(p[i]) != lower(p[k]))
            k = fail[k - 1];
        if (lower(p[i]) == lower(p[k]))
            ++k;
        fail[i] = k;
    }
    for (size_t i = from, k = 0; i < s.size(); ++i) {
        const char c = lower(s[i]);
        while (k > 0 && c != lower(p[k]))
            k = fail[k - 1];
        if (c == lower(p[k]) && ++k == m)
            return i + 1 - m;
    }
    return npos;
}

// The same for p holding `?`: bit-parallel Shift-And, O(|s| * |p| / 64), and
// about O(|s|) while partial matches stay short (only the words of the state
// that hold a partial match are touched).
size_t findWildLinear(std::string_view p, std::string_view s, size_t from)
{
    const size_t m = p.size(), words = (m + 63) / 64;
    // Masks of the pattern positions each name character may stand at: row 0
    // has the `?` positions (for characters p does not hold), each
    // case-folded character of p its own row on top of them. At most
    // 1 + 256 rows, so memory is O(|p|) for a short pattern and at most
    // 128 KiB for a 4,096-character one.
    std::array<uint16_t, 256> rowOf{};
    std::vector<uint64_t> rows(words, 0);
    for (size_t j = 0; j < m; ++j)
        if (p[j] == '?')
            rows[j / 64] |= uint64_t{1} << (j % 64);
    for (size_t j = 0; j < m; ++j) {
        if (p[j] == '?')
            continue;
        const auto c = static_cast<unsigned char>(lower(p[j]));
        if (rowOf[c] == 0) {
            const size_t at = rows.size();
            rowOf[c] = static_cast<uint16_t>(at / words);
            rows.resize(at + words);
            std::copy_n(rows.begin(), words, rows.begin() + static_cast<std::ptrdiff_t>(at));
        }
        rows[rowOf[c] * words + j / 64] |= uint64_t{1} << (j % 64);
    }
    std::vector<uint64_t> state(words, 0); // bit j: p[0..j] ends at the current character
    size_t live = 0;                       // state's words past these are zero
    const uint64_t done = uint64_t{1} << ((m - 1) % 64);
    for (size_t i = from; i < s.size(); ++i) {
        const uint64_t* mask = rows.data() + rowOf[static_cast<unsigned char>(lower(s[i]))] * words;
        const size_t n = std::min(words, live + 1);
        uint64_t carry = 1;
        live = 0;
        for (size_t w = 0; w < n; ++w) {
            const uint64_t out = state[w] >> 63;
            state[w] = ((state[w] << 1) | carry) & mask[w];
            carry = out;
            if (state[w] != 0)
                live = w + 1;
        }
        if (state[words - 1] & done)
            return i + 1 - m;
    }
    return npos;
}

// The leftmost place at or after `from` where p (`?` allowed, no `*`)
// matches in s, or npos. Character by character first: real names part from
// a pattern within a character or two. Once that has cost more than a few
// comparisons per name character passed (long partial matches, again and
// again: 7 s for one 4,096-character rule against a 1 MiB name), a
// linear-time search goes on from where it stands, so every search is
// linear in the name.
size_t findPiece(std::string_view p, std::string_view s, size_t from)
{
    const size_t m = p.size();
    if (from > s.size() || s.size() - from < m)
        return npos;
    if (m == 0)
        return from;
    size_t work = 0;
    for (size_t i = from; i + m <= s.size(); ++i) {
        size_t k = 0;
        while (k < m && same(p[k], s[i + k]))
            ++k;
        if (k == m)
            return i;
        work += k + 1;
        if (work > 4 * (i - from + 1) + 64)
            return p.find('?') == npos ? findLiteralLinear(p, s, i + 1) : findWildLinear(p, s, i + 1);
    }
    return npos;
}

// The whole name against a glob holding `*` or `?`. The text before the
// first star is anchored at the start, the text after the last at the end;
// each piece between stars takes its leftmost place after the one before
// (a later place never matches more), so the name is read about once.
bool globMatch(std::string_view p, std::string_view s)
{
    const size_t first = p.find('*');
    if (first == npos) // `?` but no star: the whole name, character by character
        return p.size() == s.size() && matchesAt(p, s, 0);
    const size_t last = p.rfind('*');
    const std::string_view head = p.substr(0, first), tail = p.substr(last + 1);
    if (s.size() < head.size() + tail.size() || !matchesAt(head, s, 0) || !matchesAt(tail, s, s.size() - tail.size()))
        return false;
    const std::string_view between = s.substr(0, s.size() - tail.size());
    std::string_view pieces = p.substr(first + 1, last - first); // ends with the last star
    size_t pos = head.size();
    while (!pieces.empty()) {
        const size_t star = pieces.find('*');
        const std::string_view piece = pieces.substr(0, star);
        pieces.remove_prefix(star == npos ? pieces.size() : star + 1);
        if (piece.empty())
            continue;
        const size_t at = findPiece(piece, between, pos);
        if (at == npos)
            return false;
        pos = at + piece.size();
    }
    return true;
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
    if (pattern.find_first_of("*?") == npos)
        return findPiece(pattern, name, 0) != npos;
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
    // Editors on Windows start UTF-8 files with a byte-order mark and end
    // lines with CR LF: the mark is skipped (it is no part of the first
    // class), the CRs are trimmed with the other trailing space below.
    if (text.starts_with("\xEF\xBB\xBF"))
        text.remove_prefix(3);
    else if (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF"))
        throw Error(source + ": the file is UTF-16 text; save it as UTF-8 (one rule a line, CLASS PATTERN)");
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
