// pipescope simulate MODEL.json [--schedule NAME] [--pp N] [--v V] [--microbatches M] [--dp D]
//                  [--boundaries L1,L2,...] [--auto-balance] [--search] [--json] [--emit-kineto DIR]
// Plans a pipeline run from a model description alone (no trace).
#include "Command.h"
#include "NumberChecks.h"
#include "ScenarioOptions.h"
#include "util/Error.h"
#include "util/Progress.h"
#include "simulate/KinetoEmitter.h"
#include "whatif/Microbatches.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"
#include "whatif/WhatIfJson.h"

#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

using namespace pipescope::whatif;

struct SimulateArgs : ScenarioArgs {
    std::string model;
    int dp = 0;
    std::string emitKineto;
    int iterations = 2;
    uint64_t seed = 1;
    bool noStepAnnotations = false;
    std::string microbatchSizes; // --microbatch-sizes
    const CLI::Option* microbatchSizesOption = nullptr; // given, even as "": an empty value is refused
    std::vector<double> stageSpeed; // --stage-speed
};

int runSimulate(const SimulateArgs& a)
{
    a.checkExchanges();
    const ModelDescription md = loadModelDescription(a.model);
    CostModel model = CostModel::fromModel(md);
    if (a.dp > 0) {
        model.dataParallel = a.dp;
        model.memory.dataParallel = a.dp;
    }
    if (auto bytes = a.gpuMemoryBytes())
        model.memory.gpuMemoryBytes = bytes;
    if (!a.stageSpeed.empty())
        model.setStageSpeeds(a.stageSpeed);

    Scenario base;
    base.label = "simulated";
    base.pp = md.pp.value_or(1);
    base.v = md.v.value_or(1);
    base.microbatches = md.microbatches.value_or(2 * base.pp);
    ScenarioChanges changes;
    changes.schedule = md.schedule.value_or("1f1b");
    if (md.v && a.schedule.empty())
        changes.v = *md.v;
    a.applyTo(changes);
    if (a.microbatchSizesOption && a.microbatchSizesOption->count() > 0 && a.microbatchSizes.find_first_not_of(" \t") == std::string::npos)
        throw FlagError("--microbatch-sizes", "the value is empty; give lognormal:SIGMA, uniform:LO,HI or one "
                                               "relative size per microbatch (1,0.5,2,...), or leave the flag out "
                                               "for equal microbatches");
    if (!a.microbatchSizes.empty() && !a.microbatchTokens.empty())
        throw FlagError("--microbatch-sizes", "give the microbatches' sizes either with --microbatch-sizes or with "
                                               "--microbatch-tokens, not both");
    a.applyMicrobatchTokens(model, changes);
    a.applyExchanges(model);
    const Scenario scenario = applyChanges(base, changes);
    if (!a.microbatchSizes.empty())
        model.microbatchSizes =
            uniformRows(microbatchSizesFromSpec(a.microbatchSizes, scenario.microbatches, a.seed), SizeSource::Simulated);

    // Sized before any work: the timeline is only kept for what is written.
    const bool document = a.json || !a.output.empty();
    const bool timeline = (document && !a.summary) || !a.emitKineto.empty();
    checkTimelineSize(scenario, document && !a.summary, a.emitKineto.empty() ? 0 : a.iterations * model.dataParallel);
    ReplayOptions ro;
    ro.timeline = timeline;
    Progress progress("simulating", 1000, true);
    WorkControl work;
    work.onProgress = [&](std::string_view phase, double f) {
        progress.setLabel(std::string(phase));
        if (f >= 0)
            progress.update(static_cast<uint64_t>(f * 1000));
    };
    BalanceOptions bo;
    bo.timeline = timeline;
    bo.work = &work;
    a.applyTo(bo);

    std::vector<Prediction> predictions;
    if (a.autoBalance) {
        BalanceResult b = autoBalance(model, scenario, bo);
        b.prediction.label = "auto-balance";
        if (!b.memoryFeasible)
            std::cerr << "pipescope simulate: warning: no partition fits the GPU memory; showing the fastest one\n";
        predictions.push_back(std::move(b.prediction));
    } else {
        predictions.push_back(predict(model, scenario, ro));
    }
    std::vector<SearchRow> rows;
    if (a.search)
        rows = searchConfigurations(model, scenario, a.searchSpace(), bo);
    const MicrobatchStudy microbatchStudy = studyMicrobatches(model, scenario);
    progress.done();

    if (!a.emitKineto.empty()) {
        simulate::KinetoEmitOptions eo;
        eo.iterations = a.iterations;
        eo.seed = a.seed;
        eo.stepAnnotations = !a.noStepAnnotations;
        eo.modelName = md.name;
        eo.costModel = &model; // module events around each layer's kernels
        const simulate::KinetoEmitSummary s = simulate::emitKineto(predictions.front(), eo, a.emitKineto);
        if (!a.json)
            std::cout << "wrote " << s.files.size() << " simulated Kineto traces (" << a.iterations
                      << " iterations each) to " << a.emitKineto << "\n";
    }

    if (document) {
        JsonOptions jo;
        jo.timeline = !a.summary;
        nlohmann::json doc =
            whatIfDocument(WhatIfSource{"model", a.model, true}, model, predictions, a.search ? &rows : nullptr, jo);
        doc["microbatches"] = microbatchStudyToJson(microbatchStudy);
        if (writeDocument(a, doc))
            return kExitOk;
    }
    std::cout << "model " << md.name << " (" << model.layerCount() << " layers), simulated without a trace\n\n";
    printPredictions(predictions, a.search ? &rows : nullptr);
    std::cout << microbatchStudyText(microbatchStudy);
    return kExitOk;
}

RegisterCommand reg{{"simulate", "Plan a pipeline run from a model description: predicted timeline, bubbles, memory", 62,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<SimulateArgs>();
                         app.add_option("model", a->model, "Model description (JSON, see docs/model-format.md)")
                             ->required();
                         addScenarioOptions(app, *a, {"Pipeline degree", "Microbatches per iteration",
                                                      "First layer of each stage after the first, e.g. 8,16,24"});
                         app.add_option("--dp", a->dp, "Data-parallel degree")->check(wholeNumber(1, 100000));
                         addOutputOptions(app, *a);
                         app.add_option("--emit-kineto", a->emitKineto,
                                        "Write the simulated job as per-rank Kineto traces DIR/rank-<r>.json");
                         app.add_option("--iterations", a->iterations, "Iterations in the emitted traces")
                             ->check(wholeNumber(1, 1000));
                         app.add_option("--seed", a->seed, "Seed of the emitted traces' jitter (and of --microbatch-sizes)");
                         app.add_option("--stage-speed", a->stageSpeed,
                                        "Relative throughput of each pipeline rank's GPU, e.g. 1,1,0.8,1: a job on "
                                        "uneven GPUs")
                             ->delimiter(',')
                             ->check(number());
                         a->microbatchSizesOption = app.add_option("--microbatch-sizes", a->microbatchSizes,
                                        "Uneven microbatches: lognormal:SIGMA, uniform:LO,HI or one relative size per "
                                        "microbatch (1,0.5,2,...)");
                         addExchangesOption(app, *a,
                                            "overlapped (default: sends overlap the next step), blocking (batched "
                                            "exchanges that hold the compute stream) or megatron (as Megatron-LM "
                                            "issues them)");
                         app.add_flag("--no-step-annotations", a->noStepAnnotations,
                                      "Emit no forward/backward step ranges: the analysis then reads steps from "
                                      "kernel order and point-to-point transfers alone");
                         return [a] { return runSimulate(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
