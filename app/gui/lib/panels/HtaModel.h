#pragma once
// Holistic Trace Analysis's views (docs/analysis.md, section 5), one table each:
//   Temporal:   rank | kernel time | idle | idle % | compute | compute % | non-compute | non-compute % | comm/comp overlap
//   StreamIdle: rank | stream | host wait | kernel wait | other
// Percentages are of the rank's kernel time; overlap is "-" without communication.
#include "panels/AnalysisTableModel.h"

namespace pipescope::gui {

class HtaModel : public AnalysisTableModel {
    Q_OBJECT
public:
    enum class View { Temporal, StreamIdle };

    explicit HtaModel(QObject* parent = nullptr);
    explicit HtaModel(View view, QObject* parent = nullptr);

    View view() const { return view_; }
    void setResult(std::shared_ptr<const AnalysisResult> result, std::shared_ptr<const Trace> trace = {}) override;

private:
    View view_ = View::Temporal;
};

} // namespace pipescope::gui
