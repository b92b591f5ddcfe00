// pipescope whatif FILE [--boundaries L1,L2,...] [--schedule NAME --v V] [--microbatches M] [--pp N]
//                 [--auto-balance] [--search] [--model MODEL.json] [--extra-work MS] [--json]
// Replays other configurations of a measured pipeline, calibrated on the trace.
#include "Command.h"
#include "NumberChecks.h"
#include "ScenarioOptions.h"
#include "analysis/MeasuredPipeline.h"
#include "store/Store.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Progress.h"
#include "whatif/ExtraWork.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include <cmath>
#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

using namespace pipescope::whatif;

struct WhatIfArgs : ScenarioArgs {
    std::string file, iterationRange;
    int iteration = -1, measuredPp = 0;
    double extraWorkMs = -1, extraWorkPieceMs = 0.1; // --extra-work: < 0 when not asked
    CalibrationArgs calibration;
};

int runWhatIf(WhatIfArgs& a)
{
    a.calibration.load();

    Store store(a.file);
    const Trace trace = store.load();
    AnalyzeOptions ao;
    if (a.iteration >= 0)
        ao.iteration = a.iteration;
    if (a.measuredPp > 0)
        ao.pipelineDegree = a.measuredPp;
    ao.iterationRange = a.iterationRange;
    const CalibrateOptions co = a.calibration.options(a.gpuMemoryBytes());
    CostModel model;
    try {
        model = calibrate(trace, analyze(trace, ao), co);
    } catch (const ValueError&) {
        throw;
    } catch (const Error& e) {
        // The analysis names analyze's --pp; for whatif, --pp is the degree to predict.
        std::string message = e.what();
        if (auto at = message.find("--pp N"); at != std::string::npos)
            message.replace(at, 6, "--measured-pp N");
        throw Error(a.file + ": " + message);
    }

    const Scenario base = measuredScenario(model);
    if (!a.boundaries.empty() && model.layerSource == LayerSource::Stages)
        throw Error("the trace does not attribute kernels to layers, so --boundaries has no layers to move; "
                    "give the layer count with --layers N or a model description with --model MODEL.json");
    ScenarioChanges changes;
    a.applyTo(changes);
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

    std::vector<Prediction> predictions;
    predictions.push_back(predict(model, base, ro));
    if (a.changesScenario())
        predictions.push_back(predict(model, requested, ro));
    if (a.autoBalance) {
        BalanceResult b = autoBalance(model, requested, bo);
        b.prediction.label = "auto-balance";
        if (!b.memoryFeasible)
            std::cerr << "pipescope whatif: warning: no partition fits the GPU memory; showing the fastest one\n";
        predictions.push_back(std::move(b.prediction));
    }
    std::vector<SearchRow> rows;
    if (a.search)
        rows = searchConfigurations(model, requested, SearchSpace{}, bo);
    progress.done();

    // --extra-work: the same work added to every prediction, in its bubbles first.
    std::vector<ExtraWorkPrediction> extra;
    if (a.extraWorkMs >= 0)
        for (const Prediction& p : predictions)
            extra.push_back(addExtraWork(p, static_cast<TimeNs>(std::llround(a.extraWorkMs * 1e6)),
                                         static_cast<TimeNs>(std::llround(a.extraWorkPieceMs * 1e6))));

    const bool simulated = trace.simulated();
    if (document) {
        JsonOptions jo;
        jo.timeline = !a.summary;
        nlohmann::json doc = whatIfDocument(WhatIfSource{"trace", a.file, simulated}, model, predictions,
                                            a.search ? &rows : nullptr, jo);
        for (size_t i = 0; i < extra.size(); ++i)
            doc["predictions"][i]["extra_work"] = extraWorkToJson(extra[i]);
        if (writeDocument(a, doc))
            return kExitOk;
    }
    std::cout << a.file << ": measured " << (model.measuredSchedule.empty() ? "unknown" : model.measuredSchedule) << ", pp "
              << model.measuredPp;
    if (model.measuredV > 1)
        std::cout << ", v " << model.measuredV;
    std::cout << ", " << model.measuredMicrobatches << " microbatches, " << model.layerCount() << " layers";
    if (model.measuredIterationNs)
        std::cout << ", iteration " << formatDuration(*model.measuredIterationNs);
    std::cout << "\n";
    if (simulated)
        std::cout << "NOTE: the trace is SIMULATED, not a measurement of real hardware.\n";
    if (const std::string notice = noLayersNotice(model); !notice.empty())
        std::cout << "NOTE: " << notice << "\n";
    std::cout << "\n";
    printPredictions(predictions, a.search ? &rows : nullptr);
    for (size_t i = 0; i < extra.size(); ++i)
        std::cout << predictions[i].label << ": " << extraWorkText(extra[i]) << "\n";
    return kExitOk;
}

RegisterCommand reg{{"whatif", "Predict another partition, schedule or microbatch count from a measured trace", 60,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<WhatIfArgs>();
                         app.add_option("file", a->file, "Store file (.pipescope)")->required();
                         addScenarioOptions(app, *a, {"Pipeline degree to predict (re-splits the layers)",
                                                      "Microbatches per iteration (same global batch)",
                                                      "First layer of each stage after the first, e.g. 4,9,13"});
                         addCalibrationOptions(app, a->calibration);
                         app.add_option("--iteration", a->iteration, "Iteration to calibrate on (default: a typical one)")
                             ->check(wholeNumber(0));
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
                         addOutputOptions(app, *a);
                         return [a] { return runWhatIf(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
