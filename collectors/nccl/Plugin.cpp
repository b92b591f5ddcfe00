// libpipescope_nccl: an NCCL profiler plugin (NCCL_PROFILER_PLUGIN names
// this file). Records every collective and point-to-point operation of every
// communicator into the process's capture file, through its own connection.
// Profiler calls never fail towards NCCL: errors are said once and dropped.
#include "Clock.h"
#include "Log.h"
#include "NcclProfilerApi.h"
#include "WriterThread.h"
#include "import/capture/CaptureEnv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>

namespace pipescope::collect {
namespace {

struct Communicator {
    uint64_t commHash = 0;
    int rank = 0;
    std::mutex mutex;
    std::map<std::pair<std::string, int>, int64_t> p2pSeq; // (func, peer) -> next sequence number
};

struct OpEvent {
    NcclOpRow row;
};

struct Plugin {
    std::mutex mutex;
    int comms = 0;
    bool opened = false, failed = false;
    pid_t pid = 0;
    WriterThread writer;
};

Plugin& plugin()
{
    static Plugin* p = new Plugin; // never destroyed: exit order must not matter
    return *p;
}

// Element size of NCCL's datatype names ("ncclFloat32", "ncclBfloat16", ...).
std::optional<int64_t> dtypeSize(const char* name)
{
    if (!name)
        return std::nullopt;
    static const std::pair<const char*, int> sizes[] = {
        {"ncclInt8", 1},     {"ncclChar", 1},     {"ncclUint8", 1},     {"ncclInt32", 4},   {"ncclInt", 4},
        {"ncclUint32", 4},   {"ncclInt64", 8},    {"ncclUint64", 8},    {"ncclFloat16", 2}, {"ncclHalf", 2},
        {"ncclFloat32", 4},  {"ncclFloat", 4},    {"ncclFloat64", 8},   {"ncclDouble", 8},  {"ncclBfloat16", 2},
        {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
    };
    for (auto& [n, s] : sizes)
        if (std::strcmp(n, name) == 0)
            return s;
    return std::nullopt;
}

void atExit()
{
    Plugin& p = plugin();
    std::lock_guard lock(p.mutex);
    if (p.opened && getpid() == p.pid) {
        p.writer.stop();
        p.opened = false;
    }
}

// NCCL dlcloses the plugin when its last communicator goes; our writer
// thread and exit handler must outlive that, so the library pins itself.
void pinLibrary()
{
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&atExit), &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE);
}

bool openWriter(Plugin& p)
{
    if (p.opened)
        return true;
    if (p.failed)
        return false;
    const char* d = std::getenv(capture::kEnvDir);
    std::string dir = d && *d ? d : "pipescope-capture";
    ::mkdir(dir.c_str(), 0777);
    ProcessMeta meta = currentProcessMeta();
    std::string path = dir + "/" + capture::captureFileName(meta.rank, meta.host, meta.pid);
    std::string error;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    bool ok = p.writer.start(path, meta, error);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (!ok) {
        warnOnce("nccl-open", "NCCL operations are not recorded: " + error);
        p.failed = true;
        return false;
    }
    p.opened = true;
    p.pid = getpid();
    pinLibrary();
    std::atexit(atExit);
    return true;
}

psNcclResult initCommon(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                        int nranks, int rank)
{
    *context = nullptr;
    if (eActivationMask)
        *eActivationMask = 0;
    try {
        Plugin& p = plugin();
        std::lock_guard lock(p.mutex);
        if (!openWriter(p))
            return psNcclSuccess; // NCCL runs on; every event call sees a null context
        auto* comm = new Communicator;
        comm->commHash = commHash;
        comm->rank = rank;
        ++p.comms;
        NcclCommRow row;
        row.commHash = commHash;
        row.name = commName ? commName : "";
        row.nranks = nranks;
        row.rank = rank;
        row.nnodes = nNodes;
        row.initNs = nowNs();
        p.writer.post([row](CaptureDb& db) { db.addNcclComm(row); }, "nccl_events");
        *context = comm;
        if (eActivationMask)
            *eActivationMask = psNcclProfileColl | psNcclProfileP2p;
    } catch (...) {
        warnOnce("nccl-init", "NCCL profiler set-up failed; NCCL operations are not recorded");
    }
    return psNcclSuccess;
}

psNcclResult finalize(void* context)
{
    auto* comm = static_cast<Communicator*>(context);
    if (!comm)
        return psNcclSuccess;
    try {
        Plugin& p = plugin();
        {
            std::lock_guard lock(p.mutex);
            --p.comms;
        }
        p.writer.flush();
    } catch (...) {
    }
    delete comm;
    return psNcclSuccess;
}

template <typename Descr>
psNcclResult startOp(void* context, void** eHandle, Descr* d, uint64_t type)
{
    *eHandle = nullptr;
    auto* comm = static_cast<Communicator*>(context);
    if (!comm || !d || !(type & (psNcclProfileColl | psNcclProfileP2p)))
        return psNcclSuccess;
    auto* ev = new (std::nothrow) OpEvent;
    if (!ev)
        return psNcclSuccess;
    // Nothing may escape into NCCL: a failure here (out of memory) loses this one operation.
    try {
        NcclOpRow& r = ev->row;
        r.commHash = comm->commHash;
        r.start = nowNs();
        if (type & psNcclProfileColl) {
            r.func = d->coll.func ? d->coll.func : "Collective";
            r.isP2p = false;
            r.count = static_cast<int64_t>(d->coll.count);
            r.dtype = d->coll.datatype ? d->coll.datatype : "";
            if (auto s = dtypeSize(d->coll.datatype))
                r.bytes = *r.count * *s;
            r.root = d->coll.root;
            r.seq = static_cast<int64_t>(d->coll.seqNumber);
            r.algo = d->coll.algo ? d->coll.algo : "";
            r.proto = d->coll.proto ? d->coll.proto : "";
            r.nchannels = d->coll.nChannels;
        } else {
            r.func = d->p2p.func ? d->p2p.func : "P2p";
            r.isP2p = true;
            r.count = static_cast<int64_t>(d->p2p.count);
            r.dtype = d->p2p.datatype ? d->p2p.datatype : "";
            if (auto s = dtypeSize(d->p2p.datatype))
                r.bytes = *r.count * *s;
            r.peer = d->p2p.peer;
            r.nchannels = d->p2p.nChannels;
            // The n-th Send from a to b pairs with the n-th Recv on b from a.
            std::lock_guard lock(comm->mutex);
            r.seq = comm->p2pSeq[{r.func, d->p2p.peer}]++;
        }
    } catch (...) {
        delete ev;
        return psNcclSuccess;
    }
    *eHandle = ev;
    return psNcclSuccess;
}

psNcclResult stopEvent(void* eHandle)
{
    auto* ev = static_cast<OpEvent*>(eHandle);
    if (!ev)
        return psNcclSuccess;
    ev->row.end = nowNs();
    try {
        plugin().writer.post([row = std::move(ev->row)](CaptureDb& db) { db.addNcclOp(row); }, "nccl_events");
    } catch (...) {
    }
    delete ev;
    return psNcclSuccess;
}

psNcclResult recordEventState4(void*, psNcclProfilerEventState, psNcclProfilerEventStateArgs_v4*)
{
    return psNcclSuccess;
}
psNcclResult recordEventState5(void*, psNcclProfilerEventState, psNcclProfilerEventStateArgs_v5*)
{
    return psNcclSuccess;
}

psNcclResult init5(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks,
                   int rank, psNcclDebugLogger)
{
    return initCommon(context, eActivationMask, commName, commId, nNodes, nranks, rank);
}

psNcclResult init4(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                   int nranks, int rank, psNcclDebugLogger)
{
    return initCommon(context, eActivationMask, commName, commHash, nNodes, nranks, rank);
}

psNcclResult start5(void* context, void** eHandle, psNcclProfilerEventDescr_v5* d)
{
    return startOp(context, eHandle, d, d ? d->type : 0);
}

psNcclResult start4(void* context, void** eHandle, psNcclProfilerEventDescr_v4* d)
{
    return startOp(context, eHandle, d, d ? d->type : 0);
}

} // namespace
} // namespace pipescope::collect

extern "C" {
// The symbols NCCL looks up with dlsym, newest first.
__attribute__((visibility("default"))) psNcclProfiler_v5 ncclProfiler_v5 = {
    "pipescope",
    pipescope::collect::init5,
    pipescope::collect::start5,
    pipescope::collect::stopEvent,
    pipescope::collect::recordEventState5,
    pipescope::collect::finalize,
};

__attribute__((visibility("default"))) psNcclProfiler_v4 ncclProfiler_v4 = {
    "pipescope",
    pipescope::collect::init4,
    pipescope::collect::start4,
    pipescope::collect::stopEvent,
    pipescope::collect::recordEventState4,
    pipescope::collect::finalize,
};
} // extern "C"
