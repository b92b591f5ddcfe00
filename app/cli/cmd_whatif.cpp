// pipescope whatif FILE [--boundaries L1,L2,...] [--schedule NAME --v V] [--microbatches M] [--pp N]
//                 [--auto-balance] [--search] [--model MODEL.json] [--extra-work MS]
//                 [--stage-speed S0,S1,... | --gpu-types A,A,B,B --gpu-throughput A=1,B=0.6]
//                 [--fix-straggler RANK] [--freeze A..B,C..D] [--json]
// Replays other configurations of a measured pipeline, calibrated on the trace.
#include "Command.h"
#include "NumberChecks.h"
#include "RankSelection.h"
#include "ScenarioOptions.h"
#include "analysis/JobSummaries.h"
#include "analysis/MeasuredPipeline.h"
#include "compare/SavedPrediction.h"
#include "store/Store.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Progress.h"
#include "whatif/ExtraWork.h"
#include "whatif/Microbatches.h"
#include "whatif/ModelDescription.h"
#include "whatif/StageSpeeds.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sys/stat.h>

namespace pipescope::cli {
namespace {

using namespace pipescope::whatif;

struct WhatIfArgs : ScenarioArgs {
    std::string file, iterationRange;
    int iteration = -1, measuredPp = 0;
    double extraWorkMs = -1, extraWorkPieceMs = 0.1; // --extra-work: < 0 when not asked
    CalibrationArgs calibration;
    std::vector<std::string> stageSpeed;             // --stage-speed: numbers, or "trace"
    std::vector<std::string> gpuTypes, gpuThroughput; // --gpu-types, --gpu-throughput NAME=SPEED
    int fixStraggler = -1;                           // --fix-straggler: < 0 when not asked
    std::vector<std::string> freeze;                 // --freeze: layer ranges FIRST..LAST
    std::string savePrediction;                      // --save-prediction FILE
    bool savePredictionGiven = false;                // --save-prediction was given (its path may be empty)
    std::string ranks;                               // --ranks LIST
};

// --stage-speed trace: each rank's speed from the layers the trace timed on it.
bool speedsFromTrace(const WhatIfArgs& a) { return a.stageSpeed.size() == 1 && whatif::speedsFromTrace(a.stageSpeed.front()); }

// Per-rank speeds from --stage-speed, or from --gpu-types with --gpu-throughput;
// empty when neither is given. Throws ValueError naming the flag.
std::vector<double> stageSpeeds(const WhatIfArgs& a)
{
    if (!a.stageSpeed.empty() && (!a.gpuTypes.empty() || !a.gpuThroughput.empty()))
        throw ValueError(Setting::StageSpeed, "give the speeds either with --stage-speed or with --gpu-types and "
                                        "--gpu-throughput, not both");
    if (speedsFromTrace(a))
        return {}; // read from the cost model once it is calibrated
    if (!a.gpuTypes.empty() || !a.gpuThroughput.empty())
        return whatif::speedsFromGpuTypes(a.gpuTypes, a.gpuThroughput);
    return whatif::parseStageSpeeds(a.stageSpeed);
}

// Whether two output paths land on one regular file: the same existing file
// (through hard or symbolic links too), or the same place for a file not
// yet written. Two names of one terminal or pipe are written in turn, and
// neither replaces the other.
bool sameOutputFile(const std::string& x, const std::string& y)
{
    struct stat sx{}, sy{};
    const bool xExists = ::stat(x.c_str(), &sx) == 0, yExists = ::stat(y.c_str(), &sy) == 0;
    if (xExists && yExists)
        return sx.st_dev == sy.st_dev && sx.st_ino == sy.st_ino && S_ISREG(sx.st_mode);
    if (xExists != yExists)
        return false;
    if (x == y)
        return true;
    namespace fs = std::filesystem;
    std::error_code ex, ey;
    const fs::path px = fs::weakly_canonical(fs::absolute(x, ex), ex);
    const fs::path py = fs::weakly_canonical(fs::absolute(y, ey), ey);
    return !ex && !ey && px == py;
}

// --save-prediction, refused before any work: an empty path, the file -o
// writes (the what-if JSON would replace the prediction, or the other way
// round), a schedule CSV's order (a saved prediction holds a built-in schedule).
void checkSavePrediction(const WhatIfArgs& a)
{
    if (!a.savePredictionGiven)
        return;
    if (a.savePrediction.empty())
        throw FlagError("--save-prediction", "the path is empty; give the file to save the prediction to");
    if (!a.output.empty() && sameOutputFile(a.savePrediction, a.output))
        throw FlagError("--save-prediction", printable(a.savePrediction) +
                                                 " is also the -o file, and one output would replace the other; give "
                                                 "them different paths");
    if (!a.scheduleCsv.empty() && !a.search)
        throw FlagError("--save-prediction", "a prediction of a schedule CSV's order (--schedule-csv) cannot be saved: a "
                                             "saved prediction holds a built-in schedule");
}

int runWhatIfImpl(WhatIfArgs& a)
{
    checkSavePrediction(a);
    a.checkExchanges();
    a.calibration.load();
    const std::vector<double> speeds = stageSpeeds(a); // refused before any work
    const std::vector<LayerRange> frozen = parseLayerRanges(a.freeze);

    if (!a.ranks.empty() && a.ranks != "all")
        parseRankList(a.ranks); // refused before any work
    Store store(a.file);
    const CommandRead read = planCommandRead(store, a.ranks, a.file);
    LoadOptions lo;
    lo.ranks = read.ranks();
    const Trace trace = store.load(lo);
    AnalyzeOptions ao;
    if (a.iteration >= 0)
        ao.iteration = a.iteration;
    if (a.measuredPp > 0)
        ao.pipelineDegree = a.measuredPp;
    else
        ao.stageMap = read.part.stageMapFromIndex; // ranks that are not whole pipelines: their stages from the index
    ao.iterationRange = a.iterationRange;
    ao.commRules = a.calibration.commRules;
    ao.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
    CalibrateOptions co = a.calibration.options(a.gpuMemoryBytes());
    // Some ranks of a sharded job (one pipeline): its index still knows how
    // each stage's slowest replica paces the job.
    co.replicaPace = read.part.replicaPace;
    // Said under the measured run: what the calibration read of the job.
    std::string readLine;
    if (read.part.partial()) {
        readLine = "Calibrated on " + describeRanksRead(read.part);
        if (!co.replicaPace.empty()) {
            readLine += "; each stage runs at its slowest replica's pace from the job index (";
            for (size_t s = 0; s < co.replicaPace.size(); ++s) {
                char pace[32];
                std::snprintf(pace, sizeof pace, "%sx%.2f", s ? ", " : "", co.replicaPace[s]);
                readLine += pace;
            }
            readLine += ")";
        }
        if (read.part.chosen)
            readLine += "; --ranks all calibrates on every rank";
    }
    CostModel model;
    AnalysisResult analysis;
    try {
        analysis = analyze(trace, ao);
        model = calibrate(trace, analysis, co);
    } catch (const ValueError& e) {
        // The measured run's boundaries are checked while calibrating: name the flag that gave them.
        if (e.setting() == Setting::Boundaries && !a.calibration.measuredBoundaries.empty())
            throw FlagError("--measured-boundaries", e.what());
        throw;
    } catch (const Error& e) {
        // The analysis names analyze's --pp; for whatif, --pp is the degree to predict.
        std::string message = e.what();
        if (auto at = message.find("--pp N"); at != std::string::npos)
            message.replace(at, 6, "--measured-pp N");
        throw Error(a.file + ": " + message);
    }

    if (!speeds.empty()) {
        try {
            model.setStageSpeeds(speeds);
        } catch (const ValueError& e) {
            // Speeds from --gpu-types: a wrong count is that flag's.
            if (a.gpuTypes.empty())
                throw;
            std::string message = e.what();
            if (auto at = message.find("stage speeds given"); at != std::string::npos)
                message.replace(at, 18, "GPU types given in --gpu-types");
            throw ValueError(Setting::GpuTypes, message);
        }
    } else if (speedsFromTrace(a))
        model.setStageSpeeds(model.measuredStageSpeeds());
    // Kept to price the freeze against every layer trainable.
    std::optional<CostModel> trainable;
    if (!frozen.empty()) {
        trainable = model;
        model.freezeLayers(frozen);
    }
    std::optional<StragglerFix> straggler;
    if (a.fixStraggler >= 0)
        straggler = priceStraggler(model, analysis, a.fixStraggler);

    ScenarioChanges changes;
    a.applyTo(changes);
    a.applyMicrobatchTokens(model, changes);
    a.applyExchanges(model);
    const Scenario base = measuredScenario(model);
    if (!a.boundaries.empty() && model.layerSource == LayerSource::Stages)
        throw Error("the trace does not attribute kernels to layers, so --boundaries has no layers to move; "
                    "give the layer count with --layers N or a model description with --model MODEL.json");
    Scenario requested = applyChanges(base, changes);
    requested.label = "requested";

    // Sized before any work: the timeline is only kept for what is written.
    const bool document = a.json || !a.output.empty();
    checkTimelineSize(base, document && !a.summary, 0);
    checkTimelineSize(requested, document && !a.summary, 0);
    ReplayOptions ro;
    ro.timeline = document && !a.summary;
    Progress progress("predicting", 1000, true);
    WorkControl work;
    work.onProgress = [&](std::string_view phase, double f) {
        progress.setLabel(std::string(phase));
        if (f >= 0)
            progress.update(static_cast<uint64_t>(f * 1000));
    };
    BalanceOptions bo;
    bo.timeline = ro.timeline;
    bo.work = &work;
    a.applyTo(bo);

    std::vector<Prediction> predictions;
    predictions.push_back(predict(model, base, ro));
    if (a.changesScenario()) {
        try {
            predictions.push_back(predict(model, requested, ro));
        } catch (const Error&) {
            // With --auto-balance the requested pipeline needs no even split of
            // its own (its layers may not divide): auto-balance partitions it.
            if (!a.autoBalance || requested.boundaries)
                throw;
        }
    }
    if (a.autoBalance) {
        BalanceResult b = autoBalance(model, requested, bo);
        b.prediction.label = "auto-balance";
        if (!b.memoryFeasible)
            std::cerr << "pipescope whatif: warning: no partition fits the GPU memory; showing the fastest one\n";
        predictions.push_back(std::move(b.prediction));
    }
    // Speed-ups against the replay of the measured run (the first prediction),
    // so that the model's calibration error is not taken for a gain.
    if (!predictions.empty() && predictions.front().measuredConfiguration)
        for (Prediction& p : predictions)
            p.baselineNs = predictions.front().iterationNs();
    std::vector<SearchRow> rows;
    if (a.search)
        rows = searchConfigurations(model, requested, a.searchSpace(), bo);
    // What the microbatches' spread costs: in the requested scenario when it
    // has uneven microbatches, else in the measured one.
    const MicrobatchStudy microbatchStudy = studyMicrobatches(
        model, model.unevenFor(requested.microbatches, MicrobatchOrder::Given) ? requested : base);
    std::optional<TimeNs> trainableNs; // the measured configuration with no layer frozen
    if (trainable) {
        ReplayOptions quick;
        quick.timeline = false;
        trainableNs = predict(*trainable, base, quick).iterationNs();
    }
    progress.done();

    // --extra-work: the same work added to every prediction, in its bubbles first.
    std::vector<ExtraWorkPrediction> extra;
    if (a.extraWorkMs >= 0)
        for (const Prediction& p : predictions)
            extra.push_back(addExtraWork(p, static_cast<TimeNs>(std::llround(a.extraWorkMs * 1e6)),
                                         static_cast<TimeNs>(std::llround(a.extraWorkPieceMs * 1e6))));

    // --save-prediction: the last prediction (the requested scenario, or its
    // auto-balanced partition), or with --search the best configuration found
    // that fits the GPU memory, for `diff --prediction` against the next run.
    // Saved before any other output, so that a refusal leaves nothing written.
    if (a.savePredictionGiven) {
        const compare::JobIdentity id = compare::jobIdentity(trace, analysis);
        compare::SavedPrediction saved;
        if (a.search) {
            const auto best = std::find_if(rows.begin(), rows.end(), [](const SearchRow& r) { return !r.outOfMemory; });
            if (best == rows.end())
                throw FlagError("--save-prediction",
                                rows.empty() ? "the search found no configuration, so there is no best one to save; "
                                               "nothing was written"
                                             : "no configuration the search found fits the GPU memory, so there is no "
                                               "best one to save; nothing was written");
            saved = compare::savePrediction(a.file, id, *best, model.layerCount(), model.measuredIterationNs);
        } else {
            saved = compare::savePrediction(a.file, id, predictions.back());
        }
        compare::writeSavedPrediction(a.savePrediction, saved);
        std::cerr << "pipescope whatif: saved the prediction \"" << printable(saved.label) << "\" ("
                  << formatDuration(saved.predictedNs) << ") to " << printable(a.savePrediction) << "\n";
    }

    const bool simulated = trace.simulated();
    if (document) {
        JsonOptions jo;
        jo.timeline = !a.summary;
        nlohmann::json doc = whatIfDocument(WhatIfSource{"trace", a.file, simulated}, model, predictions,
                                            a.search ? &rows : nullptr, jo);
        for (size_t i = 0; i < extra.size(); ++i)
            doc["predictions"][i]["extra_work"] = extraWorkToJson(extra[i]);
        doc["straggler_fix"] = straggler ? stragglerFixToJson(*straggler) : nlohmann::json(nullptr);
        doc["microbatches"] = microbatchStudyToJson(microbatchStudy);
        if (trainableNs) {
            const TimeNs frozenNs = predictions.front().iterationNs();
            doc["freeze"] = {{"frozen_layers", doc["cost_model"]["frozen_layers"]},
                             {"trainable_iteration_ns", *trainableNs},
                             {"iteration_ns", frozenNs},
                             {"gain_ns", *trainableNs - frozenNs}};
        } else {
            doc["freeze"] = nullptr;
        }
        if (writeDocument(a, doc))
            return kExitOk;
    }
    std::cout << a.file << ": measured " << scheduleName(model.measuredSchedule) << ", pp "
              << model.measuredPp;
    if (model.measuredV > 1)
        std::cout << ", v " << model.measuredV;
    std::cout << ", " << model.measuredMicrobatches << " microbatches, " << model.layerCount() << " layers";
    if (model.measuredIterationNs)
        std::cout << ", iteration " << formatDuration(*model.measuredIterationNs);
    std::cout << "\n";
    if (!readLine.empty())
        std::cout << readLine << "\n";
    if (simulated)
        std::cout << "NOTE: the trace is SIMULATED, not a measurement of real hardware.\n";
    if (const std::string notice = noLayersNotice(model); !notice.empty())
        std::cout << "NOTE: " << notice << "\n";
    if (model.layerSource == LayerSource::Count && !model.stageExtrasNote.empty())
        std::cout << "NOTE: " << model.stageExtrasNote << "\n";
    if (const std::string speedLine = stageSpeedText(model); !speedLine.empty())
        std::cout << speedLine << "\n";
    if (const std::string frozenLine = frozenLayersText(model); !frozenLine.empty())
        std::cout << frozenLine << "\n";
    if (const std::string exchangeLine = exchangesText(model); !exchangeLine.empty())
        std::cout << exchangeLine << "\n";
    if (const std::string gapLine = stepGapsText(model); !gapLine.empty())
        std::cout << gapLine << "\n";
    std::cout << "\n";
    printPredictions(predictions, a.search ? &rows : nullptr);
    for (size_t i = 0; i < extra.size(); ++i)
        std::cout << predictions[i].label << ": " << extraWorkText(extra[i]) << "\n";
    if (straggler)
        std::cout << "straggler: " << stragglerFixText(*straggler) << "\n";
    if (trainableNs)
        std::cout << "freeze: " << freezeGainText(model, predictions.front().iterationNs(), *trainableNs) << "\n";
    std::cout << microbatchStudyText(microbatchStudy);
    return kExitOk;
}

int runWhatIf(WhatIfArgs& a) { return runWhatIfImpl(a); }

RegisterCommand reg{{"whatif", "Predict another partition, schedule or microbatch count from a measured trace", 60,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<WhatIfArgs>();
                         app.add_option("file", a->file, "Store file (.pipescope) or sharded job folder")->required();
                         addScenarioOptions(app, *a, {"Pipeline degree to predict (re-splits the layers)",
                                                      "Microbatches per iteration (same global batch)",
                                                      "First layer of each stage after the first, e.g. 4,9,13"});
                         addCalibrationOptions(app, a->calibration);
                         app.add_option("--iteration", a->iteration, "Iteration to calibrate on (default: a typical one)")
                             ->check(wholeNumber(0));
                         app.add_option("--ranks", a->ranks,
                                        "calibrate on these ranks only, e.g. 0,256,512,768 (one pipeline of a large job; a sharded job's index "
                                        "gives the pace of the replicas not read), or all (by default a sharded job beyond 2 GiB is "
                                        "read one pipeline: its busiest replica's)");
                         app.add_option("--measured-pp", a->measuredPp, "Pipeline degree of the measured job, if not detected")
                             ->check(wholeNumber(1, 4096));
                         app.add_option("--iteration-range", a->iterationRange,
                                        "Annotation name that marks iterations in the trace");
                         app.add_option("--extra-work", a->extraWorkMs,
                                        "Add this much work (ms) per iteration on every stage, in its bubbles first")
                             ->check(number(0, 1e6, "ms"));
                         app.add_option("--extra-work-piece", a->extraWorkPieceMs,
                                        "Shortest piece the extra work splits into (ms, default 0.1)")
                             ->check(number(0, 1e6, "ms"));
                         app.add_option("--stage-speed", a->stageSpeed,
                                        "Relative throughput of each pipeline rank's GPU, e.g. 1,1,0.8,1 (0.8: its "
                                        "layers take 1/0.8 as long), or 'trace': from the time each rank took for "
                                        "its layers")
                             ->delimiter(',')
                             ->check(numberOrWord("trace"));
                         app.add_option("--gpu-types", a->gpuTypes, "GPU type of each pipeline rank, e.g. A,A,B,B")
                             ->delimiter(',');
                         app.add_option("--gpu-throughput", a->gpuThroughput,
                                        "Relative throughput of each GPU type, e.g. A=1,B=0.6")
                             ->delimiter(',');
                         app.add_option("--fix-straggler", a->fixStraggler,
                                        "Predict the iteration with this rank at its data-parallel peers' speed")
                             ->check(wholeNumber(0, 1048575));
                         app.add_option("--freeze", a->freeze,
                                        "Freeze layers FIRST..LAST (0-based, inclusive), e.g. 0..3,30..31: no weight "
                                        "gradients, nor any backward before the first trainable layer")
                             ->delimiter(',');
                         CLI::Option* save = app.add_option(
                             "--save-prediction", a->savePrediction,
                             "Save the last prediction (with --search: the best configuration found) with this job's "
                             "identity, to check against the next run: pipescope diff THIS NEXT --prediction FILE "
                             "(docs/diff.md)");
                         addOutputOptions(app, *a);
                         addExchangesOption(app, *a,
                                            "trace (default: as the analysis and calibration found), blocking (batched "
                                            "exchanges that hold the compute stream), overlapped, or megatron (as "
                                            "Megatron-LM issues them: for interleaved 1F1B overlapped in the steady "
                                            "state, blocking in warm-up and cool-down)");
                         return [a, save] {
                             a->savePredictionGiven = save->count() > 0;
                             return runWhatIf(*a);
                         };
                     }}};

} // namespace
} // namespace pipescope::cli
