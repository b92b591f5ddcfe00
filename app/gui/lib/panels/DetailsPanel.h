#pragma once
// What the user selected on the timeline: every field of one event (for a
// kernel its launch and NCCL arguments, for a transfer its other end, for a
// step the steps it needs and feeds, for a bubble its cause and what it
// waited on), or the statistics of a dragged time range.
#include "model/Trace.h"
#include "store/Store.h"
#include "timeline/TimelineModel.h"

#include <QWidget>

#include <functional>
#include <memory>
#include <optional>

class QTextBrowser;

namespace pipescope::gui {

class DetailsPanel : public QWidget {
    Q_OBJECT
public:
    explicit DetailsPanel(QWidget* parent = nullptr);

    void setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const timeline::TimelineModel> model);
    // Finds the CPU call that launched an activity (index into the trace's activities).
    void setLaunchLookup(std::function<std::optional<LaunchCall>(int32_t activity)> lookup) { launchLookup_ = std::move(lookup); }
    // summary: the one-glance text the timeline shows on hover (HTML).
    void showEvent(int lane, qint64 event, const QString& summary);
    // A dragged time range's statistics; its times counted from `origin` (the
    // timeline's time origin, named by originName), as the axis counts them.
    void showArea(const timeline::AreaStats& stats, qint64 origin = 0, const QString& originName = {});
    void clear();
    // The panel's text without markup (tests, copy).
    QString plainText() const;
    // The last area's kernels by name as tab-separated text (header, one line
    // per name; the "copy" link in the panel puts it on the clipboard). Empty
    // when no area is shown.
    QString areaKernelsTsv() const { return areaTsv_; }

Q_SIGNALS:
    // "Pivot these steps" under an area's statistics: the Pivot panel has them.
    void pivotRequested();

private:
    std::shared_ptr<const Trace> trace_;
    std::shared_ptr<const timeline::TimelineModel> model_;
    QTextBrowser* text_ = nullptr;
    std::function<std::optional<LaunchCall>(int32_t)> launchLookup_;

    QString relations(int lane, qint64 event) const; // table rows: what the event is connected to
    mutable bool launchShown_ = false;               // relations() named the launching call
    QString areaTsv_;
};

// What each cause means, in one sentence, for the details of a bubble.
QString causeExplanation(BubbleCause cause);

} // namespace pipescope::gui
