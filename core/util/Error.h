#pragma once
// Errors a user can cause (a bad file, a bad flag, an unwritable path) are
// thrown as pipescope::Error with one sentence that names the input and says
// what to do. The CLI prints what() and exits non-zero. Programming errors are
// assertions, not Errors.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pipescope {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// What the user chose that a refused value belongs to. Each front end maps
// it to its own control: the CLI to the flag of the same name ("--" +
// toString), the app to the field beside which the error shows.
enum class Setting : uint8_t {
    Boundaries, Pp, V, Microbatches, Schedule, Weights, Layers, StageSpeed, GpuTypes, GpuThroughput, FixStraggler,
    Freeze, MicrobatchSizes, MicrobatchTokens, Recompute, Prediction,
};
// "boundaries", "pp", "v", "microbatches", "schedule", "weights", "layers",
// "stage-speed", "gpu-types", "gpu-throughput", "fix-straggler", "freeze",
// "microbatch-sizes", "microbatch-tokens", "recompute", "prediction"
std::string_view toString(Setting s);

// A value the user chose that core refuses, in the words of the domain
// ("stage boundaries must increase"), and the setting it belongs to.
class ValueError : public Error {
public:
    ValueError(Setting setting, const std::string& message) : Error(message), setting_(setting) {}
    Setting setting() const { return setting_; }

private:
    Setting setting_;
};

// A file that is readable but not a trace of the expected kind (wrong format,
// corrupt, truncated). Importers throw it when the file as a whole is unusable.
class FormatError : public Error {
public:
    using Error::Error;
};

} // namespace pipescope
