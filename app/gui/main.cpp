// pipescope-gui: the desktop app. See MainWindow.h.
#include "Version.h"

#include <QApplication>
#include <QCommandLineParser>

int main(int argc, char** argv)
{
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("pipescope"));
    QApplication::setApplicationVersion(QString::fromUtf8(pipescope::kVersion));
    QCommandLineParser parser;
    parser.addVersionOption();
    parser.addHelpOption();
    parser.process(app);
    return 0;
}
