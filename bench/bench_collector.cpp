// CUPTI collector benchmark, without a GPU: CUPTI-shaped activity buffers
// (a launch-bound loop: per kernel a runtime launch record, a driver launch
// record and a concurrent-kernel record, 60 distinct long kernel names)
// through the collector's own buffer pool, translator, writer thread and
// capture file. Prints
//   - the program-thread side: what one CUPTI buffer request costs, with the
//     buffer zeroed by CUPTI on that thread (CUPTI's default) and pre-zeroed
//     from the pool (the collector's setting), per request and per record;
//     a trigger-callback entry with and without a getpid() check; one host
//     timestamp, direct and through a timestamp callback;
//   - the writer side: ns per record translated and inserted, and the
//     end-to-end throughput of buffers posted as CUPTI's completion callback
//     posts them.
// What CUPTI itself costs per kernel on a GPU is not measured here: see
// scripts/gpu-check.sh.
//   bench_collector [repetitions=3] [dir=/tmp]
#include "ActivityBuffers.h"
#include "ActivityRecords.h"
#include "PackedRecords.h"
#include "CaptureDb.h"
#include "RecordingWindows.h"
#include "WriterThread.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace pipescope::collect;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct SyntheticBuffer {
    std::vector<uint8_t> bytes;
    size_t valid = 0;
    int64_t records = 0, kernels = 0;
};

std::vector<std::string> kernelNames()
{
    std::vector<std::string> names;
    for (int i = 0; i < 60; ++i)
        names.push_back("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>) #"
                        + std::to_string(i));
    return names;
}

SyntheticBuffer fillBuffer(const std::vector<std::string>& names, uint32_t& correlation, uint64_t& t)
{
    SyntheticBuffer b;
    b.bytes.assign(ActivityBufferPool::kBufferSize, 0);
    size_t off = 0;
    for (;;) {
        CUpti_ActivityAPI rt;
        std::memset(&rt, 0, sizeof rt);
        rt.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
        rt.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        rt.start = t, rt.end = t + 3000, rt.threadId = 4242, rt.correlationId = correlation;
        CUpti_ActivityAPI drv = rt;
        drv.kind = CUPTI_ACTIVITY_KIND_DRIVER;
        drv.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
        drv.start = t + 500, drv.end = t + 2500;
        CUpti_ActivityKernel10 k;
        std::memset(&k, 0, sizeof k);
        k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = t + 10'000, k.end = t + 14'000, k.deviceId = 0, k.contextId = 1, k.streamId = 7;
        k.correlationId = correlation;
        k.gridX = 1024, k.gridY = 1, k.gridZ = 1, k.blockX = 256, k.blockY = 1, k.blockZ = 1;
        k.name = names[correlation % names.size()].c_str();
        if (off + 2 * sizeof rt + sizeof k > b.bytes.size())
            break;
        for (auto [p, n] : {std::pair<const void*, size_t>{&rt, sizeof rt}, {&drv, sizeof drv}, {&k, sizeof k}}) {
            std::memcpy(b.bytes.data() + off, p, n);
            off += n;
            ++b.records;
        }
        ++b.kernels;
        ++correlation;
        t += 5000;
    }
    b.valid = off;
    return b;
}

ProcessMeta benchMeta()
{
    ProcessMeta m;
    m.host = "bench";
    m.pid = getpid();
    m.startNs = 1;
    return m;
}

std::string freshPath(const std::string& dir, const char* name)
{
    std::string p = dir + "/" + name;
    for (const char* suffix : {"", "-wal", "-shm"})
        unlink((p + suffix).c_str());
    return p;
}

template <typename F>
double medianNs(int rounds, int64_t perRound, F&& f)
{
    std::vector<double> v;
    for (int r = 0; r < rounds; ++r) {
        auto t0 = Clock::now();
        f();
        v.push_back(secondsSince(t0) * 1e9 / static_cast<double>(perRound));
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int64_t hostNs()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

uint64_t timestampCallback() { return static_cast<uint64_t>(hostNs()); }

} // namespace

int main(int argc, char** argv)
{
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
    const std::string dir = argc > 2 ? argv[2] : "/tmp";
    const auto names = kernelNames();
    uint32_t correlation = 1;
    uint64_t t = 1'700'000'000'000'000'000ULL;
    std::vector<SyntheticBuffer> buffers;
    for (int i = 0; i < 8; ++i)
        buffers.push_back(fillBuffer(names, correlation, t));
    const double perBuffer = static_cast<double>(buffers[0].records);
    const double kernelsPerBuffer = static_cast<double>(buffers[0].kernels);
    std::printf("records per 4 MiB buffer: %.0f (%.0f kernels with their runtime and driver launch records)\n",
                perBuffer, kernelsPerBuffer);

    // --- Program threads: CUPTI asks for a buffer on the thread that needs one.
    {
        const int n = 64;
        ActivityBufferPool pool;
        pool.setLimit(n);
        pool.preallocate(n);
        std::vector<uint8_t*> got(n);
        // CUPTI's default: it zeroes the (warm) buffer itself, on that thread.
        double zeroedByCupti = medianNs(5, n, [&] {
            for (auto& b : got) {
                b = pool.acquire();
                std::memset(b, 0, pool.bufferSize());
            }
            for (auto* b : got)
                pool.release(b);
        });
        // ...and the same on fresh pages, as with a buffer allocated on demand.
        double freshPages = medianNs(5, n, [&] {
            for (auto& b : got) {
                void* p = mmap(nullptr, pool.bufferSize(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                b = static_cast<uint8_t*>(p);
                std::memset(b, 0, pool.bufferSize());
            }
            for (auto* b : got)
                munmap(b, pool.bufferSize());
        });
        // The collector: a pre-zeroed buffer from the pool (the writer re-zeroes it on release).
        double pooled = 0, releaseNs = 0;
        {
            std::vector<double> acq, rel;
            for (int r = 0; r < 5; ++r) {
                auto t0 = Clock::now();
                for (auto& b : got)
                    b = pool.acquire();
                acq.push_back(secondsSince(t0) * 1e9 / n);
                t0 = Clock::now();
                for (auto* b : got)
                    pool.release(b);
                rel.push_back(secondsSince(t0) * 1e9 / n);
            }
            std::sort(acq.begin(), acq.end());
            std::sort(rel.begin(), rel.end());
            pooled = acq[2];
            releaseNs = rel[2];
        }
        std::printf("buffer request on a program thread: zeroed by CUPTI %.0f ns (fresh pages %.0f ns), "
                    "pre-zeroed from the pool %.0f ns\n",
                    zeroedByCupti, freshPages, pooled);
        std::printf("  per kernel launched: %.2f ns (fresh pages %.2f ns) -> %.3f ns; re-zeroing moves to the "
                    "writer: %.0f ns per buffer, %.2f ns per record\n",
                    zeroedByCupti / kernelsPerBuffer, freshPages / kernelsPerBuffer, pooled / kernelsPerBuffer,
                    releaseNs, releaseNs / perBuffer);
    }
    {
        const int64_t n = 2'000'000;
        std::atomic<int> state{2};
        volatile int sink = 0;
        double withPid = medianNs(5, n, [&] {
            for (int64_t i = 0; i < n; ++i)
                if (state.load(std::memory_order_acquire) == 2 && getpid() > 0)
                    sink = sink + 1;
        });
        double stateOnly = medianNs(5, n, [&] {
            for (int64_t i = 0; i < n; ++i)
                if (state.load(std::memory_order_acquire) == 2)
                    sink = sink + 1;
        });
        std::printf("trigger callback entry (each NVTX push/pop in --nvtx-range mode until its window): "
                    "with getpid() %.1f ns, without %.1f ns\n",
                    withPid, stateOnly);
        uint64_t (*volatile callback)() = timestampCallback;
        volatile int64_t stamp = 0;
        double direct = medianNs(5, n, [&] {
            for (int64_t i = 0; i < n; ++i)
                stamp = hostNs();
        });
        double viaCallback = medianNs(5, n, [&] {
            for (int64_t i = 0; i < n; ++i)
                stamp = static_cast<int64_t>(callback());
        });
        std::printf("host timestamp (CLOCK_REALTIME): direct %.1f ns, through a timestamp callback %.1f ns\n", direct,
                    viaCallback);
    }

    // --- Writer side.
    auto apiName = [](int kind, uint32_t) { return std::string(kind == 0 ? "cudaLaunchKernel" : "cuLaunchKernel"); };
    RecordingWindows windows;
    windows.open(0);
    {
        std::string path = freshPath(dir, "bench_collector_a.pscap");
        CaptureDb db;
        std::string error;
        if (!db.open(path, benchMeta(), error)) {
            std::fprintf(stderr, "bench_collector: %s\n", error.c_str());
            return 1;
        }
        ActivityTranslator tr(apiName);
        tr.setApiFilter([&windows](int64_t ts) { return windows.contains(ts); });
        int64_t n = 0;
        auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r)
            for (auto& b : buffers) {
                db.begin();
                n += storeBuffer(tr, db, b.bytes.data(), b.valid, nextPacked);
                db.commit();
            }
        double s = secondsSince(t0);
        std::printf("writer, translate + insert: %.0f ns per record, %.2f M records/s (%lld records)\n",
                    s * 1e9 / static_cast<double>(n), static_cast<double>(n) / s / 1e6, static_cast<long long>(n));
    }
    {
        std::string path = freshPath(dir, "bench_collector_b.pscap");
        WriterThread writer;
        std::string error;
        if (!writer.start(path, benchMeta(), error)) {
            std::fprintf(stderr, "bench_collector: %s\n", error.c_str());
            return 1;
        }
        ActivityBufferPool pool;
        pool.setLimit(16);
        pool.preallocate(16);
        ActivityTranslator tr(apiName);
        tr.setApiFilter([&windows](int64_t ts) { return windows.contains(ts); });
        double fillS = 0;
        std::vector<double> postNs;
        int64_t n = 0;
        auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r)
            for (auto& b : buffers) {
                uint8_t* buf = pool.acquire();
                while (!buf) { // all 16 with the writer: CUPTI would drop; here we wait
                    writer.flush();
                    buf = pool.acquire();
                }
                auto tf = Clock::now(); // CUPTI filling the buffer: not the collector's cost
                std::memcpy(buf, b.bytes.data(), b.valid);
                fillS += secondsSince(tf);
                auto tp = Clock::now();
                postCompletedBuffer(writer, pool, tr, nextPacked, buf, b.valid);
                postNs.push_back(secondsSince(tp) * 1e9);
                n += b.records;
            }
        writer.flush(std::chrono::minutes(10));
        double s = secondsSince(t0) - fillS;
        writer.stop();
        std::sort(postNs.begin(), postNs.end());
        std::printf("buffer completed (CUPTI's thread): median %.0f ns per buffer posted (max %.0f); writer end to "
                    "end (store + re-zero): %.2f M records/s\n",
                    postNs[postNs.size() / 2], postNs.back(), static_cast<double>(n) / s / 1e6);
    }
    return 0;
}
