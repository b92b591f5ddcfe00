#pragma once
// The selected iteration as a schedule diagram: a row per pipeline stage
// with its F, B, I and W steps (microbatch numbers inside when they fit),
// idle time coloured by bubble cause and an optional critical-path overlay.
// The measured iteration sits on top and the prediction underneath on one
// time axis (each relative to its own iteration start), or the prediction is
// drawn as a translucent ghost over the measured rows. Painted directly with
// QPainter: an iteration has a few thousand steps at most, and a drag
// repaints it every mouse step.
#include "analysis/Analysis.h"
#include "whatif/WhatIf.h"

#include <QWidget>

#include <memory>

namespace pipescope::gui {

class PipelineView : public QWidget {
    Q_OBJECT
public:
    enum Mode { Stacked, Ghost };
    Q_ENUM(Mode)

    explicit PipelineView(QWidget* parent = nullptr);

    void setMeasured(std::shared_ptr<const AnalysisResult> measured);
    void setPrediction(std::shared_ptr<const whatif::Prediction> prediction);
    void setMode(Mode mode);
    Mode mode() const { return mode_; }
    void setCriticalPathVisible(bool visible);
    bool criticalPathVisible() const { return criticalPath_; }
    // One row per data-parallel replica of each stage (measured), or only the first replica.
    void setReplicasStacked(bool stacked);

    // The time the axis spans: the longer of the two iterations.
    TimeNs spanNs() const;
    // Boxes (steps and bubbles) the last paint drew; bounded by the iteration's steps.
    int paintedBoxes() const { return painted_; }

    QSize sizeHint() const override { return {800, 320}; }
    QSize minimumSizeHint() const override { return {240, 120}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    struct Row {
        QString label;
        int rank = -1;    // measured rows: the rank shown
        int stage = 0;
    };
    std::vector<Row> measuredRows() const;

    std::shared_ptr<const AnalysisResult> measured_;
    std::shared_ptr<const whatif::Prediction> prediction_;
    Mode mode_ = Stacked;
    bool criticalPath_ = true;
    bool replicasStacked_ = false;
    int painted_ = 0;
};

} // namespace pipescope::gui
