// pipescope export FILE -o trace.json [--from T] [--to T] [--ranks 0,1]:
// the store's timeline as Chrome Trace Event JSON for Perfetto and
// chrome://tracing (docs/export.md).
#include "Command.h"
#include "ScenarioOptions.h"
#include "analysis/CommRules.h"
#include "NumberChecks.h"
#include "RankSelection.h"
#include "analysis/JobSummaries.h"
#include "analysis/Analysis.h"
#include "report/ChromeTrace.h"
#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"
#include "util/TimeParse.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

namespace pipescope::cli {
namespace {

struct ExportArgs {
    std::string file;
    std::string output;
    std::string from, to;
    std::vector<int> ranks;
    bool noStages = false;
    bool noAnalysisTracks = false;
    std::string commRules;
};

// "250ms", "1.5s", "800us", "1200ns"; a bare number is microseconds, the unit of the written ts.
TimeNs parseOffset(const std::string& flag, const std::string& text)
{
    struct Unit {
        std::string_view suffix, exponent;
    };
    static const Unit units[] = {{"ns", "e-3"}, {"us", ""}, {"ms", "e3"}, {"s", "e6"}};
    std::string number = text;
    std::string_view exponent;
    for (const Unit& u : units) {
        if (text.size() > u.suffix.size() && text.compare(text.size() - u.suffix.size(), u.suffix.size(), u.suffix) == 0) {
            number = text.substr(0, text.size() - u.suffix.size());
            exponent = u.exponent;
            break;
        }
    }
    bool plain = !number.empty() && std::all_of(number.begin(), number.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '.';
    });
    std::optional<int64_t> ns = plain ? parseMicrosToNanos(number + std::string(exponent)) : std::nullopt;
    if (!ns)
        throw Error(flag + " " + text + ": not a time; give a non-negative number with a unit (250ms, 1.5s, 800us, 1200ns),"
                    " measured from the start of the trace");
    return *ns;
}

int runExport(const ExportArgs& a)
{
    // Fail on an unwritable output before loading the store.
    // A file is written beside and renamed; a pipe, terminal or device (-o /dev/stdout) directly.
    { AtomicOutput probe(a.output, AtomicOutput::Target::FileOrStream); }

    std::shared_ptr<const CommRules> rules;
    if (!a.commRules.empty())
        rules = std::make_shared<const CommRules>(CommRules::fromFile(a.commRules));

    // Times are checked before anything is read.
    // Offsets from the job's origin; -1: not given.
    const TimeNs fromOffset = a.from.empty() ? -1 : parseOffset("--from", a.from);
    const TimeNs toOffset = a.to.empty() ? -1 : parseOffset("--to", a.to);
    if (fromOffset >= 0 && toOffset >= 0 && toOffset <= fromOffset)
        throw Error("--from " + a.from + " --to " + a.to + ": the range is empty; give a --to later than --from");

    Store store(a.file);
    // The ranks asked for must be the job's, before anything is read.
    if (!a.ranks.empty()) {
        const StoreSummary summary = store.summary();
        std::vector<int> known;
        for (const auto& r : summary.ranks)
            known.push_back(r.rank);
        for (const auto& g : summary.gpuSummaries)
            known.push_back(g.rank);
        std::sort(known.begin(), known.end());
        known.erase(std::unique(known.begin(), known.end()), known.end());
        for (int r : a.ranks)
            if (!std::binary_search(known.begin(), known.end(), r))
                throw Error("--ranks: " + a.file + " has no rank " + std::to_string(r) + " (its ranks: " + rankListShort(known) +
                            "); pick ranks from `pipescope info " + a.file + "`");
    }
    // Only what the ranks written need is read. Their stages, idle causes and
    // transfers come from the analysis of their whole pipelines: a sharded
    // job's index knows each rank's pipeline, so their pipelines are read; a
    // store file's are not known before it is analysed, so it is read whole
    // unless --no-stages leaves the analysis out.
    std::string readRanks = "all";
    if (!a.ranks.empty() && a.noStages) {
        readRanks = rankListText(a.ranks); // the plan sorts them and reads each once
    } else if (!a.ranks.empty() && store.jobIndex()) {
        std::vector<int> wanted;
        for (int r : a.ranks) {
            const std::vector<int>* pipeline = store.jobIndex()->pipelineOf(r);
            if (pipeline)
                wanted.insert(wanted.end(), pipeline->begin(), pipeline->end());
            else
                wanted.push_back(r); // its stage comes from the index
        }
        readRanks = rankListText(wanted);
    }
    const CommandRead read = planCommandRead(store, readRanks, a.file, false);
    try {
        checkCommandRead(store, read, a.file, {"exporting", "export"});
    } catch (const FlagError&) {
        throw;
    } catch (const Error& e) {
        if (a.ranks.empty() || a.noStages || store.jobIndex())
            throw;
        throw Error(std::string(e.what()) + "; --no-stages reads only the ranks asked for (their stages are not named)");
    }
    LoadOptions lo;
    lo.ranks = read.ranks();
    const Trace trace = store.load(lo);
    if (trace.activities.empty() && trace.cpuRanges.empty())
        throw Error(a.file + ": the store holds no GPU activity and no CPU range; import a trace into it first");

    report::ChromeTraceOptions o;
    // Times count from the whole job's earliest record, whatever is read.
    const TimeNs origin = lo.ranks ? store.earliestRecord().value_or(0) : report::chromeTraceOrigin(trace);
    o.origin = origin;
    if (fromOffset >= 0)
        o.from = origin + fromOffset;
    if (toOffset >= 0)
        o.to = origin + toOffset;
    if (!a.ranks.empty())
        o.ranks = a.ranks;
    if (!a.noStages && !trace.activities.empty()) {
        // Stage numbers and stream roles for the names; a job the analysis cannot read is still exported.
        try {
            AnalyzeOptions ao;
            ao.commRules = rules;
            // Ranks that are not whole pipelines take their stages from the job index.
            ao.stageMap = read.part.stageMapFromIndex;
            report::addAnalysis(o, analyze(trace, ao), a.noAnalysisTracks ? nullptr : &trace);
        } catch (const Error&) {
        }
    }

    AtomicOutput out(a.output, AtomicOutput::Target::FileOrStream);
    report::ChromeTraceStats stats;
    {
        std::ofstream os(out.tempPath(), std::ios::binary | std::ios::trunc);
        if (!os)
            throw Error(a.output + ": cannot write; choose another -o path");
        try {
            stats = report::writeChromeTrace(trace, os, o);
        } catch (const Error&) {
            throw Error(a.output + ": cannot write the trace (disk full?); free space or choose another -o path");
        }
        os.close();
        if (!os)
            throw Error(a.output + ": cannot write the trace (disk full?); free space or choose another -o path");
    }
    if (stats.gpuEvents + stats.cpuEvents == 0)
        throw Error(a.file + ": nothing to export in the chosen --from/--to range and --ranks; widen them"
                    " (`pipescope info " + a.file + "` shows the time span)");
    out.commit();
    // On stderr when the trace itself went to a pipe or terminal, so the JSON stays clean.
    std::ostream& say = out.direct() ? std::cerr : std::cout;
    say << "Wrote " << a.output << ": " << stats.ranks << (stats.ranks == 1 ? " rank, " : " ranks, ")
              << formatCount(stats.gpuEvents) << " GPU activities, " << formatCount(stats.cpuEvents)
              << " CPU ranges. Open it in ui.perfetto.dev or chrome://tracing.\n";
    return kExitOk;
}

RegisterCommand reg{{"export", "Write the timeline as Chrome Trace Event JSON for Perfetto and chrome://tracing", 75,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<ExportArgs>();
                         app.add_option("FILE", a->file, "pipescope store (from pipescope import or capture)")->required();
                         app.add_option("-o,--output", a->output, "JSON file to write (or a pipe: -o /dev/stdout)")->required();
                         app.add_option("--from", a->from,
                                        "start of the time range, from the start of the trace (e.g. 1.5s, 250ms, 800us)");
                         app.add_option("--to", a->to, "end of the time range, from the start of the trace");
                         app.add_option("--ranks", a->ranks, "ranks to export, e.g. 0,1 (default: all)")
                             ->delimiter(',')
                             ->check(wholeNumber(0, kMaxRank));
                         addCommRulesOption(app, a->commRules);
                         app.add_flag("--no-stages", a->noStages,
                                      "skip the analysis that names stages and stream roles (faster on huge traces)");
                         app.add_flag("--no-analysis-tracks", a->noAnalysisTracks,
                                      "leave out the analysis's tracks (pipeline steps, idle by cause, transfers)");
                         return [a] { return runExport(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
