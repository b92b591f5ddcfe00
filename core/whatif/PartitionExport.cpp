#include "whatif/PartitionExport.h"

#include <set>

namespace pipescope::whatif {

namespace {

std::string decoders(int n)
{
    if (n <= 0)
        return {};
    return n == 1 ? std::string("t") : "t*" + std::to_string(n);
}

} // namespace

std::string megatronLayout(const Partition& partition)
{
    std::string out;
    const int S = partition.stages();
    for (int s = 0; s < S; ++s) {
        if (s > 0)
            out += '|';
        if (s == 0)
            out += 'E';
        out += decoders(partition.layersOf(s));
        // The comma only keeps "t*4" and "L" apart for a reader; Megatron drops it.
        if (s == S - 1)
            out += partition.layersOf(s) > 0 ? ",L" : "L";
    }
    return out;
}

std::optional<std::string> megatronLayout(const Partition& partition, const Schedule& schedule, std::string* why)
{
    if (partition.stages() != schedule.stages || schedule.rankOfStage.size() != size_t(schedule.stages) ||
        schedule.chunkOfStage.size() != size_t(schedule.stages)) {
        if (why)
            *why = "the partition has " + std::to_string(partition.stages()) + " stages, the schedule " +
                   std::to_string(schedule.stages);
        return std::nullopt;
    }
    for (int s = 0; s < schedule.stages; ++s) {
        if (schedule.rankOfStage[size_t(s)] != s % schedule.pp || schedule.chunkOfStage[size_t(s)] != s / schedule.pp) {
            if (why)
                *why = schedule.name() + " places virtual stage " + std::to_string(s) + " on rank " +
                       std::to_string(schedule.rankOfStage[size_t(s)]) +
                       "; Megatron-LM's layout puts stage s on rank s mod pp, so it cannot express this placement";
            return std::nullopt;
        }
    }
    return megatronLayout(partition);
}

std::optional<std::string> megatronUnevenFlags(const Partition& partition, const Schedule& schedule, std::string* why)
{
    const int S = partition.stages();
    if (schedule.chunks() != 1 || S != schedule.pp) {
        if (why)
            *why = "the flags describe one chunk per rank; with v " + std::to_string(schedule.chunks()) +
                   " use the layout string";
        return std::nullopt;
    }
    if (S < 2)
        return std::string();
    const int first = partition.layersOf(0), last = partition.layersOf(S - 1);
    // Megatron splits what the first and last stages leave evenly over the others.
    std::optional<int> middle;
    for (int s = 1; s + 1 < S; ++s) {
        if (middle && *middle != partition.layersOf(s)) {
            if (why)
                *why = "stages 1.." + std::to_string(S - 2) +
                       " hold different layer counts, which the flags cannot say; use the layout string";
            return std::nullopt;
        }
        middle = partition.layersOf(s);
    }
    const int even = middle ? *middle : first;
    std::string out;
    if (first != even || (!middle && first != last))
        out += "--decoder-first-pipeline-num-layers " + std::to_string(first);
    if (last != even || (!middle && first != last))
        out += std::string(out.empty() ? "" : " ") + "--decoder-last-pipeline-num-layers " + std::to_string(last);
    return out;
}

std::vector<std::vector<std::string>> stageModules(const Partition& partition, const CostModel& model)
{
    if (model.layerSource != LayerSource::Trace && model.layerSource != LayerSource::Model)
        return {};
    std::set<std::string> seen, repeated;
    for (const LayerCostModel& l : model.layers)
        if (!seen.insert(l.name).second)
            repeated.insert(l.name);
    std::vector<std::vector<std::string>> out(size_t(std::max(0, partition.stages())));
    for (int s = 0; s < partition.stages(); ++s)
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1] && l < model.layerCount(); ++l) {
            const std::string& name = model.layers[size_t(l)].name;
            out[size_t(s)].push_back(repeated.count(name) ? name + "[" + std::to_string(l) + "]" : name);
        }
    return out;
}

std::string partitionExportText(const Partition& partition, const Schedule& schedule, const CostModel& model)
{
    std::string out = "Megatron-LM\n";
    std::string why;
    if (auto layout = megatronLayout(partition, schedule, &why))
        out += "  --pipeline-model-parallel-layout \"" + *layout + "\"\n";
    else
        out += "  layout: does not apply: " + why + "\n";
    why.clear();
    if (auto flags = megatronUnevenFlags(partition, schedule, &why))
        out += flags->empty() ? std::string("  an even split: no --decoder-first/last flags needed\n") : "  " + *flags + "\n";
    else
        out += "  --decoder-first/last-pipeline-num-layers: do not apply: " + why + "\n";
    out += "\nModules per stage\n";
    const auto modules = stageModules(partition, model);
    if (modules.empty()) {
        out += "  layer names unknown (layers from a " + std::string(model.layerSource == LayerSource::Count ? "layer count" : "stage count") +
               "); give a model file to name them\n";
        return out;
    }
    for (size_t s = 0; s < modules.size(); ++s) {
        out += "  stage " + std::to_string(s);
        if (s < schedule.rankOfStage.size())
            out += " (rank " + std::to_string(schedule.rankOfStage[s]) + ")";
        out += ":";
        for (size_t i = 0; i < modules[s].size(); ++i)
            out += (i ? ", " : " ") + modules[s][i];
        out += "\n";
    }
    return out;
}

} // namespace pipescope::whatif
