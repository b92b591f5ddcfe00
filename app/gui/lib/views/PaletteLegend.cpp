#include "views/PaletteLegend.h"
#include "views/QtPalette.h"

#include "analysis/Analysis.h"
#include "timeline/Palette.h"

#include <QPainter>
#include <QResizeEvent>

namespace pipescope::gui {

namespace {
constexpr int kLine = 20;
} // namespace

PaletteLegend::PaletteLegend(int parts, QWidget* parent) : QWidget(parent), parts_(parts) { setFixedHeight(kLine); }

void PaletteLegend::resizeEvent(QResizeEvent*)
{
    const int h = layOut(nullptr);
    if (h != height())
        setFixedHeight(h);
}

void PaletteLegend::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    layOut(&p);
}

int PaletteLegend::layOut(QPainter* p) const
{
    const QFontMetrics fm(font());
    int x = 4, y = 0;
    auto place = [&](int w) {
        if (x > 4 && x + w > width()) {
            x = 4;
            y += kLine;
        }
    };
    auto swatch = [&](const QColor& c, const QString& text, bool line = false) {
        place(13 + fm.horizontalAdvance(text) + 10);
        if (p) {
            if (line)
                p->fillRect(QRect(x, y + 12, 10, 3), c);
            else
                p->fillRect(QRect(x, y + 5, 10, 10), c);
            p->setPen(palette().color(QPalette::WindowText));
            p->drawText(QPoint(x + 13, y + 14), text);
        }
        x += 13 + fm.horizontalAdvance(text) + 10;
    };
    auto title = [&](const QString& t) {
        place(fm.horizontalAdvance(t) + 6 + 40);
        if (p) {
            p->setPen(palette().color(QPalette::PlaceholderText));
            p->drawText(QPoint(x, y + 14), t);
        }
        x += fm.horizontalAdvance(t) + 6;
    };
    if (parts_ & Steps) {
        title(QStringLiteral("steps"));
        for (int k = 0; k < 4; ++k)
            swatch(toQColor(timeline::stepColor(StepKind(k))), QString(QChar::fromLatin1(toChar(StepKind(k)))));
    }
    auto causeSwatch = [&](BubbleCause c) {
        QColor q = toQColor(timeline::causeColor(c));
        if (parts_ & TranslucentCauses)
            q.setAlpha(kPipelineBubbleAlpha);
        return q;
    };
    if (parts_ & Causes) {
        title(QStringLiteral("bubbles"));
        for (int c = 0; c < kBubbleCauses; ++c)
            swatch(causeSwatch(BubbleCause(c)),
                   QString::fromUtf8(toString(BubbleCause(c)).data()).replace(QLatin1Char('_'), QLatin1Char(' ')));
    }
    if (parts_ & Work) {
        title(QStringLiteral("work"));
        for (int c = 0; c < 7; ++c)
            swatch(toQColor(timeline::classColor(WorkClass(c))), QString::fromUtf8(toString(WorkClass(c)).data()));
    }
    if (parts_ & CriticalPath)
        swatch(toQColor(timeline::rgbFromHex(timeline::kHighlightHex)), QStringLiteral("critical path"), true);
    return y + kLine;
}

} // namespace pipescope::gui
