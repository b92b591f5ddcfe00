// Renders packaging/icons/pipescope.svg's shapes to the PNG sizes the hicolor
// theme wants (qt6-base has no SVG renderer, so the shapes are repeated here;
// keep the two in step). Not part of the build; regenerate the committed PNGs
// with:
//   g++ -std=c++17 -fPIC render-icons.cpp $(pkg-config --cflags --libs Qt6Gui) -o /tmp/render-icons
//   QT_QPA_PLATFORM=offscreen /tmp/render-icons packaging/icons
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QString>

#include <cstdio>

int main(int argc, char** argv)
{
    QGuiApplication app(argc, argv);
    if (argc != 2) {
        std::fprintf(stderr, "usage: render-icons OUTPUT_FOLDER\n");
        return 2;
    }
    struct Box {
        double x, y, w, h;
        QColor color;
    };
    const QColor blue("#4fa3e0"), orange("#f0a04b");
    const Box boxes[] = {
        {40, 52, 70, 28, blue},     {62, 96, 70, 28, blue},    {84, 140, 70, 28, blue},  {106, 184, 70, 28, blue},
        {118, 52, 98, 28, orange},  {140, 96, 76, 28, orange}, {162, 140, 54, 28, orange}, {184, 184, 32, 28, orange},
    };
    for (int size : {16, 22, 24, 32, 48, 64, 128, 256}) {
        QImage img(size, size, QImage::Format_ARGB32_Premultiplied);
        img.fill(Qt::transparent);
        QPainter p(&img);
        p.setRenderHint(QPainter::Antialiasing);
        p.scale(size / 256.0, size / 256.0);
        p.setPen(Qt::NoPen);
        p.setBrush(QColor("#1f2a44"));
        p.drawRoundedRect(QRectF(16, 16, 224, 224), 40, 40);
        for (const Box& b : boxes) {
            p.setBrush(b.color);
            p.drawRoundedRect(QRectF(b.x, b.y, b.w, b.h), 6, 6);
        }
        p.end();
        QString path = QString("%1/pipescope-%2.png").arg(QString::fromLocal8Bit(argv[1])).arg(size);
        if (!img.save(path)) {
            std::fprintf(stderr, "%s: cannot write\n", qPrintable(path));
            return 1;
        }
    }
    return 0;
}
