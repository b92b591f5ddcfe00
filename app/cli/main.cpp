// pipescope: headless command-line tool. See `pipescope --help`.
#include "Command.h"
#include "Version.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>

namespace pipescope::cli {
namespace {
// Core names the setting a refused value belongs to; the CLI names its flag.
std::string flagOf(const std::string& setting)
{
    static const std::map<std::string, std::string> flags{
        {"boundaries", "--boundaries"}, {"pp", "--pp"},           {"v", "--v"},
        {"microbatches", "--microbatches"}, {"schedule", "--schedule"}, {"weights", "--weights"},
        {"layers", "--layers"},        {"stage map", "--stage-map"}, {"iteration", "--iteration"}};
    auto it = flags.find(setting);
    return it == flags.end() ? setting : it->second;
}
} // namespace

std::vector<CommandSpec>& commands()
{
    static std::vector<CommandSpec> all;
    return all;
}
} // namespace pipescope::cli

int main(int argc, char** argv)
{
    using namespace pipescope;
    using namespace pipescope::cli;
    // Whatever a command read stays protected from its outputs until it exits.
    AtomicOutput::protectInputsForProcess();

    CLI::App app{"pipescope: find where a pipeline-parallel training job loses time.\n"
                 "Import or capture per-GPU timelines into one store, analyse bubbles and imbalance,\n"
                 "and ask what-if questions about partitions, schedules and microbatches.",
                 "pipescope"};
    app.set_version_flag("--version", std::string("pipescope ") + kVersion);
    app.require_subcommand(1);
    app.fallthrough(false);

    auto& specs = commands();
    std::sort(specs.begin(), specs.end(), [](const CommandSpec& a, const CommandSpec& b) {
        return a.order != b.order ? a.order < b.order : a.name < b.name;
    });
    std::map<CLI::App*, RunFn> runs;
    for (auto& spec : specs) {
        CLI::App* sub = app.add_subcommand(spec.name, spec.summary);
        runs[sub] = spec.setup(*sub);
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return kExitUsage;
    }

    for (auto& [sub, run] : runs) {
        if (!sub->parsed())
            continue;
        try {
            return run();
        } catch (const ValueError& e) {
            std::fflush(stdout);
            std::cerr << "pipescope " << sub->get_name() << ": error: " << flagOf(e.setting()) << ": " << e.what() << "\n";
            return kExitError;
        } catch (const Error& e) {
            std::fflush(stdout);
            // Messages quote inputs (names, versions): never let them drive the terminal.
            std::cerr << "pipescope " << sub->get_name() << ": error: " << printable(e.what(), 4096) << "\n";
            return kExitError;
        } catch (const std::bad_alloc&) {
            std::cerr << "pipescope " << sub->get_name() << ": error: out of memory\n";
            return kExitError;
        } catch (const std::exception& e) {
            std::cerr << "pipescope " << sub->get_name() << ": internal error: " << printable(e.what(), 4096)
                      << " (please report this with the input that caused it)\n";
            return kExitError;
        }
    }
    return kExitUsage;
}
