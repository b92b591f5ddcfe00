#pragma once
// A progress line on stderr for long work. Silent for the first 1.5 s so
// quick runs print nothing; redraws in place on a terminal and prints a line
// every few seconds otherwise.
#include <chrono>
#include <cstdint>
#include <string>

namespace pipescope {

class Progress {
public:
    explicit Progress(std::string label, uint64_t total = 0, bool enabled = true);
    ~Progress();
    void setLabel(std::string label);
    void setTotal(uint64_t total) { total_ = total; }
    void update(uint64_t done);
    void done();

private:
    using Clock = std::chrono::steady_clock;
    std::string label_;
    uint64_t total_ = 0;
    bool enabled_ = true;
    bool tty_ = false;
    bool shown_ = false;
    Clock::time_point start_;
    Clock::time_point last_;
};

} // namespace pipescope
