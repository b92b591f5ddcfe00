#pragma once
// The job the scale benchmarks write: a GPT model of 32 layers, pipeline 4,
// 1F1B, 8 microbatches, ranks / 4 data-parallel replicas, simulated and
// emitted as per-rank PyTorch profiler traces (bench_scale, bench_serve,
// bench_import_ranks). Fewer layers make small rank traces (4 layers: one
// per stage, about a sixth of the JSON per rank), for jobs of many
// thousand ranks on one machine.
#include "simulate/KinetoEmitter.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <filesystem>
#include <string>

namespace pipescope::benchjobs {

inline std::string simulatedModelText(int ranks, int layers = 32)
{
    return R"({"format": "pipescope.model/1", "name": "gpt-)" + std::to_string(layers) + R"(l", "hidden_size": 4096, "attention_heads": 32,
  "sequence_length": 2048, "microbatch_size": 1, "vocab_size": 50304, "dtype": "bf16", "gpu_tflops": 400,
  "layers": [{"name": "decoder", "count": )" + std::to_string(layers) + R"(}],
  "communication": {"p2p_latency_us": 20, "p2p_bandwidth_gbps": 25, "allreduce_latency_us": 30, "allreduce_bandwidth_gbps": 40},
  "memory": {"gpu_memory_gib": 80, "weight_bytes_per_param": 2, "grad_bytes_per_param": 4,
             "optimizer_bytes_per_param": 12, "zero_stage": 1, "reserved_gib": 3},
  "parallel": {"pp": 4, "dp": )" + std::to_string(ranks / 4) + R"(, "microbatches": 8, "schedule": "1f1b"}})";
}

// Writes the job of `ranks` ranks (a multiple of 4) into dir; `layers` a multiple of 4 too.
inline simulate::KinetoEmitSummary writeSimulatedJob(const std::filesystem::path& dir, int ranks, int iterations, int layers = 32)
{
    using namespace whatif;
    const ModelDescription md = parseModelDescription(simulatedModelText(ranks, layers), "simulated job");
    CostModel model = CostModel::fromModel(md);
    model.dataParallel = *md.dp;
    model.memory.dataParallel = *md.dp;
    Scenario base;
    base.label = "simulated";
    base.pp = *md.pp;
    base.microbatches = *md.microbatches;
    ScenarioChanges changes;
    changes.schedule = *md.schedule;
    simulate::KinetoEmitOptions eo;
    eo.iterations = iterations;
    eo.modelName = md.name;
    eo.costModel = &model;
    eo.maxSteps = 4'000'000; // 16,384 ranks of 2 iterations: 524,288 steps
    return simulate::emitKineto(predict(model, applyChanges(base, changes)), eo, dir.string());
}

} // namespace pipescope::benchjobs
