#include "panels/QueryPanel.h"

#include "util/Format.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <limits>

namespace pipescope::gui {

QueryResultModel::QueryResultModel(QObject* parent) : AnalysisTableModel(parent) { clear(); }

void QueryResultModel::clear() { setTable({}, {}); }

void QueryResultModel::setQueryResult(const QueryResult& result)
{
    QStringList header;
    for (const std::string& c : result.columns)
        header << QString::fromStdString(c);
    std::vector<std::vector<Cell>> rows;
    rows.reserve(result.rows.size());
    for (const std::vector<QueryCell>& r : result.rows) {
        std::vector<Cell> row;
        row.reserve(r.size());
        for (const QueryCell& c : r) {
            switch (c.type) {
            case QueryCell::Type::Null:
                // Sorts before every number and text.
                row.push_back(Cell{QStringLiteral("NULL"), QVariant(std::numeric_limits<double>::lowest()), QString(), false});
                break;
            case QueryCell::Type::Integer:
                row.push_back(Cell{QString::number(c.integer), QVariant(qint64(c.integer)), QString(), true});
                break;
            case QueryCell::Type::Real:
                row.push_back(Cell{QString::fromStdString(queryCellText(c)), QVariant(c.real), QString(), true});
                break;
            case QueryCell::Type::Text:
            case QueryCell::Type::Blob: {
                const QString s = QString::fromStdString(queryCellText(c));
                row.push_back(Cell{s, QVariant(s), s.size() > 80 ? s : QString(), false});
                break;
            }
            }
        }
        rows.push_back(std::move(row));
    }
    setTable(std::move(header), std::move(rows));
}

QList<QPair<QString, QString>> QueryPanel::examples()
{
    return {
        {tr("Kernels by total time"),
         QStringLiteral("SELECT s.value AS kernel, COUNT(*) AS count, SUM(a.end_ns - a.start_ns) AS total_ns,\n"
                        "       SUM(a.end_ns - a.start_ns) / COUNT(*) AS mean_ns\n"
                        "FROM activities a JOIN strings s ON s.id = a.name_id\n"
                        "WHERE a.kind = 0\n"
                        "GROUP BY s.value ORDER BY total_ns DESC LIMIT 100")},
        {tr("Step annotations per rank"),
         QStringLiteral("SELECT c.rank, CASE WHEN s.value LIKE '%backward%' THEN 'backward' ELSE 'forward' END AS step,\n"
                        "       COUNT(*) AS count, SUM(c.end_ns - c.start_ns) AS total_ns\n"
                        "FROM cpu_ranges c JOIN strings s ON s.id = c.name_id\n"
                        "WHERE c.kind IN (0, 1) AND (s.value LIKE '%forward%' OR s.value LIKE '%backward%')\n"
                        "GROUP BY c.rank, step ORDER BY c.rank, step")},
        {tr("NCCL operations by kind"),
         QStringLiteral("SELECT kind, COUNT(*) AS ops, SUM(bytes) AS bytes, SUM(end_ns - start_ns) AS total_ns\n"
                        "FROM nccl_ops GROUP BY kind ORDER BY total_ns DESC")},
        {tr("Kernels over 1 ms (Draw as track)"),
         QStringLiteral("SELECT a.rank, a.start_ns, a.end_ns, s.value AS name\n"
                        "FROM activities a JOIN strings s ON s.id = a.name_id\n"
                        "WHERE a.kind = 0 AND a.end_ns - a.start_ns > 1000000\n"
                        "ORDER BY a.rank, a.start_ns")},
        {tr("Tables of the store"), QStringLiteral("SELECT name, sql FROM sqlite_master WHERE type = 'table'")},
    };
}

QueryPanel::QueryPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , examples_(new QComboBox(this))
    , run_(new QPushButton(tr("Run"), this))
    , draw_(new QPushButton(tr("Draw as track"), this))
    , remove_(new QPushButton(tr("Remove tracks"), this))
    , editor_(new QPlainTextEdit(this))
    , error_(new QLabel(this))
    , status_(new QLabel(this))
    , model_(new QueryResultModel(this))
    , view_(makeTableView(model_, true, this))
{
    examples_->addItem(tr("Examples…"));
    for (const auto& [label, sql] : examples())
        examples_->addItem(label, sql);
    connect(examples_, &QComboBox::activated, this, [this](int index) {
        if (index <= 0)
            return;
        editor_->setPlainText(examples_->itemData(index).toString());
        examples_->setCurrentIndex(0);
        runEditor();
    });
    editor_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    editor_->setPlaceholderText(tr("SELECT ... (read only; the tables are in docs/trace-format.md). Ctrl+Return runs it."));
    editor_->setTabChangesFocus(true);
    run_->setToolTip(tr("Run the statement (Ctrl+Return)"));
    connect(run_, &QPushButton::clicked, this, &QueryPanel::runEditor);
    draw_->setToolTip(tr("Draw the result on the timeline: one track per rank (or track value) from its start_ns (or ts) "
                         "and end_ns (or dur) columns, named by its name column"));
    remove_->setToolTip(tr("Remove the query tracks from the timeline"));
    draw_->setEnabled(false);
    remove_->setEnabled(false);
    connect(draw_, &QPushButton::clicked, this, &QueryPanel::drawAsTrack);
    connect(remove_, &QPushButton::clicked, this, &QueryPanel::removeTracks);
    auto* runKey = new QAction(this);
    runKey->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_Return), QKeySequence(Qt::CTRL | Qt::Key_Enter)});
    runKey->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    connect(runKey, &QAction::triggered, this, &QueryPanel::runEditor);
    addAction(runKey);
    // One line: a long message is elided by the layout, whole in its tooltip.
    error_->setTextFormat(Qt::PlainText);
    error_->setWordWrap(false);
    error_->setStyleSheet(QStringLiteral("color: #c62828;"));
    error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    error_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    error_->hide();
    status_->setTextFormat(Qt::PlainText);

    auto* top = new QHBoxLayout;
    top->addWidget(examples_);
    top->addWidget(run_);
    top->addWidget(draw_);
    top->addWidget(remove_);
    top->addWidget(status_, 1);
    auto* editorBox = new QWidget(this);
    auto* editorLayout = new QVBoxLayout(editorBox);
    editorLayout->setContentsMargins(0, 0, 0, 0);
    editorLayout->addLayout(top);
    editorLayout->addWidget(editor_, 1);
    editorLayout->addWidget(error_);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(editorBox);
    split->addWidget(view_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(2, 2, 2, 2);
    layout->addWidget(split, 1);
    // Long text cells stay one line wide enough to read; the rest is in the tooltip.
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    registerTable(view_);
    setStorePath({});
}

void QueryPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
}

void QueryPanel::setStorePath(const QString& path)
{
    const bool other = path != storePath_ || path.isEmpty();
    storePath_ = path;
    run_->setEnabled(!path.isEmpty());
    if (other) {
        clearResult();
        if (!tracks_.empty()) {
            // Another job: its timeline has none of them.
            tracks_.clear();
            remove_->setEnabled(false);
            emit tracksChanged();
        }
        tracksDrawn_ = 0;
    }
}

void QueryPanel::clearResult()
{
    model_->clear();
    last_ = QueryResult{};
    draw_->setEnabled(false);
    error_->clear();
    error_->setToolTip({});
    error_->hide();
    status_->setText(storePath_.isEmpty() ? tr("No store to query (open a job)") : QString());
}

void QueryPanel::showError(const QString& message)
{
    // SQLite's messages can hold line breaks (the statement quoted): one line here.
    QString line = message.simplified();
    error_->setText(line);
    error_->setToolTip(message);
    error_->show();
}

bool QueryPanel::runEditor() { return run(editor_->toPlainText()); }

bool QueryPanel::run(const QString& sql)
{
    if (editor_->toPlainText() != sql)
        editor_->setPlainText(sql);
    model_->clear();
    last_ = QueryResult{};
    draw_->setEnabled(false);
    error_->clear();
    error_->hide();
    if (storePath_.isEmpty()) {
        status_->setText(tr("No store to query (open a job)"));
        showError(tr("no store to query: this job has none (a simulated job), or none is open"));
        return false;
    }
    QueryCollector collector(kMaxRows);
    QApplication::setOverrideCursor(Qt::WaitCursor);
    try {
        const QuerySummary summary = runQuery(storePath_.toStdString(), sql.toStdString(), collector);
        QApplication::restoreOverrideCursor();
        model_->setQueryResult(collector.result);
        last_ = std::move(collector.result);
        draw_->setEnabled(true);
        QString status = summary.rows == 1 ? tr("1 row") : tr("%1 rows").arg(QString::fromStdString(formatCount(summary.rows)));
        if (summary.shards > 0)
            status += tr(" from %n shard(s)", nullptr, summary.shards);
        for (const std::string& w : summary.warnings)
            status += QStringLiteral("; ") + QString::fromStdString(w);
        status_->setText(status);
        return true;
    } catch (const std::exception& e) {
        QApplication::restoreOverrideCursor();
        status_->clear();
        showError(QString::fromStdString(e.what()));
        return false;
    }
}

bool QueryPanel::drawAsTrack()
{
    if (!timeline_) {
        showError(tr("no timeline to draw on: open a job"));
        return false;
    }
    QString why;
    const std::optional<QueryTracks> t = buildQueryTracks(last_, *timeline_, tr("query %1").arg(tracksDrawn_ + 1), &why);
    if (!t) {
        showError(why);
        return false;
    }
    ++tracksDrawn_;
    error_->clear();
    error_->hide();
    status_->setText(describe(*t));
    tracks_.push_back(std::make_shared<const QueryTracks>(*t));
    remove_->setEnabled(true);
    emit tracksChanged();
    return true;
}

void QueryPanel::removeTracks()
{
    if (tracks_.empty())
        return;
    tracks_.clear();
    tracksDrawn_ = 0;
    remove_->setEnabled(false);
    emit tracksChanged();
}

std::shared_ptr<const timeline::TimelineModel> QueryPanel::withQueryTracks(std::shared_ptr<const timeline::TimelineModel> base)
{
    if (tracks_.empty() || !base) {
        composedBase_.reset();
        composed_.reset();
        return base;
    }
    // One copy of the job's model per change of tracks, not per call.
    if (composed_ && composedBase_ == base && composedTracks_ == tracks_)
        return composed_;
    composedBase_ = base;
    composedTracks_ = tracks_;
    composed_ = std::make_shared<const timeline::TimelineModel>(gui::withQueryTracks(*base, tracks_));
    return composed_;
}

QString QueryPanel::errorText() const { return error_->text(); }

QString QueryPanel::statusText() const { return status_->text(); }

} // namespace pipescope::gui
