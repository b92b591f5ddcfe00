#pragma once
// What went wrong on the way in: the import's diagnostics (Trace::diagnostics,
// records the importers counted and skipped or repaired) followed by the
// analysis warnings, one row each:
//   origin | severity | kind | count | source | message
// origin is "import" or "analysis"; severity sorts as info < warning < error;
// source is the input file a diagnostic came from, when known; message is the
// diagnostic's example record or the warning's text (trace text: shown, never interpreted).
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class DiagnosticsModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum Column { OriginColumn = 0, SeverityColumn, KindColumn, CountColumn, SourceColumn, MessageColumn };

    explicit DiagnosticsModel(QObject* parent = nullptr);

    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;
};

} // namespace pipescope::gui
