#include "RankSelection.h"

#include "Command.h"
#include "analysis/JobSummaries.h"
#include "util/Format.h"
#include "util/Memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace pipescope::cli {

std::vector<int> parseRankList(const std::string& text)
{
    auto bad = [&]() -> FlagError {
        return FlagError("--ranks", "'" + text + "' is not a list of ranks and ranges (e.g. 0-3,8,12-15)");
    };
    auto number = [&](const std::string& s) {
        if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos)
            throw bad();
        return std::stoi(s);
    };
    std::set<int> ranks;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        const size_t dash = item.find('-');
        const int lo = number(item.substr(0, dash));
        const int hi = dash == std::string::npos ? lo : number(item.substr(dash + 1));
        if (hi < lo || hi - lo > 1'000'000)
            throw bad();
        for (int r = lo; r <= hi; ++r)
            ranks.insert(r);
    }
    if (ranks.empty())
        throw bad();
    return {ranks.begin(), ranks.end()};
}

namespace {

void checkMemoryFor(Store& store, const ReadPlan& plan, const std::string& input, const ReadVerb& verb = {})
{
    const int64_t activities = plan.activities;
    if (!plan.ranks.empty() && plan.ranksHeld == 0)
        throw FlagError("--ranks", input + " holds none of these ranks (it holds " + std::to_string(plan.gpus) + " GPUs, ranks " +
                                       std::to_string(plan.jobRankList.empty() ? 0 : plan.jobRankList.front()) + " to " +
                                       std::to_string(plan.jobRankList.empty() ? 0 : plan.jobRankList.back()) + ")");
    const auto available = availableMemory();
    const int64_t needed = activities * kAnalysisBytesPerActivity;
    if (!available || needed <= *available)
        return;
    // Ranks chosen for the job's size: the whole job did not fit either.
    std::string what;
    if (plan.chosen)
        what = verb.doing + " all " + std::to_string(plan.jobRanks) + " ranks (" + formatCount(plan.jobActivities) +
               " GPU activities) needs about " + formatBytes(plan.jobActivities * kAnalysisBytesPerActivity) +
               " of memory, and the pipeline of its busiest replica alone (ranks " + rankListShort(plan.ranks) + ", " +
               formatCount(activities) + " GPU activities) about " + formatBytes(needed);
    else
        what = verb.doing + " " +
               (!plan.ranks.empty() ? std::to_string(plan.ranksHeld) + " selected ranks" : "all " + std::to_string(plan.jobRanks) + " ranks") +
               " (" + formatCount(activities) + " GPU activities) needs about " + formatBytes(needed) + " of memory";
    // A sharded job's index has each stage's replicas side by side already,
    // and may name the pipeline worth reading alone.
    std::string overview;
    if (const JobIndex* job = store.jobIndex()) {
        overview = "; `pipescope info " + input + "` shows each stage across its replicas from the job index";
        if (const auto ov = overviewFromIndex(*job); ov && !plan.chosen)
            if (const auto b = busiestReplica(*job, *ov); b && !b->pipeline.empty())
                overview += ", and `--ranks " + rankListText(b->pipeline) + "` reads the pipeline of its busiest replica (rank " +
                            std::to_string(b->rank) + ")";
    }
    if (!verb.ranksFlag) // no --ranks to point at
        throw Error(input + ": " + what + ", and " + formatBytes(*available) + " is available; run where there is more memory" +
                    (store.jobIndex() ? "; `pipescope info " + input + "` shows each stage across its replicas from the job index"
                                      : std::string()));
    throw Error(input + ": " + what + ", and " + formatBytes(*available) +
                " is available; " + verb.doThat + " fewer ranks with --ranks (e.g. one pipeline's), or run where there is more memory" + overview);
}

} // namespace

std::optional<std::vector<int>> CommandRead::ranks() const
{
    if (plan.ranks.empty())
        return std::nullopt;
    return plan.ranks;
}

void checkCommandRead(Store& store, const CommandRead& read, const std::string& input, const ReadVerb& verb)
{
    checkMemoryFor(store, read.plan, input, verb);
}

ReadLimits commandLimits(const std::string& ranksFlag)
{
    ReadLimits limits; // --ranks all: no limit here; checkMemoryFor checks what the machine has
    if (ranksFlag != "all") {
        limits.bytesPerActivity = kAnalysisBytesPerActivity;
        limits.budgetBytes = std::getenv("PIPESCOPE_MEMORY_BUDGET") ? -1 : kCommandBudgetBytes;
    }
    return limits;
}

CommandRead planCommandRead(Store& store, const std::string& ranksFlag, const std::string& input, bool check)
{
    const std::vector<int> asked = ranksFlag.empty() || ranksFlag == "all" ? std::vector<int>{} : parseRankList(ranksFlag);
    CommandRead read;
    read.plan = planRead(store, asked, commandLimits(ranksFlag));
    if (check)
        checkMemoryFor(store, read.plan, input);
    read.part = describePart(store, read.plan);
    return read;
}

} // namespace pipescope::cli
