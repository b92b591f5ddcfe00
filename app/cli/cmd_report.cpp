// pipescope report FILE [-o report.html] [--iteration K] [whatif's scenario and
// calibration options]: one self-contained HTML page with the analysis, the
// timeline and a what-if comparison.
#include "Command.h"
#include "ScenarioOptions.h"
#include "report/Report.h"
#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"

#include <memory>
#include <optional>

namespace pipescope::cli {
namespace {

// The what-if section takes whatif's options; -o and --json are the report's own.
struct ReportArgs : ScenarioArgs {
    std::string file;
    std::optional<int> iteration;
    bool noWhatIf = false;
    CalibrationArgs calibration;

    ReportArgs() { output = "report.html"; }
};

int runReport(ReportArgs& a)
{
    if (a.search)
        throw Error("the report shows one what-if question; rank configurations with pipescope whatif FILE --search");
    a.calibration.load();
    // Fail on an unwritable output, or one that is the input, before the (possibly long) analysis.
    AtomicOutput::protectInput(a.file);
    { AtomicOutput probe(a.output, AtomicOutput::Target::FileOrStream); }

    report::ReportOptions ro;
    ro.iteration = a.iteration;
    ro.storePath = a.file;
    ro.whatIf = !a.noWhatIf;
    a.applyTo(ro.whatIfChanges);
    ro.calibrate = a.calibration.options(a.gpuMemoryBytes());
    std::string html;
    {
        Store store(a.file);
        const Trace trace = store.load();
        try {
            html = report::renderReport(trace, ro);
        } catch (const Error& e) {
            throw Error(a.file + ": " + e.what());
        }
    }
    AtomicOutput::writeFile(a.output, html);
    return kExitOk;
}

RegisterCommand reg{{"report", "Write a self-contained HTML report: timeline, idle by cause, imbalance, what-if", 70,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<ReportArgs>();
                         app.add_option("FILE", a->file, "pipescope store (from pipescope import or capture)")->required();
                         app.add_option("-o,--output", a->output, "HTML file to write (default report.html)");
                         app.add_option("--iteration", a->iteration, "iteration to show (index; default: a representative one)")
                             ->check(CLI::NonNegativeNumber);
                         app.add_flag("--no-whatif", a->noWhatIf, "leave the what-if comparison out");
                         addScenarioOptions(app, *a, {"Pipeline degree to predict (re-splits the layers)",
                                                      "Microbatches per iteration (same global batch)",
                                                      "First layer of each stage after the first, e.g. 4,9,13"});
                         addCalibrationOptions(app, a->calibration);
                         return [a] { return runReport(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
