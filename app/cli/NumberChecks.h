#pragma once
// Checks for numeric options whose messages state the allowed values in
// words ("--microbatches: must be a whole number from 1 to 100,000 (got -5)"),
// where CLI11's ranges print their bounds as raw limits (a 309-digit
// numeric_limits<double>::max() for NonNegativeNumber). A check applies to
// each value of a comma-separated list on its own.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace pipescope::cli {

// An integer (no fraction, no exponent) within the bounds given.
CLI::Validator wholeNumber(std::optional<int64_t> min = std::nullopt, std::optional<int64_t> max = std::nullopt);

// A decimal number within the bounds given (then it must be finite; without
// bounds nan and inf pass, for the caller to refuse with more context). unit,
// when given, follows the bounds in the message ("from 0.0009765625 to 1,048,576 GiB").
CLI::Validator number(std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt,
                      std::string unit = {});

// number(), or exactly the word `word` (e.g. --stage-speed trace).
CLI::Validator numberOrWord(const std::string& word);

} // namespace pipescope::cli
