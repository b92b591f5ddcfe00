// pipescope whatif FILE [--boundaries L1,L2,...] [--schedule NAME --v V] [--microbatches M] [--pp N]
//                 [--auto-balance] [--search] [--model MODEL.json] [--json]
// Replays other configurations of a measured pipeline, calibrated on the trace.
#include "Command.h"
#include "ScenarioOptions.h"
#include "analysis/MeasuredPipeline.h"
#include "store/Store.h"
#include "util/Error.h"
#include "util/Format.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"

#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

using namespace pipescope::whatif;

struct WhatIfArgs : ScenarioArgs {
    std::string file, model, iterationRange;
    int layers = 0, iteration = -1, measuredPp = 0;
    std::vector<int> measuredBoundaries;
    std::vector<double> weights;
};

int runWhatIf(const WhatIfArgs& a)
{
    std::optional<ModelDescription> md;
    if (!a.model.empty())
        md = loadModelDescription(a.model);

    Store store(a.file);
    const Trace trace = store.load();
    AnalyzeOptions ao;
    if (a.iteration >= 0)
        ao.iteration = a.iteration;
    if (a.measuredPp > 0)
        ao.pipelineDegree = a.measuredPp;
    ao.iterationRange = a.iterationRange;
    CalibrateOptions co;
    co.model = md ? &*md : nullptr;
    if (a.layers > 0)
        co.measured.layers = a.layers;
    co.measured.measuredBoundaries = a.measuredBoundaries;
    co.measured.layerWeights = a.weights;
    co.gpuMemoryBytes = a.gpuMemoryBytes();
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
    if (!a.boundaries.empty() && model.layerSource == "stages")
        throw Error("the trace does not attribute kernels to layers, so --boundaries has no layers to move; "
                    "give the layer count with --layers N or a model description with --model MODEL.json");
    ScenarioChanges changes;
    a.applyTo(changes);
    Scenario requested = applyChanges(base, changes);
    requested.label = "requested";

    std::vector<Prediction> predictions;
    predictions.push_back(predict(model, base));
    if (a.changesScenario())
        predictions.push_back(predict(model, requested));
    if (a.autoBalance) {
        BalanceResult b = autoBalance(model, requested);
        b.prediction.label = "auto-balance";
        if (!b.memoryFeasible)
            std::cerr << "pipescope whatif: warning: no partition fits the GPU memory; showing the fastest one\n";
        predictions.push_back(std::move(b.prediction));
    }
    std::vector<SearchRow> rows;
    if (a.search)
        rows = searchConfigurations(model, requested, SearchSpace{});

    JsonOptions jo;
    jo.timeline = !a.summary;
    const bool simulated = trace.simulated();
    const nlohmann::json doc = whatIfDocument(WhatIfSource{"trace", a.file, simulated}, model, predictions,
                                              a.search ? &rows : nullptr, jo);
    if (writeDocument(a, doc))
        return kExitOk;
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
    std::cout << "\n";
    printPredictions(predictions, a.search ? &rows : nullptr);
    return kExitOk;
}

RegisterCommand reg{{"whatif", "Predict another partition, schedule or microbatch count from a measured trace", 60,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<WhatIfArgs>();
                         app.add_option("file", a->file, "Store file (.pipescope)")->required();
                         addScenarioOptions(app, *a, {"Pipeline degree to predict (re-splits the layers)",
                                                      "Microbatches per iteration (same global batch)",
                                                      "First layer of each stage after the first, e.g. 4,9,13"});
                         app.add_option("--model", a->model,
                                        "Model description (layers, parameters, activations; docs/model-format.md)");
                         app.add_option("--layers", a->layers, "Layer count when the trace does not name layers")
                             ->check(CLI::Range(1, 100000));
                         app.add_option("--measured-boundaries", a->measuredBoundaries,
                                        "The measured run's boundaries (default: an even split)")
                             ->delimiter(',');
                         app.add_option("--weights", a->weights, "Relative cost of each layer, comma-separated")
                             ->delimiter(',');
                         app.add_option("--iteration", a->iteration, "Iteration to calibrate on (default: a typical one)")
                             ->check(CLI::NonNegativeNumber);
                         app.add_option("--measured-pp", a->measuredPp, "Pipeline degree of the measured job, if not detected")
                             ->check(CLI::Range(1, 4096));
                         app.add_option("--iteration-range", a->iterationRange,
                                        "Annotation name that marks iterations in the trace");
                         addOutputOptions(app, *a);
                         return [a] { return runWhatIf(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
