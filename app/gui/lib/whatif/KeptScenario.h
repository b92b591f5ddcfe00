#pragma once
// The what-if scenario a saved view keeps beside the job (session/SavedView.h,
// docs/app.md "Saved views and links"): what the editor shows, as plain
// values a JSON file holds, and the check that it fits the job opened before
// anything of it is applied.
#include "whatif/WhatIf.h"

#include <QList>
#include <QString>

#include <optional>

namespace pipescope::gui {

struct KeptScenario {
    int layers = 0;          // the layers its boundaries split (the cost model's count)
    QString schedule;        // as `pipescope whatif --schedule` names it
    int pp = 1, v = 1, microbatches = 1;
    QList<int> boundaries;   // the first layer of each virtual stage after the first
    QString microbatchOrder; // "given", "equal", ...
    QString recompute;       // "none", "full", or one per virtual stage ("full,none,none,none")
    std::optional<qint64> gpuMemoryBytes;
    QList<double> stageSpeeds; // one per pipeline rank; empty: every GPU the reference
    double extraWorkMs = 0;    // "Extra work / iteration"
    bool operator==(const KeptScenario&) const = default;
};

// What the editor shows, kept: the scenario (boundaries filled in), the GPU
// memory asked for, the speeds declared on `model` and the extra work.
// Nullopt for a schedule loaded from a CSV file, which is not kept.
std::optional<KeptScenario> keepScenario(const whatif::Scenario& scenario, std::optional<int64_t> gpuBytes,
                                         const whatif::CostModel& model, double extraWorkMs);

// The scenario to replay on `model` (the job's, without speeds), when the
// kept one fits it: the same layer count, a schedule, degree, chunks and
// microbatches the engine runs, boundaries that split the layers, a
// recomputation and a speed for every stage. Nullopt otherwise, with *why
// saying what does not fit in a few words ("it splits 32 layers; this job's
// what-if has 4").
std::optional<whatif::Scenario> scenarioFitting(const KeptScenario& kept, const whatif::CostModel& model, QString* why);

} // namespace pipescope::gui
