#pragma once
// What `pipescope capture` sets up before it runs the command: where the
// collector libraries are, and the environment that injects them into the
// command and every process it starts (torchrun, srun and mpirun pass the
// environment on to their ranks).
#include "import/capture/CaptureEnv.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipescope::capture {

inline constexpr const char* kCuptiLibrary = "libpipescope_cupti.so";
inline constexpr const char* kNcclLibrary = "libpipescope_nccl.so";
// Overrides where the collector libraries are looked for.
inline constexpr const char* kEnvCollectorDir = "PIPESCOPE_COLLECTOR_DIR";

struct CaptureSettings {
    std::string dir;            // absolute capture directory
    double delaySeconds = 0;
    double durationSeconds = 0; // 0: until the command ends
    std::string startOn;        // "", "profiler-api" or "nvtx:NAME"
    bool allApi = false;
    std::string cuptiLibrary;   // absolute paths; empty when not found
    std::string ncclLibrary;
};

// Variables to set for the command, in a stable order.
std::vector<std::pair<std::string, std::string>> captureEnvironment(const CaptureSettings& settings);

// The collector library `fileName`: $PIPESCOPE_COLLECTOR_DIR, then beside the
// executable's install tree (<prefix>/lib/pipescope), then its build tree
// (<build>/lib/pipescope for <build>/app/cli/pipescope), then next to it.
std::optional<std::string> findCollector(const std::string& fileName, const std::string& executablePath,
                                         const GetEnv& getEnv = systemGetEnv);

// The launcher is itself one task of a parallel job (srun/mpirun started
// `pipescope capture` once per rank): then each task must not merge alone.
bool launcherIsOneOfMany(const GetEnv& getEnv = systemGetEnv);

// Formats seconds for the environment without locale surprises ("1.5").
std::string secondsText(double seconds);

} // namespace pipescope::capture
