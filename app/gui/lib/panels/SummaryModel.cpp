#include "panels/SummaryModel.h"

#include "analysis/Verdict.h"
#include "util/Format.h"

#include <cstdio>

namespace pipescope::gui {

SummaryModel::SummaryModel(QObject* parent)
    : AnalysisTableModel(parent)
{
    setResult({}, {});
}

void SummaryModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    part_.reset(); // a new job: its part, if any, follows
    rebuild();
}

void SummaryModel::setJobPart(std::shared_ptr<const JobPart> part)
{
    part_ = part && part->partial() ? std::move(part) : nullptr;
    rebuild();
}

void SummaryModel::rebuild()
{
    std::vector<std::vector<Cell>> rows;
    // The value in full on hover: the dock is narrow and long values are clipped.
    auto add = [&](const QString& fact, const std::string& value) {
        Cell v = text(QString::fromStdString(value));
        v.toolTip = v.text;
        rows.push_back({text(fact), std::move(v)});
    };
    if (const AnalysisResult* result = result_.get()) {
        const AnalysisResult& r = *result;
        const Verdict v = verdict(r, trace_.get());
        add(QStringLiteral("verdict"), v.headline);
        if (part_)
            add(QStringLiteral("ranks"), "read in part: " + describeRanksRead(*part_));
        else
            add(QStringLiteral("ranks"), std::to_string(r.ranks.size()) + (r.worldSize ? " of " + std::to_string(*r.worldSize) : std::string()));
        const PipelineStructure& p = r.pipeline;
        const int jobDp = part_ ? part_->replicas() : 0; // the job's replicas, not only those read
        if (p.found) {
            const std::string dp = jobDp > p.dp ? std::to_string(jobDp) + " (" + std::to_string(p.dp) + " read)" : std::to_string(p.dp);
            add(QStringLiteral("pipeline"), "p=" + std::to_string(p.pp) + ", dp=" + dp + ", v=" + std::to_string(p.chunks) +
                                                ", m=" + std::to_string(p.microbatches));
            char conf[16];
            std::snprintf(conf, sizeof conf, "%.0f%%", p.scheduleConfidence * 100.0);
            add(QStringLiteral("schedule"), scheduleName(p.schedule) + " (confidence " + conf + ")");
        } else {
            add(QStringLiteral("pipeline"), "none found: " + p.reason);
        }
        if (r.selectedIteration >= 0 && static_cast<size_t>(r.selectedIteration) < r.iterations.size()) {
            const Iteration& it = r.iterations[static_cast<size_t>(r.selectedIteration)];
            add(QStringLiteral("iteration"), it.label + ": " + formatDuration(it.end - it.start) + " (" + std::to_string(it.index + 1) +
                                                 " of " + std::to_string(r.iterations.size()) + ")");
        }
        TimeNs window = 0, idle = 0;
        std::array<TimeNs, kBubbleCauses> byCause{};
        for (const RankIdle& ri : r.idle)
            if (ri.iteration == r.selectedIteration) {
                window += ri.windowNs;
                idle += ri.idleNs;
                for (int c = 0; c < kBubbleCauses; ++c)
                    byCause[static_cast<size_t>(c)] += ri.byCause[static_cast<size_t>(c)];
            }
        auto frac = [&](TimeNs ns) { return window > 0 ? static_cast<double>(ns) / static_cast<double>(window) : 0.0; };
        add(QStringLiteral("GPU idle"), formatPercent(frac(idle)) + " of GPU time (" + formatDuration(idle) + " over all ranks)");
        for (int c = 0; c < kBubbleCauses; ++c)
            add(QStringLiteral("idle: ") + QString::fromLatin1(toString(static_cast<BubbleCause>(c))),
                formatDuration(byCause[static_cast<size_t>(c)]) + " (" + formatPercent(frac(byCause[static_cast<size_t>(c)])) + ")");
        if (p.found && r.imbalance.bottleneckStage >= 0) {
            char ratio[32];
            std::snprintf(ratio, sizeof ratio, "%.3f", r.imbalance.maxOverMean);
            add(QStringLiteral("bottleneck stage"), std::to_string(r.imbalance.bottleneckStage) + " (busiest / mean " + ratio + ")");
            add(QStringLiteral("balanced lower bound"), formatDuration(r.imbalance.balancedLowerBoundNs));
        }
        if (const AllToAll& a = r.allToAll; !a.ranks.empty())
            add(QStringLiteral("all-to-all"), formatPercent(a.criticalShare) + " of the critical path; per rank " + formatDuration(a.minNs) +
                                                  " to " + formatDuration(a.maxNs) + " (median " + formatDuration(a.medianNs) + ")");
        if (part_ && part_->overview) {
            const auto stragglers = indexStragglers(*part_->overview);
            std::string replicas = stragglers.empty()
                                       ? "every stage's busiest replica within " + stragglerThresholdText() +
                                             " of its stage's median (job index, " + part_->overview->iteration + ")"
                                       : "";
            for (const IndexStraggler& st : stragglers)
                replicas += (replicas.empty() ? "" : "; ") + ("rank " + std::to_string(st.rank) + " (stage " + std::to_string(st.stage) +
                                                             ") " + formatSignedPercent(st.relative - 1.0) + " over its stage's median");
            add(QStringLiteral("replicas"), replicas);
        }
    }
    setTable({QStringLiteral("fact"), QStringLiteral("value")}, std::move(rows));
}

} // namespace pipescope::gui
