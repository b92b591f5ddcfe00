#pragma once
// The job at a glance: the verdict in bold with its supporting facts, a
// stacked bar of GPU time (compute, then idle by cause, in the report's
// colours) and the job facts table (SummaryModel: ranks, pp/dp/v/m,
// schedule with confidence, iteration time, idle by cause, bottleneck).
#include "panels/AnalysisPanel.h"
#include "analysis/JobPart.h"
#include "whatif/Levers.h"

#include <array>

class QLabel;
class QTableView;

namespace pipescope::gui {

class SummaryModel;

// GPU time of the selected iteration summed over ranks as one stacked bar:
// busy, then each bubble cause. Public so tests and other panels can reuse it.
class IdleShareBar : public QWidget {
    Q_OBJECT
public:
    explicit IdleShareBar(QWidget* parent = nullptr);
    void setShares(TimeNs busyNs, const std::array<TimeNs, kBubbleCauses>& idleByCause);
    QSize sizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    TimeNs busyNs_ = 0;
    std::array<TimeNs, kBubbleCauses> idle_{};
};

class SummaryPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit SummaryPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    // The changes that would help most, priced by the what-if engine (the
    // same list as `pipescope analyze` and the report); empty hides them.
    void setLevers(const whatif::Levers& levers);
    // A job read in part (SummaryModel::setJobPart); call after setResult.
    void setJobPart(std::shared_ptr<const JobPart> part);

    // The verdict's headline as shown (plain text), and its facts one per line.
    QString verdictText() const;
    QString factsText() const;
    QString leversText() const;
    SummaryModel* model() const { return model_; }

private:
    QLabel* verdict_;
    QLabel* facts_;
    QLabel* levers_;
    IdleShareBar* bar_;
    SummaryModel* model_;
    QTableView* view_;
};

} // namespace pipescope::gui
