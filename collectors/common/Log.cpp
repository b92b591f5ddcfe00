#include "Log.h"

#include "import/capture/CaptureEnv.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace pipescope::collect {

void warnOnce(const char* key, const std::string& message)
{
    static std::mutex mutex;
    static std::set<std::string> said;
    {
        std::lock_guard lock(mutex);
        if (!said.insert(key).second)
            return;
    }
    std::fprintf(stderr, "pipescope: %s\n", message.c_str());
}

void info(const std::string& message)
{
    const char* quiet = std::getenv(capture::kEnvQuiet);
    if (quiet && std::strcmp(quiet, "1") == 0)
        return;
    std::fprintf(stderr, "pipescope: %s\n", message.c_str());
}

} // namespace pipescope::collect
