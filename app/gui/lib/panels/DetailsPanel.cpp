#include "panels/DetailsPanel.h"

#include "analysis/Analysis.h"
#include "timeline/TimelineLinks.h"
#include "util/Format.h"
#include "util/Demangle.h"

#include <QClipboard>
#include <QGuiApplication>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

#include <numeric>

namespace pipescope::gui {

namespace {

QString qs(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString qs(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())).toHtmlEscaped(); }
QString dur(TimeNs ns) { return QString::fromStdString(formatDuration(ns)); }

QString row(const QString& key, const QString& value)
{
    return QStringLiteral("<tr><td style='color:#555;padding-right:10px'>%1</td><td>%2</td></tr>").arg(key, value);
}

} // namespace

QString causeExplanation(BubbleCause cause)
{
    switch (cause) {
    case BubbleCause::FillDrain:
        return QStringLiteral("Pipeline fill or drain: no microbatch had reached this stage yet, or all had left it. "
                              "More microbatches, an interleaved or zero-bubble schedule shrink it.");
    case BubbleCause::WaitNeighbor:
        return QStringLiteral("Waiting for a neighbour stage: the activation or gradient this step needs was not computed yet. "
                              "A slower neighbour (imbalance) is the usual reason; moving layers off it helps.");
    case BubbleCause::P2pTransfer:
        return QStringLiteral("The data had been computed but was still crossing the link between stages.");
    case BubbleCause::DpSync:
        return QStringLiteral("Gradient all-reduce over data-parallel replicas, including the wait for the slowest replica.");
    case BubbleCause::AllToAll:
        return QStringLiteral("An all-to-all collective (expert or sequence parallelism): the rank exchanged tokens with, "
                              "and waited for, every other rank of its group.");
    case BubbleCause::StepOverhead:
        return QStringLiteral("Before a pipeline step, with no input to wait for and no kernel launched late: the step's own "
                              "overhead between steps (scheduling, Python, the exchange's bookkeeping).");
    case BubbleCause::HostBound:
        return QStringLiteral("The GPU had nothing queued: the CPU launched the next kernel late (data loading, Python, synchronisation).");
    case BubbleCause::LaunchGap:
        return QStringLiteral("A short gap between back-to-back kernels: launch overhead.");
    case BubbleCause::Other:
        return QStringLiteral("Idle time no rule explains.");
    }
    return {};
}

DetailsPanel::DetailsPanel(QWidget* parent) : QWidget(parent), text_(new QTextBrowser(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(text_);
    text_->setOpenLinks(false);
    connect(text_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.toString() == QLatin1String("copy:kernels") && !areaTsv_.isEmpty())
            QGuiApplication::clipboard()->setText(areaTsv_);
        else if (url.toString() == QLatin1String("pivot:steps"))
            Q_EMIT pivotRequested();
    });
    clear();
}

void DetailsPanel::setJob(std::shared_ptr<const Trace> trace, std::shared_ptr<const timeline::TimelineModel> model)
{
    trace_ = std::move(trace);
    model_ = std::move(model);
    clear();
}

void DetailsPanel::clear()
{
    areaTsv_.clear();
    text_->setHtml(QStringLiteral("<p style='color:#666'>Click an event on the timeline for its details; "
                                  "shift-drag over a time range for its statistics.</p>"));
}

QString DetailsPanel::plainText() const { return text_->toPlainText(); }

QString DetailsPanel::relations(int lane, qint64 event) const
{
    using namespace timeline;
    const TimelineModel& m = *model_;
    const TimeNs origin = m.predicted ? 0 : m.start;
    // "F3 on rank 2 (stage 2), 1.2 ms to 1.8 ms"
    auto describe = [&](EventRef r) {
        const Lane& l = m.lanes[static_cast<size_t>(r.lane)];
        const Event& e = m.event(r.lane, r.event);
        QString where = QStringLiteral("rank %1").arg(l.rank);
        if (l.stage >= 0)
            where += QStringLiteral(" (stage %1)").arg(l.stage);
        if (l.kind == LaneKind::Kernels)
            where += QStringLiteral(", stream %1").arg(l.stream);
        QString name = QString::fromStdString(m.name(e.name));
        if (name.size() > 120)
            name = name.left(120) + QStringLiteral("…");
        return QStringLiteral("%1 on %2, %3 to %4")
            .arg(name.toHtmlEscaped(), where, dur(e.start - origin), dur(e.end - origin));
    };
    const EventRef ref{lane, event};
    launchShown_ = false;
    const Lane& l = m.lanes[static_cast<size_t>(lane)];
    const Event& e = m.event(lane, event);
    QString html;
    switch (l.kind) {
    case LaneKind::Memory:
        html += row(QStringLiteral("GPU memory in use"),
                    QString::fromStdString(formatBytes(int64_t(e.detail) * timeline::kMemoryUnitBytes)));
        break;
    case LaneKind::Steps:
        if (auto p = precedingStep(m, ref))
            html += row(QStringLiteral("needed"), describe(*p));
        if (auto d = dependentStep(m, ref))
            html += row(QStringLiteral("feeds"), describe(*d));
        break;
    case LaneKind::Bubbles:
        if (auto w = bubbleWait(m, ref)) {
            html += row(QStringLiteral("ended by"), describe(w->next));
            if (w->waitedOn) {
                const Event& on = m.event(w->waitedOn->lane, w->waitedOn->event);
                html += row(QStringLiteral("waited for"), describe(*w->waitedOn));
                if (on.end > e.start)
                    html += row(QString(), QStringLiteral("which ended %1 into this bubble").arg(dur(on.end - e.start)));
            }
        }
        break;
    case LaneKind::Kernels:
    case LaneKind::Transfers:
        if (auto o = matchingTransfer(m, ref))
            html += row(l.kind == LaneKind::Transfers ? QStringLiteral("feeds")
                                                      : p2pDirection(m, ref) == P2pDirection::Send ? QStringLiteral("received by")
                                                                                                   : QStringLiteral("sent by"),
                        describe(*o));
        if (launchLookup_ && e.activity >= 0)
            if (auto call = launchLookup_(e.activity)) {
                launchShown_ = true;
                QString name = QString::fromStdString(call->name);
                if (name.size() > 120)
                    name = name.left(120) + QStringLiteral("…");
                html += row(QStringLiteral("launched by"), QStringLiteral("%1 on CPU thread %2, %3 before it started")
                                                               .arg(name.toHtmlEscaped())
                                                               .arg(call->tid)
                                                               .arg(dur(e.start - call->start)));
            }
        break;
    case LaneKind::Cpu:
        break;
    }
    return html;
}

void DetailsPanel::showEvent(int lane, qint64 event, const QString& summary)
{
    if (!model_ || lane < 0 || event < 0 || static_cast<size_t>(lane) >= model_->lanes.size()) {
        clear();
        return;
    }
    const timeline::Lane& l = model_->lanes[static_cast<size_t>(lane)];
    const timeline::Event& e = model_->event(lane, event);
    QString html = QStringLiteral("<p>%1</p><table>").arg(summary);
    // Times from the start of the job (of the prediction), as the timeline's axis counts
    // them; the absolute clock value beside it for matching with other tools.
    const TimeNs origin = model_->predicted ? 0 : model_->start;
    const QString from = model_->predicted ? QStringLiteral("from the predicted iteration's start")
                                           : QStringLiteral("from the job start");
    html += row(QStringLiteral("start"), QStringLiteral("%1 %2 (%3 ns on the job clock)").arg(dur(e.start - origin), from).arg(e.start));
    html += row(QStringLiteral("end"), QStringLiteral("%1 %2").arg(dur(e.end - origin), from));
    html += row(QStringLiteral("duration"), dur(e.end - e.start));
    if (l.kind != timeline::LaneKind::Bubbles)
        html += relations(lane, event);
    if (l.kind == timeline::LaneKind::Bubbles) {
        const auto cause = BubbleCause(std::min<int>(e.code, kBubbleCauses - 1));
        html += row(QStringLiteral("cause"), qs(toString(cause)));
        html += relations(lane, event);
        html += QStringLiteral("</table><p>%1</p>").arg(causeExplanation(cause));
        text_->setHtml(html);
        return;
    }
    if (trace_ && e.activity >= 0 && static_cast<size_t>(e.activity) < trace_->activities.size()) {
        const Activity& a = trace_->activities[static_cast<size_t>(e.activity)];
        html += row(QStringLiteral("kind"), qs(toString(a.kind)));
        html += row(QStringLiteral("store id"), QString::number(a.id));
        if (a.correlation)
            html += row(QStringLiteral("correlation"), QString::number(*a.correlation));
        if (a.launchStart && !launchShown_)
            html += row(QStringLiteral("launched"), QStringLiteral("%1 before it started (CPU call at %2 from the job start)")
                                                        .arg(dur(a.start - *a.launchStart), dur(*a.launchStart - origin)));
        if (a.bytes)
            html += row(QStringLiteral("bytes"), QString::fromStdString(formatBytes(*a.bytes)));
        if (a.kind == ActivityKind::Memcpy)
            html += row(QStringLiteral("copy"), qs(toString(a.copyKind)));
        if (a.ncclIndex >= 0 && static_cast<size_t>(a.ncclIndex) < trace_->ncclOps.size()) {
            const NcclOp& op = trace_->ncclOps[static_cast<size_t>(a.ncclIndex)];
            const bool batch = a.ncclCount > 1; // a coalesced batch: its ops one by one, then their group
            html += row(QStringLiteral("NCCL"), batch ? QStringLiteral("coalesced, %1 operations").arg(a.ncclCount) : qs(toString(op.kind)));
            if (batch && static_cast<size_t>(a.ncclIndex) + a.ncclCount <= trace_->ncclOps.size()) {
                // A coalesced batch (batch_isend_irecv): each send and receive it ran.
                QStringList ops;
                for (size_t k = 0; k < a.ncclCount && k < 16; ++k) {
                    const NcclOp& each = trace_->ncclOps[static_cast<size_t>(a.ncclIndex) + k];
                    QString text = qs(toString(each.kind));
                    if (each.peer)
                        text += (each.kind == Collective::Recv ? QStringLiteral(" from rank ") : QStringLiteral(" to rank ")) +
                                QString::number(*each.peer);
                    if (each.bytes)
                        text += QStringLiteral(", ") + QString::fromStdString(formatBytes(*each.bytes));
                    ops << text;
                }
                if (a.ncclCount > 16)
                    ops << QStringLiteral("… %1 more").arg(a.ncclCount - 16);
                html += row(QStringLiteral("NCCL batch"), ops.join(QStringLiteral("<br>")));
            }
            if (!batch && op.bytes)
                html += row(QStringLiteral("message"), QString::fromStdString(formatBytes(*op.bytes)));
            if (!op.dtype.empty())
                html += row(QStringLiteral("dtype"), qs(op.dtype));
            if (!batch && op.inNelems)
                html += row(QStringLiteral("elements in / out"),
                            QStringLiteral("%1 / %2").arg(*op.inNelems).arg(op.outNelems.value_or(-1)));
            if (!batch && op.peer)
                html += row(QStringLiteral("peer rank"), QString::number(*op.peer));
            if (!op.groupName.empty() || !op.groupDesc.empty())
                html += row(QStringLiteral("group"), qs(op.groupName) + (op.groupDesc.empty() ? QString() : QStringLiteral(" (") + qs(op.groupDesc) + QLatin1Char(')')));
            if (!op.groupRanks.empty()) {
                QStringList ranks;
                for (size_t i = 0; i < op.groupRanks.size() && i < 64; ++i)
                    ranks << QString::number(op.groupRanks[i]);
                if (op.groupRanks.size() > 64)
                    ranks << QStringLiteral("…");
                html += row(QStringLiteral("group ranks"), ranks.join(QLatin1Char(',')));
            }
            if (op.seq)
                html += row(QStringLiteral("sequence"), QString::number(*op.seq));
        }
        const std::string& recorded = trace_->str(a.name);
        const std::optional<std::string> readable = demangle(recorded);
        html += row(QStringLiteral("name"), QStringLiteral("<span style='font-family:monospace'>%1</span>")
                                                .arg(qs(readable ? *readable : recorded)));
        if (readable)
            html += row(QStringLiteral("as recorded"), QStringLiteral("<span style='font-family:monospace'>%1</span>")
                                                           .arg(qs(recorded)));
    } else {
        html += row(QStringLiteral("name"), qs(model_->name(e.name)));
    }
    html += QStringLiteral("</table>");
    text_->setHtml(html);
}

void DetailsPanel::showArea(const timeline::AreaStats& s, qint64 origin, const QString& originName)
{
    // The range counted from the timeline's time origin, as its axis and tooltips count.
    QString html = QStringLiteral("<p><b>%1 selected</b>, from %2 to %3%4</p>")
                       .arg(dur(s.to - s.from), dur(s.from - origin), dur(s.to - origin),
                            originName.isEmpty() ? QString() : QStringLiteral(" (from %1)").arg(originName.toHtmlEscaped()));
    html += QStringLiteral("<p style='color:#555'>Work by class, steps and idle time: the part inside the range. "
                           "Kernels and kernels by name: every kernel that overlaps the range, whole.</p>");
    auto section = [&](const QString& title, auto names, const auto& ns, const auto& count) {
        QString rows;
        for (size_t i = 0; i < ns.size(); ++i)
            if (count[i] > 0)
                rows += QStringLiteral("<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td></tr>")
                            .arg(names(i), dur(ns[i]))
                            .arg(count[i]);
        if (!rows.isEmpty())
            html += QStringLiteral("<p><b>%1</b></p><table><tr><th align=left></th><th>time</th><th>count</th></tr>%2</table>")
                        .arg(title, rows);
    };
    section(QStringLiteral("GPU work by class"), [](size_t i) { return qs(toString(WorkClass(i))); }, s.classNs, s.classCount);
    section(QStringLiteral("Steps"), [](size_t i) { return QString(QChar::fromLatin1(toChar(StepKind(i)))); }, s.stepNs, s.stepCount);
    if (std::accumulate(s.stepCount.begin(), s.stepCount.end(), int64_t(0)) > 0)
        html += QStringLiteral("<p><a href='pivot:steps'>Pivot these steps</a> (stage × kind × microbatch × iteration: "
                               "count, total, mean, p50, p95)</p>");
    section(QStringLiteral("Idle by cause"), [](size_t i) { return qs(toString(BubbleCause(i))); }, s.idleNs, s.idleCount);
    if (s.kernels > 0)
        html += QStringLiteral("<p><b>Kernels</b>: %1, sum %2, min %3, avg %4, max %5</p>")
                    .arg(s.kernels)
                    .arg(dur(s.kernelSumNs), dur(s.kernelMinNs), dur(static_cast<TimeNs>(s.kernelAvgNs)), dur(s.kernelMaxNs));
    // Per kernel name, as Perfetto's and Nsight's statistics give it; every name goes to the clipboard.
    areaTsv_.clear();
    if (!s.kernelsByName.empty() && model_) {
        constexpr size_t kShown = 25;
        areaTsv_ = QStringLiteral("name\tclass\tcount\ttotal_ns\tavg_ns\tmin_ns\tmax_ns\tshare\n");
        QString rows;
        for (size_t i = 0; i < s.kernelsByName.size(); ++i) {
            const timeline::NameStats& n = s.kernelsByName[i];
            const QString name = QString::fromStdString(model_->name(n.name));
            const TimeNs avg = n.count ? n.totalNs / n.count : 0;
            const double share = s.kernelSumNs ? double(n.totalNs) / double(s.kernelSumNs) : 0.0;
            QString clean = name;
            clean.replace(QLatin1Char('\t'), QLatin1Char(' ')).replace(QLatin1Char('\n'), QLatin1Char(' '));
            areaTsv_ += QStringLiteral("%1\t%2\t%3\t%4\t%5\t%6\t%7\t%8\n")
                            .arg(clean, qs(toString(WorkClass(std::min<int>(n.code, 6)))))
                            .arg(n.count)
                            .arg(n.totalNs)
                            .arg(avg)
                            .arg(n.minNs)
                            .arg(n.maxNs)
                            .arg(share, 0, 'f', 4);
            if (i < kShown) {
                const QString shortName = name.size() > 60 ? name.left(57) + QStringLiteral("...") : name;
                rows += QStringLiteral("<tr><td title='%1'>%2</td><td align=right>%3</td><td align=right>%4</td>"
                                       "<td align=right>%5</td><td align=right>%6</td><td align=right>%7</td>"
                                       "<td align=right>%8</td></tr>")
                            .arg(name.toHtmlEscaped(), shortName.toHtmlEscaped())
                            .arg(n.count)
                            .arg(dur(n.totalNs), dur(avg), dur(n.minNs), dur(n.maxNs),
                                 QString::fromStdString(formatPercent(share)));
            }
        }
        html += QStringLiteral("<p><b>Kernels by name</b> (%1 names%2) <a href='copy:kernels'>copy all as TSV</a></p>"
                               "<table><tr><th align=left>name</th><th>count</th><th>total</th><th>avg</th><th>min</th>"
                               "<th>max</th><th>share</th></tr>%3</table>")
                    .arg(s.kernelsByName.size())
                    .arg(s.kernelsByName.size() > kShown ? QStringLiteral(", the %1 longest in total shown").arg(kShown) : QString(),
                         rows);
    }
    if (s.cpuRanges > 0)
        html += QStringLiteral("<p>%1 CPU ranges</p>").arg(s.cpuRanges);
    text_->setHtml(html);
}

} // namespace pipescope::gui
