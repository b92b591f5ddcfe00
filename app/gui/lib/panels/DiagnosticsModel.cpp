#include "panels/DiagnosticsModel.h"

namespace pipescope::gui {

DiagnosticsModel::DiagnosticsModel(QObject* parent)
    : AnalysisTableModel(parent)
{
    setResult({}, {});
}

void DiagnosticsModel::setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace)
{
    std::vector<std::vector<Cell>> rows;
    auto severity = [](Severity s) {
        Cell c = text(QString::fromLatin1(toString(s)));
        c.sort = static_cast<int>(s);
        return c;
    };
    if (trace)
        for (const Diagnostic& d : trace->diagnostics) {
            QString source;
            if (d.sourceId)
                for (const SourceInfo& s : trace->sources)
                    if (s.id == *d.sourceId)
                        source = QString::fromStdString(s.path);
            rows.push_back({text(QStringLiteral("import")), severity(d.severity), text(QString::fromStdString(d.kind)), integer(d.count),
                            text(source), text(QString::fromStdString(d.example))});
        }
    if (result)
        for (const Warning& w : result->warnings)
            rows.push_back({text(QStringLiteral("analysis")), severity(Severity::Warning), text(QString::fromStdString(w.kind)), integer(1),
                            text(QString()), text(QString::fromStdString(w.message))});
    setTable({QStringLiteral("origin"), QStringLiteral("severity"), QStringLiteral("kind"), QStringLiteral("count"), QStringLiteral("source"),
              QStringLiteral("message")},
             std::move(rows));
}

} // namespace pipescope::gui
