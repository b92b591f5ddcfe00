#pragma once
// The environment contract between `pipescope capture` and the collectors it
// injects, and the rank detection both sides share. Header-only and
// dependency-free: the collectors include it without linking core.
#include "CaptureSchema.h"

#include <cctype>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

namespace pipescope::capture {

// Set by `pipescope capture` for the command and its children.
inline constexpr const char* kEnvDir = "PIPESCOPE_CAPTURE_DIR";       // where capture files go
inline constexpr const char* kEnvDelay = "PIPESCOPE_CAPTURE_DELAY";   // seconds after start before recording
inline constexpr const char* kEnvDuration = "PIPESCOPE_CAPTURE_DURATION"; // seconds of recording, then stop
inline constexpr const char* kEnvStartOn = "PIPESCOPE_CAPTURE_START_ON"; // "profiler-api" or "nvtx:<range name>"
inline constexpr const char* kEnvApi = "PIPESCOPE_CAPTURE_API";       // "launches" (default) or "all"
inline constexpr const char* kEnvBuffers = "PIPESCOPE_CAPTURE_BUFFERS"; // max CUPTI buffers of 4 MiB (default 64)
inline constexpr const char* kEnvQuiet = "PIPESCOPE_CAPTURE_QUIET";   // "1": no informational lines on stderr

// Variables that name a process's global rank, in the order they are consulted:
// torchrun, Slurm, Open MPI, MPICH/Intel MPI (PMI).
inline constexpr const char* kRankVars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
inline constexpr const char* kWorldSizeVars[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
inline constexpr const char* kLocalRankVars[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "MPI_LOCALRANKID"};

using GetEnv = std::function<const char*(const char*)>;

inline const char* systemGetEnv(const char* name) { return std::getenv(name); }

// A non-negative decimal integer, or nothing (empty, signs, junk, overflow).
inline std::optional<int> parseRankValue(const char* text)
{
    if (!text || !*text)
        return std::nullopt;
    long long v = 0;
    for (const char* p = text; *p; ++p) {
        if (!std::isdigit(static_cast<unsigned char>(*p)))
            return std::nullopt;
        v = v * 10 + (*p - '0');
        if (v > 1000000000LL)
            return std::nullopt;
    }
    return static_cast<int>(v);
}

struct RankEnv {
    std::optional<int> rank;
    std::optional<int> worldSize;
    std::optional<int> localRank;
    std::string rankVar; // the variable the rank came from, empty when none
};

inline RankEnv detectRank(const GetEnv& getEnv = systemGetEnv)
{
    RankEnv r;
    for (const char* var : kRankVars) {
        if (auto v = parseRankValue(getEnv(var))) {
            r.rank = v;
            r.rankVar = var;
            break;
        }
    }
    for (const char* var : kWorldSizeVars) {
        if (auto v = parseRankValue(getEnv(var)); v && *v > 0) {
            r.worldSize = v;
            break;
        }
    }
    for (const char* var : kLocalRankVars) {
        if (auto v = parseRankValue(getEnv(var))) {
            r.localRank = v;
            break;
        }
    }
    return r;
}

// Host names go into file names: keep [A-Za-z0-9._-], replace the rest.
inline std::string sanitizeForFileName(const std::string& s)
{
    std::string out;
    for (char c : s)
        out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
    if (out.empty())
        out = "host";
    return out.substr(0, 64);
}

// "rank3.node01.12345.pscap" or "norank.node01.12345.pscap". The pid and host
// keep processes apart that claim the same rank (restarts, helper processes).
inline std::string captureFileName(const std::optional<int>& rank, const std::string& host, long pid)
{
    std::string name = rank ? "rank" + std::to_string(*rank) : std::string("norank");
    return name + "." + sanitizeForFileName(host) + "." + std::to_string(pid) + kCaptureSuffix;
}

} // namespace pipescope::capture
