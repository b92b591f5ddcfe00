// The timeline model at scale: a generated multi-rank model of 10M events
// (per rank: steps, bubbles, a compute stream of short kernels and a
// communication stream), then the time to build it, its memory, and the time
// and size of draw lists for every lane fully zoomed out, at mid zoom and in a
// 1 us window. Prints figures; asserts nothing.
//   build/release/bench/bench_timeline [events, default 10000000] [ranks, default 16]
#include "timeline/TimelineModel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace pipescope;
using namespace pipescope::timeline;

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A deterministic pseudo-random stream, so runs compare.
uint64_t next(uint64_t& s)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

TimelineModel generate(int64_t events, int ranks)
{
    TimelineModel m;
    m.names = {"", "sm90_xmma_gemm_bf16", "elementwise_kernel", "ncclDevKernel_SendRecv", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"};
    const int64_t perRank = events / ranks;
    for (int r = 0; r < ranks; ++r) {
        uint64_t seed = 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(r);
        Lane steps, bubbles, compute, comm;
        steps.kind = LaneKind::Steps;
        bubbles.kind = LaneKind::Bubbles;
        compute.kind = LaneKind::Kernels;
        comm.kind = LaneKind::Kernels;
        comm.role = StreamRole::Communication;
        for (Lane* l : {&steps, &bubbles, &compute, &comm}) {
            l->rank = r;
            l->stage = r % 8;
            l->replica = r / 8;
        }
        // Kernels of 2-20 us with 0.5-3 us gaps; a step every 400 kernels; a
        // transfer after each step and a bubble before it.
        TimeNs t = 0;
        int64_t made = 0;
        int mb = 0;
        while (made < perRank) {
            const TimeNs stepStart = t;
            for (int k = 0; k < 400 && made < perRank; ++k, ++made) {
                Event e;
                e.start = t;
                e.end = t + 2'000 + static_cast<TimeNs>(next(seed) % 18'000);
                e.name = k % 3 == 0 ? 2 : 1;
                e.microbatch = mb;
                e.step = static_cast<uint8_t>(mb % 2);
                e.activity = static_cast<int32_t>(made);
                compute.events.push_back(e);
                t = e.end + 500 + static_cast<TimeNs>(next(seed) % 2'500);
            }
            Event s;
            s.start = stepStart;
            s.end = t;
            s.code = static_cast<uint8_t>(mb % 2);
            s.microbatch = mb;
            steps.events.push_back(s);
            Event c;
            c.start = t;
            c.end = t + 30'000;
            c.code = static_cast<uint8_t>(WorkClass::P2p);
            c.name = 3;
            comm.events.push_back(c);
            Event b;
            b.start = t;
            b.end = t + 40'000;
            b.code = static_cast<uint8_t>(next(seed) % kBubbleCauses);
            bubbles.events.push_back(b);
            t += 40'000;
            made += 3;
            ++mb;
        }
        for (Lane* l : {&steps, &bubbles, &compute, &comm})
            m.lanes.push_back(std::move(*l));
    }
    return m;
}

void measure(const TimelineModel& m, const char* what, TimeNs from, TimeNs to, int width, int repeats)
{
    std::vector<DrawItem> items;
    size_t total = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < repeats; ++rep) {
        total = 0;
        for (size_t l = 0; l < m.lanes.size(); ++l) {
            m.drawList(static_cast<int>(l), from, to, width, items);
            total += items.size();
        }
    }
    const double s = secondsSince(t0) / repeats;
    std::printf("  %-22s window %14lld ns  %zu lanes x %d px: %8zu items, %8.3f ms per frame (%.2f us per lane)\n", what,
                static_cast<long long>(to - from), m.lanes.size(), width, total, s * 1e3, s * 1e6 / static_cast<double>(m.lanes.size()));
}

} // namespace

int main(int argc, char** argv)
{
    const int64_t events = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
    const int ranks = argc > 2 ? std::atoi(argv[2]) : 16;
    if (events <= 0 || ranks <= 0) {
        std::fprintf(stderr, "usage: bench_timeline [events] [ranks]\n");
        return 2;
    }
    std::printf("bench_timeline: %lld events over %d ranks\n", static_cast<long long>(events), ranks);
    auto t0 = std::chrono::steady_clock::now();
    TimelineModel m = generate(events, ranks);
    const double gen = secondsSince(t0);
    t0 = std::chrono::steady_clock::now();
    m.finalize();
    const double fin = secondsSince(t0);
    size_t lod = 0;
    for (const Lane& l : m.lanes)
        for (const auto& lv : l.lod.levels)
            lod += lv.size() * sizeof(LodBucket);
    std::printf("  generate %.3f s, finalize (sort, maxEnd, pyramids) %.3f s\n", gen, fin);
    std::printf("  events %zu, memory %.1f MiB (%.1f B per event; pyramids %.1f MiB)\n", m.eventCount(),
                static_cast<double>(m.memoryBytes()) / (1 << 20), static_cast<double>(m.memoryBytes()) / static_cast<double>(m.eventCount()),
                static_cast<double>(lod) / (1 << 20));
    const TimeNs span = m.end - m.start;
    std::printf("  span %.3f s\n", static_cast<double>(span) / 1e9);
    const int width = 1600;
    measure(m, "fully zoomed out", m.start, m.end, width, 20);
    const TimeNs mid = m.start + span / 2;
    measure(m, "mid zoom (1/1000)", mid, mid + span / 1000, width, 20);
    measure(m, "1 us window", mid, mid + 1'000, width, 200);
    // Searching every name once.
    t0 = std::chrono::steady_clock::now();
    const SearchResult r = m.search("nccl", false);
    std::printf("  search \"nccl\": %lld hits in %.3f s\n", static_cast<long long>(r.total), secondsSince(t0));
    t0 = std::chrono::steady_clock::now();
    std::vector<int> all(m.lanes.size());
    for (size_t i = 0; i < all.size(); ++i)
        all[i] = static_cast<int>(i);
    const AreaStats st = m.areaStats(all, m.start, m.end);
    std::printf("  area statistics of everything: %lld kernels in %.3f s\n", static_cast<long long>(st.kernels), secondsSince(t0));
    return 0;
}
