// pipescope report FILE [-o report.html] [--iteration K] [whatif's scenario and
// calibration options]: one self-contained HTML page with the analysis, the
// timeline and a what-if comparison.
#include "Command.h"
#include "RankSelection.h"
#include "RunInput.h"
#include "compare/Diff.h"
#include "compare/SavedPrediction.h"
#include "NumberChecks.h"
#include "ScenarioOptions.h"
#include "report/Report.h"
#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

namespace pipescope::cli {
namespace {

// An error of the comparison, already naming the baseline or the saved prediction.
class ComparisonError : public Error {
public:
    using Error::Error;
};

// The what-if section takes whatif's options; -o and --json are the report's own.
struct ReportArgs : ScenarioArgs {
    std::string file;
    std::optional<int> iteration;
    bool noWhatIf = false;
    CalibrationArgs calibration;
    std::string compare;           // --compare BASELINE
    std::optional<int> compareIteration;
    std::string prediction;        // --prediction FILE (with --compare)
    std::string ranks;             // --ranks LIST

    ReportArgs() { output = "report.html"; }
};

int runReport(ReportArgs& a)
{
    if (a.search)
        throw Error("the report shows one what-if question; rank configurations with pipescope whatif FILE --search");
    a.calibration.load();
    // Fail on an unwritable output, or one that is the input, before the (possibly long) analysis.
    AtomicOutput::protectInput(a.file);
    if (!a.compare.empty())
        AtomicOutput::protectInput(a.compare);
    { AtomicOutput probe(a.output, AtomicOutput::Target::FileOrStream); }

    report::ReportOptions ro;
    ro.iteration = a.iteration;
    ro.storePath = a.file;
    ro.whatIf = !a.noWhatIf;
    a.applyTo(ro.whatIfChanges);
    ro.calibrate = a.calibration.options(a.gpuMemoryBytes());
    ro.commRules = a.calibration.commRules;
    if (!a.microbatchTokens.empty()) {
        ro.microbatchTokens = whatif::loadMicrobatchTokens(a.microbatchTokens);
        if (a.microbatches <= 0)
            ro.whatIfChanges.microbatches = static_cast<int>(ro.microbatchTokens->tokens.size());
    }
    // --compare: the baseline, analysed and calibrated as diff does it.
    std::unique_ptr<LoadedRun> baseline;
    std::optional<compare::SavedPrediction> saved;
    if (!a.prediction.empty()) {
        if (a.compare.empty())
            throw ValueError(Setting::Prediction, "--prediction checks a saved prediction against this job and needs the run it "
                                           "was saved on: add --compare BASELINE");
        saved = compare::readSavedPrediction(a.prediction);
    }
    if (!a.compare.empty()) {
        AnalyzeOptions bo;
        bo.iteration = a.compareIteration ? a.compareIteration : a.iteration;
        bo.commRules = a.calibration.commRules;
        baseline = loadRun(a.compare, bo, ro.calibrate, false);
    }
    std::string html;
    Verdict verdict;
    std::string readLine; // a job read in part: said beside the file written
    {
        Store store(a.file);
        const CommandRead read = planCommandRead(store, a.ranks, a.file);
        if (read.part.partial())
            readLine = "; read in part: " + describeRanksRead(read.part);
        LoadOptions lo;
        lo.ranks = read.ranks();
        const Trace trace = store.load(lo);
        ro.calibrate.replicaPace = read.part.replicaPace; // some ranks of a sharded job
        ro.jobPart = &read.part;
        ro.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
        try {
            if (baseline) {
                AnalyzeOptions ao;
                ao.iteration = a.iteration;
                ao.autogradSequences = ro.autogradSequences;
                ao.commRules = ro.commRules;
                const AnalysisResult analysis = analyze(trace, ao);
                std::optional<whatif::CostModel> model;
                if (analysis.pipeline.found) {
                    try {
                        model = whatif::calibrate(trace, analysis, ro.calibrate);
                    } catch (const ValueError&) {
                        throw;
                    } catch (const Error&) {
                        // This job's partition stays unknown; the comparison shows the rest.
                    }
                }
                compare::DiffOptions dopt;
                dopt.saved = saved ? &*saved : nullptr;
                compare::DiffResult diff;
                try {
                    diff = compare::diffRuns(
                        {a.compare, &baseline->trace, &baseline->analysis, baseline->model ? &*baseline->model : nullptr},
                        {a.file, &trace, &analysis, model ? &*model : nullptr}, dopt);
                } catch (const Error& e) {
                    throw ComparisonError((saved ? a.prediction : a.compare) + ": " + e.what());
                }
                ro.comparison = &diff;
                html = report::renderReport(trace, analysis, ro, &verdict);
            } else {
                html = report::renderReport(trace, ro, &verdict);
            }
        } catch (const ComparisonError&) {
            throw; // names its own file
        } catch (const Error& e) {
            throw Error(a.file + ": " + e.what());
        }
    }
    AtomicOutput::writeFile(a.output, html);
    // One line, as export says what it wrote; on stderr when the page itself went to a terminal or pipe.
    std::error_code ec;
    std::ostream& os = std::filesystem::is_regular_file(a.output, ec) ? std::cout : std::cerr;
    os << "Wrote " << a.output << " (" << formatBytes(static_cast<int64_t>(html.size())) << readLine << "): "
       << printable(verdict.headline, 400) << "\n";
    return kExitOk;
}

RegisterCommand reg{{"report", "Write a self-contained HTML report: timeline, idle by cause, imbalance, what-if", 70,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<ReportArgs>();
                         app.add_option("FILE", a->file, "pipescope store (from pipescope import or capture)")->required();
                         app.add_option("-o,--output", a->output, "HTML file to write (default report.html)");
                         app.add_option("--iteration", a->iteration, "iteration to show (index; default: a representative one)")
                             ->check(wholeNumber(0));
                         app.add_flag("--no-whatif", a->noWhatIf, "leave the what-if comparison out");
                         app.add_option("--ranks", a->ranks,
                                        "report only these ranks, e.g. 0-3 or 0,256,512,768 (one pipeline of a large job), or all (by default a "
                                        "sharded job beyond 2 GiB is read one pipeline: its busiest replica's)");
                         app.add_option("--compare", a->compare,
                                        "a baseline run (store, trace file or folder) to compare this job with, stage by "
                                        "stage, with the check of its prediction for this job (docs/diff.md)");
                         app.add_option("--compare-iteration", a->compareIteration,
                                        "the baseline's iteration to compare (default: --iteration, else a representative one)")
                             ->check(wholeNumber(0));
                         app.add_option("--prediction", a->prediction,
                                        "with --compare: check this job against a prediction saved on the baseline "
                                        "(whatif --save-prediction)");
                         addScenarioOptions(app, *a, {"Pipeline degree to predict (re-splits the layers)",
                                                      "Microbatches per iteration (same global batch)",
                                                      "First layer of each stage after the first, e.g. 4,9,13"});
                         addCalibrationOptions(app, a->calibration);
                         return [a] { return runReport(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
