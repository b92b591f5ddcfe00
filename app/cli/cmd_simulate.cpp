// pipescope simulate MODEL.json [--schedule NAME] [--pp N] [--v V] [--microbatches M] [--dp D]
//                  [--boundaries L1,L2,...] [--auto-balance] [--search] [--json] [--emit-kineto DIR]
// Plans a pipeline run from a model description alone (no trace).
#include "Command.h"
#include "util/JsonText.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "whatif/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"
#include "whatif/WhatIfText.h"

#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

using namespace pipescope::whatif;

struct SimulateArgs {
    std::string model;
    std::string schedule, scheduleCsv;
    int pp = 0, v = 0, microbatches = 0, dp = 0;
    std::vector<int> boundaries;
    bool autoBalance = false, search = false, json = false, summary = false;
    double gpuMemoryGiB = 0;
    std::string output, emitKineto;
    int iterations = 2;
    uint64_t seed = 1;
};

int runSimulate(const SimulateArgs& a)
{
    const ModelDescription md = loadModelDescription(a.model);
    CostModel model = CostModel::fromModel(md);
    if (a.dp > 0) {
        model.dataParallel = a.dp;
        model.memory.dataParallel = a.dp;
    }
    if (a.gpuMemoryGiB > 0)
        model.memory.gpuMemoryBytes = static_cast<int64_t>(a.gpuMemoryGiB * 1024.0 * 1024.0 * 1024.0);

    Scenario base;
    base.label = "simulated";
    base.pp = md.pp.value_or(1);
    base.v = md.v.value_or(1);
    base.microbatches = md.microbatches.value_or(2 * base.pp);
    ScenarioChanges changes;
    changes.schedule = md.schedule.value_or("1f1b");
    if (!a.schedule.empty())
        changes.schedule = a.schedule;
    if (md.v && a.schedule.empty())
        changes.v = *md.v;
    if (!a.scheduleCsv.empty())
        changes.scheduleCsv = a.scheduleCsv;
    if (a.pp > 0)
        changes.pp = a.pp;
    if (a.v > 0)
        changes.v = a.v;
    if (a.microbatches > 0)
        changes.microbatches = a.microbatches;
    if (!a.boundaries.empty())
        changes.boundaries = a.boundaries;
    const Scenario scenario = applyChanges(base, changes);

    std::vector<Prediction> predictions;
    if (a.autoBalance) {
        BalanceResult b = autoBalance(model, scenario);
        b.prediction.label = "auto-balance";
        if (!b.memoryFeasible)
            std::cerr << "pipescope simulate: warning: no partition fits the GPU memory; showing the fastest one\n";
        predictions.push_back(std::move(b.prediction));
    } else {
        predictions.push_back(predict(model, scenario));
    }
    std::vector<SearchRow> rows;
    if (a.search)
        rows = searchConfigurations(model, scenario, SearchSpace{});

    if (!a.emitKineto.empty()) {
        KinetoEmitOptions eo;
        eo.iterations = a.iterations;
        eo.seed = a.seed;
        eo.modelName = md.name;
        const KinetoEmitSummary s = emitKineto(predictions.front(), eo, a.emitKineto);
        if (!a.json)
            std::cout << "wrote " << s.files.size() << " simulated Kineto traces (" << a.iterations
                      << " iterations each) to " << a.emitKineto << "\n";
    }

    JsonOptions jo;
    jo.timeline = !a.summary;
    const nlohmann::json doc =
        whatIfDocument(WhatIfSource{"model", a.model, true}, model, predictions, a.search ? &rows : nullptr, jo);
    if (!a.output.empty())
        AtomicOutput::writeFile(a.output, jsonText(doc, 1) + "\n");
    if (a.json) {
        std::cout << jsonText(doc, 1) << "\n";
        return kExitOk;
    }
    std::cout << "model " << md.name << " (" << model.layerCount() << " layers), simulated without a trace\n\n";
    for (const Prediction& p : predictions)
        std::cout << predictionText(p) << "\n";
    if (a.search)
        std::cout << "ranked configurations (auto-balanced each)\n" << searchText(rows) << "\n";
    return kExitOk;
}

RegisterCommand reg{{"simulate", "Plan a pipeline run from a model description: predicted timeline, bubbles, memory", 62,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<SimulateArgs>();
                         app.add_option("model", a->model, "Model description (JSON, see docs/model-format.md)")
                             ->required();
                         app.add_option("--schedule", a->schedule,
                                        "gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-v, dualpipev");
                         app.add_option("--schedule-csv", a->scheduleCsv,
                                        "A schedule order in torch.distributed.pipelining's CSV format");
                         app.add_option("--pp", a->pp, "Pipeline degree")->check(CLI::Range(1, 4096));
                         app.add_option("--v", a->v, "Chunks (virtual stages) per rank")->check(CLI::Range(1, 64));
                         app.add_option("--microbatches", a->microbatches, "Microbatches per iteration")
                             ->check(CLI::Range(1, 100000));
                         app.add_option("--dp", a->dp, "Data-parallel degree")->check(CLI::Range(1, 100000));
                         app.add_option("--boundaries", a->boundaries,
                                        "First layer of each stage after the first, e.g. 8,16,24")
                             ->delimiter(',');
                         app.add_flag("--auto-balance", a->autoBalance, "Find the partition with the best predicted time");
                         app.add_flag("--search", a->search, "Rank schedule x v x microbatches, each auto-balanced");
                         app.add_option("--gpu-memory", a->gpuMemoryGiB, "GPU memory in GiB for the out-of-memory flag")
                             ->check(CLI::Range(1.0 / 1024, 1024.0 * 1024)); // bytes must fit in int64
                         app.add_flag("--json", a->json, "Print JSON (schema pipescope.whatif/1) instead of tables");
                         app.add_flag("--summary", a->summary, "Leave per-step timelines out of the JSON");
                         app.add_option("-o,--output", a->output, "Also write the JSON to this file");
                         app.add_option("--emit-kineto", a->emitKineto,
                                        "Write the simulated job as per-rank Kineto traces DIR/rank-<r>.json");
                         app.add_option("--iterations", a->iterations, "Iterations in the emitted traces")
                             ->check(CLI::Range(1, 1000));
                         app.add_option("--seed", a->seed, "Seed of the emitted traces' jitter");
                         return [a] { return runSimulate(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
