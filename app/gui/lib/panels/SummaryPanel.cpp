#include "panels/SummaryPanel.h"

#include "panels/SummaryModel.h"
#include "panels/AnalysisTableModel.h"
#include "analysis/Verdict.h"
#include "util/Format.h"

#include <QLabel>
#include <QPainter>
#include <QTableView>
#include <QVBoxLayout>

namespace pipescope::gui {

IdleShareBar::IdleShareBar(QWidget* parent)
    : QWidget(parent)
{
    setMinimumHeight(18);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
}

QSize IdleShareBar::sizeHint() const { return {320, 22}; }

void IdleShareBar::setShares(TimeNs busyNs, const std::array<TimeNs, kBubbleCauses>& idleByCause)
{
    busyNs_ = busyNs;
    idle_ = idleByCause;
    TimeNs total = busyNs;
    for (TimeNs v : idle_)
        total += v;
    QString tip;
    auto line = [&](const QString& name, TimeNs ns) {
        if (ns > 0 && total > 0)
            tip += (tip.isEmpty() ? QString() : QStringLiteral("\n")) + name + QStringLiteral(": ") +
                   QString::fromStdString(formatPercent(static_cast<double>(ns) / static_cast<double>(total)));
    };
    line(tr("compute"), busyNs_);
    for (int c = 0; c < kBubbleCauses; ++c)
        line(QString::fromLatin1(toString(static_cast<BubbleCause>(c))), idle_[static_cast<size_t>(c)]);
    setToolTip(tip);
    update();
}

void IdleShareBar::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    const QRectF area = QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5);
    TimeNs total = busyNs_;
    for (TimeNs v : idle_)
        total += v;
    p.fillRect(area, palette().base());
    if (total > 0) {
        double x = area.left();
        auto seg = [&](TimeNs ns, const QColor& colour) {
            const double w = area.width() * static_cast<double>(ns) / static_cast<double>(total);
            if (w > 0)
                p.fillRect(QRectF(x, area.top(), w, area.height()), colour);
            x += w;
        };
        seg(busyNs_, pathKindColor("compute"));
        for (int c = 0; c < kBubbleCauses; ++c)
            seg(idle_[static_cast<size_t>(c)], causeColor(static_cast<BubbleCause>(c)));
    }
    p.setPen(palette().color(QPalette::Mid));
    p.drawRect(area);
}

SummaryPanel::SummaryPanel(QWidget* parent)
    : AnalysisPanel(parent)
    , verdict_(new QLabel(this))
    , facts_(new QLabel(this))
    , levers_(new QLabel(this))
    , bar_(new IdleShareBar(this))
    , model_(new SummaryModel(this))
    , view_(makeTableView(model_, false, this))
{
    auto* layout = new QVBoxLayout(this);
    QFont bold = verdict_->font();
    bold.setBold(true);
    bold.setPointSizeF(bold.pointSizeF() * 1.15);
    verdict_->setFont(bold);
    // Plain text: the headline is built from numbers, but the facts quote the iteration label from the trace.
    verdict_->setTextFormat(Qt::PlainText);
    verdict_->setWordWrap(true);
    verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    facts_->setTextFormat(Qt::PlainText);
    facts_->setWordWrap(true);
    facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(verdict_);
    layout->addWidget(facts_);
    levers_->setTextFormat(Qt::PlainText);
    levers_->setWordWrap(true);
    levers_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    levers_->setObjectName(QStringLiteral("levers"));
    levers_->hide();
    layout->addWidget(levers_);
    auto* barLabel = new QLabel(tr("GPU time of the iteration: compute, then idle by cause"), this);
    layout->addWidget(barLabel);
    layout->addWidget(bar_);
    layout->addWidget(view_, 1);
    registerTable(view_);
    setResult({}, {});
}

void SummaryPanel::setJobPart(std::shared_ptr<const JobPart> part)
{
    model_->setJobPart(std::move(part));
}

void SummaryPanel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    result_ = std::move(result);
    trace_ = std::move(trace);
    model_->setResult(result_, trace_);
    if (!result_) {
        verdict_->setText(tr("No analysis loaded."));
        facts_->clear();
        setLevers({});
        bar_->setShares(0, {});
        return;
    }
    const Verdict v = verdict(*result_, trace_.get());
    verdict_->setText(QString::fromStdString(v.headline));
    QString facts;
    for (const std::string& f : v.facts)
        facts += (facts.isEmpty() ? QString() : QStringLiteral("\n")) + QStringLiteral("\u2022 ") + QString::fromStdString(f);
    facts_->setText(facts);
    TimeNs busy = 0;
    std::array<TimeNs, kBubbleCauses> byCause{};
    for (const RankIdle& ri : result_->idle)
        if (ri.iteration == result_->selectedIteration) {
            busy += ri.busyNs;
            for (int c = 0; c < kBubbleCauses; ++c)
                byCause[static_cast<size_t>(c)] += ri.byCause[static_cast<size_t>(c)];
        }
    bar_->setShares(busy, byCause);
}

void SummaryPanel::setLevers(const whatif::Levers& levers)
{
    if (levers.bubbles.empty() && levers.levers.empty()) {
        levers_->clear();
        levers_->hide();
        return;
    }
    QString text = tr("What would help most (what-if, %1):").arg(QString::fromStdString(whatif::leversBasisText(levers)));
    if (!levers.bubbles.empty())
        text += QStringLiteral("\n\u2022 ") + QString::fromStdString(levers.bubbles);
    for (const whatif::Lever& l : levers.levers)
        text += QStringLiteral("\n\u2022 ") + QString::fromStdString(whatif::leverText(l));
    if (levers.levers.empty())
        text += QStringLiteral("\n\u2022 ") + tr("no lever is predicted to gain more than 0.5%");
    levers_->setText(text);
    levers_->show();
}

QString SummaryPanel::leversText() const { return levers_->isVisible() || !levers_->text().isEmpty() ? levers_->text() : QString(); }

QString SummaryPanel::verdictText() const { return verdict_->text(); }

QString SummaryPanel::factsText() const { return facts_->text(); }

} // namespace pipescope::gui
