#include "RunInput.h"

#include "RankSelection.h"
#include "import/Import.h"
#include "store/JobIndex.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/StreamInput.h"

#include <csignal>
#include <cstdlib>
#include <system_error>
#include <unistd.h>

namespace pipescope::cli {

namespace fs = std::filesystem;

LoadedRun::~LoadedRun()
{
    if (!scratch.empty()) {
        std::error_code ec;
        fs::remove_all(scratch, ec);
        AtomicOutput::untrackTemporary(scratchSignal);
    }
}

namespace {

fs::path makeScratch()
{
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/pipescope-run-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
        throw Error("cannot make a temporary folder to import into (" + pattern +
                    "); set TMPDIR to a writable folder");
    return fs::path(buf.data());
}

} // namespace

std::unique_ptr<LoadedRun> loadRun(const std::string& input, AnalyzeOptions ao, const whatif::CalibrateOptions& co,
                                   bool progress)
{
    auto run = std::make_unique<LoadedRun>();
    run->name = input;
    std::error_code ec;
    if (!fs::exists(input, ec))
        throw Error(input + ": no such file or folder; give a store, a trace file or a folder of per-rank traces");
    std::string storePath = input;
    // A pipe is imported (which copies it first): asking its format would read it.
    if (!isShardedJob(input) &&
        (fs::is_directory(input, ec) || isStreamInput(input) || detectFormat(input) != "store")) {
        // Signals wait while the folder is made and registered: one that came
        // between the two would leave the folder behind.
        sigset_t block, old;
        sigemptyset(&block);
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            sigaddset(&block, sig);
        ::sigprocmask(SIG_BLOCK, &block, &old);
        try {
            run->scratch = makeScratch();
            run->scratchSignal = AtomicOutput::trackTemporary(run->scratch.string());
        } catch (...) {
            ::sigprocmask(SIG_SETMASK, &old, nullptr);
            throw;
        }
        ::sigprocmask(SIG_SETMASK, &old, nullptr);
        ImportJobOptions io;
        io.inputs = {input};
        io.output = (run->scratch / "run.pipescope").string();
        io.progress = progress;
        importJob(io);
        storePath = io.output;
    }
    Store store(storePath);
    // A sharded job beyond the budget: the pipeline of its busiest replica, as analyze reads it.
    const CommandRead read = planCommandRead(store, "", input, false);
    checkCommandRead(store, read, input, ReadVerb{"comparing", "compare", false});
    run->part = read.part;
    LoadOptions lo;
    lo.ranks = read.ranks();
    run->trace = store.load(lo);
    if (ao.stageMap.empty() && !ao.pipelineDegree)
        ao.stageMap = read.part.stageMapFromIndex;
    ao.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
    try {
        run->analysis = analyze(run->trace, ao);
    } catch (const Error& e) {
        throw Error(input + ": " + e.what());
    }
    ao.autogradSequences = nullptr;
    if (!run->analysis.pipeline.found) {
        run->modelWhyNot = "no pipeline found";
        return run;
    }
    try {
        whatif::CalibrateOptions paced = co;
        paced.replicaPace = read.part.replicaPace;
        run->model = whatif::calibrate(run->trace, run->analysis, paced);
    } catch (const ValueError&) {
        throw; // a setting the user gave (the layer count, the measured boundaries) is wrong
    } catch (const Error& e) {
        run->modelWhyNot = e.what();
    }
    return run;
}

} // namespace pipescope::cli
