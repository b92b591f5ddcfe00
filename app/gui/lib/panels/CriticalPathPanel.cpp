#include "panels/CriticalPathPanel.h"

#include "panels/AnalysisTableModel.h"
#include "panels/CriticalPathModel.h"
#include "util/Format.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <map>

namespace pipescope::gui {

CriticalPathPanel::CriticalPathPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , byStage_(new CriticalPathModel(CriticalPathModel::Breakdown::ByStage, this))
    , byKind_(new CriticalPathModel(CriticalPathModel::Breakdown::ByKind, this))
    , byLimiter_(new CriticalPathModel(CriticalPathModel::Breakdown::ByLimiter, this))
    , plot_(new QCustomPlot(this))
    , note_(new QLabel(this))
{
    plot_->setMinimumHeight(90);
    plot_->xAxis->setLabel(tr("stage"));
    plot_->yAxis->setLabel(tr("time on the critical path (ms)"));
    plot_->legend->setFont(plot_->font());
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    note_->setTextFormat(Qt::PlainText);
    note_->setWordWrap(true);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(note_);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(plot_);
    auto* tables = new QWidget(split);
    auto* tl = new QHBoxLayout(tables);
    tl->setContentsMargins(0, 0, 0, 0);
    for (CriticalPathModel* m : {byStage_, byKind_, byLimiter_}) {
        QTableView* v = makeTableView(m, true, tables);
        tl->addWidget(v);
        registerTable(v);
    }
    split->addWidget(tables);
    layout->addWidget(split, 1);
    setResult({}, {});
}

void CriticalPathPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    for (CriticalPathModel* m : {byStage_, byKind_, byLimiter_})
        m->setResult(result_, trace_);
    if (result_ && !result_->criticalPath.segments.empty()) {
        const CriticalPath& cp = result_->criticalPath;
        note_->setText(tr("The chain of work and waiting that sets the iteration's length (%1, %2 segments): shortening anything off it "
                          "does not shorten the iteration.")
                           .arg(QString::fromStdString(formatDuration(cp.end - cp.start)))
                           .arg(cp.segments.size()));
    } else {
        note_->setText(result_ ? tr("No critical path for this iteration.") : QString());
    }
    replot();
}

void CriticalPathPanel::replot()
{
    plot_->clearPlottables();
    const bool any = result_ && !result_->criticalPath.segments.empty();
    if (any) {
        // stage -> column; kinds stacked in a fixed order so colours sit the same way in every bar.
        std::map<int, std::map<std::string, TimeNs>> byStageKind;
        for (const PathSegment& s : result_->criticalPath.segments)
            byStageKind[s.stage][std::string(toString(s.kind))] += s.end - s.start;
        auto ticker = QSharedPointer<QCPAxisTickerText>::create();
        std::map<int, double> column;
        double top = 0;
        for (const auto& [stage, kinds] : byStageKind) {
            const double x = static_cast<double>(column.size());
            column[stage] = x;
            ticker->addTick(x, stage >= 0 ? QString::number(stage) : tr("outside"));
            TimeNs sum = 0;
            for (const auto& kv : kinds)
                sum += kv.second;
            top = std::max(top, static_cast<double>(sum) / 1e6);
        }
        QCPBars* below = nullptr;
        for (const char* kind : {"F", "B", "I", "W", "compute", "p2p", "collective", "memcpy", "memset", "other", "idle"}) {
            QVector<double> x, y;
            for (const auto& [stage, kinds] : byStageKind) {
                auto it = kinds.find(kind);
                x << column[stage];
                y << (it != kinds.end() ? static_cast<double>(it->second) / 1e6 : 0.0);
            }
            bool nonzero = false;
            for (double v : y)
                nonzero = nonzero || v > 0;
            if (!nonzero)
                continue;
            auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
            bars->setName(QString::fromLatin1(kind));
            const QColor colour = pathKindColor(kind);
            bars->setBrush(colour);
            bars->setPen(QPen(colour.darker(130)));
            bars->setWidth(0.6);
            bars->setData(x, y);
            if (below)
                bars->moveAbove(below);
            below = bars;
        }
        plot_->xAxis->setTicker(ticker);
        plot_->xAxis->setRange(-0.6, static_cast<double>(column.size()) - 0.4);
        plot_->yAxis->setRange(0, top > 0 ? top * 1.15 : 1.0);
    }
    plot_->legend->setVisible(any);
    plot_->replot();
}

} // namespace pipescope::gui
