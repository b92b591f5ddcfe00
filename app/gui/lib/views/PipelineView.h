#pragma once
// One iteration as a schedule diagram (the analysed one unless setIteration
// picks another; the analysis must then hold every iteration's steps): a row per pipeline stage
// with its F, B, I and W steps (microbatch numbers inside when they fit),
// idle time coloured by bubble cause and an optional critical-path overlay.
// The measured iteration sits on top and the prediction underneath on one
// time axis (each relative to its own iteration start), or the prediction is
// drawn as a translucent ghost over the measured rows. Painted directly with
// QPainter: an iteration has a few thousand steps at most, and a drag
// repaints it every mouse step.
//
// It zooms and pans like the timeline: the wheel zooms at the cursor (Ctrl+
// wheel too), Shift+wheel and a left-drag on empty space pan, W/S zoom and
// A/D pan (Perfetto's keys), double-click or 0 shows the whole iteration.
#include "analysis/Analysis.h"
#include "whatif/WhatIf.h"

#include <QWidget>

#include <map>

#include <memory>
#include <optional>
#include <utility>

namespace pipescope::gui {

class PipelineView : public QWidget {
    Q_OBJECT
public:
    enum Mode { Stacked, Ghost };
    Q_ENUM(Mode)

    explicit PipelineView(QWidget* parent = nullptr);

    // Shows the analysis's selected iteration until setIteration picks another.
    // Another measured run (a job switch) starts without a prediction, on its
    // whole iteration: a prediction is of one run and never outlives it.
    void setMeasured(std::shared_ptr<const AnalysisResult> measured);
    std::shared_ptr<const AnalysisResult> measured() const { return measured_; }
    // The measured iteration shown: a position in measured->iterations, or -1
    // for the analysed (selected) one. The critical path is the analysed
    // iteration's only, so it is drawn there only; the prediction stays.
    void setIteration(int position);
    // The position shown (the selected iteration's when none was picked), -1 without one.
    int shownIteration() const;
    // The measured steps the diagram draws: the shown iteration's, on the rows shown.
    std::vector<Step> shownSteps() const;
    void setPrediction(std::shared_ptr<const whatif::Prediction> prediction);
    std::shared_ptr<const whatif::Prediction> prediction() const { return prediction_; }
    // Compare mode: a baseline run's analysed iteration drawn above the
    // measured one, on the same time axis (each from its own iteration
    // start); null leaves compare mode. `name` titles its rows.
    void setBaseline(std::shared_ptr<const AnalysisResult> baseline, const QString& name);
    bool hasBaseline() const { return baseline_ != nullptr; }
    void setMode(Mode mode);
    Mode mode() const { return mode_; }
    void setCriticalPathVisible(bool visible);
    bool criticalPathVisible() const { return criticalPath_; }
    // One row per data-parallel replica of each stage (measured), or only the first replica.
    void setReplicasStacked(bool stacked);
    bool replicasStacked() const { return replicasStacked_; }

    // The time the axis spans: the longer of the two iterations.
    TimeNs spanNs() const;
    // The window shown, in ns from the iteration start: [first, second).
    // The whole span until zoomed; a new job shows the whole span again,
    // a new prediction (a drag step) keeps the window.
    std::pair<TimeNs, TimeNs> view() const;
    void setView(TimeNs start, TimeNs end);
    void resetView();
    // Zooms by `factor` (< 1: in) around the time under x (widget pixels).
    void zoomAt(double factor, double x);
    // Pans by a share of the window's width (negative: earlier).
    void panBy(double share);
    // Boxes (steps and bubbles) the last paint drew; bounded by the iteration's steps.
    int paintedBoxes() const { return painted_; }

    // The text for the box under a point (a step or bubble, measured,
    // baseline or predicted); empty over nothing. Shown on hover.
    QString toolTipAt(const QPointF& pos) const;

    QSize sizeHint() const override { return {800, 320}; }

    QSize minimumSizeHint() const override { return {240, 120}; }

Q_SIGNALS:
    // A click on a measured step or bubble: its rank and times on the trace's clock.
    void measuredClicked(int rank, qint64 start, qint64 end, bool bubble);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;

private:
    struct Row {
        QString label;
        int rank = -1;    // measured rows: the rank shown
        int stage = 0;
    };
    std::vector<Row> measuredRows() const { return rowsOf(measured_.get()); }
    std::vector<Row> rowsOf(const AnalysisResult* analysis) const;
    const Iteration* baselineIteration() const;

    std::shared_ptr<const AnalysisResult> measured_;
    std::shared_ptr<const whatif::Prediction> prediction_;
    std::shared_ptr<const AnalysisResult> baseline_;
    QString baselineName_;
    Mode mode_ = Stacked;
    bool criticalPath_ = true;
    bool replicasStacked_ = false;
    int iteration_ = -1; // see setIteration
    TimeNs viewStart_ = 0, viewEnd_ = 0; // the window shown; empty: the whole span
    std::optional<double> panFromX_;    // a left-drag on empty space pans
    TimeNs panViewStart_ = 0;
    int plotWidth() const;
    int painted_ = 0;
    // What the last paint drew, for hover and click (a few thousand boxes at most).
    // The facts of each box; its tooltip is written on hover, not on every paint.
    struct Hit {
        enum class Source : uint8_t { Measured, Baseline, Predicted };
        QRectF rect;
        Source source = Source::Measured;
        bool bubble = false;
        uint8_t code = 0;      // StepKind, or BubbleCause for a bubble
        int microbatch = 0, chunk = 0, stage = 0;
        int rank = -1;         // -1 where unknown (predicted)
        TimeNs fromStart = 0;  // from the iteration start
        TimeNs length = 0;
        qint64 start = 0, end = 0; // measured: on the trace's clock, for the click
        // Predicted work outside the steps: 1 the optimizer step, 2 the
        // data-parallel all-reduce (0: a step or bubble).
        uint8_t work = 0;
    };
    std::vector<Hit> hits_;
    QRectF lastBox_;
    const Hit* hitAt(const QPointF& pos) const;

    // Painting, piece by piece (paintEvent puts them together): the rows of
    // the baseline, the measured run and the prediction, then the axis.
    struct Frame;
    void paintBox(Frame& f, double x0, double x1, int y, int h, QColor fill, const QString& label, bool outline);
    void addStepHit(Hit::Source src, StepKind kind, int microbatch, int chunk, int stage, int rank, TimeNs from, TimeNs length,
                    qint64 start, qint64 end);
    void addBubbleHit(Hit::Source src, BubbleCause cause, int rank, TimeNs from, TimeNs length, qint64 start, qint64 end);
    void paintTitle(Frame& f, const QString& title);
    std::map<int, int> paintRun(Frame& f, const AnalysisResult& run, const Iteration& it, const std::vector<Row>& rows,
                                Hit::Source src);
    void paintBaseline(Frame& f, const Iteration& baseIt, const std::vector<Row>& bRows);
    int paintMeasured(Frame& f, int shown, const std::vector<Row>& mRows, bool ghost, bool compared);
    void paintCriticalPath(Frame& f, const Iteration& it, const std::map<int, int>& rowOfRank);
    void paintPrediction(Frame& f, const std::vector<Row>& mRows, bool ghost, int measuredTop);
    void paintPredictedRank(Frame& f, int rank, int rowY, bool ghost);
    void paintTimeAxis(Frame& f, TimeNs span);
};

} // namespace pipescope::gui
