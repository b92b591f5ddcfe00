#include "report/ReportAssets.h"

#include "timeline/Palette.h"

#include <string>
#include <string_view>

namespace pipescope::report {

namespace {

// The stylesheet after its :root block; @faster@ and @slower@ stand for the
// palette's comparison colours (reportCss() puts them in).
const char* const kCssBody = R"CSS(* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: var(--bg); }
header, main, footer, nav { max-width: 1600px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 18px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 28px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
code, .file { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; word-break: break-all; }
.file { color: var(--dim); margin-bottom: 10px; }
.dim { color: var(--dim); }
.warn { color: @slower@; font-weight: 600; }
td.faster { color: @faster@; }
td.slower { color: @slower@; }
tr.differs td:first-child { font-weight: 600; }
.note { color: var(--dim); max-width: 110ch; margin: 4px 0 10px; }
.banner { padding: 10px 14px; border-radius: 6px; margin: 10px 0; font-size: 15px; }
.banner.simulated { background: #fff4ce; border: 2px solid #bf8700; color: #6b4b00; font-size: 17px; }
.banner.nopipe { background: #ddf4ff; border: 1px solid #54aeff; }
.banner code { white-space: nowrap; }
.kpis { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.kpi { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.kpi .v { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.kpi .l { color: var(--dim); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.kpi .s { color: var(--dim); font-size: 12px; }
dl.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 4px 20px; margin: 8px 0; }
dl.facts.compact { grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); }
.fact { display: flex; flex-direction: column; padding: 3px 0; }
.fact dt { color: var(--dim); font-size: 12px; }
.fact dd { margin: 0; }
.fact .sub { color: var(--dim); font-size: 12px; }
ul.sources { margin: 0; padding-left: 16px; }
nav { position: sticky; top: 0; background: rgba(255,255,255,.95); border-bottom: 1px solid var(--line); z-index: 5;
      padding-top: 6px; padding-bottom: 6px; }
nav a { margin-right: 16px; color: var(--accent); text-decoration: none; }
nav a:hover { text-decoration: underline; }
details > summary { cursor: pointer; color: var(--accent); margin: 6px 0; }
table { border-collapse: collapse; margin: 6px 0; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; }
th { font-weight: 600; font-size: 12.5px; background: var(--panel); position: sticky; top: 0; }
td.num { text-align: right; }
tfoot td { font-weight: 600; }
tfoot tr.share td { font-weight: normal; color: var(--dim); }
tr.hot td { background: #ffebe9; }
.tag { background: #cf222e; color: #fff; border-radius: 8px; padding: 0 6px; font-size: 11px; font-weight: 600; }
.scroll { overflow-x: auto; }
.cols { display: flex; flex-wrap: wrap; gap: 32px; }
table.shares td.w, table.shares th.w { width: 220px; }
.hbar { display: inline-block; height: 10px; background: var(--accent); vertical-align: middle; min-width: 1px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12.5px; margin: 6px 0; }
.sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 4px; vertical-align: -2px; }
.k-F { background: var(--k-F); } .k-B { background: var(--k-B); } .k-I { background: var(--k-I); } .k-W { background: var(--k-W); }
.busy { background: var(--busy); }
.c-fill_drain { background: var(--c-fill_drain); } .c-wait_neighbor { background: var(--c-wait_neighbor); }
.c-p2p_transfer { background: var(--c-p2p_transfer); } .c-dp_sync { background: var(--c-dp_sync); }
.c-all_to_all { background: var(--c-all_to_all); } .c-host_bound { background: var(--c-host_bound); }
.c-step_overhead { background: var(--c-step_overhead); } .c-launch_gap { background: var(--c-launch_gap); }
.c-other { background: var(--c-other); }
.m-p2p { background: var(--m-p2p); } .m-collective { background: var(--m-collective); }
.bars { margin: 8px 0 12px; }
.barrow { display: flex; align-items: center; gap: 8px; margin: 2px 0; }
.barrow .bl { width: 90px; font-size: 12.5px; text-align: right; }
.bars.roles .barrow .bl { width: 150px; }
.barrow .bar { flex: 1; display: flex; height: 14px; background: var(--panel); border: 1px solid var(--line); max-width: 1100px; }
.barrow .bar i { display: block; height: 100%; }
.barrow .bv { width: 90px; font-size: 12.5px; color: var(--dim); font-variant-numeric: tabular-nums; }
.gantt { position: relative; border: 1px solid var(--line); border-radius: 6px; background: #fff; user-select: none; }
.gantt .toolbar { display: flex; gap: 12px; align-items: center; padding: 4px 8px; border-bottom: 1px solid var(--line);
                  font-size: 12px; color: var(--dim); background: var(--panel); border-radius: 6px 6px 0 0; }
.gantt .toolbar .range { margin-left: auto; font-variant-numeric: tabular-nums; }
.gantt button { font: inherit; padding: 1px 8px; cursor: pointer; }
.gantt canvas { display: block; width: 100%; cursor: grab; }
.gantt canvas.dragging { cursor: grabbing; }
.gantt .tip { position: absolute; pointer-events: none; background: rgba(29,35,41,.94); color: #fff; font-size: 12px;
              padding: 6px 8px; border-radius: 4px; white-space: pre; z-index: 10; max-width: 560px; overflow: hidden;
              font-variant-numeric: tabular-nums; }
ul.warnings li { margin: 3px 0; }
footer { color: var(--dim); font-size: 12px; padding-top: 24px; padding-bottom: 24px; }
@media print { nav { display: none; } .gantt .toolbar { display: none; } }
)CSS";

// The colours the report shares with the app, as CSS variables, from
// timeline/Palette.h: text and accent, step kinds, bubble causes, work classes.
std::string rootBlock()
{
    using namespace timeline;
    auto var = [](std::string_view name, std::string_view hex) { return "--" + std::string(name) + ": " + std::string(hex) + ";"; };
    std::string r = "\n:root {\n  " + var("fg", kTextHex) + " --dim: #6a737d; --bg: #fff; --panel: #f6f8fa; --line: #d8dee4; " +
                    var("accent", kSelectionHex) + "\n ";
    const char kinds[] = {'F', 'B', 'I', 'W'};
    for (size_t k = 0; k < kStepHex.size(); ++k)
        r += " " + var(std::string("k-") + kinds[k], kStepHex[k]);
    r += " " + var("busy", kClassHex[0]) + "\n ";
    for (int c = 0; c < kBubbleCauses; ++c) {
        r += " " + var("c-" + std::string(toString(BubbleCause(c))), kCauseHex[size_t(c)]);
        if (c == 3)
            r += "\n ";
    }
    r += "\n  " + var("m-p2p", kClassHex[1]) + " " + var("m-collective", kClassHex[2]) + "\n}\n";
    return r;
}

void replaceAll(std::string& s, std::string_view what, std::string_view with)
{
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size()))
        s.replace(at, what.size(), with);
}

} // namespace

const std::string& reportCss()
{
    static const std::string css = [] {
        std::string body = kCssBody;
        replaceAll(body, "@faster@", timeline::kFasterHex);
        replaceAll(body, "@slower@", timeline::kSlowerHex);
        return rootBlock() + body;
    }();
    return css;
}

} // namespace pipescope::report
