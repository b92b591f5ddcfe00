#pragma once
// The what-if editor's charts (WhatIfEditor): the bubble share as one
// stacked bar, and per rank the busy and idle time, the peak memory against
// the GPU's and the memory over the iteration, drawn from one prediction.
#include "whatif/WhatIfWorker.h"

#include <QSharedPointer>
#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPAxisTickerText;

namespace pipescope::gui {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Idle share of each bubble cause as one stacked bar, with its total beside.
class BubbleBar : public QWidget {
public:
    explicit BubbleBar(QWidget* parent) : QWidget(parent) { setMinimumSize(160, 18); }
    void setPrediction(PredictionPtr p);
    QSize sizeHint() const override { return {260, 18}; }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    PredictionPtr prediction_;
};

// A chart of the editor's size, its y axis labelled.
QCustomPlot* smallPlot(QWidget* parent, const QString& yLabel);

// The ranks as the charts' x axis: one tick per rank, named by its number.
struct RankAxis {
    int ranks = 0;
    QVector<double> keys;
    QSharedPointer<QCPAxisTickerText> ticker;
};
RankAxis rankAxis(const whatif::Prediction& p);

// Busy and idle per rank, stacked.
void plotBusy(QCustomPlot* plot, const whatif::Prediction& p, const RankAxis& axis);
// Whether the prediction knows any rank's memory: the model gave parameter or activation sizes.
bool memoryKnown(const whatif::Prediction& p);
// Peak memory per rank against the GPU's; ranks out of memory in red, the
// measured run's peaks (the trace's allocator totals) as black ticks over the bars.
void plotPeakMemory(QCustomPlot* plot, const whatif::Prediction& p, const RankAxis& axis, bool known);
// Memory over the iteration, a step line per rank.
void plotMemoryOverTime(QCustomPlot* plot, const whatif::Prediction& p, int ranks, bool known);

} // namespace pipescope::gui
