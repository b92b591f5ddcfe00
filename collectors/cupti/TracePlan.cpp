#include "TracePlan.h"

#include <cupti_driver_cbid.h>
#include <cupti_nvtx_cbid.h>
#include <cupti_runtime_cbid.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace pipescope::collect {

namespace {

double envSeconds(const capture::GetEnv& getEnv, const char* name, std::vector<OptionWarning>* warnings)
{
    const char* v = getEnv(name);
    if (!v || !*v)
        return 0;
    char* end = nullptr;
    double d = std::strtod(v, &end);
    if (end == v || *end || d < 0) {
        if (warnings)
            warnings->emplace_back(name, std::string("ignoring ") + name + "=" + v + " (expected seconds)");
        return 0;
    }
    return d;
}

bool startsWithAny(const std::string& s, std::initializer_list<const char*> prefixes)
{
    for (const char* p : prefixes)
        if (s.rfind(p, 0) == 0)
            return true;
    return false;
}

} // namespace

CaptureOptions readCaptureOptions(const capture::GetEnv& getEnv, std::vector<OptionWarning>* warnings)
{
    CaptureOptions o;
    auto text = [&](const char* name) {
        const char* v = getEnv(name);
        return std::string(v ? v : "");
    };
    auto warn = [&](const char* key, std::string message) {
        if (warnings)
            warnings->emplace_back(key, std::move(message));
    };
    o.delayS = envSeconds(getEnv, capture::kEnvDelay, warnings);
    o.durationS = envSeconds(getEnv, capture::kEnvDuration, warnings);
    std::string s = text(capture::kEnvStartOn);
    if (s == "profiler-api") {
        o.startOn = StartOn::ProfilerApi;
    } else if (s.rfind("nvtx:", 0) == 0 && s.size() > 5) {
        o.startOn = StartOn::Nvtx;
        o.nvtxName = s.substr(5);
    } else {
        if (!s.empty())
            warn("start-on", "ignoring " + std::string(capture::kEnvStartOn) + "=" + s
                                 + " (expected profiler-api or nvtx:NAME)");
        o.startOn = o.delayS > 0 ? StartOn::Delay : StartOn::Immediately;
    }
    std::string api = text(capture::kEnvApi);
    if (api == "all")
        o.api = ApiMode::All;
    else if (api == "none")
        o.api = ApiMode::None;
    else if (!api.empty() && api != "launches")
        warn("api", "ignoring " + std::string(capture::kEnvApi) + "=" + api + " (expected launches, all or none)");
    o.minimalKinds = text(kEnvKinds) == "minimal";
    std::string clock = text(kEnvClock);
    if (clock == "callback")
        o.clock = ClockMode::Callback;
    else if (clock == "cupti")
        o.clock = ClockMode::Cupti;
    else if (!clock.empty() && clock != "auto")
        warn("clock", "ignoring " + std::string(kEnvClock) + "=" + clock + " (expected auto, callback or cupti)");
    o.overheadRecords = text(kEnvOverhead) == "1";
    std::string buffers = text(capture::kEnvBuffers);
    if (!buffers.empty()) {
        long n = std::strtol(buffers.c_str(), nullptr, 10);
        if (n >= 2 && n <= 4096)
            o.bufferLimit = static_cast<size_t>(n);
        else
            warn("buffers", "ignoring " + std::string(capture::kEnvBuffers) + "=" + buffers + " (expected 2 to 4096)");
    }
    std::string flush = text(kEnvFlushMs);
    if (!flush.empty()) {
        char* end = nullptr;
        long ms = std::strtol(flush.c_str(), &end, 10);
        if (end != flush.c_str() && !*end && ms >= 0 && ms <= 3600000)
            o.flushPeriodMs = static_cast<int>(ms);
        else
            warn("flush", "ignoring " + std::string(kEnvFlushMs) + "=" + flush + " (expected milliseconds)");
    }
    return o;
}

TracePlan makeTracePlan(const CaptureOptions& o)
{
    TracePlan p;
    p.startupKinds = {CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT};
    // CONCURRENT_KERNEL, never KERNEL: the latter serialises every kernel.
    if (o.minimalKinds)
        p.windowKinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
    else
        p.windowKinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                         CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
                         CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MARKER,
                         CUPTI_ACTIVITY_KIND_MEMORY2};
    if (o.overheadRecords)
        p.windowKinds.push_back(CUPTI_ACTIVITY_KIND_OVERHEAD);
    if (o.api == ApiMode::All)
        p.apiKinds = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
    p.selectApiCalls = o.api == ApiMode::Launches;

    // CUPTI fills a buffer we hand over already zeroed instead of zeroing
    // 4 MiB itself on the thread that asked for it (the program's); buffers
    // per thread keep the program's threads from sharing one buffer's lock.
    p.attributes = {
        {CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, "zeroed_out_activity_buffer", true, 1},
        {CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, "per_thread_activity_buffer", true, 1},
    };
    p.allSyncRecords = false;

    // No callback on the launch path: launch calls come as API activity
    // records, which CUPTI writes without calling us.
    p.callbacks = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020},
        {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING},
    };
    if (o.startOn == StartOn::ProfilerApi)
        p.triggerCallbacks = {
            {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000},
            {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000},
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart},
            {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop},
        };
    // Pushes and pops only, to find the trigger range and its end; the
    // ranges themselves are recorded as MARKER activity records.
    if (o.startOn == StartOn::Nvtx)
        p.triggerCallbacks = {
            {CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA},
            {CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushW},
            {CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushEx},
            {CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangePushEx},
            {CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePop},
            {CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxDomainRangePop},
        };
    p.preallocatedBuffers = std::min<size_t>(4, o.bufferLimit);
    return p;
}

std::vector<CUpti_CallbackId> selectApiCalls(int kind, uint32_t idCount,
                                             const std::function<std::string(uint32_t)>& name)
{
    std::vector<CUpti_CallbackId> ids;
    for (uint32_t id = 1; id < idCount; ++id) {
        std::string n = name(id);
        bool keep = kind == capture::kRuntime
                        ? startsWithAny(n, {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch",
                                            "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                                            "cudaStreamWaitEvent", "cudaMalloc", "cudaFree"})
                        : startsWithAny(n, {"cuLaunch", "cuMemcpy", "cuMemset", "cuGraphLaunch", "cuStreamSynchronize",
                                            "cuCtxSynchronize", "cuEventSynchronize", "cuStreamWaitEvent", "cuMemAlloc",
                                            "cuMemFree"});
        if (keep)
            ids.push_back(id);
    }
    return ids;
}

std::string stripVersion(std::string name)
{
    auto pos = name.rfind("_v");
    if (pos != std::string::npos && pos + 2 < name.size()
        && name.find_first_not_of("0123456789", pos + 2) == std::string::npos)
        name.erase(pos);
    return name;
}

bool cuptiClockIsRealtime(int64_t before, uint64_t cupti, int64_t after)
{
    // Generous: the alternatives (monotonic clocks) are decades away.
    constexpr int64_t kSlackNs = 10'000'000;
    auto t = static_cast<int64_t>(cupti);
    return cupti > 0 && t >= before - kSlackNs && t <= after + kSlackNs;
}

} // namespace pipescope::collect
