// The rules inside the capture merge and the store, one step at a time:
// which rank each capture file gets, which NCCL kernel an NCCL operation
// ran as, how loaded activities find their NCCL operations, and how a GPU's
// summary row counts its activities and measures its busy time.
#include "TestSupport.h"
#include "import/capture/detail/CaptureSteps.h"
#include "store/detail/StoreSteps.h"

#include <optional>
#include <string>
#include <vector>

using namespace pipescope;

namespace {

capture::detail::FileFacts file(const std::string& path, std::optional<int> rank, int64_t gpuActivities,
                                TimeNs startNs)
{
    capture::detail::FileFacts f;
    f.path = path;
    f.rank = rank;
    f.gpuActivities = gpuActivities;
    f.startNs = startNs;
    return f;
}

// -1 for a file left out.
std::vector<int> ranksOf(const std::vector<std::optional<int>>& assigned)
{
    std::vector<int> out;
    for (const auto& r : assigned)
        out.push_back(r.value_or(-1));
    return out;
}

capture::detail::NcclLaunch launch(TimeNs callStart, TimeNs callEnd, int64_t activityId)
{
    return {{callStart, callEnd}, {activityId, callEnd + 5, callEnd + 50, 1}};
}

// The activity id of the kernel chosen for an event over [start, end], -1 for none.
int64_t chosen(const std::vector<capture::detail::NcclLaunch>& launches, TimeNs start, TimeNs end)
{
    const auto* k = capture::detail::nearestNcclLaunch(launches, start, end);
    return k ? k->activityId : -1;
}

NcclOp opOf(std::optional<int64_t> activityId)
{
    NcclOp op;
    op.activityId = activityId;
    return op;
}

Activity activity(int64_t id)
{
    Activity a;
    a.id = id;
    return a;
}

} // namespace

class TstStoreSteps : public QObject {
    Q_OBJECT
private slots:
    void ranksOfCaptureFiles()
    {
        const std::vector<capture::detail::FileFacts> facts = {
            file("a", 1, 10, 500),          // loses rank 1 to b, which recorded more
            file("b", 1, 50, 400),
            file("c", std::nullopt, 5, 100), // no rank: the next free one, before a (earlier start)
            file("d", 0, 0, 0),             // recorded nothing but keeps the free rank it names
            file("e", 0, 0, 0),             // recorded nothing and repeats rank 0: left out
            file("f", std::nullopt, 0, 0),  // recorded nothing and names no rank: left out
        };
        std::vector<std::string> warnings;
        const auto assigned = capture::detail::assignRanks(facts, warnings);
        QCOMPARE(ranksOf(assigned), (std::vector<int>{3, 1, 2, 0, -1, -1}));
        QCOMPARE(warnings, (std::vector<std::string>{
                               "a: rank 1 is claimed by another process too; given a new rank",
                               "e: recorded nothing and repeats rank 0; left out",
                               "f: recorded nothing; left out",
                               "c: names no rank (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK unset); "
                               "stored as rank 2",
                           }));
    }

    void ranksOfCaptureFilesTieKeepsFileOrder()
    {
        const std::vector<capture::detail::FileFacts> facts = {file("x", 4, 7, 0), file("y", 4, 7, 0)};
        std::vector<std::string> warnings;
        QCOMPARE(ranksOf(capture::detail::assignRanks(facts, warnings)), (std::vector<int>{4, 5}));
        QCOMPARE(warnings, (std::vector<std::string>{"y: rank 4 is claimed by another process too; given a new rank"}));
    }

    void nearestNcclLaunch()
    {
        QCOMPARE(chosen({}, 100, 200), int64_t(-1));
        const std::vector<capture::detail::NcclLaunch> launches = {launch(100, 110, 1), launch(200, 210, 2),
                                                                  launch(300, 305, 3)};
        // Overlapping the call of launch 2 (distance 0) beats launch 3, 80 ns after.
        QCOMPARE(chosen(launches, 205, 220), int64_t(2));
        // 40 ns after launch 1 and 40 ns before launch 2: the earlier launch wins the tie.
        QCOMPARE(chosen(launches, 150, 160), int64_t(1));
        // 29 ns before launch 2, 60 ns after launch 1.
        QCOMPARE(chosen(launches, 170, 171), int64_t(2));
        // Before the first and after the last launch: the only neighbour.
        QCOMPARE(chosen(launches, 50, 60), int64_t(1));
        QCOMPARE(chosen(launches, 400, 410), int64_t(3));
        // The kernel's own times and stream come with it.
        const auto* k = capture::detail::nearestNcclLaunch(launches, 300, 301);
        QVERIFY(k);
        QCOMPARE(k->start, TimeNs(310));
        QCOMPARE(k->end, TimeNs(355));
        QCOMPARE(k->streamId, int64_t(1));
    }

    void activitiesFindTheirNcclOps()
    {
        std::vector<Activity> activities = {activity(10), activity(11), activity(12)};
        // Activity 11 runs a batch of two ops side by side; its third op, further
        // on, is not part of the batch. Activity 99 is not loaded.
        const std::vector<NcclOp> ops = {opOf(11), opOf(11), opOf(std::nullopt), opOf(10), opOf(99), opOf(11)};
        store::detail::linkNcclOps(activities, ops);
        QCOMPARE(activities[0].ncclIndex, int32_t(3));
        QCOMPARE(activities[0].ncclCount, uint16_t(1));
        QCOMPARE(activities[1].ncclIndex, int32_t(0));
        QCOMPARE(activities[1].ncclCount, uint16_t(2));
        QCOMPARE(activities[2].ncclIndex, int32_t(-1));
        QCOMPARE(activities[2].ncclCount, uint16_t(0));
    }

    void deviceSummaryCountsAndBusyTime()
    {
        store::detail::StreamCounts perStream;
        store::detail::DeviceTally tally;
        const int kernel = static_cast<int>(ActivityKind::Kernel), memcpy = static_cast<int>(ActivityKind::Memcpy),
                  sync = static_cast<int>(ActivityKind::Sync);
        // Kernels [100,200) and [150,300) overlap on two streams; a memcpy
        // touches their end; a synchronisation is counted but is no GPU work.
        tally.add(kernel, 100, 200, 7, perStream);
        tally.add(kernel, 150, 300, 20, perStream);
        tally.add(memcpy, 300, 350, 7, perStream);
        tally.add(sync, 360, 900, 7, perStream);
        tally.add(kernel, 400, 450, 7, perStream);
        tally.close();
        QCOMPARE(tally.counts, (std::array<int64_t, 4>{3, 1, 0, 1}));
        QVERIFY(tally.kernels.first == TimeNs(100));
        QVERIFY(tally.kernels.last == TimeNs(450));
        QCOMPARE(tally.kernels.busy, TimeNs(200 + 50));
        QVERIFY(tally.gpu.first == TimeNs(100));
        QVERIFY(tally.gpu.last == TimeNs(450));
        QCOMPARE(tally.gpu.busy, TimeNs(250 + 50));
        QCOMPARE(perStream.size(), size_t(2));
        QCOMPARE(perStream[7], (std::array<int64_t, 4>{2, 1, 0, 1}));
        QCOMPARE(perStream[20], (std::array<int64_t, 4>{1, 0, 0, 0}));
    }

    void deviceSummaryWithoutKernels()
    {
        store::detail::StreamCounts perStream;
        store::detail::DeviceTally tally;
        tally.add(static_cast<int>(ActivityKind::Memset), 10, 20, 3, perStream);
        tally.close();
        QVERIFY(!tally.kernels.first && !tally.kernels.last);
        QCOMPARE(tally.kernels.busy, TimeNs(0));
        QCOMPARE(tally.gpu.busy, TimeNs(10));
        QCOMPARE(tally.counts, (std::array<int64_t, 4>{0, 0, 1, 0}));
    }
};

QTEST_GUILESS_MAIN(TstStoreSteps)
#include "tst_store_steps.moc"
