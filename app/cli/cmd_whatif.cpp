// pipescope whatif FILE [--boundaries L1,L2,...] [--schedule NAME --v V] [--microbatches M] [--pp N]
//                 [--auto-balance] [--search] [--model MODEL.json] [--json]
// Replays other configurations of a measured pipeline, calibrated on the trace.
#include "Command.h"
#include "util/JsonText.h"
#include "analysis/MeasuredPipeline.h"
#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

using namespace pipescope::whatif;

struct WhatIfArgs {
    std::string file;
    std::string schedule, scheduleCsv, model, output, iterationRange;
    int pp = 0, v = 0, microbatches = 0, layers = 0, iteration = -1, measuredPp = 0;
    std::vector<int> boundaries, measuredBoundaries;
    std::vector<double> weights;
    bool autoBalance = false, search = false, json = false, summary = false;
    double gpuMemoryGiB = 0;
};

int runWhatIf(const WhatIfArgs& a)
{
    std::optional<ModelDescription> md;
    if (!a.model.empty())
        md = loadModelDescription(a.model);

    Store store(a.file);
    const Trace trace = store.load();
    MeasureOptions mo;
    if (a.iteration >= 0)
        mo.iteration = a.iteration;
    if (a.measuredPp > 0)
        mo.pipelineDegree = a.measuredPp;
    mo.iterationRange = a.iterationRange;
    MeasuredPipeline measured;
    try {
        measured = measurePipeline(trace, mo);
    } catch (const Error& e) {
        // The analysis names analyze's --pp; for whatif, --pp is the degree to predict.
        std::string message = e.what();
        if (auto at = message.find("--pp N"); at != std::string::npos)
            message.replace(at, 6, "--measured-pp N");
        throw Error(a.file + ": " + message);
    }

    FromMeasuredOptions fo;
    if (a.layers > 0)
        fo.layers = a.layers;
    fo.measuredBoundaries = a.measuredBoundaries;
    fo.layerWeights = a.weights;
    CostModel model = CostModel::fromMeasured(measured, md ? &*md : nullptr, fo);
    if (a.gpuMemoryGiB > 0)
        model.memory.gpuMemoryBytes = static_cast<int64_t>(a.gpuMemoryGiB * 1024.0 * 1024.0 * 1024.0);

    const Scenario base = measuredScenario(model);
    ScenarioChanges changes;
    if (!a.schedule.empty())
        changes.schedule = a.schedule;
    if (!a.scheduleCsv.empty())
        changes.scheduleCsv = a.scheduleCsv;
    if (a.pp > 0)
        changes.pp = a.pp;
    if (a.v > 0)
        changes.v = a.v;
    if (a.microbatches > 0)
        changes.microbatches = a.microbatches;
    if (!a.boundaries.empty()) {
        if (measured.layers.empty() && a.layers <= 0 && !md)
            throw Error("the trace does not attribute kernels to layers, so --boundaries has no layers to move; "
                        "give the layer count with --layers N or a model description with --model MODEL.json");
        changes.boundaries = a.boundaries;
    }
    Scenario requested = applyChanges(base, changes);
    requested.label = "requested";

    std::vector<Prediction> predictions;
    predictions.push_back(predict(model, base));
    const bool changed = !a.schedule.empty() || !a.scheduleCsv.empty() || a.pp > 0 || a.v > 0 || a.microbatches > 0 ||
                         !a.boundaries.empty();
    if (changed)
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
    if (!a.output.empty())
        AtomicOutput::writeFile(a.output, jsonText(doc, 1) + "\n");
    if (a.json) {
        std::cout << jsonText(doc, 1) << "\n";
        return kExitOk;
    }
    std::cout << a.file << ": measured " << (measured.schedule.empty() ? "unknown" : measured.schedule) << ", pp "
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
    for (const Prediction& p : predictions)
        std::cout << predictionText(p) << "\n";
    if (a.search)
        std::cout << "ranked configurations (auto-balanced each)\n" << searchText(rows) << "\n";
    return kExitOk;
}

RegisterCommand reg{{"whatif", "Predict another partition, schedule or microbatch count from a measured trace", 60,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<WhatIfArgs>();
                         app.add_option("file", a->file, "Store file (.pipescope)")->required();
                         app.add_option("--boundaries", a->boundaries,
                                        "First layer of each stage after the first, e.g. 4,9,13")
                             ->delimiter(',');
                         app.add_option("--schedule", a->schedule,
                                        "gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-v, dualpipev");
                         app.add_option("--schedule-csv", a->scheduleCsv,
                                        "A schedule order in torch.distributed.pipelining's CSV format");
                         app.add_option("--v", a->v, "Chunks (virtual stages) per rank")->check(CLI::Range(1, 64));
                         app.add_option("--microbatches", a->microbatches,
                                        "Microbatches per iteration (same global batch)")
                             ->check(CLI::Range(1, 100000));
                         app.add_option("--pp", a->pp, "Pipeline degree to predict (re-splits the layers)")
                             ->check(CLI::Range(1, 4096));
                         app.add_flag("--auto-balance", a->autoBalance, "Find the partition with the best predicted time");
                         app.add_flag("--search", a->search, "Rank schedule x v x microbatches, each auto-balanced");
                         app.add_option("--model", a->model,
                                        "Model description (layers, parameters, activations; docs/model-format.md)");
                         app.add_option("--layers", a->layers, "Layer count when the trace does not name layers")
                             ->check(CLI::Range(1, 100000));
                         app.add_option("--measured-boundaries", a->measuredBoundaries,
                                        "The measured run's boundaries (default: an even split)")
                             ->delimiter(',');
                         app.add_option("--weights", a->weights, "Relative cost of each layer, comma-separated")
                             ->delimiter(',');
                         app.add_option("--gpu-memory", a->gpuMemoryGiB, "GPU memory in GiB for the out-of-memory flag")
                             ->check(CLI::Range(1.0 / 1024, 1024.0 * 1024)); // bytes must fit in int64
                         app.add_option("--iteration", a->iteration, "Iteration to calibrate on (default: a typical one)")
                             ->check(CLI::NonNegativeNumber);
                         app.add_option("--measured-pp", a->measuredPp, "Pipeline degree of the measured job, if not detected")
                             ->check(CLI::Range(1, 4096));
                         app.add_option("--iteration-range", a->iterationRange,
                                        "Annotation name that marks iterations in the trace");
                         app.add_flag("--json", a->json, "Print JSON (schema pipescope.whatif/1) instead of tables");
                         app.add_flag("--summary", a->summary, "Leave per-step timelines out of the JSON");
                         app.add_option("-o,--output", a->output, "Also write the JSON to this file");
                         return [a] { return runWhatIf(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
