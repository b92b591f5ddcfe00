#include "panels/DiagnosticsPanel.h"

#include "panels/DiagnosticsModel.h"

#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

DiagnosticsPanel::DiagnosticsPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , model_(new DiagnosticsModel(this))
    , count_(new QLabel(this))
{
    count_->setTextFormat(Qt::PlainText);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(count_);
    QTableView* view = makeTableView(model_, true, this);
    layout->addWidget(view, 1);
    registerTable(view);
    setResult({}, {});
}

void DiagnosticsPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    model_->setResult(result_, trace_);
    const size_t imported = trace_ ? trace_->diagnostics.size() : 0;
    const size_t warnings = result_ ? result_->warnings.size() : 0;
    count_->setText(tr("%1 import diagnostics, %2 analysis warnings").arg(imported).arg(warnings));
}

} // namespace pipescope::gui
