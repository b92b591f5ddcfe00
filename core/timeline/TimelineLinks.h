#pragma once
// What one event of a timeline is connected to, for the arrows a viewer
// draws from a selection and the lines its details panel lists:
//   - a point-to-point transfer and its other end (the k-th send from rank A
//     to rank B is the k-th receive on B from A, as NCCL orders them), or for
//     a predicted transfer the step on the receiver that consumes it;
//   - a pipeline step and the step that needs its output (the next virtual
//     stage's forward, the previous one's backward), and the step whose
//     output it needed;
//   - a bubble, the step that ended it on its rank, and what that step
//     waited for.
// Steps are related by their data, not by a schedule: the dependent of a
// step is the earliest step of the same iteration, replica and microbatch
// that starts after it (F, B or I; W feeds nobody), since each stage can
// only begin a microbatch once the stage before it has handed it over.
// Qt-free; every lookup is linear in the lanes it reads, meant for a click.
#include "timeline/TimelineModel.h"

#include <optional>

namespace pipescope::timeline {

struct EventRef {
    int lane = -1;
    int64_t event = -1;
    bool valid() const { return lane >= 0 && event >= 0; }
    bool operator==(const EventRef&) const = default;
};

enum class P2pDirection : uint8_t { None, Send, Recv };
// From the communication's NCCL op name ("Send", "Recv"); None for a
// collective, a batched SendRecv, or anything but a kernel or transfer with
// communication detail.
P2pDirection p2pDirection(const TimelineModel& model, EventRef ref);

// The other end of a measured point-to-point transfer, or for a predicted
// transfer the receiver's step that consumes it.
std::optional<EventRef> matchingTransfer(const TimelineModel& model, EventRef ref);

// For a step (Steps lane): the step that needs its output, and the step whose
// output it needed. nullopt for W steps, the first forward and the last backward.
std::optional<EventRef> dependentStep(const TimelineModel& model, EventRef ref);
std::optional<EventRef> precedingStep(const TimelineModel& model, EventRef ref);

// For a bubble (Bubbles lane): the step on its rank that started when it
// ended, and that step's preceding step (what the rank waited for; absent
// when the step needed nothing from another step, e.g. the first forward).
struct BubbleWait {
    EventRef next;
    std::optional<EventRef> waitedOn;
};
std::optional<BubbleWait> bubbleWait(const TimelineModel& model, EventRef ref);

// The CPU lane of a rank's thread showing time t: the deepest of its lanes
// with a range covering t, else its first lane. -1 when the thread has none.
int cpuLaneAt(const TimelineModel& model, int rank, int64_t tid, TimeNs t);

} // namespace pipescope::timeline
