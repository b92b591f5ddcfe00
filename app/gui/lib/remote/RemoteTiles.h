#pragma once
// A remote job's timeline follows the view (docs/remote.md "The app"): when
// the user zooms or pans, the tiles of the range on screen are asked for
// again at the view's pixel width, as Perfetto's and VampirServer's clients
// do, so a block the server folded at the first frame's resolution opens
// into its events. Only the rows on screen whose tiles do not already cover
// the range finely enough are asked for, half a screen more on each side (a
// small pan or a zoom in up to 3x needs nothing new). The requests go after
// a pause (kPauseMs), off the GUI thread, one fetch at a time: a view that
// changes meanwhile is fetched next, the views in between never (the latest
// wins). The old picture stays until the new one lands: refined() hands over
// the job's model with those lanes' events replaced in the range.
#include "session/AppSession.h"
#include "remote/RemoteLink.h"

#include <QObject>
#include <QTimer>

#include <memory>
#include <optional>
#include <vector>

namespace pipescope::gui {

class RemoteTiles : public QObject {
    Q_OBJECT
public:
    static constexpr int kPauseMs = 120;
    // A remote job (job.remote set) as loadRemote built it.
    RemoteTiles(std::shared_ptr<const Job> job, QObject* parent = nullptr);
    ~RemoteTiles() override;

    // The view shows [from, to) on widthPx pixels, these lanes on screen.
    void viewChanged(qint64 from, qint64 to, int widthPx, std::vector<int> lanes);
    // The job's timeline as refined so far.
    std::shared_ptr<const timeline::TimelineModel> timeline() const { return model_; }
    bool busy() const { return inFlight_ || pause_.isActive(); }
    int fetches() const { return fetches_; }

    // One refinement, Qt-free: `base` with the tiles `t` of `lanes` (local
    // lane numbers) over [from, to), asked at foldNs, in place of what those
    // lanes held there; numbers and windows (RemoteLink's) follow. Events of
    // one server event cut at a range's edge are joined again.
    struct Refined {
        std::shared_ptr<timeline::TimelineModel> model;
        std::vector<std::vector<int64_t>> numbers;
        std::vector<std::vector<RemoteLink::TileWindow>> windows;
    };
    static Refined refine(const timeline::TimelineModel& base, std::vector<std::vector<int64_t>> numbers,
                          std::vector<std::vector<RemoteLink::TileWindow>> windows, const std::vector<int>& serverLanes,
                          const std::vector<nlohmann::json>& tiles, TimeNs from, TimeNs to, double foldNs);

Q_SIGNALS:
    void refined(std::shared_ptr<const pipescope::timeline::TimelineModel> model);

private:
    struct View {
        qint64 from = 0, to = 0;
        int widthPx = 0;
        std::vector<int> lanes;
    };
    void fetch();
    std::shared_ptr<const Job> job_;
    std::shared_ptr<const timeline::TimelineModel> model_;
    QTimer pause_;
    std::optional<View> wanted_;
    bool inFlight_ = false;
    int fetches_ = 0;
};

} // namespace pipescope::gui
