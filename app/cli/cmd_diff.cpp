// pipescope diff A B [--iteration N] [--b-iteration N] [--pp N] [--layers N] [--model MODEL.json]
//                    [--measured-boundaries L,...] [--b-measured-boundaries L,...] [--top N] [--json] [-o FILE]
// Two runs of a pipeline job compared stage by stage, with the check of A's
// prediction for B's configuration against B's measurement (docs/diff.md).
#include "Command.h"
#include "report/JobPartText.h"
#include "NumberChecks.h"
#include "RunInput.h"
#include "ScenarioOptions.h"
#include "compare/Diff.h"
#include "compare/SavedPrediction.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/JsonText.h"
#include "util/Limits.h"

#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

struct DiffArgs {
    std::string a, b, output, iterationRange;
    int iteration = -1, bIteration = -1, pp = 0, top = 20;
    CalibrationArgs calibration;
    std::vector<int> bBoundaries;
    std::string prediction; // --prediction FILE
    bool json = false, quiet = false;
};

int runDiff(DiffArgs& x)
{
    x.calibration.load();
    std::optional<compare::SavedPrediction> saved;
    if (!x.prediction.empty())
        saved = compare::readSavedPrediction(x.prediction); // refused before any work
    // Neither run may be overwritten by -o: refused before any work.
    AtomicOutput::protectInput(x.a);
    AtomicOutput::protectInput(x.b);
    if (!x.output.empty())
        AtomicOutput::refuseInput(x.output);
    AnalyzeOptions ao;
    if (x.pp > 0)
        ao.pipelineDegree = x.pp;
    ao.iterationRange = x.iterationRange;
    ao.commRules = x.calibration.commRules;
    AnalyzeOptions aoA = ao, aoB = ao;
    if (x.iteration >= 0)
        aoA.iteration = aoB.iteration = x.iteration;
    if (x.bIteration >= 0)
        aoB.iteration = x.bIteration;

    const whatif::CalibrateOptions coA = x.calibration.options(std::nullopt);
    whatif::CalibrateOptions coB = coA;
    coB.measured.measuredBoundaries = x.bBoundaries;
    std::unique_ptr<LoadedRun> a, b;
    try {
        a = loadRun(x.a, aoA, coA, !x.quiet);
    } catch (const ValueError& e) {
        if (e.setting() == Setting::Boundaries)
            throw FlagError("--measured-boundaries", e.what());
        throw;
    }
    try {
        b = loadRun(x.b, aoB, coB, !x.quiet);
    } catch (const ValueError& e) {
        if (e.setting() == Setting::Boundaries)
            throw FlagError("--b-measured-boundaries", e.what());
        throw;
    }
    compare::RunInput ra{x.a, &a->trace, &a->analysis, a->model ? &*a->model : nullptr};
    compare::RunInput rb{x.b, &b->trace, &b->analysis, b->model ? &*b->model : nullptr};
    compare::DiffOptions o;
    o.topKernels = x.top;
    o.saved = saved ? &*saved : nullptr;
    compare::DiffResult d;
    try {
        d = compare::diffRuns(ra, rb, o);
    } catch (const Error& e) {
        if (saved)
            throw Error(x.prediction + ": " + e.what());
        throw;
    }
    if (!d.prediction && !a->model && a->analysis.pipeline.found)
        d.predictionWhyNot += ": " + a->modelWhyNot;

    const bool document = x.json || !x.output.empty();
    const bool partial = a->part.partial() || b->part.partial();
    std::string jsonDoc;
    if (document) {
        nlohmann::json doc = compare::diffToJson(d);
        if (partial)
            doc["read_in_part"] = {{"a", report::jobPartJson(a->part)}, {"b", report::jobPartJson(b->part)}};
        jsonDoc = jsonText(doc, 1) + "\n";
    }
    if (!x.output.empty())
        AtomicOutput::writeFile(x.output, jsonDoc);
    if (x.json)
        std::cout << jsonDoc;
    else {
        // Said first: what of a large job the comparison is of.
        for (const auto& [label, run] : {std::pair{"A", a.get()}, std::pair{"B", b.get()}})
            if (run->part.partial())
                std::cout << label << " (" << run->name << "): read in part, " << describeRanksRead(run->part)
                          << "; the comparison is of these ranks\n";
        if (partial)
            std::cout << "\n";
        std::cout << compare::diffText(d);
    }
    return kExitOk;
}

RegisterCommand reg{{"diff", "Compare two runs stage by stage, and check A's prediction for B against B", 45,
                     [](CLI::App& app) -> RunFn {
                         auto x = std::make_shared<DiffArgs>();
                         app.add_option("A", x->a, "The first run (baseline): a store, a trace file or a folder of traces")
                             ->required();
                         app.add_option("B", x->b, "The second run: a store, a trace file or a folder of traces")->required();
                         app.add_option("--iteration", x->iteration,
                                        "Iteration to compare in both runs (default: each run's representative one)")
                             ->check(wholeNumber(0));
                         app.add_option("--b-iteration", x->bIteration, "Iteration of B to compare, when it differs from A's")
                             ->check(wholeNumber(0));
                         app.add_option("--pp", x->pp, "Pipeline degree of both runs, when their traces do not show it")
                             ->check(wholeNumber(1, kMaxRank));
                         app.add_option("--iteration-range", x->iterationRange,
                                        "Annotation or NVTX range that marks iterations");
                         addCalibrationOptions(app, x->calibration);
                         app.add_option("--b-measured-boundaries", x->bBoundaries,
                                        "B's boundaries, when its trace does not attribute layers (default: an even split)")
                             ->delimiter(',')
                             ->check(wholeNumber(1, 100000));
                         app.add_option("--prediction", x->prediction,
                                        "Check B against this prediction saved on A (whatif --save-prediction, or the "
                                        "app's File > Save prediction) instead of predicting B's configuration now");
                         app.add_option("--top", x->top, "Kernel rows to show, largest change first")
                             ->check(wholeNumber(0, 100000))
                             ->capture_default_str();
                         app.add_flag("--json", x->json, "Print JSON (schema pipescope.diff/1) instead of tables");
                         app.add_option("-o,--output", x->output, "Also write the JSON to this file");
                         app.add_flag("-q,--quiet", x->quiet, "No progress output while traces are imported");
                         return [x]() { return runDiff(*x); };
                     }}};

} // namespace
} // namespace pipescope::cli
