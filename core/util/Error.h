#pragma once
// Errors a user can cause (a bad file, a bad flag, an unwritable path) are
// thrown as pipescope::Error with one sentence that names the input and says
// what to do. The CLI prints what() and exits non-zero. Programming errors are
// assertions, not Errors.
#include <stdexcept>
#include <string>

namespace pipescope {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A value the user chose that core refuses, in the words of the domain
// ("stage boundaries must increase"). `setting` names what was chosen
// (boundaries, pp, v, microbatches, schedule, weights, layers); each front end
// maps it to its own control: the CLI to a flag name, the app to a field.
class ValueError : public Error {
public:
    ValueError(std::string setting, const std::string& message) : Error(message), setting_(std::move(setting)) {}
    const std::string& setting() const { return setting_; }

private:
    std::string setting_;
};

// A file that is readable but not a trace of the expected kind (wrong format,
// corrupt, truncated). Importers throw it when the file as a whole is unusable.
class FormatError : public Error {
public:
    using Error::Error;
};

} // namespace pipescope
