#pragma once
// The model's layers as a strip of equal cells, one per layer, each barred
// by its forward + backward cost, with the stage each layer sits in as a
// colour band and a handle on every stage boundary. Dragging a handle snaps
// it to layer edges (a stage keeps at least one layer) and reports every
// snapped change while the mouse moves and the final partition on release.
// Keyboard: Up/Down (or a click) selects a handle, Left/Right move it one layer,
// Enter (or a double-click on a handle) types the boundary's layer.
// Hovering a layer tells its forward and backward time, parameters and
// activation memory; the band under the cells tells each stage's layer count.
//
// Where the cost model knows no layers (layer source "stages"), the strip says
// so and asks for a layer count or a model file, as the CLI's --layers and
// --model do.
#include "whatif/CostModel.h"

#include <QWidget>

#include <vector>

class QLabel;
class QPushButton;
class QSpinBox;

namespace pipescope::gui {

class LayerStrip : public QWidget {
    Q_OBJECT
public:
    explicit LayerStrip(QWidget* parent = nullptr);

    void setCostModel(const whatif::CostModel& model);
    // First layer of each stage after the first (pp x v - 1 values).
    void setBoundaries(const std::vector<int>& boundaries);
    // Which rank holds each virtual stage (the band colour follows the rank); empty: stage index.
    void setStageRanks(const std::vector<int>& rankOfStage);
    // Another job: no partition shown, no handle selected, no drag in progress
    // (the cost model stays until setCostModel gives the next one's).
    void forgetPartition();
    // Whether the strip lets the user move boundaries (off while nothing can move).
    void setEditable(bool editable);

    const std::vector<int>& boundaries() const { return boundaries_; }
    int layerCount() const { return static_cast<int>(cost_.size()); }
    bool needsLayers() const { return needsLayers_; }
    int selectedHandle() const { return selected_; }
    void selectHandle(int handle);
    // Pixel x of a layer edge and of a boundary handle, in widget coordinates.
    int edgeX(int layer) const;
    int handleX(int handle) const { return edgeX(boundaries_.at(size_t(handle))); }
    // The handle row's y: where a press grabs a handle.
    int handleY() const;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    // As the "Model file..." button does after its dialog (for tests and drops).
    void requestModelFile(const QString& path) { emit modelFileRequested(path); }
    // A boundary typed in: `layer` becomes the first layer of stage handle + 1
    // (clamped so each stage keeps a layer); one committed change, as a drag's
    // release. False when nothing moved. What Enter's dialog calls.
    bool typeBoundary(int handle, int layer);
    // The layer under widget x, -1 outside the cells; and what hovering it tells.
    int layerAt(int x) const;
    QString layerToolTip(int layer) const;

signals:
    void boundariesDragged(std::vector<int> boundaries);
    void boundariesCommitted(std::vector<int> boundaries);
    void layersRequested(int layers);
    void modelFileRequested(QString path);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool event(QEvent* event) override;

private:
    int handleAt(int x) const;
    int snap(int handle, int x) const;
    bool moveHandle(int handle, int layer); // true when the boundary changed
    void showPrompt(bool show);
    void askBoundary(int handle); // the dialog behind Enter and double-click
    int stageOfLayer(int layer) const;

    std::vector<double> cost_; // forward + backward per layer, ns
    std::vector<QString> names_;
    struct LayerFacts {
        double forwardNs = 0, backwardNs = 0;
        int64_t params = 0, activationBytes = 0;
        bool frozen = false;
    };
    std::vector<LayerFacts> facts_;
    double maxCost_ = 0;
    std::vector<int> boundaries_;
    std::vector<int> rankOfStage_;
    std::vector<int> pressBoundaries_;
    int dragging_ = -1;
    int selected_ = -1;
    bool editable_ = true;
    bool needsLayers_ = false;

    QWidget* prompt_;
    QLabel* promptText_;
    QSpinBox* layerCount_;
    QPushButton* useCount_;
    QPushButton* modelFile_;
};

} // namespace pipescope::gui
