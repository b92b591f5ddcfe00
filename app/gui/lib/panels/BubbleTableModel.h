#pragma once
// Idle time of every rank in the selected iteration, split by cause: one row
// per rank (in stage, replica, rank order), columns
//   rank | stage | fill_drain ... other (the seven causes) | idle | idle %
// where idle % is the share of the iteration window. Durations sort as raw
// nanoseconds through SortRole. BiggestBubbleRole lets the main window jump
// the timeline to the worst bubble behind a cell.
#include "panels/AnalysisTableModel.h"

#include <array>
#include <optional>

namespace pipescope::gui {

class BubbleTableModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum Column { RankColumn = 0, StageColumn = 1, FirstCauseColumn = 2, IdleColumn = FirstCauseColumn + kBubbleCauses, IdleShareColumn };
    enum Role {
        // QVariantList{qint64 start, qint64 end}: the longest bubble of the
        // row's rank with the column's cause (any cause outside the cause
        // columns); invalid when there is none.
        BiggestBubbleRole = FirstCustomRole,
        RankRole, // int: the row's rank
    };

    explicit BubbleTableModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

    // The cause of a cause column; nullopt for the other columns.
    static std::optional<BubbleCause> causeOfColumn(int column);

private:
    struct Span {
        TimeNs start = 0, end = 0;
    };
    std::vector<int> rankOfRow_;
    // [row][cause], the last entry for any cause; end == start: none.
    std::vector<std::array<Span, kBubbleCauses + 1>> biggest_;
};

} // namespace pipescope::gui
