// Kineto import throughput: writes a synthetic PyTorch-profiler trace with
// the event mix and layout of a real one (cpu_op around a launch call, ac2g
// flows after their events, kernels with full args, memcpy/memset, step and
// GPU annotations, NCCL kernels with collective args), imports it into a
// store, and prints JSON MB/s, events/s, peak RSS against the store's size,
// and the time of Store::summary() (what `pipescope info` reads).
//
//   bench_import [EVENTS=5000000] [DIR]   (DIR keeps the files; default: a temp dir, removed)
#include "import/Import.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

using namespace pipescope;
namespace fs = std::filesystem;

namespace {

double seconds(std::chrono::steady_clock::time_point since)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double cpuSeconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

long peakRssKb()
{
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

const char* const kKernels[] = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
    "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "ampere_sgemm_128x64_nn",
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel",
    "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(cutlass_80_tensorop_bf16_"
    "s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 "
    "const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, "
    "false, true, false>(Flash_fwd_params)",
};
const char* const kOps[] = {"aten::add", "aten::mm", "aten::addmm", "aten::native_layer_norm",
                            "aten::_flash_attention_forward", "aten::copy_"};

// Writes the trace; returns the number of events.
int64_t generate(const std::string& path, int64_t target)
{
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f)
        throw Error(path + ": cannot write");
    std::setvbuf(f, nullptr, _IOFBF, 1 << 22);
    std::fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\","
                    " \"totalGlobalMem\": 85045379072, \"computeMajor\": 9, \"computeMinor\": 0, \"numSms\": 132}],\n"
                    "  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8, \"pg_count\": 1,"
                    " \"pg_config\": [{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"backend_config\": \"cuda:nccl\","
                    " \"pg_size\": 8, \"ranks\": [0, 1, 2, 3, 4, 5, 6, 7]}], \"nccl_version\": \"2.21.5\"},\n"
                    "  \"traceEvents\": [\n");
    const int pid = 4242, tid = 4243;
    // Microseconds after baseTimeNanoseconds, written with 3 decimals as Kineto does.
    int64_t cpuNs = 4458676388068751, gpuNs = cpuNs + 50000;
    int64_t events = 0, corr = 100000, ext = 1;
    auto us = [](int64_t ns) { return std::pair<long long, int>(ns / 1000, int(ns % 1000)); };
    bool first = true;
    auto sep = [&] {
        if (!first)
            std::fputs(",\n", f);
        first = false;
    };
    int64_t step = 0;
    while (events < target) {
        // One profiler step: an annotation, then launches.
        sep();
        auto [sts, sfrac] = us(cpuNs);
        std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%" PRId64 "\", \"pid\": %d,"
                        " \"tid\": %d, \"ts\": %lld.%03d, \"dur\": 90000.000, \"args\": {\"External id\": %" PRId64
                        ", \"Record function id\": 0, \"Ev Idx\": %" PRId64 "}}",
                     step++, pid, tid, sts, sfrac, ext++, events);
        ++events;
        sep();
        auto [gts, gfrac] = us(gpuNs);
        std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"## forward ##\", \"pid\": 0,"
                        " \"tid\": 7, \"ts\": %lld.%03d, \"dur\": 50000.000, \"args\": {\"External id\": %" PRId64 "}}",
                     gts, gfrac, ext);
        ++events;
        for (int k = 0; k < 1000 && events < target; ++k) {
            bool nccl = k % 50 == 49;
            int which = int((k * 7 + step) % 6);
            int64_t opDur = 9000 + (k % 13) * 317, launchStart = cpuNs + 2113, launchDur = 4000 + (k % 7) * 101;
            int64_t kStart = std::max(gpuNs, launchStart + launchDur + 1500), kDur = 3000 + (k % 29) * 1237;
            int stream = nccl ? 40 : 7;
            auto [ots, ofrac] = us(cpuNs);
            auto [ods, odfrac] = us(opDur);
            sep();
            std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\":"
                            " %lld.%03d, \"dur\": %lld.%03d, \"args\": {\"External id\": %" PRId64 ", \"Record function id\":"
                            " %" PRId64 ", \"Sequence number\": %" PRId64 ", \"Fwd thread id\": 0, \"Ev Idx\": %" PRId64 "}}",
                         nccl ? "record_param_comms" : kOps[which], pid, tid, ots, ofrac, ods, odfrac, ext, ext, ext,
                         events);
            auto [lts, lfrac] = us(launchStart);
            auto [lds, ldfrac] = us(launchDur);
            sep();
            std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": %d,"
                            " \"tid\": %d, \"ts\": %lld.%03d, \"dur\": %lld.%03d, \"args\": {\"External id\": %" PRId64
                            ", \"cbid\": 211, \"correlation\": %" PRId64 "}}",
                         pid, tid, lts, lfrac, lds, ldfrac, ext, corr);
            sep();
            std::fprintf(f, "  {\"ph\": \"s\", \"id\": %" PRId64 ", \"pid\": %d, \"tid\": %d, \"ts\": %lld.%03d, \"cat\":"
                            " \"ac2g\", \"name\": \"ac2g\"}",
                         corr, pid, tid, lts, lfrac);
            auto [kts, kfrac] = us(kStart);
            auto [kds, kdfrac] = us(kDur);
            sep();
            if (nccl) {
                std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_bf16_RING_LL("
                                "ncclDevKernelArgsStorage<4096ul>)\", \"pid\": 0, \"tid\": %d, \"ts\": %lld.%03d, \"dur\":"
                                " %lld.%03d, \"args\": {\"External id\": %" PRId64 ", \"queued\": 0, \"device\": 0, \"context\":"
                                " 1, \"stream\": %d, \"correlation\": %" PRId64 ", \"registers per thread\": 96, \"shared"
                                " memory\": 87568, \"blocks per SM\": 0.060606, \"warps per SM\": 1.030303, \"grid\": [8, 1, 1],"
                                " \"block\": [544, 1, 1], \"est. achieved occupancy %%\": 0, \"Collective name\": \"allreduce\","
                                " \"In msg nelems\": %d, \"Out msg nelems\": %d, \"Group size\": 8, \"dtype\": \"BFloat16\","
                                " \"In split size\": \"[]\", \"Out split size\": \"[]\", \"Process Group Name\": \"0\","
                                " \"Process Group Description\": \"default_pg\", \"Process Group Ranks\":"
                                " \"[0, 1, 2, 3, 4, 5, 6, 7]\"}}",
                             stream, kts, kfrac, kds, kdfrac, ext, stream, corr, 1 << 20, 1 << 20);
            } else {
                std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, \"ts\":"
                                " %lld.%03d, \"dur\": %lld.%03d, \"args\": {\"External id\": %" PRId64 ", \"queued\": 0,"
                                " \"device\": 0, \"context\": 1, \"stream\": %d, \"correlation\": %" PRId64 ", \"registers per"
                                " thread\": 128, \"shared memory\": 49152, \"blocks per SM\": 1.939394, \"warps per SM\":"
                                " 15.515152, \"grid\": [%d, 1, 1], \"block\": [256, 1, 1], \"est. achieved occupancy %%\": 24}}",
                             kKernels[which], stream, kts, kfrac, kds, kdfrac, ext, stream, corr, 128 + k % 1024);
            }
            sep();
            std::fprintf(f, "  {\"ph\": \"f\", \"id\": %" PRId64 ", \"pid\": 0, \"tid\": %d, \"ts\": %lld.%03d, \"cat\":"
                            " \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}",
                         corr, stream, kts, kfrac);
            events += 5;
            ++corr;
            if (k % 20 == 0) {
                // A memcpy or memset now and then, launched like kernels.
                int64_t mStart = kStart + kDur + 700, mDur = 1200 + (k % 5) * 211;
                auto [mts, mfrac] = us(mStart);
                auto [mds, mdfrac] = us(mDur);
                sep();
                if (k % 40 == 0)
                    std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD (Pinned -> Device)\","
                                    " \"pid\": 0, \"tid\": 7, \"ts\": %lld.%03d, \"dur\": %lld.%03d, \"args\": {\"External id\":"
                                    " %" PRId64 ", \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": %" PRId64
                                    ", \"bytes\": 1048576, \"memory bandwidth (GB/s)\": 24.4}}",
                                 mts, mfrac, mds, mdfrac, ext, corr);
                else
                    std::fprintf(f, "  {\"ph\": \"X\", \"cat\": \"gpu_memset\", \"name\": \"Memset (Device)\", \"pid\": 0,"
                                    " \"tid\": 7, \"ts\": %lld.%03d, \"dur\": %lld.%03d, \"args\": {\"External id\": %" PRId64
                                    ", \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": %" PRId64
                                    ", \"bytes\": 65536, \"memory bandwidth (GB/s)\": 51.2}}",
                                 mts, mfrac, mds, mdfrac, ext, corr);
                ++events;
                ++corr;
                kDur += mDur + 700;
            }
            ++ext;
            cpuNs += opDur + 1200;
            gpuNs = kStart + kDur + 800;
        }
        cpuNs = std::max(cpuNs, gpuNs - 20000) + 30000;
    }
    std::fprintf(f, "\n  ],\n  \"traceName\": \"%s\",\n  \"displayTimeUnit\": \"ms\",\n"
                    "  \"baseTimeNanoseconds\": 1711964646000000000\n}\n",
                 path.c_str());
    if (std::fclose(f) != 0)
        throw Error(path + ": write failed");
    return events;
}

} // namespace

int main(int argc, char** argv)
{
    int64_t target = argc > 1 ? std::atoll(argv[1]) : 5'000'000;
    bool keep = argc > 2;
    fs::path dir = keep ? fs::path(argv[2]) : fs::temp_directory_path() / ("pipescope-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string json = (dir / "rank-0.trace.json").string();
    std::string store = (dir / "bench.pipescope").string();
    try {
        auto t0 = std::chrono::steady_clock::now();
        int64_t events = generate(json, target);
        double genSecs = seconds(t0);
        double mb = double(fs::file_size(json)) / 1e6;
        std::printf("generated %" PRId64 " events, %.1f MB of JSON in %.1f s (%s)\n", events, mb, genSecs, json.c_str());
        long rssBefore = peakRssKb();

        fs::remove(store);
        auto t1 = std::chrono::steady_clock::now();
        double c1 = cpuSeconds();
        ImportedSource src;
        double parseSecs = 0, parseCpu = 0;
        {
            StoreWriter writer(store);
            ImportOptions o;
            o.progress = false;
            src = importKineto(json, writer, o);
            parseSecs = seconds(t1);
            parseCpu = cpuSeconds() - c1;
            writer.finish();
        }
        double totalSecs = seconds(t1);
        double totalCpu = cpuSeconds() - c1;
        long rss = peakRssKb();
        double storeMb = double(fs::file_size(store)) / 1e6;

        auto t2 = std::chrono::steady_clock::now();
        StoreSummary summary = Store(store).summary();
        double summarySecs = seconds(t2);

        // Per CPU second too: on a shared machine wall time includes waiting for a core.
        std::printf("import (parse + insert): %.2f s wall, %.2f s CPU: %.1f MB/s of JSON (%.1f per CPU s),"
                    " %.2f M events/s (%.2f per CPU s)\n",
                    parseSecs, parseCpu, mb / parseSecs, mb / parseCpu, double(events) / parseSecs / 1e6,
                    double(events) / parseCpu / 1e6);
        std::printf("finish (index, link, nest, summarise): %.2f s wall, %.2f s CPU\n", totalSecs - parseSecs,
                    totalCpu - parseCpu);
        std::printf("whole import: %.2f s wall, %.2f s CPU: %.1f MB/s of JSON (%.1f per CPU s), %.2f M events/s"
                    " (%.2f per CPU s), %" PRId64 " records\n",
                    totalSecs, totalCpu, mb / totalSecs, mb / totalCpu, double(events) / totalSecs / 1e6,
                    double(events) / totalCpu / 1e6, src.records);
        std::printf("peak RSS %.1f MB (%.1f MB before the import), store %.1f MB: peak RSS / store = %.2f\n",
                    double(rss) / 1024, double(rssBefore) / 1024, storeMb, double(rss) / 1024 / storeMb);
        int64_t kernels = 0;
        for (const auto& g : summary.gpuSummaries)
            kernels += g.kernels;
        std::printf("Store::summary(): %.3f s (%" PRId64 " kernels, %zu NCCL kinds)\n", summarySecs, kernels,
                    summary.ncclCounts.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_import: %s\n", e.what());
        return 1;
    }
    if (!keep)
        fs::remove_all(dir);
    return 0;
}
