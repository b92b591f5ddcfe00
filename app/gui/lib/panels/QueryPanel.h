#pragma once
// The Query panel: read-only SQL over the shown job's store (or each shard of
// a sharded job), as `pipescope query` runs it (core/store/Query.h: the store
// opened read-only, an authorizer that refuses anything but reading;
// docs/query.md). A statement is typed or picked from a few examples, run
// with Ctrl+Return or Run; its result fills a sortable table copyable as TSV
// (Ctrl+C, context menu) and an error shows in one line above it. Showing
// another job clears the result (setStorePath). A result with a rank (or
// track), a start and an end (or duration) column is drawn as tracks on the
// timeline by "Draw as track" (views/QueryTrack.h), until "Remove tracks".
#include "panels/AnalysisPanel.h"
#include "panels/AnalysisTableModel.h"
#include "views/QueryTrack.h"

#include "store/Query.h"

#include <QList>
#include <QPair>
#include <QString>

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTableView;

namespace pipescope::gui {

// A query's result as a table: integers and reals as numbers (right-aligned,
// sorted by value), text as it is, NULL as "NULL", a blob as X'..' (the
// CLI's text form, queryCellText).
class QueryResultModel : public AnalysisTableModel {
    Q_OBJECT
public:
    explicit QueryResultModel(QObject* parent = nullptr);
    void setResult(std::shared_ptr<const AnalysisResult>, std::shared_ptr<const Trace> = {}) override {}
    void setQueryResult(const QueryResult& result);
    void clear();
};

class QueryPanel : public AnalysisPanel {
    Q_OBJECT
public:
    // Rows a result may hold in the panel; more is refused with a one-line error.
    static constexpr int64_t kMaxRows = 100'000;

    explicit QueryPanel(QWidget* parent = nullptr);

    // The panel does not use the analysis; it queries the job's store.
    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace) override;
    // The store of the job shown (empty: none, e.g. a simulated job). Another
    // store than the last clears the result, the error and the row count.
    void setStorePath(const QString& path);
    QString storePath() const { return storePath_; }
    // The shown job's timeline, which results are drawn over (their rows
    // outside its time span are left out).
    void setTimeline(std::shared_ptr<const timeline::TimelineModel> timeline) { timeline_ = std::move(timeline); }

    // Draws the shown result as tracks ("query 1", "query 2", ...); false,
    // with the error line saying which columns it needs, when it cannot.
    bool drawAsTrack();
    // Removes every query track from the timeline.
    void removeTracks();
    const std::vector<std::shared_ptr<const QueryTracks>>& tracks() const { return tracks_; }
    // `base` with the query tracks on it (base itself when there are none);
    // the same model again while neither changes.
    std::shared_ptr<const timeline::TimelineModel> withQueryTracks(std::shared_ptr<const timeline::TimelineModel> base);

    // Runs `sql` (shown in the editor) on the store; false, with the error
    // shown in one line, when it is refused or fails.
    bool run(const QString& sql);
    // Runs the editor's statement.
    bool runEditor();

    // (label, SQL) of the examples in the drop-down.
    static QList<QPair<QString, QString>> examples();

    QueryResultModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    QPlainTextEdit* editor() const { return editor_; }
    QComboBox* examplesBox() const { return examples_; }
    QString errorText() const;  // the one-line error, empty after a query that ran
    QString statusText() const; // "12 rows", or what the panel waits for
    QPushButton* drawButton() const { return draw_; }
    QPushButton* removeButton() const { return remove_; }

Q_SIGNALS:
    // The query tracks were added or removed: the timeline is to show withQueryTracks().
    void tracksChanged();

private:
    void clearResult();
    void showError(const QString& message);

    QString storePath_;
    std::shared_ptr<const timeline::TimelineModel> timeline_;
    QueryResult last_; // the shown result, for Draw as track
    std::vector<std::shared_ptr<const QueryTracks>> tracks_;
    int tracksDrawn_ = 0; // names them: query 1, query 2, ...
    std::shared_ptr<const timeline::TimelineModel> composedBase_, composed_;
    std::vector<std::shared_ptr<const QueryTracks>> composedTracks_; // what composed_ holds
    QComboBox* examples_;
    QPushButton* run_;
    QPushButton* draw_;
    QPushButton* remove_;
    QPlainTextEdit* editor_;
    QLabel* error_;
    QLabel* status_;
    QueryResultModel* model_;
    QTableView* view_;
};

} // namespace pipescope::gui
