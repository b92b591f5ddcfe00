#pragma once
// The import's diagnostics and the analysis warnings in one sortable table
// (DiagnosticsModel), with a count line above it.
#include "panels/AnalysisPanel.h"

class QLabel;

namespace pipescope::gui {

class DiagnosticsModel;

class DiagnosticsPanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit DiagnosticsPanel(QWidget* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;

    DiagnosticsModel* model() const { return model_; }

private:
    DiagnosticsModel* model_;
    QLabel* count_;
};

} // namespace pipescope::gui
