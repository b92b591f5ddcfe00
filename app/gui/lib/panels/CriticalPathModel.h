#pragma once
// The selected iteration's critical path summed one way:
//   ByStage:   stage   | time | share   (stage -1: "outside the pipeline")
//   ByKind:    kind    | time | share   (F B I W compute p2p collective memcpy memset other idle; longest first)
//   ByLimiter: limiter | time | share   (what the verdict reads: idle parts
//              take the cause of the bubble they fall in; see core/analysis/Verdict.h)
// Share is of the path's length.
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class CriticalPathModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum class Breakdown { ByStage, ByKind, ByLimiter };
    enum Column { NameColumn = 0, TimeColumn, ShareColumn };
    // Key of a row: int stage (ByStage), QString kind (ByKind), int PathLimiter (ByLimiter).
    enum Role { KeyRole = FirstCustomRole };

    explicit CriticalPathModel(QObject* parent = nullptr);
    explicit CriticalPathModel(Breakdown breakdown, QObject* parent = nullptr);

    Breakdown breakdown() const { return breakdown_; }
    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

private:
    Breakdown breakdown_ = Breakdown::ByStage;
    std::vector<QVariant> keys_;
};

} // namespace pipescope::gui
