// pipescope merge DIR [-o job.pipescope]: the per-rank capture files of
// `pipescope capture` into one store.
#include "Command.h"
#include "import/capture/ImportCapture.h"
#include "util/Format.h"

#include <filesystem>
#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

struct MergeArgs {
    std::string dir;
    std::string output;
    bool quiet = false;
    std::string align = "host-clock";
};

int runMerge(const MergeArgs& a)
{
    MergeOptions o;
    o.output = a.output;
    o.progress = !a.quiet;
    o.alignCollectives = a.align == "collectives";
    auto report = mergeCaptureDir(a.dir, o);
    for (const auto& w : report.warnings)
        std::cerr << "pipescope merge: warning: " << printable(w, 4096) << "\n";
    if (a.quiet)
        return kExitOk;
    std::cout << "Merged " << report.sources.size() << (report.sources.size() == 1 ? " rank" : " ranks") << " from "
              << report.files.size() << (report.files.size() == 1 ? " file" : " files") << " into " << report.output;
    if (!report.skipped.empty())
        std::cout << " (" << report.skipped.size() << (report.skipped.size() == 1 ? " file" : " files")
                  << " skipped, see the warnings)";
    std::cout << "\n";
    TextTable t({">rank", "file", ">records"});
    for (const auto& src : report.sources) {
        int r = src.ranks.empty() ? -1 : src.ranks.front();
        t.add({std::to_string(r), std::filesystem::path(report.rankFiles.at(r)).filename().string(),
               formatCount(src.records)});
    }
    std::cout << t.render();
    if (report.alignedByCollectives) {
        std::cout << "Clock alignment: matched collectives and transfers\n";
        // Capture times are on the epoch clock already: the offsets are shifts only.
        TextTable offsets({">rank", ">shift by collectives"});
        for (auto [r, off] : report.offsets)
            offsets.add({std::to_string(r), formatShift(off)});
        std::cout << offsets.render();
    } else {
        std::cout << "Clock alignment: each host's system clock (CLOCK_REALTIME)\n";
    }
    std::cout << "Next: pipescope info " << report.output << "   or   pipescope analyze " << report.output << "\n";
    return kExitOk;
}

RegisterCommand reg{{"merge", "Merge the per-rank files of pipescope capture into one store", 6,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<MergeArgs>();
                         app.add_option("dir", a->dir, "Capture directory (pipescope capture -o DIR)")->required();
                         app.add_option("-o,--output", a->output, "Store file to write (default: DIR/job.pipescope)");
                         app.add_flag("-q,--quiet", a->quiet, "No summary");
                         app.add_option("--align", a->align,
                                        "host-clock (each host's system clock; exact on one host) or collectives "
                                        "(then shift ranks so matched collectives and transfers end together)")
                             ->check(CLI::IsMember({"host-clock", "collectives"}))
                             ->capture_default_str();
                         app.footer("Example:\n  pipescope merge run1 -o job.pipescope");
                         return [a] { return runMerge(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
