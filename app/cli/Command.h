#pragma once
// Subcommands register themselves: each cmd_<name>.cpp defines a static
// RegisterCommand whose setup adds its options to the CLI11 subcommand and
// returns the function that runs it. Run functions return the exit code and
// may throw pipescope::Error (printed as one line, exit 1).
#include "util/Error.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace pipescope::cli {

using RunFn = std::function<int()>;

struct CommandSpec {
    std::string name;
    std::string summary;
    int order = 100; // position in --help
    std::function<RunFn(CLI::App&)> setup;
};

std::vector<CommandSpec>& commands();

struct RegisterCommand {
    explicit RegisterCommand(CommandSpec spec) { commands().push_back(std::move(spec)); }
};

// A flag's value refused by the CLI itself (or a core ValueError named by
// another flag than its setting's): printed as "FLAG: message", exit 1. Core's
// ValueErrors print as "--" + toString(setting).
class FlagError : public Error {
public:
    FlagError(std::string flag, const std::string& message) : Error(message), flag_(std::move(flag)) {}
    const std::string& flag() const { return flag_; }

private:
    std::string flag_;
};

// Exit codes shared by all subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1; // bad input, unwritable output, failed run
inline constexpr int kExitUsage = 2; // bad flags

} // namespace pipescope::cli
