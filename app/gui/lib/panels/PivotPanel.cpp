#include "panels/PivotPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

PivotModel::PivotModel(QObject* parent) : AnalysisTableModel(parent) { rebuild(); }

void PivotModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    result_ = std::move(result);
    rebuild();
}

void PivotModel::setGrouping(PivotBy by)
{
    by_ = by;
    rebuild();
}

void PivotModel::rebuild()
{
    QStringList header{tr("stage"), tr("kind")};
    if (by_ == PivotBy::StageKindMicrobatch)
        header << tr("microbatch");
    else if (by_ == PivotBy::StageKindIteration)
        header << tr("iteration");
    header << tr("count") << tr("total") << tr("mean") << tr("p50") << tr("p95");
    std::vector<std::vector<Cell>> rows;
    if (result_)
        for (const PivotRow& r : pivotSteps(*result_, by_)) {
            std::vector<Cell> row{integer(r.stage), text(QString(QChar::fromLatin1(toChar(r.kind))))};
            if (by_ == PivotBy::StageKindMicrobatch)
                row.push_back(integer(r.microbatch));
            else if (by_ == PivotBy::StageKindIteration)
                row.push_back(integer(r.iteration));
            for (Cell c : {integer(r.count), duration(r.totalNs), duration(r.meanNs), duration(r.p50Ns), duration(r.p95Ns)})
                row.push_back(std::move(c));
            rows.push_back(std::move(row));
        }
    setTable(std::move(header), std::move(rows));
}

PivotPanel::PivotPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , model_(new PivotModel(this))
    , grouping_(new QComboBox(this))
    , note_(new QLabel(this))
    , view_(makeTableView(model_, true, this))
{
    grouping_->addItem(tr("stage × kind"), int(PivotBy::StageKind));
    grouping_->addItem(tr("stage × kind × microbatch"), int(PivotBy::StageKindMicrobatch));
    grouping_->addItem(tr("stage × kind × iteration"), int(PivotBy::StageKindIteration));
    connect(grouping_, &QComboBox::currentIndexChanged, this,
            [this] { model_->setGrouping(static_cast<PivotBy>(grouping_->currentData().toInt())); });
    note_->setTextFormat(Qt::PlainText);
    note_->setText(tr("The analysed iteration's steps (every iteration's when the job was analysed with all "
                      "iterations); duration = step end − start; p50 and p95 by nearest rank."));
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Rows:"), this));
    top->addWidget(grouping_);
    top->addWidget(note_, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addLayout(top);
    layout->addWidget(view_, 1);
    registerTable(view_);
}

void PivotPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = result;
    trace_ = std::move(trace);
    model_->setResult(std::move(result));
}

} // namespace pipescope::gui
