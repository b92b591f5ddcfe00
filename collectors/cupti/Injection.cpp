// libpipescope_cupti: loaded into the profiled process by the CUDA driver
// through CUDA_INJECTION64_PATH, which calls InitializeInjection() during
// cuInit. Records GPU activities, launch calls, NVTX ranges and memory
// events into the rank's capture file. Everything here is defensive: on any
// failure it says so once on stderr and the program runs on untouched.
#include "ActivityBuffers.h"
#include "ActivityRecords.h"
#include "Clock.h"
#include "Log.h"
#include "RecordingWindows.h"
#include "TracePlan.h"
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
#include <string>
#include <thread>
#include <vector>

#define PIPESCOPE_EXPORT extern "C" __attribute__((visibility("default")))

namespace pipescope::collect {
namespace {

// Cost in the profiled program, by where it is paid (docs/capture.md):
// - launch path: nothing of ours. Kernels, copies and launch calls come as
//   activity records that CUPTI writes into our buffers; the callbacks we
//   subscribe to fire a few times per run (cudaDeviceReset, context
//   destruction, the start/stop trigger until its window is recorded).
// - buffer request (a program thread, once per 4 MiB of records): a pooled,
//   pre-zeroed, pre-faulted buffer.
// - everything else (translating records, SQLite) on CUPTI's thread and ours.
struct Collector {
    std::atomic<int> state{0}; // 0 idle, 1 initialising, 2 running, 3 failed, 4 finished
    pid_t pid = 0;
    CaptureOptions opt;
    TracePlan plan;
    ActivityBufferPool pool;
    WriterThread writer;
    ActivityTranslator translator{nullptr};
    RecordingWindows windows;
    CUpti_SubscriberHandle subscriber = nullptr;
    bool clockCallback = false;

    std::mutex windowMutex;
    bool recording = false;
    std::atomic<bool> windowUsed{false}; // profiler-api / nvtx: only the first window
    int64_t windowStart = 0;
    std::string windowReason;
    std::thread timer;
    std::condition_variable timerWake;
    bool timerCancel = false;

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

std::string apiName(int kind, uint32_t cbid)
{
    const char* name = nullptr;
    CUpti_CallbackDomain domain = kind == capture::kRuntime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
    if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name)
        return {};
    return stripVersion(name);
}

bool nextRecord(uint8_t* buffer, size_t validSize, CUpti_Activity** record)
{
    return cuptiActivityGetNextRecord(buffer, validSize, record) == CUPTI_SUCCESS;
}

void enableActivities(Collector& c, bool on)
{
    for (CUpti_ActivityKind k : c.plan.windowKinds) {
        CUptiResult r = on ? cuptiActivityEnable(k) : cuptiActivityDisable(k);
        if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_NOT_COMPATIBLE && r != CUPTI_ERROR_INVALID_KIND)
            warnOnce(("enable-" + std::to_string(static_cast<int>(k))).c_str(),
                     "could not " + std::string(on ? "enable" : "disable") + " CUPTI activity kind "
                         + std::to_string(static_cast<int>(k)) + ": " + cuptiError(r));
    }
}

// API records are switched on once, at start-up: CUPTI does not take a
// per-call selection made later from a callback (seen with CUDA 13.0). Calls
// outside the recording windows are dropped when stored.
void enableApiRecords(Collector& c)
{
    for (CUpti_ActivityKind k : c.plan.apiKinds)
        cuptiActivityEnable(k);
    if (!c.plan.selectApiCalls)
        return;
    auto name = [](int kind) { return [kind](uint32_t id) { return apiName(kind, id); }; };
    for (auto id : selectApiCalls(capture::kRuntime, CUPTI_RUNTIME_TRACE_CBID_SIZE, name(capture::kRuntime)))
        cuptiActivityEnableRuntimeApi(id, 1);
    for (auto id : selectApiCalls(capture::kDriver, CUPTI_DRIVER_TRACE_CBID_SIZE, name(capture::kDriver)))
        cuptiActivityEnableDriverApi(id, 1);
}

void switchCallbacks(Collector& c, const std::vector<CallbackSite>& sites, bool on)
{
    if (!c.subscriber)
        return;
    for (const CallbackSite& s : sites)
        cuptiEnableCallback(on ? 1 : 0, c.subscriber, s.domain, s.id);
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
    c.windows.open(c.windowStart);
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
    c.windows.close(end);
    std::string reason = c.windowReason;
    c.writer.post([start, end, reason](CaptureDb& db) { db.addWindow(start, end, reason); });
    // Only the first window is recorded: from now on the trigger's callbacks
    // would cost every push/pop for nothing. Switched off from the writer
    // thread, outside the callback that got us here.
    if (!c.plan.triggerCallbacks.empty())
        c.writer.post([](CaptureDb&) { switchCallbacks(collector(), collector().plan.triggerCallbacks, false); });
    info("recording stopped");
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords)
{
    Collector& c = collector();
    *maxNumRecords = 0;
    *buffer = c.pool.acquire();
    *size = *buffer ? c.pool.bufferSize() : 0;
    if (!*buffer)
        warnOnce("buffers-exhausted", "all CUPTI activity buffers are in use; records are dropped and counted "
                                      "(raise PIPESCOPE_CAPTURE_BUFFERS)");
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t /*size*/, size_t validSize)
{
    Collector& c = collector();
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped) == CUPTI_SUCCESS && dropped > 0)
        c.writer.countDropped("cupti_records", static_cast<int64_t>(dropped));
    postCompletedBuffer(c.writer, c.pool, c.translator, nextRecord, buffer, validSize);
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
    case CUPTI_CBID_NVTX_nvtxRangePushW: // never the trigger (not ASCII), but it nests
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
        ++tlNvtxDepth;
        const char* msg = pushMessage(cbid, data->functionParams);
        if (msg && !c.windowUsed && !nvtxTriggerOpen.load() && c.opt.nvtxName == msg) {
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
    // A forked child is turned off by the atfork handler: no getpid() here.
    if (c.state.load(std::memory_order_acquire) != 2)
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
        } else if (c.opt.startOn == StartOn::ProfilerApi && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000
                   && !enter && !c.windowUsed) {
            startRecording("profiler-api");
        } else if (c.opt.startOn == StartOn::ProfilerApi && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000
                   && enter) {
            stopRecording();
        }
    } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        if (c.opt.startOn == StartOn::ProfilerApi && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart && !enter
            && !c.windowUsed)
            startRecording("profiler-api");
        else if (c.opt.startOn == StartOn::ProfilerApi && cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStop && enter)
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

void onSignal(int sig, siginfo_t* info, void* context)
{
    const struct sigaction& prev = sig == SIGTERM ? previousTerm : previousInt;
    if (prev.sa_handler == SIG_IGN)
        return;
    if (prev.sa_handler != SIG_DFL) {
        // The program handles it (Python turns SIGINT into KeyboardInterrupt);
        // its normal exit path then runs our atexit flush. A SA_SIGINFO
        // handler gets the real siginfo: it may read it.
        if (prev.sa_flags & SA_SIGINFO)
            prev.sa_sigaction(sig, info, context);
        else
            prev.sa_handler(sig);
        return;
    }
    Collector& c = collector();
    // A forked child (a DataLoader worker, say) inherits this handler but not
    // the flusher thread: nobody would answer, and it would hang 5 s before dying.
    if (getpid() != c.pid || c.state.load() != 2) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    // Default action is to die: let the flusher thread write first, briefly.
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
    sa.sa_sigaction = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_SIGINFO;
    sigaction(SIGTERM, &sa, &previousTerm);
    sigaction(SIGINT, &sa, &previousInt);
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

// The attributes as CUPTI holds them after set-up, for the file's meta.
std::string attributeSummary(const Collector& c)
{
    std::string out;
    auto add = [&out](const char* name, const std::string& value) {
        out += (out.empty() ? "" : " ") + std::string(name) + "=" + value;
    };
    for (const AttributeSetting& a : c.plan.attributes) {
        uint8_t flag = 0;
        size_t size = sizeof flag;
        add(a.name, cuptiActivityGetAttribute(a.attribute, &size, &flag) == CUPTI_SUCCESS ? std::to_string(flag) : "?");
    }
    const std::pair<CUpti_ActivityAttribute, const char*> sizes[] = {
        {CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, "device_buffer_size"},
        {CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, "device_buffer_pool_limit"},
        {CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, "device_buffer_pre_allocate"},
    };
    for (auto& [attr, name] : sizes) {
        size_t value = 0, size = sizeof value;
        add(name, cuptiActivityGetAttribute(attr, &size, &value) == CUPTI_SUCCESS ? std::to_string(value) : "?");
    }
    return out;
}

bool setUp(Collector& c, std::string& error)
{
    c.pid = getpid();
    std::vector<OptionWarning> warnings;
    c.opt = readCaptureOptions(capture::systemGetEnv, &warnings);
    for (auto& [key, message] : warnings)
        warnOnce(key.c_str(), message);
    c.plan = makeTracePlan(c.opt);
    c.translator = ActivityTranslator(apiName);
    c.translator.setApiFilter([](int64_t ts) { return collector().windows.contains(ts); });

    CUptiResult r = CUPTI_SUCCESS;
    // Every record must be on CLOCK_REALTIME, the clock of the NCCL plugin and
    // of the recording windows. That is CUPTI's own clock on Linux, so no
    // callback is needed; where it is not (WSL), CUPTI is given one.
    c.clockCallback = c.opt.clock == ClockMode::Callback;
    if (c.opt.clock == ClockMode::Auto) {
        int64_t before = nowNs();
        uint64_t cupti = 0;
        r = cuptiGetTimestamp(&cupti);
        int64_t after = nowNs();
        c.clockCallback = r != CUPTI_SUCCESS || !cuptiClockIsRealtime(before, cupti, after);
    }
    if (c.clockCallback) {
        r = cuptiActivityRegisterTimestampCallback([]() -> uint64_t { return static_cast<uint64_t>(nowNs()); });
        if (r != CUPTI_SUCCESS) {
            error = "cannot set CUPTI's clock: " + cuptiError(r);
            return false;
        }
    }
    // Attributes first: CUPTI reads them when the buffer callbacks are registered.
    for (const AttributeSetting& a : c.plan.attributes) {
        uint8_t flag = static_cast<uint8_t>(a.value);
        size_t value = a.value;
        size_t size = a.isFlag ? sizeof flag : sizeof value;
        void* data = a.isFlag ? static_cast<void*>(&flag) : static_cast<void*>(&value);
        // Older CUPTI lacks some: it then does the work itself, as before.
        cuptiActivitySetAttribute(a.attribute, &size, data);
    }
    c.pool.setLimit(c.opt.bufferLimit);
    r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
    if (r != CUPTI_SUCCESS) {
        error = "cannot register CUPTI buffers: " + cuptiError(r);
        return false;
    }
    // Device and context records come once, at context creation: always on.
    // The first enable is also the test that CUPTI works here at all.
    for (CUpti_ActivityKind k : c.plan.startupKinds) {
        r = cuptiActivityEnable(k);
        if (r != CUPTI_SUCCESS && k == c.plan.startupKinds.front()) {
            error = "CUPTI cannot trace in this process: " + cuptiError(r);
            cuptiActivityFlushAll(0);
            return false;
        }
        if (k == c.plan.startupKinds.front())
            c.pool.preallocate(c.plan.preallocatedBuffers);
    }
    cuptiActivityEnableAllSyncRecords(c.plan.allSyncRecords ? 1 : 0);
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
        if (c.opt.startOn == StartOn::ProfilerApi || c.opt.startOn == StartOn::Nvtx)
            c.opt.startOn = StartOn::Immediately;
    } else {
        switchCallbacks(c, c.plan.callbacks, true);
        switchCallbacks(c, c.plan.triggerCallbacks, true);
    }
    pointNvtxAtCupti();

    ProcessMeta meta = currentProcessMeta();
    std::string path = captureDir() + "/" + capture::captureFileName(meta.rank, meta.host, meta.pid);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    // The periodic flush bounds what a killed process loses; it runs on the
    // writer thread and never holds a lock of ours across CUPTI's flush.
    std::function<void()> tick;
    if (c.opt.flushPeriodMs > 0)
        tick = [] { flushAll(false); };
    auto period = std::chrono::milliseconds(c.opt.flushPeriodMs > 0 ? c.opt.flushPeriodMs : 1000);
    bool started = c.writer.start(path, meta, error, tick, period);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (!started)
        return false;
    std::string attributes = attributeSummary(c);
    std::string buffers = std::to_string(c.pool.limit()) + " x " + std::to_string(c.pool.bufferSize() >> 20)
                          + " MiB, " + std::to_string(c.pool.available()) + " ready at start";
    c.writer.post([attributes, buffers](CaptureDb& db) {
        const Collector& cc = collector();
        db.setMeta("cupti.version", std::to_string(CUPTI_API_VERSION));
        db.setMeta("cupti.clock", cc.clockCallback ? "callback" : "cupti");
        db.setMeta("cupti.api", cc.opt.api == ApiMode::All ? "all" : cc.opt.api == ApiMode::None ? "none" : "launches");
        db.setMeta("cupti.kinds", cc.opt.minimalKinds ? "minimal" : "all");
        db.setMeta("cupti.attributes", attributes);
        db.setMeta("cupti.buffers", buffers);
        db.setMeta("cupti.flush_ms", std::to_string(cc.opt.flushPeriodMs));
        if (cc.opt.overheadRecords)
            db.setMeta("cupti.overhead", "recorded");
    });
    return true;
}

void startTimer(Collector& c)
{
    if (c.opt.startOn != StartOn::Delay && c.opt.durationS <= 0)
        return;
    c.timer = startQuietThread([] {
        Collector& cc = collector();
        auto wait = [&cc](double seconds) {
            std::unique_lock lock(cc.windowMutex);
            return !cc.timerWake.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return cc.timerCancel; });
        };
        if (cc.opt.startOn == StartOn::Delay) {
            if (!wait(cc.opt.delayS))
                return;
            startRecording("delay");
        }
        if (cc.opt.durationS > 0 && (cc.opt.startOn == StartOn::Delay || cc.opt.startOn == StartOn::Immediately)) {
            if (!wait(cc.opt.durationS))
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
        if (c.opt.startOn == StartOn::Immediately)
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
