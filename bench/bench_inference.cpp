// How well the analysis reads a pipeline from a trace without step
// annotations: on simulated jobs over the matrix of every built-in schedule x
// p in {2, 4, 8} x v x m in {p, 2p, 4p} x dp in {1, 2}, the share of jobs
// whose p, dp, v, m and schedule come out right, and of those whose every
// step (kind, chunk, microbatch, in order on every rank) is right.
//
//   build/release/bench/bench_inference [--quick] [--verbose] [--modules] [--blocking] [--no-autograd]
//
// --quick runs p in {2, 4} only; --modules keeps PyTorch module events in the
// traces (nn.Module ranges), which the step inference does not need;
// --blocking writes jobs whose exchanges hold the compute stream, as
// Megatron-LM runs them (simulate --exchanges blocking); --no-autograd reads
// kernel order and point-to-point transfers alone, not autograd's sequence
// numbers (which pair each backward with its forward where the order cannot).
#include "../tests/common/InferenceMatrix.h"
#include "whatif/ModelDescription.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

using namespace pipescope;
using namespace pipescope::whatif;
namespace fs = std::filesystem;


int main(int argc, char** argv)
{
    bool quick = false, verbose = false, modules = false, blocking = false, autograd = true;
    for (int i = 1; i < argc; ++i) {
        quick = quick || std::strcmp(argv[i], "--quick") == 0;
        verbose = verbose || std::strcmp(argv[i], "--verbose") == 0;
        modules = modules || std::strcmp(argv[i], "--modules") == 0;
        blocking = blocking || std::strcmp(argv[i], "--blocking") == 0;
        autograd = autograd && std::strcmp(argv[i], "--no-autograd") != 0;
    }
    CostModel model = CostModel::fromModel(loadModelDescription(PIPESCOPE_SOURCE_DIR "/resources/models/gpt-32l.json"));
    if (blocking) {
        model.blockingExchanges = true;
        model.exchangeGapNs = kDefaultExchangeGapNs;
    }
    const fs::path work = fs::temp_directory_path() / ("pipescope-bench-inference-" + std::to_string(::getpid()));
    fs::create_directories(work);

    std::vector<test::Config> configs;
    for (ScheduleKind kind : builtinScheduleKinds()) {
        std::vector<int> vs{1};
        if (kind == ScheduleKind::Interleaved1F1B || kind == ScheduleKind::LoopedBFS)
            vs = {2, 4};
        else if (isVShaped(kind))
            vs = {2};
        for (int pp : quick ? std::vector<int>{2, 4} : std::vector<int>{2, 4, 8})
            for (int v : vs)
                for (int mf : {1, 2, 4})
                    for (int dp : {1, 2})
                        configs.push_back({kind, pp, v, pp * mf, dp});
    }
    std::map<std::string, std::pair<int, int>> bySchedule; // shape right, ran
    int ran = 0, shape = 0, steps = 0, ambiguous = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const test::Config& c : configs) {
        test::Outcome o;
        try {
            o = test::evaluateInference(model, c, work, modules, autograd);
        } catch (const std::exception& e) {
            o.ran = true;
            o.detail = std::string("error: ") + e.what();
        }
        if (!o.ran)
            continue;
        ++ran;
        shape += o.shape;
        steps += o.steps;
        ambiguous += o.ambiguous;
        auto& b = bySchedule[std::string(toString(c.kind))];
        b.first += o.shape;
        b.second += 1;
        if (verbose || !o.steps)
            std::printf("%-34s %-5s %-5s %s%s\n", c.name().c_str(), o.shape ? "shape" : "-", o.steps ? "steps" : "-",
                        o.ambiguous ? "(ambiguous, said so) " : "",
                        o.detail.c_str());
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fs::remove_all(work);
    std::printf("\nper schedule (shape right / jobs):\n");
    for (const auto& [name, b] : bySchedule)
        std::printf("  %-18s %3d / %3d\n", name.c_str(), b.first, b.second);
    std::printf("\n%d jobs (%s, without step annotations%s%s) in %.1f s\n", ran, quick ? "p in {2, 4}" : "p in {2, 4, 8}",
                modules ? ", with module events" : "",
                autograd ? "" : "; kernel order and transfers only, no autograd sequence numbers", secs);
    std::printf("p, dp, v, m and schedule right: %d (%.1f%%)   target >= 95%%\n", shape, 100.0 * shape / std::max(ran, 1));
    std::printf("every step right as well:       %d (%.1f%%)\n", steps, 100.0 * steps / std::max(ran, 1));
    std::printf("right or reported as ambiguous: %d (%.1f%%)   (the trace cannot tell the true schedule from the one named)\n",
                shape + ambiguous, 100.0 * (shape + ambiguous) / std::max(ran, 1));
    return 0;
}
