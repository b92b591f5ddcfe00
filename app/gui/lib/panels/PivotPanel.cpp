#include "panels/PivotPanel.h"

#include "util/Format.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

PivotModel::PivotModel(QObject* parent) : AnalysisTableModel(parent) { rebuild(); }

void PivotModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace>)
{
    result_ = std::move(result);
    rebuild();
}

void PivotModel::setArea(std::optional<StepArea> area)
{
    area_ = std::move(area);
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
        for (const PivotRow& r : pivotSteps(*result_, by_, area_ ? &*area_ : nullptr)) {
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
    note_->setWordWrap(true);
    allSteps_ = new QPushButton(tr("All steps"), this);
    allSteps_->setToolTip(tr("Every step the analysis holds, not only the area selected on the timeline"));
    connect(allSteps_, &QPushButton::clicked, this, &PivotPanel::clearArea);
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Rows:"), this));
    top->addWidget(grouping_);
    top->addWidget(allSteps_);
    top->addWidget(note_, 1);
    showNote();
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
    model_->setArea(std::nullopt); // another job: the area was the last one's
    areaText_.clear();
    model_->setResult(std::move(result));
    showNote();
}

namespace {

// "rank 2", "ranks 0-3", "ranks 0, 2, 5-7".
QString ranksText(const std::vector<int>& ranks)
{
    QStringList parts;
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
            ++j;
        parts << (j == i ? QString::number(ranks[i]) : QStringLiteral("%1-%2").arg(ranks[i]).arg(ranks[j]));
        i = j + 1;
    }
    return (ranks.size() == 1 ? QStringLiteral("rank ") : QStringLiteral("ranks ")) + parts.join(QStringLiteral(", "));
}

QString dur(TimeNs ns) { return QString::fromStdString(formatDuration(ns)); }

} // namespace

void PivotPanel::setArea(const StepArea& area, qint64 origin, const QString& originName)
{
    areaText_ = area.ranks.empty() ? tr("no rank's tracks") : ranksText(area.ranks);
    areaText_ += tr(", %1 from %2 to %3%4")
                     .arg(dur(area.to - area.from), dur(area.from - origin), dur(area.to - origin),
                          originName.isEmpty() ? QString() : tr(" (from %1)").arg(originName));
    model_->setArea(area);
    showNote();
}

void PivotPanel::clearArea()
{
    areaText_.clear();
    model_->setArea(std::nullopt);
    showNote();
}

void PivotPanel::showNote()
{
    const QString how = tr("duration = step end − start; p50 and p95 by nearest rank.");
    allSteps_->setEnabled(model_->area().has_value());
    if (!model_->area()) {
        note_->setText(tr("The analysed iteration's steps (every iteration's when the job was analysed with all iterations); ") + how);
        return;
    }
    QString text = tr("The steps in the area selected on the timeline: %1; each step that overlaps it, whole; ").arg(areaText_) + how;
    if (model_->rowCount() == 0)
        text += tr(" No analysed step is in it (the analysis holds the analysed iteration's steps).");
    note_->setText(text);
}

QString PivotPanel::noteText() const { return note_->text(); }

} // namespace pipescope::gui
