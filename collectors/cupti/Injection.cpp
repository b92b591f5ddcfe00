// libpipescope_cupti: loaded into the profiled process by the CUDA driver
// through CUDA_INJECTION64_PATH, which calls InitializeInjection() during
// cuInit. Records GPU activities, launch calls, NVTX ranges and memory
// events into the rank's capture file. Everything here is defensive: on any
// failure it says so once on stderr and the program runs on untouched.
#include "ActivityRecords.h"
#include "Clock.h"
#include "Log.h"
#include "WriterThread.h"
#include "import/capture/CaptureEnv.h"

#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#define PIPESCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace pipescope::collect {
namespace {

constexpr size_t kBufferSize = 4u << 20; // CUPTI's sweet spot (Kineto uses the same)
constexpr size_t kBufferAlign = 8;

// A bounded pool of activity buffers: when all are in flight, CUPTI gets
// none and counts the records it had to drop.
class BufferPool {
public:
    void setLimit(size_t n) { limit_ = n; }
    uint8_t* acquire()
    {
        std::lock_guard lock(mutex_);
        if (!free_.empty()) {
            uint8_t* b = free_.back();
            free_.pop_back();
            return b;
        }
        if (allocated_ >= limit_)
            return nullptr;
        auto* b = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferSize));
        if (b)
            ++allocated_;
        return b;
    }
    void release(uint8_t* b)
    {
        std::lock_guard lock(mutex_);
        free_.push_back(b);
    }

private:
    std::mutex mutex_;
    std::vector<uint8_t*> free_;
    size_t allocated_ = 0;
    size_t limit_ = 64;
};

enum class StartOn { Immediately, Delay, ProfilerApi, Nvtx };

struct Collector {
    std::atomic<int> state{0}; // 0 idle, 1 initialising, 2 running, 3 failed, 4 finished
    pid_t pid = 0;
    BufferPool pool;
    WriterThread writer;
    ActivityTranslator translator{nullptr};
    CUpti_SubscriberHandle subscriber = nullptr;
    bool allApi = false;
    bool noApi = false;
    bool minimalKinds = false;
    bool hostClockCallback = false;
    std::mutex spanMutex; // recording windows, for filtering API records
    std::vector<std::pair<int64_t, int64_t>> spans;
    std::optional<int64_t> openSince;
    std::vector<CUpti_CallbackId> runtimeIds, driverIds;

    StartOn startOn = StartOn::Immediately;
    double delayS = 0, durationS = 0;
    std::string nvtxName;
    std::mutex windowMutex;
    bool recording = false;
    bool windowUsed = false; // profiler-api / nvtx: only the first window
    int64_t windowStart = 0;
    std::string windowReason;
    std::thread timer;
    std::condition_variable timerWake;
    bool timerCancel = false;

    std::atomic<int64_t> droppedBuffers{0};
    sem_t flushRequest, flushDone;
    std::thread signalFlusher;
};

Collector& collector()
{
    static Collector* c = new Collector; // never destroyed: atexit order must not matter
    return *c;
}

// NVTX push depth of the thread that opened the trigger range.
thread_local int tlNvtxDepth = 0;
std::atomic<bool> nvtxTriggerOpen{false};
std::atomic<pthread_t> nvtxTriggerThread{};
int nvtxTriggerDepth = 0;

std::string cuptiError(CUptiResult r)
{
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    return s ? s : ("CUPTI error " + std::to_string(static_cast<int>(r)));
}

std::string stripVersion(std::string name)
{
    // "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"
    auto pos = name.rfind("_v");
    if (pos != std::string::npos && pos + 2 < name.size()
        && name.find_first_not_of("0123456789", pos + 2) == std::string::npos)
        name.erase(pos);
    return name;
}

std::string apiName(int kind, uint32_t cbid)
{
    const char* name = nullptr;
    CUpti_CallbackDomain domain = kind == capture::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name)
        return {};
    return stripVersion(name);
}

bool startsWithAny(const std::string& s, std::initializer_list<const char*> prefixes)
{
    for (const char* p : prefixes)
        if (s.rfind(p, 0) == 0)
            return true;
    return false;
}

// The API calls that launch or wait for GPU work, plus allocations: enough
// to correlate every GPU activity with its CPU call at a fraction of the
// cost of tracing every runtime call.
void selectApiCalls(Collector& c)
{
    for (uint32_t id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) {
        std::string n = apiName(capture::kRuntime, id);
        if (startsWithAny(n, {"cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch", "cudaStreamSynchronize",
                              "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaStreamWaitEvent", "cudaMalloc",
                              "cudaFree"}))
            c.runtimeIds.push_back(id);
    }
    for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
        std::string n = apiName(capture::kDriver, id);
        if (startsWithAny(n, {"cuLaunch", "cuMemcpy", "cuMemset", "cuGraphLaunch", "cuStreamSynchronize",
                              "cuCtxSynchronize", "cuEventSynchronize", "cuStreamWaitEvent", "cuMemAlloc",
                              "cuMemFree"}))
            c.driverIds.push_back(id);
    }
}

constexpr CUpti_ActivityKind kRecordedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_MEMORY2,
};

void enableActivities(Collector& c, bool on)
{
    auto toggle = [on](CUpti_ActivityKind k) {
        CUptiResult r = on ? cuptiActivityEnable(k) : cuptiActivityDisable(k);
        if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_NOT_COMPATIBLE && r != CUPTI_ERROR_INVALID_KIND)
            warnOnce(("enable-" + std::to_string(static_cast<int>(k))).c_str(),
                     "could not " + std::string(on ? "enable" : "disable") + " CUPTI activity kind "
                         + std::to_string(static_cast<int>(k)) + ": " + cuptiError(r));
    };
    for (auto k : kRecordedKinds)
        if (!c.minimalKinds || k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || k == CUPTI_ACTIVITY_KIND_MEMCPY
            || k == CUPTI_ACTIVITY_KIND_MEMSET)
            toggle(k);
}

// API records are switched on once, at start-up: CUPTI does not take a
// per-call selection made later from a callback (seen with CUDA 13.0). Calls outside the
// recording windows are dropped when stored.
void enableApiRecords(Collector& c)
{
    if (c.noApi)
        return;
    if (c.allApi) {
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
        return;
    }
    for (auto id : c.runtimeIds)
        cuptiActivityEnableRuntimeApi(id, 1);
    for (auto id : c.driverIds)
        cuptiActivityEnableDriverApi(id, 1);
}

bool insideWindow(int64_t ts)
{
    Collector& c = collector();
    std::lock_guard lock(c.spanMutex);
    if (c.openSince && ts >= *c.openSince)
        return true;
    for (auto& [s, e] : c.spans)
        if (ts >= s && ts <= e)
            return true;
    return false;
}

void startRecording(const char* reason)
{
    Collector& c = collector();
    std::lock_guard lock(c.windowMutex);
    if (c.recording)
        return;
    enableActivities(c, true);
    c.recording = true;
    c.windowStart = nowNs();
    {
        std::lock_guard spans(c.spanMutex);
        c.openSince = c.windowStart;
    }
    c.windowReason = reason;
    info(std::string("recording started (") + reason + ")");
}

void stopRecording()
{
    Collector& c = collector();
    std::lock_guard lock(c.windowMutex);
    if (!c.recording)
        return;
    enableActivities(c, false);
    c.recording = false;
    c.windowUsed = true;
    int64_t start = c.windowStart, end = nowNs();
    {
        std::lock_guard spans(c.spanMutex);
        c.spans.emplace_back(start, end);
        c.openSince.reset();
    }
    std::string reason = c.windowReason;
    c.writer.post([start, end, reason](CaptureDb& db) { db.addWindow(start, end, reason); });
    info("recording stopped");
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords)
{
    *maxNumRecords = 0;
    *buffer = collector().pool.acquire();
    *size = *buffer ? kBufferSize : 0;
    if (!*buffer)
        warnOnce("buffers-exhausted", "all CUPTI activity buffers are in use; records are dropped and counted "
                                      "(raise PIPESCOPE_CAPTURE_BUFFERS)");
}

int64_t countRecords(uint8_t* buffer, size_t validSize)
{
    int64_t n = 0;
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS)
        ++n;
    return n;
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t /*size*/, size_t validSize)
{
    Collector& c = collector();
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped) == CUPTI_SUCCESS && dropped > 0) {
        auto n = static_cast<int64_t>(dropped);
        c.writer.post([n](CaptureDb& db) { db.addDropped("cupti_records", n); });
    }
    if (!buffer)
        return;
    if (validSize == 0) {
        c.pool.release(buffer);
        return;
    }
    bool posted = c.writer.post(
        [buffer, validSize](CaptureDb& db) {
            Collector& cc = collector();
            CUpti_Activity* rec = nullptr;
            while (cuptiActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS)
                cc.translator.store(rec, db);
            cc.pool.release(buffer);
        },
        "cupti_buffers", 0);
    if (!posted) {
        c.writer.post([n = countRecords(buffer, validSize)](CaptureDb& db) { db.addDropped("writer_queue", n); });
        c.pool.release(buffer);
    }
}

// First ASCII message of an NVTX push, or nullptr.
const char* pushMessage(CUpti_CallbackId cbid, const void* params)
{
    const nvtxEventAttributes_t* attr = nullptr;
    switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
        return static_cast<const nvtxRangePushA_params*>(params)->message;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
        attr = static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib;
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
        attr = static_cast<const nvtxDomainRangePushEx_params*>(params)->core.eventAttrib;
        break;
    default:
        return nullptr;
    }
    if (attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return attr->message.ascii;
    return nullptr;
}

void onNvtx(CUpti_CallbackId cbid, const CUpti_NvtxData* data)
{
    Collector& c = collector();
    switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
        ++tlNvtxDepth;
        const char* msg = pushMessage(cbid, data->functionParams);
        if (msg && !c.windowUsed && !nvtxTriggerOpen.load() && c.nvtxName == msg) {
            nvtxTriggerOpen = true;
            nvtxTriggerThread = pthread_self();
            nvtxTriggerDepth = tlNvtxDepth;
            startRecording("nvtx");
        }
        break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
        if (nvtxTriggerOpen.load() && pthread_equal(nvtxTriggerThread.load(), pthread_self())
            && tlNvtxDepth == nvtxTriggerDepth) {
            nvtxTriggerOpen = false;
            stopRecording();
        }
        if (tlNvtxDepth > 0)
            --tlNvtxDepth;
        break;
    default:
        break;
    }
}

void flushAll(bool forced)
{
    CUptiResult r = cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_NOT_INITIALIZED)
        warnOnce("flush", "CUPTI could not flush its buffers: " + cuptiError(r));
}

void CUPTIAPI onCallback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata)
{
    Collector& c = collector();
    if (c.state.load() != 2 || getpid() != c.pid)
        return;
    if (domain == CUPTI_CB_DOMAIN_NVTX) {
        onNvtx(cbid, static_cast<const CUpti_NvtxData*>(cbdata));
        return;
    }
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        // The context's records must be out before it goes.
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
            flushAll(true);
        return;
    }
    const auto* api = static_cast<const CUpti_CallbackData*>(cbdata);
    bool enter = api->callbackSite == CUPTI_API_ENTER;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
        if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020 && enter) {
            flushAll(true);
        } else if (c.startOn == StartOn::ProfilerApi && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000
                   && !enter && !c.windowUsed) {
            startRecording("profiler-api");
        } else if (c.startOn == StartOn::ProfilerApi && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000
                   && enter) {
            stopRecording();
        }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        if (c.startOn == StartOn::ProfilerApi && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && !enter
            && !c.windowUsed)
            startRecording("profiler-api");
        else if (c.startOn == StartOn::ProfilerApi && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop && enter)
            stopRecording();
    }
}

// Stops recording and writes everything out. Called at exit, on SIGTERM/SIGINT.
void finishCapture()
{
    Collector& c = collector();
    int expected = 2;
    if (getpid() != c.pid || !c.state.compare_exchange_strong(expected, 4))
        return;
    {
        std::lock_guard lock(c.windowMutex);
        c.timerCancel = true;
    }
    c.timerWake.notify_all();
    if (c.timer.joinable())
        c.timer.detach(); // it only sleeps and toggles recording; leaving it is harmless at exit
    {
        std::lock_guard lock(c.windowMutex);
        if (c.recording) {
            int64_t start = c.windowStart, end = nowNs();
            std::string reason = c.windowReason;
            c.writer.post([start, end, reason](CaptureDb& db) { db.addWindow(start, end, reason); });
        }
    }
    flushAll(true);
    c.writer.post([](CaptureDb& db) { collector().translator.finish(db); });
    c.writer.stop();
    if (c.subscriber)
        cuptiUnsubscribe(c.subscriber);
}

void atExit() { finishCapture(); }

struct sigaction previousTerm, previousInt;

void onSignal(int sig)
{
    const struct sigaction& prev = sig == SIGTERM ? previousTerm : previousInt;
    if (prev.sa_handler == SIG_IGN)
        return;
    if (prev.sa_handler != SIG_DFL) {
        // The program handles it (Python turns SIGINT into KeyboardInterrupt);
        // its normal exit path then runs our atexit flush.
        if (prev.sa_flags & SA_SIGINFO)
            prev.sa_sigaction(sig, nullptr, nullptr);
        else
            prev.sa_handler(sig);
        return;
    }
    // Default action is to die: let the flusher thread write first, briefly.
    Collector& c = collector();
    sem_post(&c.flushRequest);
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    while (sem_timedwait(&c.flushDone, &deadline) == -1 && errno == EINTR) {
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

// Threads of ours never take the program's signals.
template <typename F>
std::thread startQuietThread(F&& f)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    std::thread t;
    try {
        t = std::thread(std::forward<F>(f));
    } catch (...) {
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return t;
}

void installSignalHandlers(Collector& c)
{
    if (sem_init(&c.flushRequest, 0, 0) != 0 || sem_init(&c.flushDone, 0, 0) != 0)
        return;
    c.signalFlusher = startQuietThread([] {
        Collector& cc = collector();
        while (sem_wait(&cc.flushRequest) == -1 && errno == EINTR) {
        }
        finishCapture();
        sem_post(&cc.flushDone);
    });
    if (!c.signalFlusher.joinable())
        return;
    c.signalFlusher.detach();
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, &previousTerm);
    sigaction(SIGINT, &sa, &previousInt);
}

double envSeconds(const char* name)
{
    const char* v = std::getenv(name);
    if (!v || !*v)
        return 0;
    char* end = nullptr;
    double d = std::strtod(v, &end);
    if (end == v || d < 0) {
        warnOnce(name, std::string("ignoring ") + name + "=" + v + " (expected seconds)");
        return 0;
    }
    return d;
}

void readConfig(Collector& c)
{
    c.delayS = envSeconds(capture::kEnvDelay);
    c.durationS = envSeconds(capture::kEnvDuration);
    const char* startOn = std::getenv(capture::kEnvStartOn);
    std::string s = startOn ? startOn : "";
    if (s == "profiler-api")
        c.startOn = StartOn::ProfilerApi;
    else if (s.rfind("nvtx:", 0) == 0 && s.size() > 5) {
        c.startOn = StartOn::Nvtx;
        c.nvtxName = s.substr(5);
    } else {
        if (!s.empty())
            warnOnce("start-on", "ignoring " + std::string(capture::kEnvStartOn) + "=" + s
                                     + " (expected profiler-api or nvtx:NAME)");
        c.startOn = c.delayS > 0 ? StartOn::Delay : StartOn::Immediately;
    }
    const char* api = std::getenv(capture::kEnvApi);
    c.allApi = api && std::strcmp(api, "all") == 0;
    c.noApi = api && std::strcmp(api, "none") == 0;
    // Diagnostics for measuring overhead; see docs/capture.md.
    const char* kinds = std::getenv("PIPESCOPE_CAPTURE_KINDS");
    c.minimalKinds = kinds && std::strcmp(kinds, "minimal") == 0;
    const char* clock = std::getenv("PIPESCOPE_CAPTURE_CLOCK");
    c.hostClockCallback = !(clock && std::strcmp(clock, "cupti") == 0);
    if (const char* b = std::getenv(capture::kEnvBuffers)) {
        long n = std::strtol(b, nullptr, 10);
        if (n >= 2 && n <= 4096)
            c.pool.setLimit(static_cast<size_t>(n));
    }
}

std::string captureDir()
{
    const char* d = std::getenv(capture::kEnvDir);
    std::string dir = d && *d ? d : "pipescope-capture";
    ::mkdir(dir.c_str(), 0777); // exists already when pipescope capture made it
    return dir;
}

// NVTX finds CUPTI's NVTX hooks through NVTX_INJECTION64_PATH. When pipescope
// capture did not set it (the library was injected by hand), point it at the
// libcupti we are linked with, so ranges opened from now on are seen.
void pointNvtxAtCupti()
{
    if (std::getenv("NVTX_INJECTION64_PATH"))
        return;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) && info.dli_fname)
        setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

bool setUp(Collector& c, std::string& error)
{
    c.pid = getpid();
    c.translator = ActivityTranslator(apiName);
    c.translator.setApiFilter(insideWindow);
    readConfig(c);

    CUptiResult r = CUPTI_SUCCESS;
    // Every record is stamped with our CLOCK_REALTIME, the clock of the NCCL
    // plugin and of the recording windows. PIPESCOPE_CAPTURE_CLOCK=cupti
    // leaves CUPTI's own (documented as CLOCK_REALTIME on Linux too; an
    // overhead diagnostic, not the default).
    if (c.hostClockCallback) {
        r = cuptiActivityRegisterTimestampCallback([]() -> uint64_t { return static_cast<uint64_t>(nowNs()); });
        if (r != CUPTI_SUCCESS) {
            error = "cannot set CUPTI's clock: " + cuptiError(r);
            return false;
        }
    }
    r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
    if (r != CUPTI_SUCCESS) {
        error = "cannot register CUPTI buffers: " + cuptiError(r);
        return false;
    }
    // Device and context records come once, at context creation: always on.
    // The first enable is also the test that CUPTI works here at all.
    r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
    if (r != CUPTI_SUCCESS) {
        error = "CUPTI cannot trace in this process: " + cuptiError(r);
        cuptiActivityFlushAll(0);
        return false;
    }
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONTEXT);
    if (!c.allApi && !c.noApi)
        selectApiCalls(c);
    enableApiRecords(c);

    r = cuptiSubscribe(&c.subscriber, onCallback, nullptr);
    if (r != CUPTI_SUCCESS) {
        c.subscriber = nullptr;
        // Activity tracing still works; only the triggers and the flush on
        // cudaDeviceReset need the callback API.
        warnOnce("subscribe", std::string(r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                              ? "another CUPTI client (a profiler) holds the callback API"
                                              : "the CUPTI callback API is unavailable (" + cuptiError(r) + ")")
                                  + "; cudaProfilerStart/Stop and NVTX triggers are off");
        if (c.startOn == StartOn::ProfilerApi || c.startOn == StartOn::Nvtx)
            c.startOn = StartOn::Immediately;
    } else {
        cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
        cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
        if (c.startOn == StartOn::ProfilerApi) {
            cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
            cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                                CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
            cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
            cuptiEnableCallback(1, c.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
        }
        if (c.startOn == StartOn::Nvtx)
            cuptiEnableDomain(1, c.subscriber, CUPTI_CB_DOMAIN_NVTX);
    }
    pointNvtxAtCupti();

    ProcessMeta meta = currentProcessMeta();
    std::string path = captureDir() + "/" + capture::captureFileName(meta.rank, meta.host, meta.pid);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    bool started = c.writer.start(path, meta, error, [] { flushAll(false); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (!started)
        return false;
    c.writer.post([](CaptureDb& db) {
        db.setMeta("cupti.version", std::to_string(CUPTI_API_VERSION));
        db.setMeta("cupti.clock", collector().hostClockCallback ? "callback" : "cupti");
        db.setMeta("cupti.api", collector().allApi ? "all" : collector().noApi ? "none" : "launches");
    });
    return true;
}

void startTimer(Collector& c)
{
    if (c.startOn != StartOn::Delay && c.durationS <= 0)
        return;
    c.timer = startQuietThread([] {
        Collector& cc = collector();
        auto wait = [&cc](double seconds) {
            std::unique_lock lock(cc.windowMutex);
            return !cc.timerWake.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return cc.timerCancel; });
        };
        if (cc.startOn == StartOn::Delay) {
            if (!wait(cc.delayS))
                return;
            startRecording("delay");
        }
        if (cc.durationS > 0 && (cc.startOn == StartOn::Delay || cc.startOn == StartOn::Immediately)) {
            if (!wait(cc.durationS))
                return;
            stopRecording();
        }
    });
}

} // namespace
} // namespace pipescope::collect

// Called by the CUDA driver during cuInit. Returns 1 on success, 0 when the
// collector stays off (the program runs normally either way). A second call
// is a no-op.
PIPESCOPE_EXPORT int InitializeInjection(void)
{
    using namespace pipescope::collect;
    Collector& c = collector();
    int expected = 0;
    if (!c.state.compare_exchange_strong(expected, 1))
        return expected == 2 ? 1 : 0;
    try {
        std::string error;
        if (!setUp(c, error)) {
            warnOnce("init", "GPU capture is off in this process: " + error);
            c.state = 3;
            return 0;
        }
        c.state = 2;
        std::atexit(atExit);
        pthread_atfork(nullptr, nullptr, [] {
            // A forked child has neither our threads nor CUPTI's state.
            collector().state = 3;
        });
        installSignalHandlers(c);
        if (c.startOn == StartOn::Immediately)
            startRecording("start");
        startTimer(c);
        return 1;
    } catch (...) {
        warnOnce("init", "GPU capture is off in this process: unexpected failure during set-up");
        c.state = 3;
        return 0;
    }
}

// NVTX_INJECTION64_PATH may name this library (pipescope capture does, so
// ranges opened before the first CUDA call are seen too): hand NVTX over to
// CUPTI's own hooks.
PIPESCOPE_EXPORT int InitializeInjectionNvtx2(const void* getExportTable)
{
    using Fn = int (*)(const void*);
    static Fn target = [] {
        void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
        if (!h)
            h = dlopen("libcupti.so", RTLD_NOW | RTLD_NOLOAD);
        return h ? reinterpret_cast<Fn>(dlsym(h, "InitializeInjectionNvtx2")) : nullptr;
    }();
    if (!target) {
        pipescope::collect::warnOnce("nvtx", "CUPTI's NVTX hooks were not found; NVTX ranges are not recorded");
        return 0;
    }
    return target(getExportTable);
}
