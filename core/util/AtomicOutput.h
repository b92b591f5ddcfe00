#pragma once
// Output files appear complete or not at all: work is written to a temporary
// file beside the destination and renamed over it on commit(). If the writer
// fails or is destroyed without commit(), the temporary file is removed and
// any earlier file at the destination is left untouched.
//
// No output is ever written over an input: files being read are registered
// (an InputGuard while they are open, or protectInput() for the rest of the
// process) and an output that resolves to one of them (same device and inode,
// or the same real path) is refused. A job folder (one holding job.json)
// registered as an input protects everything inside it: no output may land
// there while the job is read. A command-line run calls
// protectInputsForProcess(), so every file it read stays protected until it
// exits; a long-lived process (the app) protects a file only while it reads it
// or keeps it open. A destination
// that is not a regular file (a terminal, a pipe, /dev/null) is never renamed
// over: text outputs are written to it directly, stores refuse it.
// Temporaries are removed on SIGINT, SIGTERM, SIGHUP and SIGABRT, and those
// left by processes that no longer exist are removed by the next write.
#include <cstdint>
#include <string>

namespace pipescope {

class AtomicOutput {
public:
    enum class Target {
        RegularFile,  // a store: must be a regular file
        FileOrStream, // text: a device or pipe is written directly
    };
    // Throws Error naming the path when its folder does not exist or is not
    // writable, when it is an input, or when it cannot hold this kind of output.
    // "-" is standard output (text only).
    explicit AtomicOutput(std::string finalPath, Target target = Target::RegularFile);
    ~AtomicOutput();
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;

    const std::string& tempPath() const { return temp_; }
    // The path as the user gave it (for messages).
    const std::string& finalPath() const { return final_; }
    // True when the destination is not a regular file and is written in place.
    bool direct() const { return direct_; }
    void commit();
    bool committed() const { return committed_; }

    // Writes text (a report, a JSON document) atomically in one call.
    static void writeFile(const std::string& path, const std::string& contents);

    // Registers a file this process reads; no output may replace it while the
    // guard lives (or, after protectInputsForProcess(), until the process ends).
    class InputGuard {
    public:
        InputGuard() = default;
        explicit InputGuard(const std::string& path);
        ~InputGuard();
        InputGuard(InputGuard&& other) noexcept;
        InputGuard& operator=(InputGuard&& other) noexcept;
        InputGuard(const InputGuard&) = delete;
        InputGuard& operator=(const InputGuard&) = delete;

    private:
        void release();
        uint64_t id_ = 0;
    };
    // Registers a file for the rest of the process.
    static void protectInput(const std::string& path);
    // From now on, guards keep their files registered after they end (the CLI).
    static void protectInputsForProcess();
    // Throws Error when path resolves to a registered input.
    static void refuseInput(const std::string& path);

    // Temporaries to remove if a signal ends the process (files or folders).
    static int trackTemporary(const std::string& path);
    static void untrackTemporary(int handle);
    // Removes "." + name + ".tmp-PID*" entries in folder whose PID is no longer running.
    static void removeStaleTemporaries(const std::string& folder, const std::string& name);

private:
    std::string final_;
    std::string target_; // where the rename lands (a symlink's target)
    std::string temp_;
    int tracked_ = -1;
    bool direct_ = false;
    bool committed_ = false;
};

} // namespace pipescope
