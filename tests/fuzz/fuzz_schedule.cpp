// libFuzzer target for torch schedule CSVs: parse (which validates the
// order) and replay what was accepted on uniform costs. Parsing must finish
// or throw pipescope::Error; an accepted schedule must replay without a
// deadlock. Seeds: tests/fuzz/seeds/schedule.
#include "util/Error.h"
#include "whatif/Replay.h"
#include "model/Schedule.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace pipescope;
    using namespace pipescope::whatif;
    Schedule s;
    try {
        s = parseScheduleCsv(std::string(reinterpret_cast<const char*>(data), size), "fuzz.csv");
    } catch (const pipescope::Error&) {
        return 0;
    }
    ReplayCosts costs;
    costs.stages.assign(size_t(s.stages), StageCost{10, 20, 10, 10});
    costs.boundaryBytes.assign(s.stages > 1 ? size_t(s.stages - 1) : 0, 1000);
    costs.p2pLatencyNs = 5;
    costs.p2pBytesPerNs = 100;
    try {
        (void)Replay().run(s, costs);
    } catch (const pipescope::Error& e) {
        std::fprintf(stderr, "a validated schedule failed to replay: %s\n", e.what());
        std::abort();
    }
    return 0;
}
