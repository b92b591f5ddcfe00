#include "report/CompareSection.h"

#include "report/Html.h"
#include "util/Format.h"

namespace pipescope::report {

namespace {

const char* const kNone = "—";

std::string esc(std::string_view s) { return htmlEscape(s); }

std::string cellDur(const std::optional<TimeNs>& v)
{
    if (!v)
        return std::string("<td class=\"num dim\">") + kNone + "</td>";
    return "<td class=\"num\" title=\"" + std::to_string(*v) + " ns\">" + esc(formatDuration(*v)) + "</td>";
}

// A change cell, coloured: faster (less time) green, slower red.
std::string cellChange(const compare::Both<TimeNs>& v, bool percent = true)
{
    if (!v.a || !v.b)
        return std::string("<td class=\"num dim\">") + kNone + "</td>";
    const TimeNs d = *v.b - *v.a;
    std::string text = formatShift(d);
    if (percent && *v.a > 0)
        text += " (" + formatSignedPercent(static_cast<double>(d) / static_cast<double>(*v.a)) + ")";
    const char* cls = d < 0 ? "num faster" : d > 0 ? "num slower" : "num";
    return std::string("<td class=\"") + cls + "\" title=\"" + std::to_string(d) + " ns\">" + esc(text) + "</td>";
}

std::string cellText(const std::string& text, bool num = false)
{
    return std::string(num ? "<td class=\"num\">" : "<td>") + esc(text) + "</td>";
}

std::string layersText(const compare::RunConfig& c)
{
    if (c.layersPerStage.empty()) // no layer ranges in the trace: unknown, not the other run's
        return c.pipeline ? "unknown" : kNone;
    std::string s;
    for (size_t i = 0; i < c.layersPerStage.size(); ++i)
        s += (i ? "," : "") + std::to_string(c.layersPerStage[i]);
    return s;
}

} // namespace

void compareSection(std::string& out, const compare::DiffResult& d)
{
    out += "<section id=\"comparison\"><h2>Compared with " + esc(d.aName) + "</h2>\n";
    out += "<p class=\"note\">Run A is <code>" + esc(d.aName) + "</code>";
    if (d.iteration.a)
        out += " (iteration " + std::to_string(*d.iteration.a) + ")";
    out += ", run B this job";
    if (d.iteration.b)
        out += " (iteration " + std::to_string(*d.iteration.b) + ")";
    out += ". Green: less time in B; red: more. Definitions: docs/diff.md.</p>\n";

    if (d.prediction) {
        const compare::PredictionCheck& p = *d.prediction;
        out += "<div class=\"banner verdict\" id=\"prediction-check\"><strong>Predicted " + esc(formatDuration(p.predictedNs)) +
               " from run A, measured " + esc(formatDuration(p.measuredNs)) + " (" + esc(formatSignedPercent(p.error)) +
               ")</strong><ul class=\"note\">";
        std::string what;
        for (const compare::Difference& c : p.changes)
            what += (what.empty() ? "" : ", ") + c.field + " " + c.a + " → " + c.b;
        if (what.empty()) // a saved scenario that asked for A's own configuration
            what = "no change from A's configuration as its trace records it";
        if (p.saved)
            out += "<li>The prediction saved on A" + (p.savedLabel.empty() ? std::string() : " (“" + esc(p.savedLabel) + "”)") +
                   ": " + esc(what) + "</li>";
        else
            out += "<li>A's cost model replayed B's configuration: " + esc(what) + "</li>";
        if (p.batch == "microbatch")
            out += "<li>B's microbatches cost what A's did: replayed at A's microbatch size (a larger global batch)</li>";
        else if (p.batch == "global")
            out += "<li>B's microbatches are smaller than A's: replayed with A's global batch</li>";
        if (p.calibrationError)
            out += "<li>A's replay of its own run was " + esc(formatSignedPercent(*p.calibrationError)) +
                   " off its measurement</li>";
        for (const std::string& n : p.notModelled)
            out += std::string(p.saved ? "<li>Differs: " : "<li>Not modelled: ") + esc(n) + "</li>";
        out += "</ul></div>\n";
    } else {
        out += "<p class=\"dim\" id=\"prediction-check\">No prediction check: " + esc(d.predictionWhyNot) + ".</p>\n";
    }

    out += "<div class=\"cols\"><div>\n<table id=\"compare-config\"><thead><tr><th>configuration</th><th>A</th><th>B</th>"
           "</tr></thead><tbody>";
    auto row = [&](const std::string& name, const std::string& a, const std::string& b) {
        const bool differs = a != b && a != kNone && b != kNone && a != "unknown" && b != "unknown";
        out += std::string(differs ? "<tr class=\"differs\">" : "<tr>") + cellText(name) + cellText(a, true) +
               cellText(b, true) + "</tr>";
    };
    row("ranks", std::to_string(d.a.ranks), std::to_string(d.b.ranks));
    auto pp = [](const compare::RunConfig& c) {
        return c.pipeline ? std::to_string(c.pp) + " / " + std::to_string(c.dp) + " / " + std::to_string(c.v) : std::string(kNone);
    };
    row("pp / dp / v", pp(d.a), pp(d.b));
    row("microbatches", d.a.pipeline ? std::to_string(d.a.microbatches) : kNone,
        d.b.pipeline ? std::to_string(d.b.microbatches) : kNone);
    row("schedule", d.a.pipeline ? scheduleName(d.a.schedule) : kNone, d.b.pipeline ? scheduleName(d.b.schedule) : kNone);
    row("layers per stage", layersText(d.a), layersText(d.b));
    out += "</tbody></table>\n</div><div>\n";

    out += "<table id=\"compare-iteration\"><thead><tr><th></th><th>A</th><th>B</th><th>change</th></tr></thead><tbody>";
    out += "<tr>" + cellText("iteration") + cellDur(d.iterationNs.a) + cellDur(d.iterationNs.b) + cellChange(d.iterationNs) + "</tr>";
    out += "<tr>" + cellText("idle share") + cellText(d.bubbleShare.a ? formatPercent(*d.bubbleShare.a) : kNone, true) +
           cellText(d.bubbleShare.b ? formatPercent(*d.bubbleShare.b) : kNone, true) + "<td></td></tr>";
    for (int c = 0; c < kBubbleCauses; ++c) {
        const compare::Both<TimeNs>& v = d.idleByCause[size_t(c)];
        if (v.a.value_or(0) == 0 && v.b.value_or(0) == 0)
            continue;
        out += "<tr data-cause=\"" + esc(toString(static_cast<BubbleCause>(c))) + "\">" +
               cellText("idle: " + std::string(toString(static_cast<BubbleCause>(c)))) + cellDur(v.a) + cellDur(v.b) +
               cellChange(v, false) + "</tr>";
    }
    out += "</tbody></table>\n<p class=\"note\">Idle: mean per pipeline rank.</p>\n</div></div>\n";

    if (!d.stages.empty()) {
        out += "<h3>Stages, per microbatch</h3>\n<table id=\"compare-stages\"><thead><tr><th>stage</th><th>F A</th>"
               "<th>F B</th><th>B A</th><th>B B</th><th>F+B A</th><th>F+B B</th><th>F+B change</th><th>busy A</th>"
               "<th>busy B</th><th>busy change</th></tr></thead><tbody>";
        for (const compare::StageDiff& s : d.stages)
            out += "<tr>" + cellText(std::to_string(s.stage), true) + cellDur(s.forwardNs.a) + cellDur(s.forwardNs.b) +
                   cellDur(s.backwardNs.a) + cellDur(s.backwardNs.b) + cellDur(s.fbNs.a) + cellDur(s.fbNs.b) +
                   cellChange(s.fbNs) + cellDur(s.busyNs.a) + cellDur(s.busyNs.b) + cellChange(s.busyNs) + "</tr>";
        out += "</tbody></table>\n<p class=\"note\">Each step's kernel time, all chunks of the stage, replicas averaged; "
               "backward is B, or I + W where split.</p>\n";
    }

    if (d.criticalPathNs.a || d.criticalPathNs.b) {
        out += "<h3>Critical path</h3>\n<table id=\"compare-critical\"><thead><tr><th>kind</th><th>A</th><th>B</th>"
               "<th>change</th></tr></thead><tbody>";
        out += "<tr>" + cellText("total") + cellDur(d.criticalPathNs.a) + cellDur(d.criticalPathNs.b) +
               cellChange(d.criticalPathNs) + "</tr>";
        for (const auto& [kind, v] : d.criticalPathByKind)
            out += "<tr>" + cellText(kind) + cellDur(v.a) + cellDur(v.b) + cellChange(v, false) + "</tr>";
        out += "</tbody></table>\n";
    }

    out += "<h3>Kernels that changed most, per stage</h3>\n<p class=\"note\">Per replica, in the compared iteration: " +
           esc(formatCount(d.kernelNames)) + " (stage, kernel) pairs compared, " + esc(formatCount(d.kernelsAdded)) +
           " added, " + esc(formatCount(d.kernelsRemoved)) + " removed.</p>\n";
    if (d.kernels.empty()) {
        out += "<p class=\"dim\">None changed.</p>\n";
    } else {
        out += "<table id=\"compare-kernels\"><thead><tr><th>stage</th><th>kernel</th><th>class</th><th>change</th>"
               "<th>count A</th><th>count B</th><th>total A</th><th>total B</th><th>difference</th></tr></thead><tbody>";
        for (const compare::KernelDiff& k : d.kernels) {
            const std::string name = k.name.size() > 72 ? k.name.substr(0, 69) + "..." : k.name;
            out += "<tr>" + cellText(k.stage >= 0 ? std::to_string(k.stage) : "-", true) + "<td class=\"kernel\" title=\"" +
                   esc(k.name) + "\">" + esc(name) + "</td>" + cellText(std::string(toString(k.workClass))) +
                   cellText(std::string(compare::toString(k.change))) +
                   cellText(k.count.a ? formatCount(*k.count.a) : kNone, true) +
                   cellText(k.count.b ? formatCount(*k.count.b) : kNone, true) + cellDur(k.totalNs.a) + cellDur(k.totalNs.b) +
                   cellChange({k.totalNs.a.value_or(0), k.totalNs.b.value_or(0)}, false) + "</tr>";
        }
        out += "</tbody></table>\n";
    }
    out += "</section>\n";
}

} // namespace pipescope::report
