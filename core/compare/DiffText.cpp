// The text form of a comparison: `pipescope diff` without --json.
#include "compare/Diff.h"

#include "util/Format.h"

#include <sstream>

namespace pipescope::compare {

namespace {

const std::string kNone = "—";
const std::string kUnknown = "unknown"; // a partition the trace does not give (Difference values too)

std::string dur(const std::optional<TimeNs>& v) { return v ? formatDuration(*v) : kNone; }
std::string bytes(const std::optional<int64_t>& v) { return v ? formatBytes(*v) : kNone; }
std::string count(const std::optional<int64_t>& v) { return v ? formatCount(*v) : kNone; }

// "+1.234 ms (+5.0%)", or "—" when a side is missing.
std::string change(const Both<TimeNs>& v)
{
    if (!v.a || !v.b)
        return kNone;
    std::string s = formatShift(*v.b - *v.a);
    if (*v.a > 0)
        s += " (" + formatSignedPercent(static_cast<double>(*v.b - *v.a) / static_cast<double>(*v.a)) + ")";
    return s;
}

std::string shortName(const std::string& name)
{
    std::string p = printable(name, 70);
    return p;
}

} // namespace

std::string diffText(const DiffResult& d)
{
    std::ostringstream os;
    os << "A: " << printable(d.aName, 300);
    if (d.iteration.a)
        os << " (iteration " << *d.iteration.a << ")";
    os << "\nB: " << printable(d.bName, 300);
    if (d.iteration.b)
        os << " (iteration " << *d.iteration.b << ")";
    os << "\n\n";

    // The prediction check first: it answers "did the change do what was predicted?".
    if (d.prediction) {
        const PredictionCheck& p = *d.prediction;
        os << "Prediction check: predicted " << formatDuration(p.predictedNs) << " from run A, measured "
           << formatDuration(p.measuredNs) << " (" << formatSignedPercent(p.error) << ")\n";
        std::string what;
        for (const Difference& c : p.changes)
            what += (what.empty() ? "" : ", ") + c.field + " " + c.a + " -> " + c.b;
        if (what.empty()) // a saved scenario that asked for A's own configuration
            what = "no change from A's configuration as its trace records it";
        if (p.saved)
            os << "  the prediction saved on A" << (p.savedLabel.empty() ? "" : " (\"" + printable(p.savedLabel, 80) + "\")")
               << ": " << what << "\n";
        else
            os << "  A's cost model replayed B's configuration: " << what << "\n";
        if (p.batch == "microbatch")
            os << "  B's microbatches cost what A's did: replayed at A's microbatch size (a larger global batch)\n";
        else if (p.batch == "global")
            os << "  B's microbatches are smaller than A's: replayed with A's global batch split "
               << p.scenario.microbatches << " ways\n";
        if (p.calibrationError)
            os << "  A's replay of its own run was " << formatSignedPercent(*p.calibrationError) << " off its measurement\n";
        for (const std::string& n : p.notModelled)
            os << "  " << (p.saved ? "differs: " : "not modelled: ") << n << "\n";
    } else {
        os << "Prediction check: none: " << d.predictionWhyNot << "\n";
    }
    os << "\n";

    TextTable cfg({"configuration", "A", "B"});
    auto row = [&](const std::string& name, const std::string& a, const std::string& b) {
        cfg.add({name + (a != b && a != kNone && b != kNone && a != kUnknown && b != kUnknown ? " *" : ""), a, b});
    };
    row("ranks", std::to_string(d.a.ranks), std::to_string(d.b.ranks));
    if (d.a.pipeline || d.b.pipeline) {
        auto pp = [](const RunConfig& c) {
            return c.pipeline ? std::to_string(c.pp) + " / " + std::to_string(c.dp) + " / " + std::to_string(c.v) : kNone;
        };
        row("pp / dp / v", pp(d.a), pp(d.b));
        row("microbatches", d.a.pipeline ? std::to_string(d.a.microbatches) : kNone,
            d.b.pipeline ? std::to_string(d.b.microbatches) : kNone);
        row("schedule", d.a.pipeline ? scheduleName(d.a.schedule) : kNone, d.b.pipeline ? scheduleName(d.b.schedule) : kNone);
        auto layers = [](const RunConfig& c) {
            if (c.layersPerStage.empty())
                return c.pipeline ? kUnknown : kNone;
            std::string s;
            for (size_t i = 0; i < c.layersPerStage.size(); ++i)
                s += (i ? "," : "") + std::to_string(c.layersPerStage[i]);
            return s;
        };
        row("layers per stage", layers(d.a), layers(d.b));
    }
    // A partition a trace does not give is unknown, not the other run's: then
    // the configurations are not said to be the same.
    bool shown = false; // a difference both traces show
    for (const Difference& x : d.differences)
        shown = shown || (x.a != kUnknown && x.b != kUnknown);
    os << cfg.render("");
    if (d.differences.empty())
        os << "  (same configuration)\n";
    else if (shown)
        os << "  (* differs)\n";
    const bool aUnknown = d.a.pipeline && d.a.layersPerStage.empty(), bUnknown = d.b.pipeline && d.b.layersPerStage.empty();
    if (aUnknown || bUnknown)
        os << "  (layers per stage unknown: "
           << (aUnknown && bUnknown ? "neither trace has" : bUnknown ? "B's trace has no" : "A's trace has no")
           << " layer ranges, so a partition that moved does not show here)\n";
    os << "\n";

    TextTable top({"", ">A", ">B", ">change"});
    top.add({"iteration", dur(d.iterationNs.a), dur(d.iterationNs.b), change(d.iterationNs)});
    top.add({"idle share", d.bubbleShare.a ? formatPercent(*d.bubbleShare.a) : kNone,
             d.bubbleShare.b ? formatPercent(*d.bubbleShare.b) : kNone, ""});
    for (int c = 0; c < kBubbleCauses; ++c) {
        const Both<TimeNs>& v = d.idleByCause[size_t(c)];
        if (v.a.value_or(0) == 0 && v.b.value_or(0) == 0)
            continue;
        top.add({"  idle: " + std::string(toString(static_cast<BubbleCause>(c))), dur(v.a), dur(v.b),
                 v.a && v.b ? formatShift(*v.b - *v.a) : kNone});
    }
    os << top.render("") << "  (idle: mean per pipeline rank)\n\n";

    if (!d.stages.empty()) {
        os << "Stages, per microbatch (all chunks; replicas averaged)\n";
        TextTable st({">stage", ">F A", ">F B", ">B A", ">B B", ">F+B A", ">F+B B", ">F+B change", ">busy A", ">busy B",
                      ">peak mem A", ">peak mem B"});
        for (const StageDiff& s : d.stages)
            st.add({std::to_string(s.stage), dur(s.forwardNs.a), dur(s.forwardNs.b), dur(s.backwardNs.a),
                    dur(s.backwardNs.b), dur(s.fbNs.a), dur(s.fbNs.b), change(s.fbNs), dur(s.busyNs.a), dur(s.busyNs.b),
                    bytes(s.peakBytes.a), bytes(s.peakBytes.b)});
        os << st.render() << "\n";
    }

    if (d.criticalPathNs.a || d.criticalPathNs.b) {
        os << "Critical path\n";
        TextTable cp({"kind", ">A", ">B", ">change"});
        cp.add({"total", dur(d.criticalPathNs.a), dur(d.criticalPathNs.b), change(d.criticalPathNs)});
        for (const auto& [kind, v] : d.criticalPathByKind)
            cp.add({"  " + kind, dur(v.a), dur(v.b), v.a && v.b ? formatShift(*v.b - *v.a) : kNone});
        os << cp.render() << "\n";
    }

    os << "Kernels that changed most, per stage (per replica; " << formatCount(d.kernelNames) << " names compared, "
       << formatCount(d.kernelsAdded) << " added, " << formatCount(d.kernelsRemoved) << " removed)\n";
    if (d.kernels.empty()) {
        os << "  none changed\n";
    } else {
        TextTable k({">stage", "kernel", "class", ">count A", ">count B", ">total A", ">total B", ">change"});
        for (const KernelDiff& x : d.kernels)
            k.add({x.stage < 0 ? std::string("-") : std::to_string(x.stage), shortName(x.name),
                   std::string(toString(x.workClass)), count(x.count.a), count(x.count.b), dur(x.totalNs.a),
                   dur(x.totalNs.b), formatShift(x.totalNs.b.value_or(0) - x.totalNs.a.value_or(0))});
        os << k.render();
    }
    return os.str();
}

} // namespace pipescope::compare
