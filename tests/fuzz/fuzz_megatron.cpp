// libFuzzer target for Megatron-LM step timings (docs/import-megatron.md):
// detection on the input's head, then the input as a file through the job's
// checks (planMegatronJob) and the importer into a store. Each step must
// finish or throw pipescope::Error, never crash, trip a sanitizer or take
// memory out of proportion to the input (nesting is refused before parsing).
// Seeds: tests/fuzz/seeds/megatron/ (one rank's file, an aggregated file).
#include "import/Import.h"
#include "import/megatron/MegatronTiming.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

namespace {

std::string g_dir;
std::unique_ptr<pipescope::StoreWriter> g_writer;
int g_uses = 0;

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    char pattern[] = "/tmp/fuzz_megatron.XXXXXX";
    if (!mkdtemp(pattern))
        std::abort();
    g_dir = pattern;
    std::atexit([] {
        g_writer.reset();
        std::error_code ec;
        std::filesystem::remove_all(g_dir, ec);
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)pipescope::looksLikeMegatronTiming(text.substr(0, 4096));
    const std::string input = g_dir + "/benchmark-data-0-pipeline-0-tensor-0.json";
    {
        std::ofstream f(input, std::ios::binary | std::ios::trunc);
        f.write(text.data(), static_cast<std::streamsize>(text.size()));
    }
    // One store for many inputs keeps the fuzzer fast; a fresh one now and
    // then keeps it small.
    if (!g_writer || ++g_uses > 500) {
        g_writer.reset();
        g_writer = std::make_unique<pipescope::StoreWriter>(g_dir + "/store.pipescope");
        g_uses = 0;
    }
    pipescope::ImportOptions options;
    options.progress = false;
    try {
        const pipescope::MegatronJobPlan plan = pipescope::planMegatronJob({g_dir}, {input}, {"megatron-timing"}, std::nullopt);
        if (!plan.skipped.count(input)) {
            g_writer->beginInput();
            try {
                pipescope::importMegatronTiming(input, *g_writer, options, plan.pipelineDegree);
            } catch (...) {
                g_writer->discardInput();
                throw;
            }
            g_writer->keepInput();
        }
    } catch (const pipescope::Error&) {
    }
    return 0;
}
