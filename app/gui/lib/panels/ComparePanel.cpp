#include "panels/ComparePanel.h"

#include "panels/AnalysisTableModel.h"
#include "timeline/Palette.h"
#include "util/Format.h"

#include <QHBoxLayout>

#include <cmath>
#include <QLabel>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

// The panel's tables: rows of cells built from a DiffResult.
class DiffTableModel : public AnalysisTableModel {
public:
    using AnalysisTableModel::AnalysisTableModel;
    using AnalysisTableModel::Cell;
    void setResult(std::shared_ptr<const AnalysisResult>, std::shared_ptr<const Trace>) override {}
    void set(QStringList header, std::vector<std::vector<Cell>> rows) { setTable(std::move(header), std::move(rows)); }

    static Cell str(const QString& s) { return text(s); }
    static Cell num(int64_t n) { return integer(n); }
    static Cell dur(const std::optional<TimeNs>& v) { return v ? duration(*v) : durationOrDash(0, false); }
    static Cell optCount(const std::optional<int64_t>& v) { return v ? integer(*v) : durationOrDash(0, false); }
    static Cell share(const std::optional<double>& v)
    {
        if (!v)
            return durationOrDash(0, false);
        return percent(*v);
    }
    // B - A, coloured: less time green, more red; sorts by the change.
    static Cell change(const compare::Both<TimeNs>& v, bool withPercent = true)
    {
        if (!v.a || !v.b)
            return durationOrDash(0, false);
        const TimeNs d = *v.b - *v.a;
        Cell c;
        c.text = QString::fromStdString(formatShift(d));
        if (withPercent && *v.a > 0)
            c.text += QStringLiteral(" (%1)").arg(
                QString::fromStdString(formatSignedPercent(static_cast<double>(d) / static_cast<double>(*v.a))));
        c.sort = QVariant::fromValue<qint64>(d);
        c.toolTip = QStringLiteral("%1 ns").arg(d);
        c.numeric = true;
        if (d != 0)
            c.foreground = QColor(QLatin1String(d < 0 ? timeline::kFasterHex.data() : timeline::kSlowerHex.data()));
        return c;
    }
};

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s); }

QString layersText(const compare::RunConfig& c)
{
    if (c.layersPerStage.empty()) // no layer ranges in the trace: unknown, not the other run's (as diff says)
        return c.pipeline ? QObject::tr("unknown") : QStringLiteral("—");
    QStringList parts;
    for (int n : c.layersPerStage)
        parts << QString::number(n);
    return parts.join(QLatin1Char(','));
}

QString boundariesList(const std::vector<int>& b)
{
    QStringList parts;
    for (int x : b)
        parts << QString::number(x);
    return parts.join(QLatin1Char(','));
}

// The stages whose forward + backward work changed by more than a tenth, as "stage 0 −21.7%".
QStringList changedStages(const compare::DiffResult& d)
{
    QStringList out;
    for (const compare::StageDiff& s : d.stages)
        if (s.fbNs.a && s.fbNs.b && *s.fbNs.a > 0) {
            const double change = static_cast<double>(*s.fbNs.b - *s.fbNs.a) / static_cast<double>(*s.fbNs.a);
            if (std::abs(change) > 0.10)
                out << QObject::tr("stage %1 %2").arg(s.stage).arg(qs(formatSignedPercent(change)));
        }
    return out;
}

} // namespace

QString ComparePanel::headlineText(const compare::DiffResult& d)
{
    if (d.prediction) {
        const compare::PredictionCheck& p = *d.prediction;
        return tr("Predicted %1 from run A, measured %2 (%3)")
            .arg(qs(formatDuration(p.predictedNs)), qs(formatDuration(p.measuredNs)), qs(formatSignedPercent(p.error)));
    }
    return tr("Iteration %1 in A, %2 in B (%3)")
        .arg(qs(d.iterationNs.a ? formatDuration(*d.iterationNs.a) : "—"),
             qs(d.iterationNs.b ? formatDuration(*d.iterationNs.b) : "—"),
             d.iterationNs.a && d.iterationNs.b && *d.iterationNs.a > 0
                 ? qs(formatSignedPercent(static_cast<double>(*d.iterationNs.delta()) / static_cast<double>(*d.iterationNs.a)))
                 : QStringLiteral("—"));
}

QString ComparePanel::notesText(const compare::DiffResult& d)
{
    QStringList notes;
    if (d.prediction) {
        const compare::PredictionCheck& p = *d.prediction;
        QStringList what;
        for (const compare::Difference& c : p.changes)
            what << QStringLiteral("%1 %2 → %3").arg(qs(c.field), qs(c.a), qs(c.b));
        // A saved scenario whose only change is a partition A's trace does not
        // give: the partition it asked for, said as such (never an empty list).
        if (what.isEmpty() && p.scenario.boundaries)
            what << tr("boundaries %1 (A's own partition is not in its trace)").arg(boundariesList(*p.scenario.boundaries));
        const QString changes = what.isEmpty() ? tr("no change from A's configuration as its trace records it")
                                               : what.join(QStringLiteral(", "));
        if (p.saved)
            notes << tr("A = %1, B = this job. The prediction saved on A%2: %3.")
                         .arg(qs(d.aName), p.savedLabel.empty() ? QString() : QStringLiteral(" (\u201c%1\u201d)").arg(qs(p.savedLabel)),
                              changes);
        else
            notes << tr("A = %1, B = this job. A's cost model replayed B's configuration: %2.").arg(qs(d.aName), changes);
        if (p.calibrationError)
            notes << tr("A's replay of its own run was %1 off its measurement.").arg(qs(formatSignedPercent(*p.calibrationError)));
        for (const std::string& n : p.notModelled)
            notes << (p.saved ? tr("Differs: %1.") : tr("Not modelled: %1.")).arg(qs(n));
    } else {
        notes << tr("A = %1, B = this job. No prediction check: %2.").arg(qs(d.aName), qs(d.predictionWhyNot));
    }
    // Without layer ranges a partition is unknown, and an unknown one is not A's:
    // say so where the stages' work moved.
    if (d.a.pipeline && d.b.pipeline && (d.a.layersPerStage.empty() || d.b.layersPerStage.empty())) {
        const QStringList moved = changedStages(d);
        if (!moved.isEmpty())
            notes << tr("%1, so a changed partition does not show in the configuration; the stages' work changed "
                        "(%2): B may have moved layers.")
                         .arg(d.a.layersPerStage.empty() && d.b.layersPerStage.empty() ? tr("Neither trace gives layer ranges")
                              : d.b.layersPerStage.empty() ? tr("Run B's trace gives no layer ranges")
                                                           : tr("Run A's trace gives no layer ranges"),
                              moved.join(QStringLiteral(", ")));
    }
    return notes.join(QLatin1Char(' '));
}

ComparePanel::ComparePanel(QWidget* parent)
    : AnalysisPanel(parent)
    , headline_(new QLabel(this))
    , notes_(new QLabel(this))
    , config_(new DiffTableModel(this))
    , totals_(new DiffTableModel(this))
    , stages_(new DiffTableModel(this))
    , path_(new DiffTableModel(this))
    , microbatches_(new DiffTableModel(this))
    , kernels_(new DiffTableModel(this))
{
    headline_->setTextFormat(Qt::PlainText);
    headline_->setWordWrap(true);
    QFont bold = headline_->font();
    bold.setBold(true);
    headline_->setFont(bold);
    headline_->setObjectName(QStringLiteral("compareHeadline"));
    notes_->setTextFormat(Qt::PlainText);
    notes_->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(headline_);
    layout->addWidget(notes_);
    auto* tabs = new QTabWidget(this);
    auto page = [&](DiffTableModel* a, DiffTableModel* b, const QString& name) {
        auto* w = new QWidget(tabs);
        auto* l = new QHBoxLayout(w);
        l->setContentsMargins(0, 0, 0, 0);
        for (DiffTableModel* m : {a, b}) {
            if (!m)
                continue;
            QTableView* v = makeTableView(m, true, w);
            l->addWidget(v);
            registerTable(v);
        }
        tabs->addTab(w, name);
    };
    page(stages_, nullptr, tr("Stages"));
    page(config_, totals_, tr("Configuration and idle"));
    page(microbatches_, nullptr, tr("Microbatches"));
    page(path_, nullptr, tr("Critical path"));
    page(kernels_, nullptr, tr("Kernels"));
    layout->addWidget(tabs, 1);
    setDiff(nullptr);
}

QString ComparePanel::headline() const { return headline_->text(); }
QString ComparePanel::notes() const { return notes_->text(); }

void ComparePanel::setDiff(std::shared_ptr<const compare::DiffResult> diff)
{
    diff_ = std::move(diff);
    using M = DiffTableModel;
    if (!diff_) {
        headline_->setText(tr("No comparison. File > Compare with... opens a baseline run to compare this job with."));
        notes_->clear();
        for (DiffTableModel* m : {config_, totals_, stages_, microbatches_, path_, kernels_})
            m->set({}, {});
        return;
    }
    const compare::DiffResult& d = *diff_;
    headline_->setText(headlineText(d));
    notes_->setText(notesText(d));

    {
        std::vector<std::vector<M::Cell>> rows;
        auto row = [&](const QString& name, const QString& a, const QString& b) {
            M::Cell n = M::str(name);
            const QString unknown = QObject::tr("unknown");
            n.emphasis = a != b && a != QStringLiteral("—") && b != QStringLiteral("—") && a != unknown && b != unknown;
            rows.push_back({n, M::str(a), M::str(b)});
        };
        row(tr("ranks"), QString::number(d.a.ranks), QString::number(d.b.ranks));
        auto pp = [](const compare::RunConfig& c) {
            return c.pipeline ? QStringLiteral("%1 / %2 / %3").arg(c.pp).arg(c.dp).arg(c.v) : QStringLiteral("—");
        };
        row(tr("pp / dp / v"), pp(d.a), pp(d.b));
        row(tr("microbatches"), d.a.pipeline ? QString::number(d.a.microbatches) : QStringLiteral("—"),
            d.b.pipeline ? QString::number(d.b.microbatches) : QStringLiteral("—"));
        row(tr("schedule"), d.a.pipeline ? qs(scheduleName(d.a.schedule)) : QStringLiteral("—"), d.b.pipeline ? qs(scheduleName(d.b.schedule)) : QStringLiteral("—"));
        row(tr("layers per stage"), layersText(d.a), layersText(d.b));
        config_->set({tr("configuration"), tr("A"), tr("B")}, std::move(rows));
    }
    {
        std::vector<std::vector<M::Cell>> rows;
        rows.push_back({M::str(tr("iteration")), M::dur(d.iterationNs.a), M::dur(d.iterationNs.b), M::change(d.iterationNs)});
        rows.push_back({M::str(tr("idle share")), M::share(d.bubbleShare.a), M::share(d.bubbleShare.b), M::str({})});
        for (int c = 0; c < kBubbleCauses; ++c) {
            const compare::Both<TimeNs>& v = d.idleByCause[size_t(c)];
            if (v.a.value_or(0) == 0 && v.b.value_or(0) == 0)
                continue;
            rows.push_back({M::str(tr("idle: %1").arg(qs(std::string(toString(static_cast<BubbleCause>(c)))))), M::dur(v.a),
                            M::dur(v.b), M::change(v, false)});
        }
        totals_->set({QString(), tr("A"), tr("B"), tr("change")}, std::move(rows));
    }
    {
        std::vector<std::vector<M::Cell>> rows;
        for (const compare::StageDiff& s : d.stages)
            rows.push_back({M::num(s.stage), M::dur(s.forwardNs.a), M::dur(s.forwardNs.b), M::dur(s.backwardNs.a),
                            M::dur(s.backwardNs.b), M::dur(s.fbNs.a), M::dur(s.fbNs.b), M::change(s.fbNs), M::dur(s.busyNs.a),
                            M::dur(s.busyNs.b), M::change(s.busyNs)});
        stages_->set({tr("stage"), tr("F A"), tr("F B"), tr("B A"), tr("B B"), tr("F+B A"), tr("F+B B"), tr("F+B change"),
                      tr("busy A"), tr("busy B"), tr("busy change")},
                     std::move(rows));
    }
    {
        // Per microbatch where both runs cut the work the same way; else one row saying why not.
        std::vector<std::vector<M::Cell>> rows;
        for (const compare::MicrobatchDiff& m : d.microbatches) {
            compare::Both<TimeNs> fb;
            if (m.forwardNs.a && m.backwardNs.a)
                fb.a = *m.forwardNs.a + *m.backwardNs.a;
            if (m.forwardNs.b && m.backwardNs.b)
                fb.b = *m.forwardNs.b + *m.backwardNs.b;
            rows.push_back({M::num(m.stage), M::num(m.microbatch), M::dur(m.forwardNs.a), M::dur(m.forwardNs.b),
                            M::dur(m.backwardNs.a), M::dur(m.backwardNs.b), M::change(fb)});
        }
        if (rows.empty())
            rows.push_back({M::str(qs(d.microbatchesWhyNot)), M::str({}), M::str({}), M::str({}), M::str({}), M::str({}),
                            M::str({})});
        microbatches_->set({tr("stage"), tr("microbatch"), tr("F A"), tr("F B"), tr("B A"), tr("B B"), tr("F+B change")},
                           std::move(rows));
    }
    {
        std::vector<std::vector<M::Cell>> rows;
        rows.push_back({M::str(tr("total")), M::dur(d.criticalPathNs.a), M::dur(d.criticalPathNs.b), M::change(d.criticalPathNs)});
        for (const auto& [kind, v] : d.criticalPathByKind)
            rows.push_back({M::str(qs(kind)), M::dur(v.a), M::dur(v.b), M::change(v, false)});
        path_->set({tr("kind"), tr("A"), tr("B"), tr("change")}, std::move(rows));
    }
    {
        std::vector<std::vector<M::Cell>> rows;
        for (const compare::KernelDiff& k : d.kernels) {
            M::Cell name = M::str(qs(k.name));
            name.toolTip = qs(k.name);
            rows.push_back({k.stage >= 0 ? M::num(k.stage) : M::str(QStringLiteral("—")), name,
                            M::str(qs(std::string(toString(k.workClass)))), M::str(qs(std::string(compare::toString(k.change)))),
                            M::optCount(k.count.a), M::optCount(k.count.b), M::dur(k.totalNs.a), M::dur(k.totalNs.b),
                            M::change({k.totalNs.a.value_or(0), k.totalNs.b.value_or(0)}, false)});
        }
        kernels_->set({tr("stage"), tr("kernel"), tr("class"), tr("change"), tr("count A"), tr("count B"), tr("total A"),
                       tr("total B"), tr("difference")},
                      std::move(rows));
    }
}

} // namespace pipescope::gui
