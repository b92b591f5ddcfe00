// pipescope: headless command-line tool. See `pipescope --help`.
#include "Command.h"
#include "Version.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace pipescope::cli {
namespace {
// Core names the setting a refused value belongs to; the CLI's flag has its name.
std::string flagOf(Setting setting) { return "--" + std::string(toString(setting)); }

// Edits (insert, delete, substitute, swap two neighbours) that turn a into b.
size_t editDistance(const std::string& a, const std::string& b)
{
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i)
        d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j)
        d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

// The line for a first word that names no command (CLI11 would only say
// "A subcommand is required"), or empty when the first word is a command.
// The main program takes flags only, so its first other word is the command.
std::string unknownCommandMessage(const CLI::App& app, int argc, char** argv)
{
    std::string word;
    for (int i = 1; i < argc && word.empty(); ++i)
        if (argv[i][0] != '-')
            word = argv[i];
    if (word.empty())
        return {};
    std::string lower = word;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string best;
    size_t bestDistance = 0;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        const std::string& name = sub->get_name();
        if (name == word)
            return {};
        // One slip in a short name, two in a longer one; more is another word.
        const size_t d = editDistance(lower, name);
        if (d <= (name.size() >= 6 ? 2u : 1u) && (best.empty() || d < bestDistance)) {
            best = name;
            bestDistance = d;
        }
    }
    std::string line = "pipescope: unknown command '" + printable(word, 64) + "'";
    return line + (best.empty() ? "; run pipescope --help for the list of commands" : "; did you mean '" + best + "'?");
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
    } catch (const CLI::ConversionError& e) {
        // CLI11 says "Could not convert: --iteration = 99999999999": say
        // which value of which option, what it takes, and where to look.
        std::string what = e.what();
        const std::string prefix = "Could not convert: ";
        const auto subs = app.get_subcommands();
        const std::string cmd = subs.empty() ? std::string() : " " + subs.front()->get_name();
        if (what.rfind(prefix, 0) == 0) {
            std::string rest = what.substr(prefix.size());
            if (const size_t eq = rest.find(" = "); eq != std::string::npos)
                rest = rest.substr(0, eq) + " " + rest.substr(eq + 3);
            std::cerr << "pipescope" << cmd << ": error: " << printable(rest, 200)
                      << ": not a value this option takes (a number that fits, e.g. a whole number up to 2147483647); "
                         "see `pipescope"
                      << cmd << " --help`\n";
            return kExitUsage;
        }
        app.exit(e);
        return kExitUsage;
    } catch (const CLI::ParseError& e) {
        if (std::string unknown = unknownCommandMessage(app, argc, argv); !unknown.empty()) {
            std::cerr << unknown << "\n";
            return kExitUsage;
        }
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
        } catch (const FlagError& e) {
            std::fflush(stdout);
            std::cerr << "pipescope " << sub->get_name() << ": error: " << e.flag() << ": " << e.what() << "\n";
            return kExitError;
        } catch (const Error& e) {
            std::fflush(stdout);
            // Messages quote inputs (names, versions): never let them drive the terminal.
            std::cerr << "pipescope " << sub->get_name() << ": error: " << printable(e.what(), 4096) << "\n";
            return kExitError;
        } catch (const std::bad_alloc&) {
            // Which input was too large: the command's own arguments name it.
            std::string inputs;
            for (const CLI::Option* opt : sub->get_options())
                if (opt->get_positional() && opt->count() > 0)
                    for (const std::string& v : opt->results())
                        inputs += (inputs.empty() ? "" : ", ") + printable(v, 200);
            std::cerr << "pipescope " << sub->get_name() << ": error: out of memory"
                      << (inputs.empty() ? std::string() : " reading " + inputs)
                      << "; run it where there is more memory, or on a smaller part of the input (see `pipescope "
                      << sub->get_name() << " --help` for --ranks and limits)\n";
            return kExitError;
        } catch (const std::exception& e) {
            std::cerr << "pipescope " << sub->get_name() << ": internal error: " << printable(e.what(), 4096)
                      << " (please report this with the input that caused it)\n";
            return kExitError;
        }
    }
    return kExitUsage;
}
