#pragma once
// Holistic Trace Analysis's temporal breakdown per rank (the main table) and
// idle time per stream (HtaModel), with the notes the analysis left about
// how HTA's arithmetic was applied.
#include "panels/AnalysisPanel.h"

class QLabel;

namespace pipescope::gui {

class HtaModel;

class HtaPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit HtaPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    HtaModel* temporalModel() const { return temporal_; }
    HtaModel* streamIdleModel() const { return idle_; }

private:
    HtaModel* temporal_;
    HtaModel* idle_;
    QLabel* mode_;
};

} // namespace pipescope::gui
