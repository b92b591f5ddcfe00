#pragma once
// The colour key shared by the timeline and the pipeline views: step kinds,
// bubble causes, work classes and the critical-path mark, in the palette of
// core/timeline/Palette.h. It wraps onto more lines rather than cutting its
// last entries off.
#include <QWidget>

namespace pipescope::gui {

// The pipeline views draw bubbles translucent so the steps stand out.
inline constexpr int kPipelineBubbleAlpha = 150;

class PaletteLegend : public QWidget {
public:
    // TranslucentCauses: cause swatches as the pipeline views paint them.
    enum Part { Steps = 1, Causes = 2, Work = 4, CriticalPath = 8, TranslucentCauses = 16 };
    explicit PaletteLegend(int parts, QWidget* parent = nullptr);

protected:
    void resizeEvent(QResizeEvent* event) override;
    void paintEvent(QPaintEvent* event) override;

private:
    // Places the entries (painting them when p is set); returns the height used.
    int layOut(QPainter* p) const;

    int parts_;
};

} // namespace pipescope::gui
