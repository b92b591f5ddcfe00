// pipescope diff A B [--iteration N] [--b-iteration N] [--pp N] [--layers N] [--model MODEL.json]
//                    [--measured-boundaries L,...] [--b-measured-boundaries L,...] [--top N] [--json] [-o FILE]
//                    [--fail-if COND,...] [--baseline NAME (then only B)] [--baseline-dir DIR]
// pipescope diff --save-baseline NAME JOB [--baseline-dir DIR]
// Two runs of a pipeline job compared stage by stage, with the check of A's
// prediction for B's configuration against B's measurement (docs/diff.md);
// with --fail-if, a gate for CI: exit 3 when B regressed beyond a condition,
// 4 when the runs cannot be gated.
#include "Command.h"
#include "report/JobPartText.h"
#include "NumberChecks.h"
#include "RunInput.h"
#include "ScenarioOptions.h"
#include "compare/Diff.h"
#include "compare/DiffGate.h"
#include "compare/SavedPrediction.h"
#include "import/Import.h"
#include "store/JobIndex.h"
#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/JsonText.h"
#include "util/Limits.h"
#include "util/StreamInput.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

namespace fs = std::filesystem;

// diff's own exit codes, beyond Command.h's 0, 1 and 2 (docs/diff.md, "Exit codes").
constexpr int kExitRegression = 3;  // B regressed beyond a --fail-if condition
constexpr int kExitNotGated = 4;    // the runs cannot be gated (no iteration, other stages, a value missing)

constexpr const char* kBaselineDirEnv = "PIPESCOPE_BASELINE_DIR";
constexpr const char* kBaselineSuffix = ".pipescope";

struct DiffArgs {
    std::string a, b, output, iterationRange;
    int iteration = -1, bIteration = -1, pp = 0, top = 20;
    CalibrationArgs calibration;
    std::vector<int> bBoundaries;
    std::string prediction; // --prediction FILE
    bool json = false, quiet = false;
    std::vector<std::string> failIf;          // --fail-if, each one or more comma-separated conditions
    std::string baseline, saveBaseline, baselineDir;
};

// A command line diff cannot run: one line, exit 2, as for a bad flag.
int usage(const std::string& message)
{
    std::cerr << "pipescope diff: error: " << message << "; see `pipescope diff --help`\n";
    return kExitUsage;
}

// Letters, digits, '.', '_' and '-', not starting with '.' or '-': a file name in the baseline folder.
CLI::Validator baselineName()
{
    return CLI::Validator(
        [](std::string& v) -> std::string {
            bool ok = !v.empty() && v.size() <= 100 && v[0] != '.' && v[0] != '-';
            for (char c : v)
                ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
            if (ok)
                return {};
            return "'" + printable(v, 100) +
                   "' is not a baseline name; use up to 100 letters, digits, '.', '_' and '-' (e.g. main, release-1.2)";
        },
        "NAME");
}

CLI::Validator gateConditions()
{
    return CLI::Validator(
        [](std::string& v) -> std::string {
            try {
                compare::parseGateConditions(v);
            } catch (const Error& e) {
                return e.what();
            }
            return {};
        },
        "COND");
}

// The baseline folder: --baseline-dir, else $PIPESCOPE_BASELINE_DIR; "" when neither.
std::string baselineFolder(const DiffArgs& x)
{
    if (!x.baselineDir.empty())
        return x.baselineDir;
    const char* env = std::getenv(kBaselineDirEnv);
    return env && *env ? env : "";
}

std::string baselinePath(const std::string& folder, const std::string& name)
{
    return (fs::path(folder) / (name + kBaselineSuffix)).string();
}

// "main, release-1.2" or "none": the baselines saved in the folder.
std::string savedBaselines(const std::string& folder)
{
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string f = it->path().filename().string();
        if (f.size() > std::string_view(kBaselineSuffix).size() && f[0] != '.' && f.ends_with(kBaselineSuffix))
            names.push_back(f.substr(0, f.size() - std::string_view(kBaselineSuffix).size()));
    }
    if (names.empty())
        return "none";
    std::sort(names.begin(), names.end());
    std::string out;
    for (size_t i = 0; i < names.size() && i < 10; ++i)
        out += (i ? ", " : "") + printable(names[i], 100);
    return names.size() > 10 ? out + ", ... (" + std::to_string(names.size()) + ")" : out;
}

// --save-baseline NAME JOB: the store (copied) or the traces (imported) kept as DIR/NAME.pipescope.
int saveBaseline(const DiffArgs& x, const std::string& folder)
{
    const std::string& job = x.a;
    std::error_code ec;
    if (!fs::exists(job, ec))
        throw Error(job + ": no such file or folder; give a store, a trace file or a folder of per-rank traces");
    if (isShardedJob(job))
        throw Error(job + ": a sharded job is not copied into the baseline folder (its shards may be large and are "
                          "not copied atomically); give its folder as A instead of --baseline, or link it as " +
                    baselinePath(folder, x.saveBaseline));
    fs::create_directories(folder, ec);
    if (!fs::is_directory(folder))
        throw FlagError("--baseline-dir", folder + ": cannot create the baseline folder" +
                                              (ec ? " (" + ec.message() + ")" : std::string()) +
                                              "; give a writable folder with --baseline-dir or " + kBaselineDirEnv);
    const std::string dest = baselinePath(folder, x.saveBaseline);
    if (fs::equivalent(job, dest, ec))
        throw Error(job + ": is the baseline '" + x.saveBaseline + "' itself; nothing to save");
    AtomicOutput::protectInput(job);
    if (fs::is_directory(job, ec) || isStreamInput(job) || detectFormat(job) != "store") {
        ImportJobOptions io;
        io.inputs = {job};
        io.output = dest;
        io.progress = !x.quiet;
        importJob(io);
    } else {
        { Store check(job); } // a pipescope store of a schema this build reads, or refused here
        AtomicOutput out(dest, AtomicOutput::Target::RegularFile);
        fs::copy_file(job, out.tempPath(), fs::copy_options::overwrite_existing, ec);
        if (ec)
            throw Error(dest + ": cannot copy " + job + " there (" + ec.message() + "); free space or choose another "
                        "--baseline-dir");
        out.commit();
    }
    std::cout << "Saved baseline '" << x.saveBaseline << "': " << dest << " (" << formatBytes(static_cast<int64_t>(fs::file_size(dest, ec)))
              << "), from " << job << "; compare with: pipescope diff --baseline " << x.saveBaseline << " NEW\n";
    return kExitOk;
}

int runDiff(DiffArgs& x)
{
    // Which runs: A and B, --baseline NAME and B, or --save-baseline NAME and one run.
    const bool named = !x.baseline.empty() || !x.saveBaseline.empty();
    if (!x.baseline.empty() && !x.saveBaseline.empty())
        return usage("--baseline and --save-baseline: give one (--save-baseline keeps a run, --baseline compares with one)");
    if (!x.baselineDir.empty() && !named)
        return usage("--baseline-dir: only with --baseline NAME or --save-baseline NAME");
    const std::string folder = baselineFolder(x);
    if (named && folder.empty())
        return usage(std::string(x.baseline.empty() ? "--save-baseline" : "--baseline") +
                     ": no baseline folder; give --baseline-dir DIR or set " + kBaselineDirEnv);
    if (!x.saveBaseline.empty()) {
        if (x.a.empty() || !x.b.empty())
            return usage("--save-baseline NAME takes one run: pipescope diff --save-baseline NAME JOB");
        if (!x.failIf.empty())
            return usage("--fail-if: not with --save-baseline, which compares nothing");
        return saveBaseline(x, folder);
    }
    if (!x.baseline.empty()) {
        if (x.a.empty() || !x.b.empty())
            return usage("--baseline NAME takes one run, the new one: pipescope diff --baseline NAME NEW");
        x.b = x.a;
        x.a = baselinePath(folder, x.baseline);
        std::error_code ec;
        if (!fs::exists(x.a, ec))
            throw FlagError("--baseline", "no baseline '" + x.baseline + "' in " + folder + " (no " + x.a +
                                              "); save one with pipescope diff --save-baseline " + x.baseline +
                                              " JOB (saved there: " + savedBaselines(folder) + ")");
    } else if (x.a.empty() || x.b.empty()) {
        return usage("give two runs, A and B (or --baseline NAME and B)");
    }
    std::vector<compare::GateCondition> conditions;
    for (const std::string& list : x.failIf)
        for (compare::GateCondition& c : compare::parseGateConditions(list))
            conditions.push_back(std::move(c));

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

    compare::GateResult gate;
    if (!conditions.empty())
        gate = compare::evaluateGate(d, conditions, compare::gateRuns(a->analysis, b->analysis));

    const bool document = x.json || !x.output.empty();
    const bool partial = a->part.partial() || b->part.partial();
    std::string jsonDoc;
    if (document) {
        nlohmann::json doc = compare::diffToJson(d);
        if (partial)
            doc["read_in_part"] = {{"a", report::jobPartJson(a->part)}, {"b", report::jobPartJson(b->part)}};
        if (!conditions.empty())
            doc["gate"] = compare::gateToJson(gate);
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
    if (conditions.empty())
        return kExitOk;
    // The gate's verdict last, on standard error: one line per regression.
    std::cout.flush();
    for (const compare::GateRegression& r : gate.regressions)
        std::cerr << "pipescope diff: regression: " << r.line << "\n";
    if (!gate.refusal.empty()) {
        std::cerr << "pipescope diff: error: cannot gate: " << gate.refusal << "\n";
        return kExitNotGated;
    }
    if (!gate.regressions.empty())
        return kExitRegression;
    std::string all;
    for (const std::string& c : gate.conditions)
        all += (all.empty() ? "" : ", ") + c;
    std::cerr << "pipescope diff: no regression (" << all << ")\n";
    return kExitOk;
}

RegisterCommand reg{{"diff", "Compare two runs stage by stage, and check A's prediction for B against B", 45,
                     [](CLI::App& app) -> RunFn {
                         auto x = std::make_shared<DiffArgs>();
                         app.add_option("A", x->a,
                                        "The first run (baseline): a store, a trace file or a folder of traces; with "
                                        "--baseline, the new run; with --save-baseline, the run to keep");
                         app.add_option("B", x->b, "The second run: a store, a trace file or a folder of traces");
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
                         app.add_option("--fail-if", x->failIf,
                                        "Exit 3 when B regressed beyond this condition, e.g. iteration>+3%, "
                                        "stage[2]>+5%, stage>+5% (any stage), bubble.fill_drain>+2ms; repeat it or "
                                        "separate conditions with commas (docs/diff.md)")
                             ->allow_extra_args(false)
                             ->check(gateConditions());
                         app.add_option("--baseline", x->baseline,
                                        "Compare the one run given with the baseline saved under this name")
                             ->check(baselineName());
                         app.add_option("--save-baseline", x->saveBaseline,
                                        "Keep the one run given as the baseline of this name (replacing one saved before)")
                             ->check(baselineName());
                         app.add_option("--baseline-dir", x->baselineDir,
                                        std::string("Folder of named baselines (default: $") + kBaselineDirEnv + ")");
                         return [x]() { return runDiff(*x); };
                     }}};

} // namespace
} // namespace pipescope::cli
