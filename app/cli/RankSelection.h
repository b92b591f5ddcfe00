#pragma once
// Reading a large job: the ranks to read (--ranks LIST), and a check, before
// anything is read, that the machine has the memory the whole read needs,
// so that a job too large ends with advice instead of the kernel's OOM killer.
#include "analysis/JobPart.h"
#include "store/Store.h"

#include <optional>
#include <string>
#include <vector>

namespace pipescope::cli {

// "0-3,8,12-15": ranks in ascending order, each once. Throws FlagError
// naming --ranks when the text is not such a list.
std::vector<int> parseRankList(const std::string& text);

// What the analysis of a trace needs per GPU activity at its peak, measured
// by bench/bench_scale (the trace, the analysis and the what-if model).
inline constexpr int64_t kAnalysisBytesPerActivity = 600;

// What a command holds per GPU activity is kAnalysisBytesPerActivity; left
// to choose, it reads a sharded job whole up to this much memory, and beyond
// it the pipeline of the job's busiest replica (analysis/JobPart.h).
// PIPESCOPE_MEMORY_BUDGET (bytes), when set, replaces it.
inline constexpr int64_t kCommandBudgetBytes = int64_t(2) << 30;

// The limits a command reads a job within, for its --ranks text ("all":
// none but the machine's).
ReadLimits commandLimits(const std::string& ranksFlag);

// What a command reads of a job: --ranks LIST, --ranks all (every rank,
// whatever the budget), or nothing given (the whole job, or the pipeline
// of its busiest replica beyond the budget), and what it knows of the rest.
struct CommandRead {
    ReadPlan plan;
    JobPart part;
    // For LoadOptions::ranks: nullopt when every rank is read.
    std::optional<std::vector<int>> ranks() const;
};

// What the command does with what it reads, in the check's words.
struct ReadVerb {
    std::string doing = "analysing"; // "analysing all 8 ranks (...) needs about ..."
    std::string doThat = "analyse";  // "analyse fewer ranks with --ranks"
    bool ranksFlag = true;           // the command has --ranks to suggest (diff has not)
};

// Plans the read and (check) checks, before anything is read, that the
// machine has the memory it needs: throws Error naming the input, with what
// to do instead, when it has not (FlagError naming --ranks for a list the
// job does not hold). Without check, call checkCommandRead before reading.
CommandRead planCommandRead(Store& store, const std::string& ranksFlag, const std::string& input, bool check = true);
void checkCommandRead(Store& store, const CommandRead& read, const std::string& input, const ReadVerb& verb = {});

} // namespace pipescope::cli
