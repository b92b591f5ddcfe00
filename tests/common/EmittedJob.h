#pragma once
// A simulated job written as `pipescope simulate --emit-kineto` writes it:
// pp stages x dp data-parallel ranks of a small GPT (8 layers, 2 x pp
// microbatches, 1F1B), rank files of a few megabytes each. Needs
// pipescope_simulate (and what it links).
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <QString>

namespace pipescope::test {

inline void emitJob(const QString& dir, int pp, int dp, int iterations)
{
    using namespace whatif;
    const std::string text = R"({"format": "pipescope.model/1", "name": "gpt-8l", "hidden_size": 1024,
        "attention_heads": 16, "sequence_length": 1024, "vocab_size": 32000, "gpu_tflops": 300,
        "layers": [{"name": "decoder", "count": 8}],
        "communication": {"p2p_latency_us": 20, "p2p_bandwidth_gbps": 25, "allreduce_latency_us": 30,
                          "allreduce_bandwidth_gbps": 40}})";
    const ModelDescription md = parseModelDescription(text, "test model");
    CostModel model = CostModel::fromModel(md);
    model.dataParallel = dp;
    model.memory.dataParallel = dp;
    Scenario base;
    base.pp = pp;
    base.microbatches = 2 * pp;
    ScenarioChanges changes;
    changes.schedule = "1f1b";
    simulate::KinetoEmitOptions eo;
    eo.iterations = iterations;
    eo.costModel = &model;
    simulate::emitKineto(predict(model, applyChanges(base, changes)), eo, dir.toStdString());
}

} // namespace pipescope::test
