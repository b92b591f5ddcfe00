#include "whatif/LayerStrip.h"

#include "timeline/Palette.h"
#include "util/Format.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QInputDialog>
#include <QToolTip>
#include <QKeyEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace pipescope::gui {

namespace {

constexpr int kMargin = 8;       // left and right
constexpr int kBandH = 13;       // stage colour band under the cells, with each stage's layer count
constexpr int kHandleH = 14;     // the grip above the cells
constexpr int kCellTop = kHandleH + 2;
constexpr int kGrabPx = 6;       // how close a press must come to a handle

// Stage bands take the palette's hues in turn (ranks, not causes: any distinct set will do).
QColor bandColor(int index)
{
    static const std::array<std::string_view, 8> hues = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1",
                                                         "#edc948", "#76b7b2", "#ff9da7", "#9c755f"};
    const auto c = timeline::rgbFromHex(hues[size_t(index) % hues.size()]);
    return QColor(c.r, c.g, c.b);
}

} // namespace

LayerStrip::LayerStrip(QWidget* parent) : QWidget(parent)
{
    setFocusPolicy(Qt::StrongFocus);
    setMouseTracking(true);
    setAccessibleName(tr("Layer strip"));
    setWhatsThis(tr("Drag a stage boundary; Up/Down select a boundary, Left/Right move it, Enter types it"));

    prompt_ = new QWidget(this);
    auto* v = new QVBoxLayout(prompt_);
    promptText_ = new QLabel(tr("The trace does not attribute kernels to layers, so there is no boundary to move. "
                                "Give the layer count, or a model file with the layers."),
                             prompt_);
    promptText_->setWordWrap(true);
    v->addWidget(promptText_);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Layers:"), prompt_));
    layerCount_ = new QSpinBox(prompt_);
    layerCount_->setRange(1, 100000);
    layerCount_->setValue(16);
    layerCount_->setAccessibleName(tr("Layer count"));
    row->addWidget(layerCount_);
    useCount_ = new QPushButton(tr("Use layer count"), prompt_);
    row->addWidget(useCount_);
    modelFile_ = new QPushButton(tr("Model file..."), prompt_);
    row->addWidget(modelFile_);
    row->addStretch(1);
    v->addLayout(row);
    prompt_->hide();
    connect(useCount_, &QPushButton::clicked, this, [this] { emit layersRequested(layerCount_->value()); });
    connect(modelFile_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Model description"), {},
                                                          tr("Model descriptions (*.json);;All files (*)"));
        if (!path.isEmpty())
            emit modelFileRequested(path);
    });
}

QSize LayerStrip::sizeHint() const { return {640, needsLayers_ ? 90 : 72}; }
QSize LayerStrip::minimumSizeHint() const { return {160, needsLayers_ ? 80 : 56}; }

void LayerStrip::setCostModel(const whatif::CostModel& model)
{
    cost_.clear();
    names_.clear();
    facts_.clear();
    for (const auto& l : model.layers) {
        cost_.push_back(l.forwardNs + l.backwardNs);
        names_.push_back(QString::fromStdString(l.name));
        facts_.push_back({l.forwardNs, l.backwardNs, l.params, l.activationBytes, l.frozen});
    }
    maxCost_ = cost_.empty() ? 0 : *std::max_element(cost_.begin(), cost_.end());
    // No model at all (a job without a what-if) asks for nothing.
    needsLayers_ = model.layerSource == whatif::LayerSource::Stages && model.measuredPp > 0;
    if (model.measuredPp > 0 && needsLayers_)
        layerCount_->setMinimum(model.measuredPp * std::max(1, model.measuredV));
    dragging_ = -1;
    showPrompt(needsLayers_);
    updateGeometry();
    update();
}

void LayerStrip::showPrompt(bool show)
{
    prompt_->setVisible(show);
    if (show)
        prompt_->setGeometry(rect());
}

void LayerStrip::resizeEvent(QResizeEvent*)
{
    // isHidden, not isVisible: the strip is resized while its tab is not shown,
    // and the prompt must fill it when the tab comes up.
    if (!prompt_->isHidden())
        prompt_->setGeometry(rect());
}

void LayerStrip::setBoundaries(const std::vector<int>& boundaries)
{
    // A drag in progress owns the handles; the session's echo must not pull them back.
    if (dragging_ >= 0)
        return;
    boundaries_ = boundaries;
    if (selected_ >= static_cast<int>(boundaries_.size()))
        selected_ = boundaries_.empty() ? -1 : 0;
    update();
}

void LayerStrip::forgetPartition()
{
    boundaries_.clear();
    rankOfStage_.clear();
    pressBoundaries_.clear();
    dragging_ = -1;
    selected_ = -1;
    update();
}

void LayerStrip::setStageRanks(const std::vector<int>& rankOfStage)
{
    rankOfStage_ = rankOfStage;
    update();
}

void LayerStrip::setEditable(bool editable)
{
    editable_ = editable;
    update();
}

void LayerStrip::selectHandle(int handle)
{
    selected_ = handle >= 0 && handle < static_cast<int>(boundaries_.size()) ? handle : -1;
    update();
}

int LayerStrip::edgeX(int layer) const
{
    const int n = std::max(1, layerCount());
    const double w = double(width() - 2 * kMargin) / n;
    return kMargin + static_cast<int>(std::lround(w * layer));
}

int LayerStrip::handleY() const { return kHandleH / 2; }

int LayerStrip::handleAt(int x) const
{
    int best = -1, bestDist = kGrabPx + 1;
    for (int h = 0; h < static_cast<int>(boundaries_.size()); ++h) {
        const int d = std::abs(handleX(h) - x);
        if (d < bestDist)
            best = h, bestDist = d;
    }
    return best;
}

int LayerStrip::snap(int handle, int x) const
{
    const int n = std::max(1, layerCount());
    const double w = double(width() - 2 * kMargin) / n;
    int layer = static_cast<int>(std::lround((x - kMargin) / std::max(1e-9, w)));
    const int lo = handle > 0 ? boundaries_[size_t(handle) - 1] + 1 : 1;
    const int hi = handle + 1 < static_cast<int>(boundaries_.size()) ? boundaries_[size_t(handle) + 1] - 1 : layerCount() - 1;
    return std::clamp(layer, lo, hi);
}

bool LayerStrip::moveHandle(int handle, int layer)
{
    if (handle < 0 || handle >= static_cast<int>(boundaries_.size()))
        return false;
    const int lo = handle > 0 ? boundaries_[size_t(handle) - 1] + 1 : 1;
    const int hi = handle + 1 < static_cast<int>(boundaries_.size()) ? boundaries_[size_t(handle) + 1] - 1 : layerCount() - 1;
    layer = std::clamp(layer, lo, hi);
    if (layer == boundaries_[size_t(handle)])
        return false;
    boundaries_[size_t(handle)] = layer;
    update();
    return true;
}

int LayerStrip::stageOfLayer(int layer) const
{
    return static_cast<int>(std::upper_bound(boundaries_.begin(), boundaries_.end(), layer) - boundaries_.begin());
}

int LayerStrip::layerAt(int x) const
{
    const int n = layerCount();
    if (n == 0 || needsLayers_ || x < edgeX(0) || x >= edgeX(n))
        return -1;
    for (int l = 0; l < n; ++l)
        if (x < edgeX(l + 1))
            return l;
    return -1;
}

QString LayerStrip::layerToolTip(int layer) const
{
    if (layer < 0 || layer >= layerCount())
        return {};
    const LayerFacts& f = facts_[size_t(layer)];
    auto dur = [](double ns) { return QString::fromStdString(formatDuration(static_cast<int64_t>(std::llround(ns)))); };
    const QString dash = QStringLiteral("—");
    QString t = tr("<b>layer %1</b>").arg(layer);
    if (!names_[size_t(layer)].isEmpty() && names_[size_t(layer)] != QString::number(layer))
        t += QStringLiteral(" · ") + names_[size_t(layer)].toHtmlEscaped();
    t += tr(" · stage %1").arg(stageOfLayer(layer));
    t += tr("<br>forward %1, backward %2 per microbatch").arg(dur(f.forwardNs), dur(f.backwardNs));
    t += tr("<br>parameters %1%2")
             .arg(f.params > 0 ? QString::fromStdString(formatCount(f.params)) : dash, f.frozen ? tr(" (frozen)") : QString());
    t += tr(", activations %1 per microbatch")
             .arg(f.activationBytes > 0 ? QString::fromStdString(formatBytes(f.activationBytes)) : dash);
    return t;
}

bool LayerStrip::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int h = handleAt(help->pos().x());
        QString tip;
        if (h >= 0 && !needsLayers_)
            tip = tr("boundary %1: stage %2 starts at layer %3<br><i>drag, or double-click to type it</i>")
                      .arg(h)
                      .arg(h + 1)
                      .arg(boundaries_[size_t(h)]);
        else
            tip = layerToolTip(layerAt(help->pos().x()));
        if (tip.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), tip, this);
        return true;
    }
    return QWidget::event(e);
}

bool LayerStrip::typeBoundary(int handle, int layer)
{
    if (needsLayers_ || !editable_ || !moveHandle(handle, layer))
        return false;
    selected_ = handle;
    emit boundariesDragged(boundaries_);
    emit boundariesCommitted(boundaries_);
    return true;
}

void LayerStrip::askBoundary(int handle)
{
    if (needsLayers_ || !editable_ || handle < 0 || handle >= static_cast<int>(boundaries_.size()))
        return;
    const int lo = handle > 0 ? boundaries_[size_t(handle) - 1] + 1 : 1;
    const int hi = handle + 1 < static_cast<int>(boundaries_.size()) ? boundaries_[size_t(handle) + 1] - 1 : layerCount() - 1;
    bool ok = false;
    const int layer = QInputDialog::getInt(this, tr("Stage boundary"),
                                           tr("First layer of stage %1 (%2 to %3):").arg(handle + 1).arg(lo).arg(hi),
                                           boundaries_[size_t(handle)], lo, hi, 1, &ok);
    if (ok)
        typeBoundary(handle, layer);
}

void LayerStrip::mouseDoubleClickEvent(QMouseEvent* e)
{
    const int h = handleAt(int(e->position().x()));
    if (e->button() == Qt::LeftButton && h >= 0)
        askBoundary(h);
    else
        QWidget::mouseDoubleClickEvent(e);
}

void LayerStrip::mousePressEvent(QMouseEvent* e)
{
    if (needsLayers_ || !editable_ || e->button() != Qt::LeftButton)
        return QWidget::mousePressEvent(e);
    const int h = handleAt(int(e->position().x()));
    if (h < 0)
        return;
    dragging_ = h;
    selected_ = h;
    pressBoundaries_ = boundaries_;
    update();
}

void LayerStrip::mouseMoveEvent(QMouseEvent* e)
{
    if (dragging_ < 0) {
        setCursor(!needsLayers_ && editable_ && handleAt(int(e->position().x())) >= 0 ? Qt::SplitHCursor : Qt::ArrowCursor);
        return;
    }
    if (moveHandle(dragging_, snap(dragging_, int(e->position().x()))))
        emit boundariesDragged(boundaries_);
}

void LayerStrip::mouseReleaseEvent(QMouseEvent* e)
{
    if (dragging_ < 0 || e->button() != Qt::LeftButton)
        return;
    moveHandle(dragging_, snap(dragging_, int(e->position().x())));
    dragging_ = -1;
    if (boundaries_ != pressBoundaries_)
        emit boundariesCommitted(boundaries_);
    update();
}

void LayerStrip::keyPressEvent(QKeyEvent* e)
{
    const int handles = static_cast<int>(boundaries_.size());
    if (needsLayers_ || handles == 0)
        return QWidget::keyPressEvent(e);
    switch (e->key()) {
    case Qt::Key_Up:
    case Qt::Key_Down: {
        const int step = e->key() == Qt::Key_Down ? 1 : -1;
        selectHandle(selected_ < 0 ? 0 : (selected_ + step + handles) % handles);
        return;
    }
    case Qt::Key_Return:
    case Qt::Key_Enter:
        askBoundary(selected_ < 0 ? 0 : selected_);
        return;
    case Qt::Key_Left:
    case Qt::Key_Right: {
        if (!editable_)
            return;
        if (selected_ < 0)
            selectHandle(0);
        const int step = e->key() == Qt::Key_Right ? 1 : -1;
        if (moveHandle(selected_, boundaries_[size_t(selected_)] + step)) {
            emit boundariesDragged(boundaries_);
            emit boundariesCommitted(boundaries_); // each key press is one step to undo
        }
        return;
    }
    default:
        QWidget::keyPressEvent(e);
    }
}

void LayerStrip::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    if (needsLayers_)
        return; // the prompt covers the strip
    const int n = layerCount();
    if (n == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("No layers to move"));
        return;
    }
    const int cellBottom = height() - kBandH - 2;
    const int cellH = std::max(4, cellBottom - kCellTop);

    // Stage of each layer from the boundaries.
    std::vector<int> stageOf(size_t(n), 0);
    for (int l = 0, s = 0; l < n; ++l) {
        while (s < static_cast<int>(boundaries_.size()) && l >= boundaries_[size_t(s)])
            ++s;
        stageOf[size_t(l)] = s;
    }
    const QFontMetrics fm(font());
    for (int l = 0; l < n; ++l) {
        const int x0 = edgeX(l), x1 = edgeX(l + 1);
        const int s = stageOf[size_t(l)];
        const QColor band = bandColor(size_t(s) < rankOfStage_.size() ? rankOfStage_[size_t(s)] : s);
        QColor cell = band.lighter(175);
        p.fillRect(QRect(x0, kCellTop, x1 - x0, cellH), cell);
        // The bar: this layer's forward + backward against the costliest layer.
        const int barH = maxCost_ > 0 ? static_cast<int>(std::lround(cellH * cost_[size_t(l)] / maxCost_)) : 0;
        p.fillRect(QRect(x0, kCellTop + cellH - barH, x1 - x0, barH), band.lighter(130));
        p.fillRect(QRect(x0, height() - kBandH, x1 - x0, kBandH), band);
        if (x1 - x0 > 2) {
            p.setPen(palette().color(QPalette::Base));
            p.drawLine(x0, kCellTop, x0, kCellTop + cellH);
        }
        // Names only where they fit; otherwise the tooltip of the strip carries the count.
        const QString label = names_[size_t(l)];
        if (x1 - x0 - 4 >= fm.horizontalAdvance(label)) {
            p.setPen(palette().color(QPalette::Text));
            p.drawText(QRect(x0 + 2, kCellTop, x1 - x0 - 4, cellH), Qt::AlignCenter, label);
        } else if (x1 - x0 - 4 >= fm.horizontalAdvance(QString::number(l))) {
            p.setPen(palette().color(QPalette::Text));
            p.drawText(QRect(x0 + 2, kCellTop, x1 - x0 - 4, cellH), Qt::AlignCenter, QString::number(l));
        }
    }
    // Each stage's layer count in its band, in words where they fit.
    {
        QFont small = font();
        small.setPointSizeF(std::max(6.0, small.pointSizeF() * 0.8));
        p.setFont(small);
        const QFontMetrics sfm(small);
        const int stages = static_cast<int>(boundaries_.size()) + 1;
        for (int s = 0; s < stages; ++s) {
            const int first = s == 0 ? 0 : boundaries_[size_t(s) - 1];
            const int last = s + 1 < stages ? boundaries_[size_t(s)] : n;
            const QRect band(edgeX(first), height() - kBandH, edgeX(last) - edgeX(first), kBandH);
            const int count = last - first;
            QString label = count == 1 ? tr("stage %1 · 1 layer").arg(s) : tr("stage %1 · %2 layers").arg(s).arg(count);
            if (sfm.horizontalAdvance(label) + 4 > band.width())
                label = QString::number(count);
            if (sfm.horizontalAdvance(label) + 2 > band.width() || sfm.height() > kBandH + 3)
                continue;
            p.setPen(Qt::white);
            p.drawText(band, Qt::AlignCenter, label);
        }
        p.setFont(font());
    }
    // Handles: a line through the cells and a grip above.
    for (int h = 0; h < static_cast<int>(boundaries_.size()); ++h) {
        const int x = handleX(h);
        const bool sel = h == selected_;
        const auto hx = timeline::rgbFromHex(timeline::kSelectionHex);
        const QColor c = sel ? QColor(hx.r, hx.g, hx.b) : palette().color(QPalette::Text);
        p.setPen(QPen(c, sel ? 3 : 2));
        p.drawLine(x, kCellTop - 2, x, height());
        if (editable_) {
            const QPolygon grip({QPoint(x - 5, 1), QPoint(x + 5, 1), QPoint(x + 5, kHandleH - 5), QPoint(x, kHandleH),
                                 QPoint(x - 5, kHandleH - 5)});
            p.setBrush(c);
            p.drawPolygon(grip);
            p.setBrush(Qt::NoBrush);
        }
    }
    if (hasFocus() && selected_ >= 0) {
        p.setPen(QPen(palette().color(QPalette::Highlight), 1, Qt::DotLine));
        p.drawRect(rect().adjusted(0, 0, -1, -1));
    }
}

} // namespace pipescope::gui
