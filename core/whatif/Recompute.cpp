#include "whatif/Recompute.h"

#include "whatif/CostModel.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pipescope::whatif {

namespace {

constexpr Recompute kAll[] = {Recompute::None, Recompute::Selective, Recompute::Full};

TimeNs ns(double x)
{
    if (std::isnan(x) || x > static_cast<double>(kMaxTimeNs))
        throw Error("a stage's recomputed forward (" + std::to_string(x) + " ns) does not fit the nanosecond clock");
    return static_cast<TimeNs>(std::llround(std::max(0.0, x)));
}

int64_t bytes(double x)
{
    if (std::isnan(x) || x > static_cast<double>(std::numeric_limits<int64_t>::max() / 4))
        throw Error("the activation memory of a stage (" + std::to_string(x) + " bytes) is too large to count");
    return static_cast<int64_t>(std::llround(std::max(0.0, x)));
}

} // namespace

std::string_view toString(Recompute r)
{
    switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
    }
    return "none";
}

std::optional<Recompute> recomputeFromString(std::string_view text)
{
    for (Recompute r : kAll)
        if (text == toString(r))
            return r;
    return std::nullopt;
}

std::vector<Recompute> parseRecompute(const std::string& text)
{
    std::vector<Recompute> out;
    size_t at = 0;
    while (true) {
        const size_t comma = text.find(',', at);
        std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        const auto r = recomputeFromString(item);
        if (!r)
            throw ValueError(Setting::Recompute, "'" + printable(item, 64) +
                                              "' is not a recomputation; give none, selective or full, for every "
                                              "stage or one per virtual stage, comma-separated");
        out.push_back(*r);
        if (comma == std::string::npos)
            break;
        at = comma + 1;
    }
    return out;
}

std::string recomputeText(const std::vector<Recompute>& perStage)
{
    if (perStage.empty())
        return "none";
    if (std::all_of(perStage.begin(), perStage.end(), [&](Recompute r) { return r == perStage.front(); }))
        return std::string(toString(perStage.front()));
    std::string out;
    for (Recompute r : perStage)
        out += (out.empty() ? "" : ",") + std::string(toString(r));
    return out;
}

std::vector<Recompute> recomputePerStage(const std::vector<Recompute>& setting, int stages)
{
    const size_t S = static_cast<size_t>(std::max(0, stages));
    if (setting.empty())
        return std::vector<Recompute>(S, Recompute::None);
    if (setting.size() == 1)
        return std::vector<Recompute>(S, setting.front());
    if (setting.size() != S)
        throw ValueError(Setting::Recompute, "the recomputation lists " + std::to_string(setting.size()) +
                                          " stages and the scenario has " + std::to_string(stages) +
                                          " (pp x v); give one setting for all or one per virtual stage");
    return setting;
}

bool anyRecompute(const std::vector<Recompute>& perStage)
{
    return std::any_of(perStage.begin(), perStage.end(), [](Recompute r) { return r != Recompute::None; });
}

StageActivation stageActivation(Recompute r, double layerBytes, double extraBytes, double inputBytes,
                                const MemoryConfig& config)
{
    StageActivation a;
    switch (r) {
    case Recompute::None: a.storedBytes = layerBytes + extraBytes; break;
    case Recompute::Selective: {
        const double share = std::clamp(config.selectiveActivationShare, 0.0, 1.0);
        a.storedBytes = extraBytes + layerBytes * (1.0 - share);
        a.recomputeBytes = layerBytes * share;
        break;
    }
    case Recompute::Full:
        // The layers' input is kept (never more than what the layers stored themselves).
        a.storedBytes = extraBytes + std::min(std::max(0.0, inputBytes), layerBytes);
        a.recomputeBytes = layerBytes;
        break;
    }
    return a;
}

double recomputeForwardNs(Recompute r, double layerForwardNs, const MemoryConfig& config)
{
    switch (r) {
    case Recompute::None: return 0.0;
    case Recompute::Selective: return layerForwardNs * std::clamp(config.selectiveForwardShare, 0.0, 1.0);
    case Recompute::Full: return layerForwardNs;
    }
    return 0.0;
}

ActivationBytes stageActivationBytes(const CostModel& model, const Partition& partition, int microbatches,
                                     const std::vector<Recompute>& perStage)
{
    const int S = partition.stages();
    const double scale = model.microbatchScale(microbatches);
    ActivationBytes out;
    out.stored.assign(size_t(std::max(0, S)), 0);
    out.recompute.assign(size_t(std::max(0, S)), 0);
    for (int s = 0; s < S; ++s) {
        double layer = 0, extra = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            layer += static_cast<double>(model.layers[size_t(l)].activationBytes);
        if (s == 0)
            extra += static_cast<double>(model.firstStageExtra.activationBytes);
        if (s == S - 1)
            extra += static_cast<double>(model.lastStageExtra.activationBytes);
        const Recompute r = size_t(s) < perStage.size() ? perStage[size_t(s)] : Recompute::None;
        const StageActivation a =
            stageActivation(r, layer, extra, static_cast<double>(model.p2pBytes), model.memory);
        out.stored[size_t(s)] = bytes(a.storedBytes * scale);
        out.recompute[size_t(s)] = bytes(a.recomputeBytes * scale);
    }
    return out;
}

void addRecomputeCosts(const CostModel& model, const Partition& partition, const Schedule& schedule,
                       const std::vector<Recompute>& perStage, ReplayCosts& costs)
{
    if (!anyRecompute(perStage))
        return;
    const int S = schedule.stages;
    const int M = schedule.microbatches;
    const double scale = model.microbatchScale(M);
    const bool perMicrobatch = costs.microbatchCosts.size() == size_t(S) * size_t(std::max(0, M));
    for (int s = 0; s < S && size_t(s) < costs.stages.size() && size_t(s) < perStage.size(); ++s) {
        double forward = 0;
        for (int l = partition.firstLayer[size_t(s)]; l < partition.firstLayer[size_t(s) + 1]; ++l)
            forward += model.layers[size_t(l)].forwardNs;
        const double speed = model.paceOfRank(schedule.rankOfStage[size_t(s)]);
        const double extra = recomputeForwardNs(perStage[size_t(s)], forward, model.memory) * scale / speed;
        if (extra <= 0)
            continue;
        StageCost& sc = costs.stages[size_t(s)];
        if (perMicrobatch)
            for (int i = 0; i < M; ++i) {
                StageCost& mc = costs.microbatchCosts[size_t(s) * size_t(M) + size_t(i)];
                const double f = sc.forward > 0 ? static_cast<double>(mc.forward) / static_cast<double>(sc.forward) : 1.0;
                const TimeNs add = ns(extra * f);
                mc.backward += add;
                mc.backwardInput += add;
            }
        const TimeNs add = ns(extra);
        sc.backward += add;
        sc.backwardInput += add;
    }
}

} // namespace pipescope::whatif
