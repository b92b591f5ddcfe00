#pragma once
// A loaded job as Chrome Trace Event JSON, the format Perfetto
// (ui.perfetto.dev) and chrome://tracing open, and the one `pipescope
// import` reads back (docs/export.md describes the mapping).
//
// One process per rank ("rank N (stage S)"), one thread per GPU stream
// ("stream K (compute)") and one per CPU thread of annotation ranges. GPU
// activities are complete ("X") events with their device, stream,
// correlation, bytes and NCCL facts as args. Times are microseconds with
// exactly three decimals (the nanoseconds), measured from
// baseTimeNanoseconds, the earliest record of the job. The document is
// written event by event, never held whole in memory.
//
// With the analysis (addAnalysis), each rank also gets its pipeline steps
// ("pipeline steps": F/B/I/W slices named like "F 3", microbatch 3), its idle
// time by cause ("idle by cause") and its matched point-to-point messages
// ("transfers", a send and a receive slice joined by a flow arrow), under the
// categories pipescope.step, pipescope.bubble and pipescope.transfer, which
// `pipescope import` skips (the analysis finds them again). A flow also joins
// each step to the step that needs its output (timeline/TimelineLinks.h's
// rule: the earliest later F, B or I of the same iteration, replica and
// microbatch).
#include "analysis/Analysis.h"
#include "model/Pipeline.h"
#include "model/Trace.h"
#include "util/Work.h"

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace pipescope::report {

struct ChromeTraceOptions {
    std::optional<std::vector<int>> ranks; // every rank when unset
    std::optional<TimeNs> from, to;        // records overlapping [from, to) on the job's clock, as Store::load
    std::map<int, int> stageOf;            // rank -> pipeline stage; process names leave it out when absent
    // baseTimeNanoseconds: the whole job's earliest record (Store::earliestRecord)
    // when the trace holds only some of it; unset: chromeTraceOrigin(trace).
    std::optional<TimeNs> origin;
    std::map<int64_t, std::string> roleOf; // store stream id -> "compute", "communication", "copy", ...
    const WorkControl* work = nullptr;     // progress and cancel every few thousand events (optional)
    // The analysis's own tracks (see above); empty: none are written.
    std::vector<Step> steps;
    std::vector<Bubble> bubbles;
    std::vector<MeasuredMessage> messages;
    std::vector<std::pair<size_t, size_t>> stepFlows; // (step, the step that needs its output), indices into steps
};

// Stages and stream roles as the analysis found them; with the trace, also
// its steps, idle time by cause and matched messages as tracks of their own.
void addAnalysis(ChromeTraceOptions& options, const AnalysisResult& analysis, const Trace* trace = nullptr);

struct ChromeTraceStats {
    int64_t gpuEvents = 0;  // kernels, copies, memsets, syncs
    int64_t cpuEvents = 0;  // CPU ranges
    int64_t ranks = 0;      // processes written
    int64_t lanes = 0;      // threads written (the analysis's tracks included)
    int64_t analysisEvents = 0; // steps, idle intervals and transfer slices written
    TimeNs baseTime = 0;    // baseTimeNanoseconds
};

// The earliest start over the whole trace (all ranks, every record): the
// origin of the written timestamps, so exports of different ranks or ranges
// of one job share it.
TimeNs chromeTraceOrigin(const Trace& trace);

// Writes the document to `out`. Throws Error when the stream fails.
ChromeTraceStats writeChromeTrace(const Trace& trace, std::ostream& out, const ChromeTraceOptions& options = {});

// "1234.567": nanoseconds as microseconds with exactly three decimals.
std::string microsText(TimeNs ns);

} // namespace pipescope::report
