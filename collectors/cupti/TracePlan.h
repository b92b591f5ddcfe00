#pragma once
// What the CUPTI collector asks of CUPTI, decided from the environment before
// any CUPTI call: activity kinds, activity attributes, the few callbacks it
// subscribes to and the clock. Kept apart from Injection.cpp so the choices
// that set the collector's cost in the profiled program are tested without a
// GPU. Uses CUPTI's headers only, never its functions.
#include "import/capture/CaptureEnv.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace pipescope::collect {

enum class StartOn { Immediately, Delay, ProfilerApi, Nvtx };
enum class ApiMode { Launches, All, None };
// Auto: CUPTI's own clock when it reads CLOCK_REALTIME (its documented
// default on Linux), else a timestamp callback that does.
enum class ClockMode { Auto, Callback, Cupti };

// Diagnostics, read only by the collector (see docs/capture.md).
inline constexpr const char* kEnvKinds = "PIPESCOPE_CAPTURE_KINDS";       // "minimal": kernels, copies, memsets
inline constexpr const char* kEnvClock = "PIPESCOPE_CAPTURE_CLOCK";       // "auto", "callback" or "cupti"
inline constexpr const char* kEnvOverhead = "PIPESCOPE_CAPTURE_OVERHEAD"; // "1": CUPTI's own overhead records
inline constexpr const char* kEnvFlushMs = "PIPESCOPE_CAPTURE_FLUSH_MS";  // periodic flush, 0 = at exit only

struct CaptureOptions {
    StartOn startOn = StartOn::Immediately;
    double delayS = 0, durationS = 0;
    std::string nvtxName;
    ApiMode api = ApiMode::Launches;
    bool minimalKinds = false;
    ClockMode clock = ClockMode::Auto;
    bool overheadRecords = false;
    size_t bufferLimit = 64;
    int flushPeriodMs = 1000;
};

// A value the collector ignores, with the reason: (key for warnOnce, message).
using OptionWarning = std::pair<std::string, std::string>;

CaptureOptions readCaptureOptions(const capture::GetEnv& getEnv, std::vector<OptionWarning>* warnings = nullptr);

struct CallbackSite {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId id;
    bool operator==(const CallbackSite&) const = default;
};

struct AttributeSetting {
    CUpti_ActivityAttribute attribute;
    const char* name;
    // uint8_t flags or size_t sizes, as CUPTI declares each attribute.
    bool isFlag;
    size_t value;
};

struct TracePlan {
    // Switched on once at start-up: device and context records.
    std::vector<CUpti_ActivityKind> startupKinds;
    // Switched on and off with the recording windows.
    std::vector<CUpti_ActivityKind> windowKinds;
    // API records: whole kinds (--all-api) or CUPTI's per-call selection.
    std::vector<CUpti_ActivityKind> apiKinds;
    bool selectApiCalls = false;
    // Set before the buffer callbacks are registered.
    std::vector<AttributeSetting> attributes;
    // Event and stream query records only for work that has completed.
    bool allSyncRecords = false;
    // Callbacks for the whole run, and those of the start/stop trigger,
    // switched off once its window has been recorded.
    std::vector<CallbackSite> callbacks;
    std::vector<CallbackSite> triggerCallbacks;
    // Buffers allocated and touched at start-up, so the program's threads
    // never fault in fresh pages when CUPTI asks for a buffer.
    size_t preallocatedBuffers = 4;
};

TracePlan makeTracePlan(const CaptureOptions& options);

// The runtime (kind 0) or driver (kind 1) calls whose API records are kept in
// the default mode: those that launch, copy, set, wait for or allocate GPU
// work. `name` gives the call's name without its version suffix.
std::vector<CUpti_CallbackId> selectApiCalls(int kind, uint32_t idCount,
                                             const std::function<std::string(uint32_t)>& name);

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"
std::string stripVersion(std::string name);

// Whether a CUPTI timestamp read between two host CLOCK_REALTIME reads is on
// that clock (CUPTI's default on Linux; not under WSL, where it is
// CLOCK_MONOTONIC_RAW).
bool cuptiClockIsRealtime(int64_t before, uint64_t cupti, int64_t after);

} // namespace pipescope::collect
