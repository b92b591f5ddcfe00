// pipescope capture [-o DIR] [--delay S] [--duration S] -- COMMAND...
// Runs COMMAND with the CUPTI collector and the NCCL profiler plugin
// injected through the environment, then merges the per-rank files.
#include "Command.h"
#include "NumberChecks.h"
#include "import/capture/CaptureLaunch.h"
#include "import/capture/ImportCapture.h"
#include "util/Error.h"
#include "util/Format.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

namespace fs = std::filesystem;

struct CaptureArgs {
    std::string dir = "pipescope-capture";
    double delay = 0;
    double duration = 0;
    bool profilerApi = false;
    std::string nvtxRange;
    bool allApi = false;
    bool noMerge = false;
    std::string output;
    bool quiet = false;
    std::vector<std::string> command;
};

std::string executablePath()
{
    std::error_code ec;
    auto p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
}

// Empty when a CUDA driver with at least one GPU answers; else why not. The
// launcher checks without keeping anything: the driver is unloaded again.
std::string gpuProblem()
{
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return "no CUDA driver found (libcuda.so.1 cannot be loaded)";
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    std::string problem;
    int n = 0;
    if (!init || !count)
        problem = "the CUDA driver library lacks cuInit";
    else if (int rc = init(0); rc != 0)
        problem = "the CUDA driver did not initialise (cuInit error " + std::to_string(rc) + ")";
    else if (count(&n) != 0 || n == 0)
        problem = "the CUDA driver sees no GPU";
    dlclose(lib);
    return problem;
}

volatile sig_atomic_t childPid = 0;

void forwardSignal(int sig)
{
    if (childPid > 0)
        kill(childPid, sig);
}

// Runs the command with extra environment; returns its exit status the way a shell reports it.
int runCommand(const std::vector<std::string>& command, const std::vector<std::pair<std::string, std::string>>& env)
{
    std::vector<char*> argv;
    for (const auto& a : command)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    // Ctrl-C reaches the whole foreground group: the command decides what it
    // means, the launcher waits for it and merges what was recorded.
    struct sigaction ignore {}, forward {}, oldInt {}, oldQuit {}, oldTerm {}, oldHup {};
    ignore.sa_handler = SIG_IGN;
    forward.sa_handler = forwardSignal;
    sigemptyset(&ignore.sa_mask);
    sigemptyset(&forward.sa_mask);
    std::cout.flush();
    std::cerr.flush();
    pid_t pid = fork();
    if (pid < 0)
        throw Error(std::string("cannot start the command: ") + std::strerror(errno));
    if (pid == 0) {
        for (const auto& [k, v] : env)
            setenv(k.c_str(), v.c_str(), 1);
        execvp(argv[0], argv.data());
        std::fprintf(stderr, "pipescope capture: cannot run %s: %s\n", argv[0], std::strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    childPid = pid;
    sigaction(SIGINT, &ignore, &oldInt);
    sigaction(SIGQUIT, &ignore, &oldQuit);
    sigaction(SIGTERM, &forward, &oldTerm);
    sigaction(SIGHUP, &forward, &oldHup);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    childPid = 0;
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGQUIT, &oldQuit, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGHUP, &oldHup, nullptr);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

void printMergeReport(const MergeReport& report)
{
    std::cout << "Merged " << report.sources.size() << (report.sources.size() == 1 ? " rank" : " ranks") << " into "
              << report.output << "\n";
    TextTable t({">rank", "file", ">records"});
    for (size_t i = 0; i < report.sources.size(); ++i) {
        int r = report.sources[i].ranks.empty() ? -1 : report.sources[i].ranks.front();
        t.add({std::to_string(r), fs::path(report.rankFiles.at(r)).filename().string(),
               formatCount(report.sources[i].records)});
    }
    std::cout << t.render();
    for (const auto& w : report.warnings)
        std::cerr << "pipescope: warning: " << printable(w, 4096) << "\n";
}

int runCapture(const CaptureArgs& a)
{
    if (a.command.empty())
        throw Error("no command given; put it after --, e.g. pipescope capture -- python train.py");
    if (a.profilerApi && !a.nvtxRange.empty())
        throw Error("--profiler-api and --nvtx-range both choose when recording starts; pass one of them");
    std::error_code ec;
    fs::create_directories(a.dir, ec);
    if (ec || !fs::is_directory(a.dir))
        throw Error(a.dir + ": cannot create the capture directory: " + ec.message());
    fs::path dir = fs::absolute(a.dir, ec);
    // The launcher merges every capture file in the folder at the end, so files
    // left by an earlier run would be mixed into this job. One task of a
    // parallel launch (srun/mpirun) shares the folder with its siblings and
    // cannot tell theirs from stale ones; it is left to `pipescope merge`.
    if (!capture::launcherIsOneOfMany() && !a.noMerge)
        if (auto stale = captureFilesIn(dir.string()); !stale.empty())
            throw Error(a.dir + ": already holds " + std::to_string(stale.size()) +
                        " capture file(s) from an earlier run; choose a new -o folder or remove them");

    capture::CaptureSettings s;
    s.dir = dir.lexically_normal().string();
    s.delaySeconds = a.delay;
    s.durationSeconds = a.duration;
    s.startOn = a.profilerApi ? "profiler-api" : a.nvtxRange.empty() ? "" : "nvtx:" + a.nvtxRange;
    s.allApi = a.allApi;
    std::string exe = executablePath();
    s.cuptiLibrary = capture::findCollector(capture::kCuptiLibrary, exe).value_or("");
    s.ncclLibrary = capture::findCollector(capture::kNcclLibrary, exe).value_or("");

    bool canRecord = true;
    if (s.cuptiLibrary.empty()) {
        std::cerr << "pipescope capture: " << capture::kCuptiLibrary
                  << " not found (this pipescope was built without the CUDA toolkit, or set "
                  << capture::kEnvCollectorDir << "); the command runs without GPU capture\n";
        canRecord = false;
    } else if (std::string problem = gpuProblem(); !problem.empty()) {
        std::cerr << "pipescope capture: " << problem << "; the command runs, but nothing can be recorded\n";
        canRecord = false;
    }
    if (const char* other = std::getenv("CUDA_INJECTION64_PATH"); other && *other && s.cuptiLibrary != other)
        std::cerr << "pipescope capture: replacing CUDA_INJECTION64_PATH=" << other << " for the command\n";

    auto env = capture::captureEnvironment(s);
    if (!a.quiet && canRecord)
        std::cerr << "pipescope capture: recording into " << s.dir << "\n";
    int exitCode = runCommand(a.command, env);

    bool oneOfMany = capture::launcherIsOneOfMany();
    if (a.noMerge || oneOfMany) {
        if (oneOfMany && !a.quiet)
            std::cerr << "pipescope capture: this is one task of a parallel launch; once all ranks are done, run: "
                      << "pipescope merge " << s.dir << "\n";
        return exitCode;
    }
    if (captureFilesIn(s.dir).empty()) {
        if (canRecord)
            std::cerr << "pipescope capture: no capture files were written to " << s.dir
                      << " (the command ran no CUDA code, or CUDA_INJECTION64_PATH was cleared)\n";
        return exitCode;
    }
    MergeOptions mo;
    mo.output = a.output.empty() ? (fs::path(s.dir) / "job.pipescope").string() : a.output;
    mo.progress = !a.quiet;
    try {
        auto report = mergeCaptureDir(s.dir, mo);
        if (!a.quiet) {
            printMergeReport(report);
            std::cout << "Next: pipescope info " << report.output << "   or   pipescope analyze " << report.output << "\n";
        }
    } catch (const Error& e) {
        std::cerr << "pipescope capture: error: merge failed: " << e.what() << "\n";
        return exitCode != 0 ? exitCode : kExitError;
    }
    return exitCode;
}

RegisterCommand reg{{"capture", "Run a command and record its GPUs, NCCL operations and NVTX ranges", 5,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<CaptureArgs>();
                         app.add_option("-o,--dir", a->dir, "Directory for the per-rank capture files")
                             ->capture_default_str();
                         app.add_option("--delay", a->delay, "Seconds after each process's first CUDA call before recording")
                             ->check(number(0.0, std::nullopt, "seconds"));
                         app.add_option("--duration", a->duration, "Seconds to record, then stop (default: until exit)")
                             ->check(number(0.0, std::nullopt, "seconds"));
                         app.add_flag("--profiler-api", a->profilerApi,
                                      "Record only between cudaProfilerStart() and cudaProfilerStop()");
                         app.add_option("--nvtx-range", a->nvtxRange,
                                        "Record only inside the first NVTX range with this name");
                         app.add_flag("--all-api", a->allApi,
                                      "Record every CUDA runtime and driver call, not only launches, copies, "
                                      "synchronisation and allocation");
                         app.add_flag("--no-merge", a->noMerge, "Leave the per-rank files; merge later with pipescope merge");
                         app.add_option("--store", a->output, "Merged store to write (default: DIR/job.pipescope)");
                         app.add_flag("-q,--quiet", a->quiet, "No summary");
                         app.add_option("command", a->command, "The command to run, after --")->required();
                         app.footer("Examples:\n"
                                    "  pipescope capture -o run1 -- torchrun --nproc-per-node 8 train.py\n"
                                    "  srun pipescope capture -o run1 -- python train.py   # then: pipescope merge run1\n"
                                    "  pipescope capture --delay 30 --duration 10 -- python train.py\n"
                                    "The command's exit code is pipescope's exit code.");
                         return [a] { return runCapture(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
