#include "whatif/WhatIfText.h"

#include "util/Format.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace pipescope::whatif {

namespace {

std::string joinInts(const std::vector<int>& v)
{
    std::string s;
    for (size_t i = 0; i < v.size(); ++i)
        s += (i ? "," : "") + std::to_string(v[i]);
    return s.empty() ? "-" : s;
}

std::string ratio(double x)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", x);
    return buf;
}


} // namespace

std::string describeConfig(const Prediction& p)
{
    std::ostringstream o;
    o << p.schedule.name() << ", pp " << p.schedule.pp;
    if (p.schedule.chunks() > 1)
        o << ", v " << p.schedule.chunks();
    o << ", " << p.schedule.microbatches << " microbatches";
    if (p.dataParallel > 1)
        o << ", dp " << p.dataParallel;
    o << ", boundaries " << joinInts(p.partition.boundaries());
    if (p.unevenMicrobatches)
        o << ", uneven microbatches " << toString(p.microbatchOrder);
    else if (p.microbatchOrder == MicrobatchOrder::Equal)
        o << ", equal microbatches";
    if (anyRecompute(p.recompute))
        o << ", recompute " << recomputeText(p.recompute);
    return o.str();
}

std::string predictionText(const Prediction& p)
{
    std::ostringstream o;
    o << p.label << ": " << describeConfig(p) << "\n";
    o << "  iteration  " << formatDuration(p.iterationNs());
    if (auto err = p.calibrationError()) {
        // Not a speed-up: how far the model's replay of the measured run is from it.
        o << "   (replay of the measured run: " << formatDuration(p.iterationNs()) << " vs "
          << formatDuration(*p.measuredIterationNs) << " measured, calibration error " << formatSignedPercent(*err) << ")";
    } else if (p.measuredIterationNs) {
        o << "   (measured " << formatDuration(*p.measuredIterationNs);
        if (auto s = p.speedup())
            o << ", speed-up " << ratio(*s) << (p.baselineNs ? " against the replay of the measured run" : "");
        o << ")";
    }
    o << "\n  bubble     " << formatPercent(p.replay.bubbleFraction) << " of rank time";
    const double total = static_cast<double>(p.iterationNs()) * static_cast<double>(p.replay.ranks.size());
    std::string causes;
    for (int c = 0; c < kBubbleCauseCount; ++c) {
        const TimeNs t = p.replay.bubbleNs[size_t(c)];
        if (t > 0 && total > 0)
            causes += (causes.empty() ? "" : ", ") + std::string(toString(static_cast<BubbleCause>(c))) + " " +
                      formatPercent(static_cast<double>(t) / total);
    }
    if (!causes.empty())
        o << " (" << causes << ")";
    o << "\n";
    const bool measuredMemory = std::any_of(p.measuredPeakBytes.begin(), p.measuredPeakBytes.end(), [](int64_t b) { return b >= 0; });
    std::vector<std::string> head{"rank", "stages", ">layers", ">busy", ">idle", ">peak memory", ">in flight", "OOM"};
    if (measuredMemory)
        head.insert(head.begin() + 6, ">measured peak");
    TextTable t(head);
    for (size_t r = 0; r < p.replay.ranks.size(); ++r) {
        const RankReplay& rr = p.replay.ranks[r];
        std::vector<int> stages;
        int layers = 0;
        for (int s = 0; s < p.schedule.stages; ++s)
            if (p.schedule.rankOfStage[size_t(s)] == static_cast<int>(r)) {
                stages.push_back(s);
                layers += p.partition.layersOf(s);
            }
        TimeNs idle = 0;
        for (TimeNs x : rr.bubbleNs)
            idle += x;
        const RankMemory* m = r < p.memory.size() ? &p.memory[r] : nullptr;
        std::vector<std::string> row{std::to_string(r), joinInts(stages), std::to_string(layers), formatDuration(rr.busyNs),
                                     formatDuration(idle), m && m->peakBytes > 0 ? formatBytes(m->peakBytes) : "-",
                                     m ? std::to_string(m->peakInFlight) : "-", m && m->outOfMemory ? "yes" : ""};
        if (measuredMemory)
            row.insert(row.begin() + 6, r < p.measuredPeakBytes.size() && p.measuredPeakBytes[r] >= 0
                                            ? formatBytes(p.measuredPeakBytes[r])
                                            : std::string("-"));
        t.add(std::move(row));
    }
    o << t.render();
    if (p.outOfMemory())
        o << "  WARNING: peak memory exceeds the GPU's " << formatBytes(p.gpuMemoryBytes.value_or(0)) << "\n";
    return o.str();
}

std::string stragglerFixText(const StragglerFix& f)
{
    return "rank " + std::to_string(f.rank) + " (stage " + std::to_string(f.stage) + ", replica " + std::to_string(f.replica) +
           ") computes " + formatPercent(f.relative - 1.0) + " " + (f.relative >= 1.0 ? "slower" : "faster") +
           " than its peers (" + formatDuration(f.computeNs) + " vs " + formatDuration(f.peerMedianNs) +
           "); at their speed: iteration " + formatDuration(f.iterationNs) + " (" + formatShift(-f.gainNs) +
           " against " + formatDuration(f.slowestReplicaNs) + " with each stage at its slowest replica)";
}

std::string stageSpeedText(const CostModel& model)
{
    if (!model.heterogeneous())
        return {};
    std::ostringstream o;
    o << "stage speeds";
    for (size_t r = 0; r < model.stageSpeed.size(); ++r)
        o << (r ? ", " : " ") << model.stageSpeed[r];
    o << " (relative throughput per pipeline rank; a stage's layers take 1/speed as long)";
    return o.str();
}

std::string exchangesText(const CostModel& model)
{
    if (model.megatronExchanges)
        return std::string("exchanges: as Megatron-LM issues them (interleaved 1F1B: overlapped in the steady state, "
                           "blocking in warm-up and cool-down; 1F1B: blocking batches), ") +
               (model.sharedLinks ? "transfers in flight sharing one medium"
                                  : "each direction between two ranks a link of its own") +
               ", " + formatDuration(model.p2pLatencyNs) + " per transfer alone";
    if (!model.blockingExchanges)
        return {};
    return "exchanges: blocking batches, as Megatron-LM runs them (a step waits for its rank's sends and receives; " +
           formatDuration(model.exchangeGapNs) + " from a batch to the next step)";
}

std::string stepGapsText(const CostModel& model)
{
    std::string out;
    if (!model.stepGapNs.empty()) {
        auto range = [&](size_t k) {
            TimeNs lo = -1, hi = 0;
            for (const auto& g : model.stepGapNs)
                if (g[k] > 0) {
                    lo = lo < 0 ? g[k] : std::min(lo, g[k]);
                    hi = std::max(hi, g[k]);
                }
            if (lo < 0)
                return formatDuration(model.launchGapNs);
            return lo == hi ? formatDuration(lo) : formatDuration(lo) + "-" + formatDuration(hi);
        };
        out = "host gap before each step, as measured (steps whose input was ready): forward " + range(0) +
              ", backward " + range(1) + " per rank";
    }
    if (model.measuredOrder)
        out += std::string(out.empty() ? "" : "; ") + "the measured order of steps is replayed (not the built-in " +
               std::string(toString(model.measuredOrder->kind)) + " order)";
    return out;
}

std::string frozenLayersText(const CostModel& model)
{
    if (model.frozenLayers.empty())
        return {};
    int count = 0;
    for (const LayerRange& r : model.frozenLayers)
        count += r.last - r.first + 1;
    std::ostringstream o;
    o << "frozen layers " << layerRangesText(model.frozenLayers) << " (" << count << " of " << model.layerCount()
      << "): no weight gradients, gradient buffers or optimizer state";
    if (const int prefix = model.frozenPrefix(); prefix > 0)
        o << "; " << (prefix == 1 ? std::string("layer 0") : "layers 0.." + std::to_string(prefix - 1))
          << " and the first-stage extra run no backward (nothing before them needs an input gradient)";
    return o.str();
}

std::string freezeGainText(const CostModel& model, TimeNs frozenNs, TimeNs trainableNs)
{
    return "layers " + layerRangesText(model.frozenLayers) + " frozen: iteration " + formatDuration(frozenNs) + " (" +
           formatShift(frozenNs - trainableNs) + " against " + formatDuration(trainableNs) + " with every layer trainable)";
}

std::string noLayersNotice(const CostModel& model)
{
    if (model.layerSource != LayerSource::Stages)
        return {};
    return "the trace does not attribute kernels to layers, so each stage is one layer and no boundary can move; "
           "give --layers N or --model FILE, or record with torch.profiler's with_stack=True (module calls) or "
           "the pipescope_annotate helper (layer ranges)";
}

std::string searchText(const std::vector<SearchRow>& rows, size_t maxRows)
{
    // The recomputation column only when some row recomputes.
    const bool recompute = std::any_of(rows.begin(), rows.end(), [](const SearchRow& r) {
        return r.recomputeChosen || anyRecompute(r.scenario.recompute);
    });
    std::vector<std::string> head{">#", "schedule", ">v", ">microbatches", ">iteration", ">speed-up", ">bubble",
                                  ">peak memory", "OOM", "front", "boundaries"};
    if (recompute)
        head.insert(head.begin() + 4, "recompute");
    TextTable t(head);
    for (size_t i = 0; i < rows.size() && i < maxRows; ++i) {
        const SearchRow& r = rows[i];
        std::vector<std::string> cells{std::to_string(i + 1), std::string(toString(r.scenario.schedule)),
                                       std::to_string(r.scenario.v), std::to_string(r.scenario.microbatches),
                                       formatDuration(r.iterationNs), r.speedup ? ratio(*r.speedup) : "-",
                                       formatPercent(r.bubbleFraction), r.peakBytes > 0 ? formatBytes(r.peakBytes) : "-",
                                       r.outOfMemory ? "yes" : "", r.pareto ? "*" : "", joinInts(r.boundaries)};
        if (recompute)
            cells.insert(cells.begin() + 4, (r.recomputeChosen ? "per stage: " : "") + recomputeText(r.scenario.recompute));
        t.add(cells);
    }
    std::string out = t.render();
    if (rows.size() > maxRows)
        out += "  ... " + std::to_string(rows.size() - maxRows) + " more (see --json)\n";
    if (std::any_of(rows.begin(), rows.end(), [](const SearchRow& r) { return r.pareto; }))
        out += "  front: * marks the configurations no other beats in both iteration time and peak memory\n";
    return out;
}

} // namespace pipescope::whatif
