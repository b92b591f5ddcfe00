#pragma once
// Compare mode's panel: the diff of a baseline run (A) against the job shown
// (B), as `pipescope diff A B` computes it (docs/diff.md). The prediction
// check on top, then sortable, copyable tables: configuration, iteration and
// idle by cause, stages per microbatch, the critical path, and the kernels
// per stage that changed most. Less time in B reads green, more red.
#include "panels/AnalysisPanel.h"

#include "compare/Diff.h"

#include <memory>

class QLabel;

namespace pipescope::gui {

class DiffTableModel;

class ComparePanel : public AnalysisPanel {
    Q_OBJECT
public:
    explicit ComparePanel(QWidget* parent = nullptr);

    // The panel shows a comparison, not an analysis: results are ignored.
    void setResult(std::shared_ptr<const AnalysisResult>, std::shared_ptr<const Trace>) override {}
    // Null: no comparison (the panel says how to start one).
    void setDiff(std::shared_ptr<const compare::DiffResult> diff);
    std::shared_ptr<const compare::DiffResult> diff() const { return diff_; }
    // The one line on top ("predicted 149.3 ms from run A, measured ...").
    QString headline() const;
    // The lines under it: what was predicted and what it does not cover, or why nothing was.
    QString notes() const;
    // Both, for a diff (what the panel shows, and what a test reads).
    static QString headlineText(const compare::DiffResult& d);
    static QString notesText(const compare::DiffResult& d);

private:
    std::shared_ptr<const compare::DiffResult> diff_;
    QLabel* headline_ = nullptr;
    QLabel* notes_ = nullptr;
    DiffTableModel* config_ = nullptr;
    DiffTableModel* totals_ = nullptr;
    DiffTableModel* stages_ = nullptr;
    DiffTableModel* path_ = nullptr;
    DiffTableModel* microbatches_ = nullptr;
    DiffTableModel* kernels_ = nullptr;
};

} // namespace pipescope::gui
