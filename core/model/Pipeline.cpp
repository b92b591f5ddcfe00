#include "model/Pipeline.h"

#include <cctype>

namespace pipescope {

namespace {

constexpr std::array<std::string_view, kBubbleCauses> kCause = {"fill_drain",  "wait_neighbor", "p2p_transfer",
                                                               "dp_sync",     "all_to_all",    "host_bound",
                                                               "step_overhead", "launch_gap", "other"};

// Lower case without '-', '_' and ' ', so "ZB-H1", "zb_h1" and "zbh1" name one schedule.
std::string normalized(std::string_view name)
{
    std::string out;
    for (char c : name) {
        if (c == '-' || c == '_' || c == ' ')
            continue;
        out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    return out;
}

} // namespace

std::string_view toString(BubbleCause c) { return kCause.at(static_cast<size_t>(c)); }

std::optional<BubbleCause> bubbleCauseFromString(std::string_view name)
{
    for (size_t i = 0; i < kCause.size(); ++i)
        if (kCause[i] == name)
            return static_cast<BubbleCause>(i);
    return std::nullopt;
}

std::string scheduleName(const std::optional<ScheduleKind>& schedule)
{
    return schedule ? std::string(toString(*schedule)) : std::string("unknown");
}

std::string_view toString(ScheduleKind kind)
{
    switch (kind) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved1F1B: return "interleaved-1f1b";
    case ScheduleKind::LoopedBFS: return "looped-bfs";
    case ScheduleKind::ZeroBubbleH1: return "zb-h1";
    case ScheduleKind::ZeroBubbleH2: return "zb-h2";
    case ScheduleKind::ZeroBubbleV: return "zb-v";
    case ScheduleKind::DualPipeV: return "dualpipev";
    case ScheduleKind::Custom: return "custom";
    }
    return "custom";
}

std::optional<ScheduleKind> scheduleKindFromString(std::string_view name)
{
    const std::string n = normalized(name);
    if (n == "gpipe")
        return ScheduleKind::GPipe;
    if (n == "1f1b" || n == "pipedream" || n == "pipedreamflush")
        return ScheduleKind::OneFOneB;
    if (n == "interleaved1f1b" || n == "interleaved" || n == "vpp")
        return ScheduleKind::Interleaved1F1B;
    if (n == "loopedbfs" || n == "bfs")
        return ScheduleKind::LoopedBFS;
    if (n == "zbh1" || n == "zb1p" || n == "interleavedzerobubble" || n == "zerobubble")
        return ScheduleKind::ZeroBubbleH1;
    if (n == "zbh2")
        return ScheduleKind::ZeroBubbleH2;
    if (n == "zbv" || n == "zbvzerobubble")
        return ScheduleKind::ZeroBubbleV;
    if (n == "dualpipev")
        return ScheduleKind::DualPipeV;
    if (n == "custom")
        return ScheduleKind::Custom;
    return std::nullopt;
}

const std::vector<ScheduleKind>& builtinScheduleKinds()
{
    static const std::vector<ScheduleKind> all{ScheduleKind::GPipe,        ScheduleKind::OneFOneB,
                                               ScheduleKind::Interleaved1F1B, ScheduleKind::LoopedBFS,
                                               ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleH2,
                                               ScheduleKind::ZeroBubbleV,  ScheduleKind::DualPipeV};
    return all;
}

bool isVShaped(ScheduleKind kind) { return kind == ScheduleKind::ZeroBubbleV || kind == ScheduleKind::DualPipeV; }

bool splitsBackward(ScheduleKind kind)
{
    return kind == ScheduleKind::ZeroBubbleH1 || kind == ScheduleKind::ZeroBubbleH2 ||
           kind == ScheduleKind::ZeroBubbleV || kind == ScheduleKind::DualPipeV;
}

} // namespace pipescope
