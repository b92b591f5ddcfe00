#pragma once
// The NCCL profiler plugin interface, versions 4 and 5, as documented by NCCL
// (ext-profiler/README.md and the versioned structs NCCL 2.26-2.28 look up
// through dlsym: "ncclProfiler_v5", then "ncclProfiler_v4", ...). Written for
// pipescope from the documented layout; names carry a ps prefix so this
// header never clashes with nccl.h. Layouts must match NCCL's bit for bit:
// tests/collectors checks the offsets that the plugin reads.
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

extern "C" {

// ncclResult_t is a C enum: an int on every ABI NCCL supports.
typedef int psNcclResult;
enum { psNcclSuccess = 0, psNcclInternalError = 3 };

// ncclDebugLogger_t: (level, flags, file, line, fmt, ...).
typedef void (*psNcclDebugLogger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Event type bits (eActivationMask and descriptor type).
enum {
    psNcclProfileGroup = 1 << 0,
    psNcclProfileColl = 1 << 1,
    psNcclProfileP2p = 1 << 2,
    psNcclProfileProxyOp = 1 << 3,
    psNcclProfileProxyStep = 1 << 4,
    psNcclProfileProxyCtrl = 1 << 5,
    psNcclProfileKernelCh = 1 << 6,
    psNcclProfileNetPlugin = 1 << 7,
    psNcclProfileGroupApi = 1 << 8,   // v5
    psNcclProfileCollApi = 1 << 9,    // v5
    psNcclProfileP2pApi = 1 << 10,    // v5
    psNcclProfileKernelLaunch = 1 << 11, // v5
};

typedef int psNcclProfilerEventState; // ncclProfilerEventState_t (an enum)

// ---- version 4 (NCCL 2.26) ----
typedef struct {
    uint8_t type;
    void* parentObj;
    int rank;
    union {
        struct {
            uint64_t seqNumber;
            const char* func;
            void const* sendBuff;
            void* recvBuff;
            size_t count;
            int root;
            const char* datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char* algo;
            const char* proto;
        } coll;
        struct {
            const char* func;
            void* buff;
            const char* datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void* data;
        } netPlugin;
    };
} psNcclProfilerEventDescr_v4;

typedef union {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void* data;
    } netPlugin;
    struct {
        uint64_t pTimer;
    } kernelCh;
} psNcclProfilerEventStateArgs_v4;

typedef struct {
    const char* name;
    psNcclResult (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                         int nranks, int rank, psNcclDebugLogger logfn);
    psNcclResult (*startEvent)(void* context, void** eHandle, psNcclProfilerEventDescr_v4* eDescr);
    psNcclResult (*stopEvent)(void* eHandle);
    psNcclResult (*recordEventState)(void* eHandle, psNcclProfilerEventState eState,
                                     psNcclProfilerEventStateArgs_v4* eStateArgs);
    psNcclResult (*finalize)(void* context);
} psNcclProfiler_v4;

// ---- version 5 (NCCL 2.27, 2.28) ----
typedef struct {
    uint64_t type;
    void* parentObj;
    int rank;
    union {
        struct {
            bool graphCaptured;
            int groupDepth;
        } groupApi;
        struct {
            const char* func;
            size_t count;
            const char* datatype;
            int root;
            void* stream;
            bool graphCaptured;
        } collApi;
        struct {
            const char* func;
            size_t count;
            const char* datatype;
            void* stream;
            bool graphCaptured;
        } p2pApi;
        struct {
            void* stream;
        } kernelLaunch;
        struct {
            uint64_t seqNumber;
            const char* func;
            void const* sendBuff;
            void* recvBuff;
            size_t count;
            int root;
            const char* datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char* algo;
            const char* proto;
            void* parentGroup;
        } coll;
        struct {
            const char* func;
            void* buff;
            const char* datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
            void* parentGroup;
        } p2p;
        struct {
            pid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void* data;
        } netPlugin;
    };
} psNcclProfilerEventDescr_v5;

typedef union {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void* data;
    } netPlugin;
    struct {
        uint64_t pTimer;
    } kernelCh;
} psNcclProfilerEventStateArgs_v5;

typedef struct {
    const char* name;
    psNcclResult (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                         int nranks, int rank, psNcclDebugLogger logfn);
    psNcclResult (*startEvent)(void* context, void** eHandle, psNcclProfilerEventDescr_v5* eDescr);
    psNcclResult (*stopEvent)(void* eHandle);
    psNcclResult (*recordEventState)(void* eHandle, psNcclProfilerEventState eState,
                                     psNcclProfilerEventStateArgs_v5* eStateArgs);
    psNcclResult (*finalize)(void* context);
} psNcclProfiler_v5;

} // extern "C"
