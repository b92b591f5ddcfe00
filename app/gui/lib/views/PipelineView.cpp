#include "views/PipelineView.h"
#include "views/TimeAxis.h"
#include "views/QtPalette.h"

#include "views/PaletteLegend.h"

#include "timeline/Palette.h"
#include "util/Format.h"

#include <QKeyEvent>
#include <QPaintEvent>
#include <QWheelEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace pipescope::gui {

namespace {

constexpr int kLabelW = 92;  // row labels on the left
constexpr int kAxisH = 22;   // time axis at the bottom
constexpr int kTitleH = 16;  // "measured" / "predicted" headings
constexpr int kRowGap = 2;


// 1, 2, 5 x 10^k: a tick step giving about `target` ticks over `span`.
double niceStep(double span, int target)
{
    const double raw = span / std::max(1, target);
    const double mag = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-9))));
    for (double f : {1.0, 2.0, 5.0, 10.0})
        if (raw <= f * mag)
            return f * mag;
    return 10 * mag;
}

} // namespace

PipelineView::PipelineView(QWidget* parent) : QWidget(parent)
{
    setAttribute(Qt::WA_OpaquePaintEvent);
    setMouseTracking(true);
    setFocusPolicy(Qt::ClickFocus);
    setAccessibleName(tr("Pipeline view"));
}

int PipelineView::plotWidth() const
{
    return std::max(1, width() - kLabelW - 8);
}

std::pair<TimeNs, TimeNs> PipelineView::view() const
{
    const TimeNs span = spanNs();
    if (viewEnd_ <= viewStart_ || span <= 0)
        return {0, span};
    // A window past a shorter iteration (a new prediction) slides back into it.
    const TimeNs width = std::min(viewEnd_ - viewStart_, span);
    const TimeNs start = std::clamp(viewStart_, TimeNs(0), span - width);
    return {start, start + width};
}

void PipelineView::setView(TimeNs start, TimeNs end)
{
    const TimeNs span = spanNs();
    constexpr TimeNs kMinWidth = 1000; // 1 µs: narrower shows nothing a trace resolves
    if (span <= 0 || end - start >= span) {
        resetView();
        return;
    }
    const TimeNs width = std::max(end - start, std::min(kMinWidth, span));
    viewStart_ = std::clamp(start, TimeNs(0), span - width);
    viewEnd_ = viewStart_ + width;
    update();
}

void PipelineView::resetView()
{
    viewStart_ = viewEnd_ = 0;
    update();
}

void PipelineView::zoomAt(double factor, double x)
{
    const auto [start, end] = view();
    const double frac = std::clamp((x - kLabelW) / double(plotWidth()), 0.0, 1.0);
    const double at = double(start) + frac * double(end - start);
    const double width = double(end - start) * factor;
    setView(TimeNs(std::llround(at - frac * width)), TimeNs(std::llround(at - frac * width + width)));
}

void PipelineView::panBy(double share)
{
    const auto [start, end] = view();
    const TimeNs shift = TimeNs(std::llround(double(end - start) * share));
    if (end - start < spanNs())
        setView(start + shift, end + shift);
}

void PipelineView::wheelEvent(QWheelEvent* event)
{
    const QPoint d = event->angleDelta();
    const double x = event->position().x();
    if (event->modifiers() & Qt::ShiftModifier) {
        const int delta = d.x() != 0 ? d.x() : d.y();
        panBy(-delta / 120.0 * 0.1);
    } else if (d.y() != 0) {
        zoomAt(d.y() > 0 ? std::pow(0.8, d.y() / 120.0) : std::pow(1.25, -d.y() / 120.0), x);
    } else if (d.x() != 0) {
        panBy(-d.x() / 120.0 * 0.1);
    }
    event->accept();
}

void PipelineView::keyPressEvent(QKeyEvent* event)
{
    const double mid = kLabelW + plotWidth() / 2.0;
    switch (event->key()) {
    case Qt::Key_W: zoomAt(0.8, mid); break;
    case Qt::Key_S: zoomAt(1.25, mid); break;
    case Qt::Key_A: panBy(-0.1); break;
    case Qt::Key_D: panBy(0.1); break;
    case Qt::Key_0:
    case Qt::Key_Home: resetView(); break;
    default: QWidget::keyPressEvent(event); return;
    }
    event->accept();
}

void PipelineView::mouseDoubleClickEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && !hitAt(event->position()))
        resetView();
}

void PipelineView::mouseReleaseEvent(QMouseEvent* event)
{
    if (event->button() == Qt::LeftButton && panFromX_) {
        panFromX_.reset();
        setCursor(Qt::ArrowCursor);
    }
    QWidget::mouseReleaseEvent(event);
}

void PipelineView::setMeasured(std::shared_ptr<const AnalysisResult> measured)
{
    if (measured != measured_)
        prediction_.reset(); // the last run's
    measured_ = std::move(measured);
    iteration_ = -1;
    viewStart_ = viewEnd_ = 0; // another job: its whole iteration
    update();
}

void PipelineView::setIteration(int position)
{
    iteration_ = position;
    update();
}

int PipelineView::shownIteration() const
{
    if (!measured_)
        return -1;
    const int n = static_cast<int>(measured_->iterations.size());
    if (iteration_ >= 0 && iteration_ < n)
        return iteration_;
    return measured_->selectedIteration >= 0 && measured_->selectedIteration < n ? measured_->selectedIteration : -1;
}

std::vector<Step> PipelineView::shownSteps() const
{
    std::vector<Step> out;
    const int shown = shownIteration();
    if (shown < 0)
        return out;
    const int index = measured_->iterations[size_t(shown)].index;
    std::set<int> ranks;
    for (const Row& r : measuredRows())
        ranks.insert(r.rank);
    for (const Step& s : measured_->steps)
        if (s.iteration == index && ranks.count(s.rank))
            out.push_back(s);
    return out;
}

void PipelineView::setPrediction(std::shared_ptr<const whatif::Prediction> prediction)
{
    prediction_ = std::move(prediction);
    update();
}

void PipelineView::setBaseline(std::shared_ptr<const AnalysisResult> baseline, const QString& name)
{
    baseline_ = std::move(baseline);
    baselineName_ = name;
    update();
}

const Iteration* PipelineView::baselineIteration() const
{
    if (!baseline_)
        return nullptr;
    const int n = static_cast<int>(baseline_->iterations.size());
    const int sel = baseline_->selectedIteration;
    return sel >= 0 && sel < n ? &baseline_->iterations[size_t(sel)] : nullptr;
}

void PipelineView::setMode(Mode mode)
{
    mode_ = mode;
    update();
}

void PipelineView::setCriticalPathVisible(bool visible)
{
    criticalPath_ = visible;
    update();
}

void PipelineView::setReplicasStacked(bool stacked)
{
    replicasStacked_ = stacked;
    update();
}

std::vector<PipelineView::Row> PipelineView::rowsOf(const AnalysisResult* analysis) const
{
    std::vector<Row> rows;
    if (!analysis || !analysis->pipeline.found)
        return rows;
    std::vector<StageAssignment> a = analysis->pipeline.stageMap;
    a.erase(std::remove_if(a.begin(), a.end(), [&](const StageAssignment& s) {
                return s.stage < 0 || (!replicasStacked_ && s.replica != 0);
            }),
            a.end());
    std::sort(a.begin(), a.end(), [](const auto& x, const auto& y) {
        return std::tie(x.stage, x.replica, x.rank) < std::tie(y.stage, y.replica, y.rank);
    });
    for (const auto& s : a) {
        Row r;
        r.rank = s.rank;
        r.stage = s.stage;
        r.label = replicasStacked_ ? tr("stage %1 · r%2").arg(s.stage).arg(s.rank) : tr("stage %1").arg(s.stage);
        rows.push_back(r);
    }
    return rows;
}

TimeNs PipelineView::spanNs() const
{
    TimeNs span = 0;
    if (const int shown = shownIteration(); shown >= 0) {
        const Iteration& it = measured_->iterations[size_t(shown)];
        span = it.end - it.start;
    }
    if (prediction_)
        span = std::max(span, prediction_->iterationNs());
    if (const Iteration* b = baselineIteration())
        span = std::max(span, b->end - b->start);
    return span;
}

const PipelineView::Hit* PipelineView::hitAt(const QPointF& pos) const
{
    // The last drawn on top wins (steps are drawn over bubbles).
    for (auto it = hits_.rbegin(); it != hits_.rend(); ++it)
        if (it->rect.adjusted(-1, 0, 1, 0).contains(pos))
            return &*it;
    return nullptr;
}

QString PipelineView::toolTipAt(const QPointF& pos) const
{
    const Hit* h = hitAt(pos);
    if (!h)
        return {};
    auto ms = [](TimeNs ns) { return QString::fromStdString(formatDuration(ns)); };
    QString t = h->source == Hit::Source::Baseline ? tr("baseline: ") : h->source == Hit::Source::Predicted ? tr("predicted: ") : QString();
    if (h->work == 1) {
        t += tr("<b>optimizer step</b>");
    } else if (h->work == 2) {
        t += tr("<b>data-parallel all-reduce</b>");
    } else if (h->bubble) {
        t += tr("<b>idle: %1</b>").arg(QString::fromStdString(std::string(toString(BubbleCause(h->code)))));
    } else {
        t += tr("<b>%1 of microbatch %2</b> · stage %3").arg(QChar::fromLatin1(toChar(StepKind(h->code)))).arg(h->microbatch).arg(h->stage);
        if (h->chunk > 0)
            t += tr(" · chunk %1").arg(h->chunk);
    }
    if (h->rank >= 0)
        t += tr(" · rank %1").arg(h->rank);
    t += tr("<br>%1 from the iteration start, %2 long").arg(ms(h->fromStart), ms(h->length));
    if (h->source == Hit::Source::Measured)
        t += tr("<br><i>click: show it on the timeline</i>");
    return t;
}

void PipelineView::mouseMoveEvent(QMouseEvent* event)
{
    if (panFromX_ && (event->buttons() & Qt::LeftButton)) {
        const auto [start, end] = view();
        const double nsPerPx = double(end - start) / double(plotWidth());
        const TimeNs shift = TimeNs(std::llround((*panFromX_ - event->position().x()) * nsPerPx));
        const TimeNs from = panViewStart_ + shift;
        setView(from, from + (end - start));
        return;
    }
    const QString tip = toolTipAt(event->position());
    if (tip.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(event->globalPosition().toPoint(), tip, this);
    const Hit* h = hitAt(event->position());
    setCursor(h && h->source == Hit::Source::Measured ? Qt::PointingHandCursor : Qt::ArrowCursor);
}

void PipelineView::mousePressEvent(QMouseEvent* event)
{
    if (event->button() != Qt::LeftButton)
        return QWidget::mousePressEvent(event);
    const Hit* h = hitAt(event->position());
    if (h && h->source == Hit::Source::Measured) {
        Q_EMIT measuredClicked(h->rank, h->start, h->end, h->bubble);
        return;
    }
    // Empty space (or a predicted box): a drag pans a zoomed diagram.
    if (view().second - view().first < spanNs()) {
        panFromX_ = event->position().x();
        panViewStart_ = view().first;
        setCursor(Qt::ClosedHandCursor);
    }
}

// What one paint shares between its pieces: the painter, the rows' geometry
// and the window of time shown. `y` is where the next section starts.
struct PipelineView::Frame {
    QPainter& p;
    const QFontMetrics fm;
    QColor text;
    int plotW = 0, rowH = 0;
    TimeNs viewStart = 0, viewEnd = 0;
    double pxPerNs = 0, plotLeft = 0, plotRight = 0;
    int y = 0;
    double xOf(TimeNs t) const { return kLabelW + double(t - viewStart) * pxPerNs; }
    int rowTop(int row) const { return y + row * (rowH + kRowGap); }
};

void PipelineView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    painted_ = 0;
    hits_.clear();
    const TimeNs span = spanNs();
    const int shown = shownIteration();
    const std::vector<Row> mRows = shown >= 0 ? measuredRows() : std::vector<Row>{};
    const int pRows = prediction_ ? prediction_->schedule.pp : 0;
    const Iteration* baseIt = baselineIteration();
    const std::vector<Row> bRows = baseIt ? rowsOf(baseline_.get()) : std::vector<Row>{};
    if (span <= 0 || (mRows.empty() && pRows == 0 && bRows.empty())) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("No pipeline to show"));
        return;
    }
    const bool ghost = mode_ == Ghost && !mRows.empty() && pRows > 0;
    const int sections = int(!bRows.empty()) + (ghost ? 1 : int(!mRows.empty()) + int(pRows > 0));
    const int rowsTotal = int(bRows.size()) + (ghost ? int(mRows.size()) : int(mRows.size()) + pRows);
    Frame f{p, QFontMetrics(font()), palette().color(QPalette::Text)};
    f.plotW = plotWidth();
    f.rowH = std::max(6, (height() - kAxisH - sections * kTitleH) / std::max(1, rowsTotal) - kRowGap);
    std::tie(f.viewStart, f.viewEnd) = view();
    f.pxPerNs = double(f.plotW) / double(f.viewEnd - f.viewStart);
    f.plotLeft = kLabelW;
    f.plotRight = kLabelW + f.plotW;

    if (!bRows.empty())
        paintBaseline(f, *baseIt, bRows);
    int measuredTop = f.y;
    if (!mRows.empty())
        measuredTop = paintMeasured(f, shown, mRows, ghost, !bRows.empty());
    if (pRows > 0)
        paintPrediction(f, mRows, ghost, measuredTop);
    paintTimeAxis(f, span);
}

// One box: a step with its microbatch number where it fits, or a bubble.
// Boxes outside the window are not drawn (nor hoverable); those across
// its edges are cut there. lastBox_ is where it went (null: nowhere).
void PipelineView::paintBox(Frame& f, double x0, double x1, int y, int h, QColor fill, const QString& label, bool outline)
{
    if (x1 < f.plotLeft || x0 > f.plotRight) {
        lastBox_ = QRectF();
        return;
    }
    x0 = std::max(x0, f.plotLeft);
    x1 = std::min(x1, f.plotRight);
    const QRectF r(x0, y, std::max(1.0, x1 - x0), h);
    lastBox_ = r;
    f.p.fillRect(r, fill);
    if (outline) {
        f.p.setPen(QPen(fill.darker(160), 1));
        f.p.drawRect(r);
    }
    if (!label.isEmpty() && r.width() >= f.fm.horizontalAdvance(label) + 2 && h >= f.fm.height() - 2) {
        f.p.setPen(f.text);
        f.p.drawText(r, Qt::AlignCenter, label);
    }
    ++painted_;
}

// The box just drawn becomes hoverable (a measured one clickable).
void PipelineView::addStepHit(Hit::Source src, StepKind kind, int microbatch, int chunk, int stage, int rank, TimeNs from,
                              TimeNs length, qint64 start, qint64 end)
{
    if (!lastBox_.isNull())
        hits_.push_back({lastBox_, src, false, uint8_t(kind), microbatch, chunk, stage, rank, from, length, start, end});
}

void PipelineView::addBubbleHit(Hit::Source src, BubbleCause cause, int rank, TimeNs from, TimeNs length, qint64 start, qint64 end)
{
    if (!lastBox_.isNull())
        hits_.push_back({lastBox_, src, true, uint8_t(cause), 0, 0, 0, rank, from, length, start, end});
}

void PipelineView::paintTitle(Frame& f, const QString& t)
{
    f.p.setPen(f.text);
    QFont bold = font();
    bold.setBold(true);
    f.p.setFont(bold);
    f.p.drawText(QRect(4, f.y, width() - 8, kTitleH), Qt::AlignLeft | Qt::AlignVCenter, t);
    f.p.setFont(font());
    f.y += kTitleH;
}

// One measured run's rows (labels, bubbles, steps) from f.y, each from its
// iteration's start; returns the row of each rank drawn.
std::map<int, int> PipelineView::paintRun(Frame& f, const AnalysisResult& run, const Iteration& it, const std::vector<Row>& rows,
                                          Hit::Source src)
{
    std::map<int, int> rowOfRank;
    for (size_t i = 0; i < rows.size(); ++i) {
        rowOfRank[rows[i].rank] = int(i);
        f.p.setPen(f.text);
        f.p.drawText(QRect(4, f.rowTop(int(i)), kLabelW - 8, f.rowH), Qt::AlignLeft | Qt::AlignVCenter, rows[i].label);
    }
    // Only this run's own boxes lead into its trace (the timeline shows this run).
    const bool own = src == Hit::Source::Measured;
    for (const Bubble& b : run.bubbles) {
        const auto r = rowOfRank.find(b.rank);
        if (b.iteration != it.index || r == rowOfRank.end())
            continue;
        paintBox(f, f.xOf(b.start - it.start), f.xOf(b.end - it.start), f.rowTop(r->second), f.rowH,
                 toQColor(timeline::causeColor(b.cause), kPipelineBubbleAlpha), {}, false);
        addBubbleHit(src, b.cause, b.rank, b.start - it.start, b.end - b.start, own ? b.start : 0, own ? b.end : 0);
    }
    for (const Step& st : run.steps) {
        const auto r = rowOfRank.find(st.rank);
        if (st.iteration != it.index || r == rowOfRank.end())
            continue;
        paintBox(f, f.xOf(st.start - it.start), f.xOf(st.end - it.start), f.rowTop(r->second), f.rowH,
                 toQColor(timeline::microbatchTint(timeline::stepColor(st.kind), st.microbatch)), QString::number(st.microbatch),
                 false);
        addStepHit(src, st.kind, st.microbatch, st.chunk, st.stage, st.rank, st.start - it.start, st.end - st.start,
                   own ? st.start : 0, own ? st.end : 0);
    }
    return rowOfRank;
}

// The baseline's iteration (compare mode), on top.
void PipelineView::paintBaseline(Frame& f, const Iteration& baseIt, const std::vector<Row>& bRows)
{
    paintTitle(f, tr("baseline %1: %2").arg(baselineName_, QString::fromStdString(formatDuration(baseIt.end - baseIt.start))));
    paintRun(f, *baseline_, baseIt, bRows, Hit::Source::Baseline);
    f.y += int(bRows.size()) * (f.rowH + kRowGap);
}

// The measured iteration shown, with the critical path where it is the
// analysed one; returns the top of its rows (where a ghost prediction goes).
int PipelineView::paintMeasured(Frame& f, int shown, const std::vector<Row>& mRows, bool ghost, bool compared)
{
    const Iteration& it = measured_->iterations[size_t(shown)];
    const bool analysed = measured_->criticalPath.iteration == it.index && shown == measured_->selectedIteration;
    const QString which = shown == measured_->selectedIteration ? QString() : tr(" (iteration %1)").arg(it.index);
    paintTitle(f, ghost ? tr("measured%3 %1, predicted %2 (ghost)")
                              .arg(QString::fromStdString(formatDuration(it.end - it.start)),
                                   QString::fromStdString(formatDuration(prediction_->iterationNs())), which)
                        : (compared ? tr("this run%2: %1") : tr("measured%2 %1"))
                              .arg(QString::fromStdString(formatDuration(it.end - it.start)), which));
    const int measuredTop = f.y;
    const std::map<int, int> rowOfRank = paintRun(f, *measured_, it, mRows, Hit::Source::Measured);
    if (criticalPath_ && analysed)
        paintCriticalPath(f, it, rowOfRank);
    if (!ghost)
        f.y += int(mRows.size()) * (f.rowH + kRowGap);
    return measuredTop;
}

// The analysed iteration's critical path: a line under each segment's row.
void PipelineView::paintCriticalPath(Frame& f, const Iteration& it, const std::map<int, int>& rowOfRank)
{
    const auto hl = toQColor(timeline::rgbFromHex(timeline::kHighlightHex));
    f.p.setPen(QPen(hl, 3));
    for (const PathSegment& seg : measured_->criticalPath.segments) {
        const auto r = rowOfRank.find(seg.rank);
        if (r == rowOfRank.end())
            continue;
        const int yy = f.rowTop(r->second) + f.rowH - 2;
        const double x0 = std::max(f.plotLeft, f.xOf(seg.start - it.start));
        const double x1 = std::min(f.plotRight, f.xOf(seg.end - it.start));
        if (x1 > x0)
            f.p.drawLine(QPointF(x0, yy), QPointF(x1, yy));
    }
}

// The what-if prediction: rows of its own under the measured ones, or as a
// ghost over the lower half of the measured rows.
void PipelineView::paintPrediction(Frame& f, const std::vector<Row>& mRows, bool ghost, int measuredTop)
{
    const int pRows = prediction_->schedule.pp;
    if (!ghost) {
        paintTitle(f, tr("predicted %1 (%2)")
                          .arg(QString::fromStdString(formatDuration(prediction_->iterationNs())),
                               QString::fromStdString(prediction_->schedule.name())));
    } else {
        f.y = measuredTop;
    }
    for (int r = 0; r < pRows; ++r) {
        if (!ghost) {
            f.p.setPen(f.text);
            f.p.drawText(QRect(4, f.rowTop(r), kLabelW - 8, f.rowH), Qt::AlignLeft | Qt::AlignVCenter, tr("stage %1").arg(r));
        }
        if (size_t(r) >= prediction_->replay.ranks.size())
            continue;
        // Ghost rows follow the measured rows' order: rank r of the pipeline is stage r.
        int row = r;
        if (ghost) {
            row = -1;
            for (size_t i = 0; i < mRows.size(); ++i)
                if (mRows[i].stage == r) {
                    row = int(i);
                    break;
                }
            if (row < 0)
                continue;
        }
        paintPredictedRank(f, r, f.rowTop(row), ghost);
    }
    if (!ghost)
        f.y += pRows * (f.rowH + kRowGap);
    else
        f.y = measuredTop + int(mRows.size()) * (f.rowH + kRowGap);
}

// One pipeline rank of the prediction in the row at rowY: its bubbles, the
// iteration's tail and its steps (a ghost: the steps alone, translucent).
void PipelineView::paintPredictedRank(Frame& f, int r, int rowY, bool ghost)
{
    using Src = Hit::Source;
    const int alpha = ghost ? 90 : 255;
    const int h = ghost ? f.rowH / 2 : f.rowH; // the ghost covers the lower half, so both stay readable
    const int top = ghost ? rowY + f.rowH - h : rowY;
    const whatif::RankReplay& rr = prediction_->replay.ranks[size_t(r)];
    if (!ghost)
        for (const whatif::Bubble& b : rr.bubbles) {
            paintBox(f, f.xOf(b.start), f.xOf(b.end), top, h, toQColor(timeline::causeColor(b.cause), kPipelineBubbleAlpha), {}, false);
            addBubbleHit(Src::Predicted, b.cause, -1, b.start, b.end - b.start, 0, 0);
        }
    // The iteration's end: the all-reduce and the optimizer step, work
    // outside the steps (without them the row would end in an unexplained
    // gap before the fill/drain of faster ranks).
    if (!ghost) {
        const std::pair<TimeNs, TimeNs> tail[] = {{rr.allReduceStart, rr.allReduceEnd}, {rr.optimizerStart, rr.optimizerEnd}};
        for (int k = 0; k < 2; ++k) {
            const auto [from, to] = tail[k];
            if (to <= from)
                continue;
            const WorkClass cls = k == 0 ? WorkClass::Collective : WorkClass::Compute;
            paintBox(f, f.xOf(from), f.xOf(to), top, h, toQColor(timeline::classColor(cls)), k == 0 ? tr("AR") : tr("opt"), true);
            if (!lastBox_.isNull()) {
                hits_.push_back({lastBox_, Src::Predicted, false, 0, 0, 0, r, -1, from, to - from, 0, 0});
                hits_.back().work = uint8_t(k == 0 ? 2 : 1);
            }
        }
    }
    for (const whatif::TimedAction& a : rr.actions) {
        paintBox(f, f.xOf(a.start), f.xOf(a.end), top, h, toQColor(timeline::microbatchTint(timeline::stepColor(a.kind), a.microbatch), alpha),
                 ghost ? QString() : QString::number(a.microbatch), ghost);
        if (!ghost)
            addStepHit(Src::Predicted, a.kind, a.microbatch, 0, r, -1, a.start, a.end - a.start, 0, 0);
    }
}

// The time axis under the rows, with "zoomed" while the window is not the whole span.
void PipelineView::paintTimeAxis(Frame& f, TimeNs span)
{
    QPainter& p = f.p;
    const int axisY = std::min(f.y + 2, height() - kAxisH);
    p.setPen(f.text);
    p.drawLine(kLabelW, axisY, kLabelW + f.plotW, axisY);
    if (f.viewEnd - f.viewStart < span) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(QRect(4, axisY + 4, kLabelW - 8, kAxisH - 4), Qt::AlignLeft | Qt::AlignTop, tr("zoomed · 0: all"));
        p.setPen(f.text);
    }
    const double step = niceStep(double(f.viewEnd - f.viewStart), std::max(2, f.plotW / 110));
    for (double t = std::ceil(double(f.viewStart) / step) * step; t <= double(f.viewEnd) + 1; t += step) {
        const int x = int(std::lround(f.xOf(TimeNs(t))));
        p.drawLine(x, axisY, x, axisY + 4);
        const QString label = timeTickLabel(t, step);
        p.drawText(QRect(x - 50, axisY + 4, 100, kAxisH - 4), Qt::AlignHCenter | Qt::AlignTop, label);
    }
}

} // namespace pipescope::gui
