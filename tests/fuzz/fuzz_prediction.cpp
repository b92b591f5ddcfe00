// libFuzzer target for saved predictions (pipescope.prediction/1,
// docs/diff.md): parse and check every field. Reading must finish or throw
// pipescope::FormatError naming the input; a prediction it accepts must be
// written again as it was read (the check writeSavedPrediction makes) and
// read back the same. Seeds: tests/fuzz/seeds/prediction.
#include "compare/SavedPrediction.h"
#include "util/Error.h"
#include "util/JsonText.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

bool same(const pipescope::compare::SavedPrediction& a, const pipescope::compare::SavedPrediction& b)
{
    return a.jobName == b.jobName && a.job == b.job && a.label == b.label && a.schedule == b.schedule && a.pp == b.pp &&
           a.v == b.v && a.microbatches == b.microbatches && a.boundaries == b.boundaries && a.layers == b.layers &&
           a.recompute == b.recompute && a.predictedNs == b.predictedNs && a.measuredNs == b.measuredNs;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace pipescope;
    compare::SavedPrediction saved;
    try {
        saved = compare::parseSavedPrediction(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    } catch (const FormatError& e) {
        if (std::string(e.what()).rfind("fuzz.json: ", 0) != 0) {
            std::fprintf(stderr, "the refusal does not name the file: %s\n", e.what());
            std::abort();
        }
        return 0;
    }
    const std::string again = jsonText(compare::savedPredictionToJson(saved), 1);
    try {
        if (!same(saved, compare::parseSavedPrediction(again, "again.json"))) {
            std::fprintf(stderr, "an accepted prediction reads back differently:\n%s\n", again.c_str());
            std::abort();
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "an accepted prediction does not read back: %s\n", e.what());
        std::abort();
    }
    return 0;
}
