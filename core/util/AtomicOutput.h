#pragma once
// Output files appear complete or not at all: work is written to a temporary
// file beside the destination and renamed over it on commit(). If the writer
// fails or is destroyed without commit(), the temporary file is removed and
// any earlier file at the destination is left untouched.
#include <string>

namespace pipescope {

class AtomicOutput {
public:
    // Throws Error naming the path when its folder does not exist or is not writable.
    explicit AtomicOutput(std::string finalPath);
    ~AtomicOutput();
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;

    const std::string& tempPath() const { return temp_; }
    const std::string& finalPath() const { return final_; }
    void commit();
    bool committed() const { return committed_; }

    // Writes text (a report, a JSON document) atomically in one call.
    static void writeFile(const std::string& path, const std::string& contents);

private:
    std::string final_;
    std::string temp_;
    bool committed_ = false;
};

} // namespace pipescope
