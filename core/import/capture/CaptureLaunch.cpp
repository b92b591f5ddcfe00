#include "import/capture/CaptureLaunch.h"

#include <cstdio>
#include <filesystem>

namespace pipescope::capture {

namespace fs = std::filesystem;

std::string secondsText(double seconds)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", seconds);
    return buf;
}

std::vector<std::pair<std::string, std::string>> captureEnvironment(const CaptureSettings& s)
{
    std::vector<std::pair<std::string, std::string>> env;
    if (!s.cuptiLibrary.empty()) {
        env.emplace_back("CUDA_INJECTION64_PATH", s.cuptiLibrary);
        // The CUPTI library hands NVTX to CUPTI's hooks, so ranges opened
        // before the first CUDA call are recorded too.
        env.emplace_back("NVTX_INJECTION64_PATH", s.cuptiLibrary);
    }
    if (!s.ncclLibrary.empty())
        env.emplace_back("NCCL_PROFILER_PLUGIN", s.ncclLibrary);
    env.emplace_back(kEnvDir, s.dir);
    if (s.delaySeconds > 0)
        env.emplace_back(kEnvDelay, secondsText(s.delaySeconds));
    if (s.durationSeconds > 0)
        env.emplace_back(kEnvDuration, secondsText(s.durationSeconds));
    if (!s.startOn.empty())
        env.emplace_back(kEnvStartOn, s.startOn);
    env.emplace_back(kEnvApi, s.allApi ? "all" : "launches");
    return env;
}

std::optional<std::string> findCollector(const std::string& fileName, const std::string& executablePath,
                                         const GetEnv& getEnv)
{
    std::vector<fs::path> dirs;
    if (const char* d = getEnv(kEnvCollectorDir); d && *d)
        dirs.emplace_back(d);
    if (!executablePath.empty()) {
        fs::path exeDir = fs::path(executablePath).parent_path();
        dirs.push_back(exeDir / ".." / "lib" / "pipescope");
        dirs.push_back(exeDir / ".." / "lib64" / "pipescope");
        dirs.push_back(exeDir / ".." / ".." / "lib" / "pipescope");
        dirs.push_back(exeDir);
    }
    for (const auto& d : dirs) {
        std::error_code ec;
        fs::path candidate = d / fileName;
        if (fs::is_regular_file(candidate, ec)) {
            auto canonical = fs::weakly_canonical(candidate, ec);
            return (ec ? candidate : canonical).string();
        }
    }
    return std::nullopt;
}

bool launcherIsOneOfMany(const GetEnv& getEnv)
{
    RankEnv r = detectRank(getEnv);
    return r.rank && r.worldSize && *r.worldSize > 1;
}

} // namespace pipescope::capture
