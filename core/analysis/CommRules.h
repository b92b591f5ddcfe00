#pragma once
// Which GPU kernels are communication, by name, beyond NCCL's own kernels
// (which Classify.h reads from their names and records): DeepEP's expert
// dispatch and combine, NVSHMEM, PyTorch's symmetric-memory collectives,
// vLLM's and TensorRT-LLM's custom all-reduce. docs/communication-kernels.md
// lists the built-in table; a user rule file (--comm-rules FILE, and in the
// app) adds what the table misses, and wins over it.
//
// A rule file holds one rule a line, `CLASS PATTERN`: CLASS is collective,
// all-to-all, all-reduce, p2p, compute or memcpy; PATTERN is the rest of the
// line, a glob over the kernel's full name (`*` any text, `?` one character,
// case-insensitive). A pattern with no `*` or `?` matches any name that
// contains it. `#` starts a comment line. Rules are tried in file order.
// The file is UTF-8 text (a leading byte-order mark is skipped; lines may end
// in CR LF); a pattern is at most 4,096 characters, a file 4 MiB.
//
// Matching takes time about linear in the name's length whatever the
// pattern (a 4,096-character rule against a 1 MiB name: milliseconds), up to
// |name| x |piece| / 64 for a long piece holding `?`.
#include "analysis/Analysis.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope {

struct CommRule {
    std::string pattern;
    WorkClass cls = WorkClass::Collective;
    std::string op;     // "AllToAll", "AllReduce", ... when the rule says which, else ""
    std::string family; // where it comes from, for messages ("DeepEP", "NVSHMEM", "rule file line 3")
};

struct CommMatch {
    WorkClass cls = WorkClass::Collective;
    std::string_view op;
    std::string_view family;
};

class CommRules {
public:
    // The built-in table only.
    static const CommRules& builtIn();
    // The user's rules (tried first), then the built-in table. Throws Error
    // naming the file and line for an unreadable file or a malformed rule.
    static CommRules fromFile(const std::string& path);
    static CommRules fromText(std::string_view text, const std::string& source);

    // The first rule matching a kernel name, or nullopt.
    std::optional<CommMatch> match(std::string_view kernelName) const;
    // The first of the user's rules matching it (they win over NCCL's names too).
    std::optional<CommMatch> matchUser(std::string_view kernelName) const;
    const std::vector<CommRule>& rules() const { return rules_; }
    // The user's file text (empty for the built-in table): part of cache keys.
    const std::string& userText() const { return userText_; }

private:
    std::vector<CommRule> rules_; // the user's first, then the built-in table
    size_t userRules_ = 0;
    std::string userText_;
};

// Case-insensitive glob (`*`, `?`) over the whole name; without wildcards, a
// substring test. Linear in the name (see above), no recursion.
bool commPatternMatches(std::string_view pattern, std::string_view name);

} // namespace pipescope
