#pragma once
// What the user selected on the timeline: every field of one event (for a
// kernel its launch and NCCL arguments, for a bubble its cause and what it
// waited on), or the statistics of a dragged time range.
#include "model/Trace.h"
#include "timeline/TimelineModel.h"

#include <QWidget>

#include <memory>

class QTextBrowser;

namespace pipescope::gui {

class DetailsPanel : public QWidget {
    Q_OBJECT
public:
    explicit DetailsPanel(QWidget* parent = nullptr);

    void setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const timeline::TimelineModel> model);
    // summary: the one-glance text the timeline shows on hover (HTML).
    void showEvent(int lane, qint64 event, const QString& summary);
    void showArea(const timeline::AreaStats& stats);
    void clear();
    // The panel's text without markup (tests, copy).
    QString plainText() const;

private:
    std::shared_ptr<const Trace> trace_;
    std::shared_ptr<const timeline::TimelineModel> model_;
    QTextBrowser* text_ = nullptr;
};

// What each cause means, in one sentence, for the details of a bubble.
QString causeExplanation(BubbleCause cause);

} // namespace pipescope::gui
