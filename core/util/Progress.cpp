#include "util/Progress.h"

#include <cstdio>
#include <unistd.h>

namespace pipescope {

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled), tty_(::isatty(2) == 1), start_(Clock::now()),
      last_(start_)
{
}

Progress::~Progress() { done(); }

void Progress::setLabel(std::string label) { label_ = std::move(label); }

void Progress::update(uint64_t done)
{
    if (!enabled_)
        return;
    auto now = Clock::now();
    if (now - start_ < std::chrono::milliseconds(1500))
        return;
    auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
    if (shown_ && now - last_ < interval)
        return;
    last_ = now;
    shown_ = true;
    double secs = std::chrono::duration<double>(now - start_).count();
    if (total_ > 0)
        std::fprintf(stderr, "%s%s: %3.0f%% (%.1f s)%s", tty_ ? "\r" : "", label_.c_str(),
                     100.0 * double(done) / double(total_), secs, tty_ ? "\x1b[K" : "\n");
    else
        std::fprintf(stderr, "%s%s: %llu (%.1f s)%s", tty_ ? "\r" : "", label_.c_str(),
                     static_cast<unsigned long long>(done), secs, tty_ ? "\x1b[K" : "\n");
    std::fflush(stderr);
}

void Progress::done()
{
    if (shown_ && tty_) {
        std::fprintf(stderr, "\r\x1b[K");
        std::fflush(stderr);
    }
    shown_ = false;
}

} // namespace pipescope
