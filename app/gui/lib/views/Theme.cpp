#include "views/Theme.h"

#include <QApplication>
#include <QFont>
#include <QSettings>
#include <QStyle>
#include <QStyleFactory>

#include <optional>

namespace pipescope::gui {

namespace {

// What the application started with, for "System".
struct Startup {
    QPalette palette;
    QString style;
    QFont font;
};

std::optional<Startup>& startup()
{
    static std::optional<Startup> s;
    return s;
}

QPalette darkPalette()
{
    // GitHub's dark greys, which the light theme's text colour (#1d2329) mirrors.
    const QColor window(0x22, 0x27, 0x2e), base(0x16, 0x1b, 0x22), alt(0x1c, 0x21, 0x28), text(0xe6, 0xed, 0xf3);
    const QColor disabled(0x7d, 0x85, 0x90), highlight(0x2f, 0x81, 0xf7);
    QPalette p;
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, alt);
    p.setColor(QPalette::ToolTipBase, QColor(0x30, 0x36, 0x3d));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, disabled);
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window);
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(0xff, 0x7b, 0x72));
    p.setColor(QPalette::Light, QColor(0x3d, 0x44, 0x4d));
    p.setColor(QPalette::Midlight, QColor(0x30, 0x36, 0x3d));
    p.setColor(QPalette::Mid, QColor(0x21, 0x26, 0x2d));
    p.setColor(QPalette::Dark, QColor(0x0d, 0x11, 0x17));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Highlight, highlight);
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x58, 0xa6, 0xff));
    p.setColor(QPalette::LinkVisited, QColor(0xbc, 0x8c, 0xff));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, disabled);
    return p;
}

} // namespace

const char* toString(ThemeChoice t)
{
    switch (t) {
    case ThemeChoice::Light: return "light";
    case ThemeChoice::Dark: return "dark";
    case ThemeChoice::System: break;
    }
    return "system";
}

ThemeChoice themeFromString(const QString& s)
{
    if (s == QLatin1String("light"))
        return ThemeChoice::Light;
    if (s == QLatin1String("dark"))
        return ThemeChoice::Dark;
    return ThemeChoice::System;
}

Appearance savedAppearance()
{
    QSettings s;
    Appearance a;
    a.theme = themeFromString(s.value(QStringLiteral("appearance/theme")).toString());
    a.fontPoint = std::clamp(s.value(QStringLiteral("appearance/fontPoint"), 0).toInt(), 0, 32);
    const QString d = s.value(QStringLiteral("appearance/density")).toString();
    a.density = d == QLatin1String("compact")       ? RowDensity::Compact
                : d == QLatin1String("comfortable") ? RowDensity::Comfortable
                                                    : RowDensity::Normal;
    return a;
}

void saveAppearance(const Appearance& a)
{
    QSettings s;
    s.setValue(QStringLiteral("appearance/theme"), QString::fromLatin1(toString(a.theme)));
    s.setValue(QStringLiteral("appearance/fontPoint"), a.fontPoint);
    s.setValue(QStringLiteral("appearance/density"), a.density == RowDensity::Compact       ? QStringLiteral("compact")
                                                     : a.density == RowDensity::Comfortable ? QStringLiteral("comfortable")
                                                                                            : QStringLiteral("normal"));
}

void applyAppearance(const Appearance& a)
{
    if (!startup())
        startup() = Startup{QApplication::palette(), QApplication::style()->name(), QApplication::font()};
    const Startup& was = *startup();
    switch (a.theme) {
    case ThemeChoice::System:
        QApplication::setStyle(QStyleFactory::create(was.style));
        QApplication::setPalette(was.palette);
        break;
    case ThemeChoice::Light:
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
        QApplication::setPalette(QApplication::style()->standardPalette());
        break;
    case ThemeChoice::Dark:
        QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
        QApplication::setPalette(darkPalette());
        break;
    }
    QFont f = was.font;
    if (a.fontPoint > 0)
        f.setPointSize(a.fontPoint);
    QApplication::setFont(f);
}

bool isDark(const QPalette& palette) { return palette.color(QPalette::Window).lightness() < 128; }

int rowHeight(RowDensity density)
{
    switch (density) {
    case RowDensity::Compact: return 15;
    case RowDensity::Comfortable: return 22;
    case RowDensity::Normal: break;
    }
    return 18;
}

ViewColors viewColors(const QPalette& palette)
{
    ViewColors c;
    c.text = palette.color(QPalette::Text);
    if (isDark(palette)) {
        c.header = QColor(0x1c, 0x21, 0x28);
        c.separator = QColor(0x6e, 0x76, 0x81);
        c.hoverOutline = QColor(0xe6, 0xed, 0xf3);
        c.labelBox = QColor(0x16, 0x1b, 0x22, 230);
    } else {
        c.header = QColor(0xf6, 0xf8, 0xfa);
        c.separator = QColor(0x8c, 0x95, 0x9f);
        c.hoverOutline = QColor(0x1d, 0x23, 0x29);
        c.labelBox = QColor(255, 255, 255, 230);
    }
    return c;
}

} // namespace pipescope::gui
