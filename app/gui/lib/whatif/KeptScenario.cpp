#include "whatif/KeptScenario.h"

#include "util/Limits.h"
#include "whatif/CostModel.h"
#include "whatif/MicrobatchSizes.h"
#include "whatif/Recompute.h"

#include <cmath>
#include <exception>

namespace pipescope::gui {

namespace {

QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

} // namespace

std::optional<KeptScenario> keepScenario(const whatif::Scenario& scenario, std::optional<int64_t> gpuBytes,
                                         const whatif::CostModel& model, double extraWorkMs)
{
    if (scenario.custom || scenario.schedule == ScheduleKind::Custom)
        return std::nullopt;
    KeptScenario k;
    k.layers = model.layerCount();
    k.schedule = qs(toString(scenario.schedule));
    k.pp = scenario.pp;
    k.v = scenario.v;
    k.microbatches = scenario.microbatches;
    if (scenario.boundaries)
        for (int b : *scenario.boundaries)
            k.boundaries << b;
    k.microbatchOrder = qs(toString(scenario.microbatchOrder));
    k.recompute = QString::fromStdString(whatif::recomputeText(scenario.recompute));
    if (gpuBytes)
        k.gpuMemoryBytes = *gpuBytes;
    for (double s : model.stageSpeed)
        k.stageSpeeds << s;
    k.extraWorkMs = extraWorkMs;
    return k;
}

std::optional<whatif::Scenario> scenarioFitting(const KeptScenario& kept, const whatif::CostModel& model, QString* why)
{
    why->clear();
    if (kept.layers != model.layerCount()) {
        *why = QStringLiteral("it splits %1 layers; this job's what-if has %2").arg(kept.layers).arg(model.layerCount());
        return std::nullopt;
    }
    whatif::ScenarioChanges c;
    c.schedule = kept.schedule.toStdString();
    c.pp = kept.pp;
    c.v = kept.v;
    c.microbatches = kept.microbatches;
    const auto order = whatif::microbatchOrderFromString(kept.microbatchOrder.toStdString());
    if (!order) {
        *why = QStringLiteral("no microbatch order '%1'").arg(kept.microbatchOrder);
        return std::nullopt;
    }
    c.microbatchOrder = *order;
    try {
        if (kept.recompute != QLatin1String("none"))
            c.recompute = whatif::parseRecompute(kept.recompute.toStdString());
        whatif::Scenario s = whatif::applyChanges(whatif::Scenario{}, c);
        const int stages = s.pp * s.v;
        whatif::recomputePerStage(s.recompute, stages); // one item, or one per virtual stage
        if (whatif::scenarioSteps(s) > kMaxReplaySteps) {
            *why = QStringLiteral("it has more steps than a replay takes");
            return std::nullopt;
        }
        if (!kept.boundaries.isEmpty()) { // none kept: the measured partition, or an even split, as the engine picks
            s.boundaries = std::vector<int>(kept.boundaries.begin(), kept.boundaries.end());
            whatif::partitionFromBoundaries(*s.boundaries, model.layerCount(), stages); // throws for a split that is not one
        }
        if (!kept.stageSpeeds.isEmpty() && kept.stageSpeeds.size() != s.pp) {
            *why = QStringLiteral("%1 GPU speeds for pp %2").arg(kept.stageSpeeds.size()).arg(s.pp);
            return std::nullopt;
        }
        if (!kept.stageSpeeds.isEmpty()) {
            whatif::CostModel atSpeeds = model; // throws for a speed that is not one, or a count the model refuses
            atSpeeds.setStageSpeeds(std::vector<double>(kept.stageSpeeds.begin(), kept.stageSpeeds.end()));
        }
        if (kept.gpuMemoryBytes && *kept.gpuMemoryBytes <= 0) {
            *why = QStringLiteral("no GPU memory");
            return std::nullopt;
        }
        if (!std::isfinite(kept.extraWorkMs) || kept.extraWorkMs < 0) {
            *why = QStringLiteral("extra work of %1 ms").arg(kept.extraWorkMs);
            return std::nullopt;
        }
        return s;
    } catch (const std::exception& e) {
        *why = QString::fromUtf8(e.what());
        return std::nullopt;
    }
}

} // namespace pipescope::gui
