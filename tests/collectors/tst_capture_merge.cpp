// Per-rank capture files -> one store, and the `pipescope capture` launcher.
// Capture files are written here with plain SQL from the documented schema,
// so these tests need neither the collectors nor a GPU.
#include "TestSupport.h"
#include "import/capture/CaptureLaunch.h"
#include "import/capture/CaptureSchema.h"
#include "import/capture/ImportCapture.h"
#include "store/Sqlite.h"
#include "util/Error.h"

#include <QDir>
#include <QRegularExpression>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <dlfcn.h>
#include <map>
#include <sqlite3.h>

using namespace pipescope;

namespace {

constexpr int64_t kT0 = 1'750'000'000'000'000'000; // an epoch time, ns

// Builds a capture file the way the collectors would have left it.
class CaptureFileBuilder {
public:
    explicit CaptureFileBuilder(const std::string& path) : db_(path, sql::Database::Mode::Create)
    {
        db_.exec(capture::kCaptureSchemaSql);
        db_.exec("PRAGMA application_id = " + std::to_string(capture::kCaptureApplicationId));
        db_.exec("PRAGMA user_version = " + std::to_string(capture::kCaptureVersion));
    }
    CaptureFileBuilder& meta(const std::string& k, const std::string& v)
    {
        db_.prepare("INSERT OR REPLACE INTO meta VALUES (?1, ?2)").bind(1, k).bind(2, v).run();
        return *this;
    }
    int64_t str(const std::string& s)
    {
        db_.prepare("INSERT OR IGNORE INTO strings(value) VALUES (?1)").bind(1, s).run();
        auto st = db_.prepare("SELECT id FROM strings WHERE value = ?1");
        st.bind(1, s);
        st.step();
        return st.int64(0);
    }
    CaptureFileBuilder& kernel(const std::string& name, int64_t start, int64_t end, int64_t stream, int64_t corr)
    {
        db_.prepare("INSERT INTO gpu_activities(kind, start_ns, end_ns, device, context, stream, correlation, name_id)"
                    " VALUES (0, ?1, ?2, 0, 1, ?3, ?4, ?5)")
            .bind(1, start).bind(2, end).bind(3, stream).bind(4, corr).bind(5, str(name)).run();
        return *this;
    }
    CaptureFileBuilder& contextSync(int64_t start, int64_t end)
    {
        db_.prepare("INSERT INTO gpu_activities(kind, start_ns, end_ns, context, name_id) VALUES (3, ?1, ?2, 1, ?3)")
            .bind(1, start).bind(2, end).bind(3, str("Context synchronize")).run();
        return *this;
    }
    CaptureFileBuilder& api(const std::string& name, int64_t start, int64_t end, int64_t corr)
    {
        db_.prepare("INSERT INTO api_calls VALUES (0, 211, ?1, 77, ?2, ?3, ?4)")
            .bind(1, str(name)).bind(2, start).bind(3, end).bind(4, corr).run();
        return *this;
    }
    CaptureFileBuilder& nvtx(const std::string& name, int64_t start, std::optional<int64_t> end)
    {
        db_.prepare("INSERT INTO nvtx_ranges(kind, tid, start_ns, end_ns, name_id) VALUES (0, 77, ?1, ?2, ?3)")
            .bind(1, start).bind(2, end).bind(3, str(name)).run();
        return *this;
    }
    CaptureFileBuilder& memory(int64_t ts, int64_t bytes, int kind)
    {
        db_.prepare("INSERT INTO memory_events VALUES (0, ?1, ?2, 4096, ?3)").bind(1, ts).bind(2, bytes).bind(3, kind).run();
        return *this;
    }
    CaptureFileBuilder& comm(int64_t hash, const std::string& name, int nranks, int rank)
    {
        db_.prepare("INSERT INTO nccl_comms VALUES (?1, ?2, ?3, ?4, 1, ?5)")
            .bind(1, hash).bind(2, name).bind(3, nranks).bind(4, rank).bind(5, kT0).run();
        return *this;
    }
    CaptureFileBuilder& op(int64_t hash, const std::string& func, bool p2p, std::optional<int64_t> peer, int64_t seq,
                           int64_t start, int64_t end)
    {
        db_.prepare("INSERT INTO nccl_ops(comm_hash, func, is_p2p, count, dtype, bytes, peer, seq, start_ns, end_ns)"
                    " VALUES (?1, ?2, ?3, 256, 'ncclFloat32', 1024, ?4, ?5, ?6, ?7)")
            .bind(1, hash).bind(2, func).bind(3, p2p ? 1 : 0).bind(4, peer).bind(5, seq).bind(6, start).bind(7, end)
            .run();
        return *this;
    }
    CaptureFileBuilder& device(const std::string& name)
    {
        db_.prepare("INSERT INTO devices(id, name, sm_count, cc_major, cc_minor) VALUES (0, ?1, 132, 9, 0)")
            .bind(1, name).run();
        db_.exec("INSERT INTO contexts VALUES (1, 0)");
        return *this;
    }
    CaptureFileBuilder& dropped(const std::string& source, int64_t n)
    {
        db_.prepare("INSERT INTO dropped VALUES (?1, ?2)").bind(1, source).bind(2, n).run();
        return *this;
    }

private:
    sql::Database db_;
};

int64_t one(sql::Database& db, const std::string& q)
{
    auto st = db.prepare(q);
    if (!st.step() || st.isNull(0))
        return -1;
    return st.int64(0);
}

std::string oneText(sql::Database& db, const std::string& q)
{
    auto st = db.prepare(q);
    if (!st.step() || st.isNull(0))
        return "<null>";
    return st.string(0);
}

constexpr int64_t kWorld = 0xAAAA; // all three ranks of the job (one file is missing: rank 1)
constexpr int64_t kPipe = 0xBBBB;  // ranks 0 and 2

// rank 0, rank 2, a process without a rank that ran kernels, one that ran nothing.
void writeJob(const QString& dir)
{
    auto p = [&](const char* n) { return (dir + "/" + n).toStdString(); };
    {
        CaptureFileBuilder f(p("rank0.node01.100.pscap"));
        f.meta("rank", "0").meta("world_size", "3").meta("host", "node01").meta("pid", "100").meta("boot_id", "b1");
        f.meta("start_ns", std::to_string(kT0)).meta("end_ns", std::to_string(kT0 + 10'000));
        f.device("NVIDIA H200");
        f.kernel("gemm", kT0 + 200, kT0 + 900, 7, 10).api("cudaLaunchKernel", kT0 + 20, kT0 + 30, 10);
        f.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", kT0 + 1000, kT0 + 1800, 9, 11)
            .api("cuLaunchKernelEx", kT0 + 120, kT0 + 130, 11);
        f.kernel("ncclDevKernel_SendRecv", kT0 + 2000, kT0 + 2600, 9, 12).api("cuLaunchKernelEx", kT0 + 1900, kT0 + 1910, 12);
        f.contextSync(kT0 + 2600, kT0 + 2700);
        // NCCL 2.28 starts an operation's event right after its kernel's launch.
        f.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", kT0 + 3100, kT0 + 3500, 9, 13)
            .api("cuLaunchKernelEx", kT0 + 3000, kT0 + 3010, 13);
        f.nvtx("pipescope/forward mb=0 stage=0 chunk=0", kT0 + 10, kT0 + 950);
        f.nvtx("still open", kT0 + 3000, std::nullopt);
        f.memory(kT0 + 5, 1 << 20, 3).memory(kT0 + 9000, -(1 << 20), 3).memory(kT0 + 6, 4096, 2);
        f.comm(kWorld, "default_pg", 3, 0).comm(kPipe, "pp", 2, 0);
        f.op(kWorld, "AllReduce", false, std::nullopt, 0, kT0 + 100, kT0 + 140);
        f.op(kPipe, "Send", true, 1, 0, kT0 + 1850, kT0 + 1920);
        f.op(kWorld, "AllReduce", false, std::nullopt, 1, kT0 + 3012, kT0 + 3013);
        f.dropped("cupti_records", 5);
    }
    {
        CaptureFileBuilder f(p("rank2.node01.102.pscap"));
        f.meta("rank", "2").meta("world_size", "3").meta("host", "node01").meta("pid", "102").meta("boot_id", "b1");
        f.meta("start_ns", std::to_string(kT0 + 50)).meta("end_ns", std::to_string(kT0 + 9000));
        f.kernel("ncclDevKernel_SendRecv", kT0 + 2100, kT0 + 2600, 3, 5).api("cuLaunchKernelEx", kT0 + 1950, kT0 + 1960, 5);
        f.comm(kWorld, "default_pg", 3, 2).comm(kPipe, "pp", 2, 1);
        f.op(kPipe, "Recv", true, 0, 0, kT0 + 1940, kT0 + 1970);
    }
    {
        CaptureFileBuilder f(p("norank.node01.300.pscap"));
        f.meta("host", "node01").meta("pid", "300").meta("start_ns", std::to_string(kT0 + 7));
        f.kernel("warmup", kT0 + 500, kT0 + 600, 7, 1);
    }
    {
        CaptureFileBuilder f(p("norank.node01.301.pscap"));
        f.meta("host", "node01").meta("pid", "301").meta("start_ns", std::to_string(kT0 + 8));
    }
}

// Rank 1 of writeJob's job, with records of every kind before its memory
// events; the file then loses that table, so reading it fails part-way.
void writeRankFailingPartWay(const QString& dir, const char* name = "rank1.node01.101.pscap")
{
    const std::string path = (dir + "/" + name).toStdString();
    {
        CaptureFileBuilder f(path);
        f.meta("rank", "1").meta("world_size", "3").meta("host", "node01").meta("pid", "101").meta("boot_id", "b1");
        f.meta("start_ns", std::to_string(kT0 + 20)).meta("end_ns", std::to_string(kT0 + 9000));
        f.device("NVIDIA H200");
        f.kernel("only_in_rank1", kT0 + 300, kT0 + 800, 7, 1).api("cudaLaunchKernel", kT0 + 40, kT0 + 50, 1);
        f.nvtx("rank1 range", kT0 + 30, kT0 + 900);
        f.dropped("cupti_records", 7);
    }
    sql::Database db(path, sql::Database::Mode::ReadWrite);
    db.exec("DROP TABLE memory_events");
}

bool haveDriver()
{
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib)
        dlclose(lib);
    return lib != nullptr;
}

} // namespace

class TestCaptureMerge : public QObject {
    Q_OBJECT

private slots:
    void rankDetection_data();
    void rankDetection();
    void fileNames();
    void environment();
    void findsCollectors();
    void mergeAssignsRanksAndCounts();
    void mergeLinksNcclOperations();
    void mergeMapsCommunicatorRanks();
    void mergeAlignsByTransfers();
    void importSingleFile();
    void importKeepsCaptureTimes();
    void refusesBadFiles();
    void mergeSkipsFileThatFailsPartWay();
    void mergeFailsWhenNoFileMerges();
    void cliMerge();
    void cliMergeSkipsBrokenFile();
    void cliCaptureRunsCommand();
    void cliCaptureSetsEnvironment();
};

void TestCaptureMerge::rankDetection_data()
{
    QTest::addColumn<QStringList>("env");
    QTest::addColumn<int>("rank");       // -1: none
    QTest::addColumn<int>("worldSize");  // -1: none
    QTest::addColumn<int>("localRank");  // -1: none
    QTest::addColumn<QString>("var");
    QTest::addColumn<bool>("oneOfMany");
    QTest::newRow("nothing") << QStringList{} << -1 << -1 << -1 << "" << false;
    QTest::newRow("torchrun") << QStringList{"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1"} << 5 << 8 << 1 << "RANK" << true;
    QTest::newRow("slurm") << QStringList{"SLURM_PROCID=12", "SLURM_NTASKS=16", "SLURM_LOCALID=4"} << 12 << 16 << 4
                           << "SLURM_PROCID" << true;
    QTest::newRow("openmpi") << QStringList{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4"} << 3 << 4 << -1
                             << "OMPI_COMM_WORLD_RANK" << true;
    QTest::newRow("pmi") << QStringList{"PMI_RANK=0", "PMI_SIZE=2"} << 0 << 2 << -1 << "PMI_RANK" << true;
    // torchrun inside an allocation: the process's own RANK wins over the task id.
    QTest::newRow("torchrun under slurm") << QStringList{"SLURM_PROCID=1", "RANK=9", "WORLD_SIZE=16"} << 9 << 16 << -1
                                          << "RANK" << true;
    QTest::newRow("junk skipped") << QStringList{"RANK=abc", "SLURM_PROCID=2"} << 2 << -1 << -1 << "SLURM_PROCID"
                                  << false;
    QTest::newRow("negative") << QStringList{"RANK=-1"} << -1 << -1 << -1 << "" << false;
    QTest::newRow("single task") << QStringList{"SLURM_PROCID=0", "SLURM_NTASKS=1"} << 0 << 1 << -1 << "SLURM_PROCID"
                                 << false;
}

void TestCaptureMerge::rankDetection()
{
    QFETCH(QStringList, env);
    QFETCH(int, rank);
    QFETCH(int, worldSize);
    QFETCH(int, localRank);
    QFETCH(QString, var);
    QFETCH(bool, oneOfMany);
    std::map<std::string, std::string> vars;
    for (const auto& kv : env)
        vars[kv.section('=', 0, 0).toStdString()] = kv.section('=', 1).toStdString();
    capture::GetEnv get = [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    };
    auto r = capture::detectRank(get);
    QCOMPARE(r.rank.value_or(-1), rank);
    QCOMPARE(r.worldSize.value_or(-1), worldSize);
    QCOMPARE(r.localRank.value_or(-1), localRank);
    QCOMPARE(QString::fromStdString(r.rankVar), var);
    QCOMPARE(capture::launcherIsOneOfMany(get), oneOfMany);
}

void TestCaptureMerge::fileNames()
{
    QCOMPARE(capture::captureFileName(3, "gpu-node-01.cluster", 4242), std::string("rank3.gpu-node-01.cluster.4242.pscap"));
    QCOMPARE(capture::captureFileName(std::nullopt, "a b/c", 7), std::string("norank.a_b_c.7.pscap"));
    QCOMPARE(capture::captureFileName(0, "", 1), std::string("rank0.host.1.pscap"));
}

void TestCaptureMerge::environment()
{
    capture::CaptureSettings s;
    s.dir = "/scratch/run1";
    s.delaySeconds = 2.5;
    s.durationSeconds = 10;
    s.startOn = "nvtx:train_step";
    s.cuptiLibrary = "/opt/pipescope/lib/pipescope/libpipescope_cupti.so";
    s.ncclLibrary = "/opt/pipescope/lib/pipescope/libpipescope_nccl.so";
    auto env = capture::captureEnvironment(s);
    std::map<std::string, std::string> m(env.begin(), env.end());
    QCOMPARE(env.size(), size_t(8));
    QCOMPARE(m["CUDA_INJECTION64_PATH"], s.cuptiLibrary);
    QCOMPARE(m["NVTX_INJECTION64_PATH"], s.cuptiLibrary);
    QCOMPARE(m["NCCL_PROFILER_PLUGIN"], s.ncclLibrary);
    QCOMPARE(m["PIPESCOPE_CAPTURE_DIR"], std::string("/scratch/run1"));
    QCOMPARE(m["PIPESCOPE_CAPTURE_DELAY"], std::string("2.5"));
    QCOMPARE(m["PIPESCOPE_CAPTURE_DURATION"], std::string("10"));
    QCOMPARE(m["PIPESCOPE_CAPTURE_START_ON"], std::string("nvtx:train_step"));
    QCOMPARE(m["PIPESCOPE_CAPTURE_API"], std::string("launches"));

    capture::CaptureSettings bare;
    bare.dir = "/d";
    auto env2 = capture::captureEnvironment(bare);
    std::map<std::string, std::string> m2(env2.begin(), env2.end());
    QCOMPARE(env2.size(), size_t(2)); // no libraries found: only the directory and the API choice
    QVERIFY(!m2.count("CUDA_INJECTION64_PATH"));
}

void TestCaptureMerge::findsCollectors()
{
    QTemporaryDir tmp;
    QDir(tmp.path()).mkpath("prefix/bin");
    QDir(tmp.path()).mkpath("prefix/lib/pipescope");
    QDir(tmp.path()).mkpath("override");
    QFile(tmp.path() + "/prefix/lib/pipescope/libpipescope_cupti.so").open(QIODevice::WriteOnly);
    QFile(tmp.path() + "/override/libpipescope_cupti.so").open(QIODevice::WriteOnly);
    std::string exe = (tmp.path() + "/prefix/bin/pipescope").toStdString();
    capture::GetEnv none = [](const char*) -> const char* { return nullptr; };
    auto found = capture::findCollector("libpipescope_cupti.so", exe, none);
    QVERIFY(found);
    QVERIFY(QString::fromStdString(*found).endsWith("prefix/lib/pipescope/libpipescope_cupti.so"));
    QVERIFY(!capture::findCollector("libpipescope_nccl.so", exe, none));
    std::string overrideDir = (tmp.path() + "/override").toStdString();
    capture::GetEnv withOverride = [&](const char* n) -> const char* {
        return std::string(n) == capture::kEnvCollectorDir ? overrideDir.c_str() : nullptr;
    };
    found = capture::findCollector("libpipescope_cupti.so", exe, withOverride);
    QVERIFY(found);
    QVERIFY(QString::fromStdString(*found).endsWith("override/libpipescope_cupti.so"));
}

void TestCaptureMerge::mergeAssignsRanksAndCounts()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    MergeOptions o;
    o.output = test::path(tmp, "job.pipescope");
    auto report = mergeCaptureDir(tmp.path().toStdString(), o);
    QCOMPARE(report.files.size(), size_t(4));
    QCOMPARE(report.sources.size(), size_t(3));
    QCOMPARE(report.rankFiles.size(), size_t(3));
    QVERIFY(QString::fromStdString(report.rankFiles.at(0)).endsWith("rank0.node01.100.pscap"));
    QVERIFY(QString::fromStdString(report.rankFiles.at(2)).endsWith("rank2.node01.102.pscap"));
    // The unranked process that ran kernels follows the highest named rank.
    QVERIFY(QString::fromStdString(report.rankFiles.at(3)).endsWith("norank.node01.300.pscap"));
    QCOMPARE(report.warnings.size(), size_t(3)); // empty file left out, rank given, dropped records
    QCOMPARE(report.droppedRecords, int64_t(5));
    for (auto [rank, offset] : report.offsets)
        QCOMPARE(offset, TimeNs(0));

    sql::Database db(o.output, sql::Database::Mode::ReadOnly);
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 0"), 5);
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 2"), 1);
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 3"), 1);
    // Times stay on the epoch clock, exactly as recorded.
    QCOMPARE(one(db, "SELECT start_ns FROM activities a JOIN strings s ON s.id = a.name_id WHERE s.value = 'gemm'"),
             kT0 + 200);
    // Context-wide synchronisation goes to the device of its context, on a stream of its own.
    QCOMPARE(oneText(db, "SELECT s.name FROM activities a JOIN streams s ON s.id = a.stream_id WHERE a.kind = 3"),
             std::string("sync"));
    QCOMPARE(one(db, "SELECT count(*) FROM cpu_ranges WHERE rank = 0 AND kind = 3"), 4);
    QCOMPARE(one(db, "SELECT count(*) FROM cpu_ranges WHERE rank = 0 AND kind = 1"), 2);
    QCOMPARE(one(db, "SELECT end_ns FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE s.value = 'still open'"),
             kT0 + 10'000);
    // Device memory only (the pinned host allocation is left out).
    QCOMPARE(one(db, "SELECT count(*) FROM memory_events"), 2);
    QCOMPARE(one(db, "SELECT sum(bytes) FROM memory_events"), 0);
    QCOMPARE(one(db, "SELECT count(*) FROM sources WHERE format = 'capture' AND alignment = 'time_base' "
                     "AND clock_offset_ns = 0"),
             3);
    QCOMPARE(one(db, "SELECT time_base_ns FROM sources WHERE rank = 2"), kT0 + 50);
    QCOMPARE(one(db, "SELECT device FROM ranks WHERE rank = 0"), 0);
    QCOMPARE(oneText(db, "SELECT host FROM ranks WHERE rank = 2"), std::string("node01"));
    QCOMPARE(one(db, "SELECT world_size FROM ranks WHERE rank = 0"), 3);
    QCOMPARE(oneText(db, "SELECT name FROM gpus WHERE rank = 0"), std::string("NVIDIA H200"));
    QCOMPARE(oneText(db, "SELECT compute_capability FROM gpus WHERE rank = 0"), std::string("9.0"));
    QCOMPARE(one(db, "SELECT count FROM diagnostics WHERE kind = 'capture_dropped:cupti_records'"), 1);
    // Launch calls are linked to their kernels by correlation.
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 0 AND kind = 0 AND launch_id IS NOT NULL"), 4);
}

void TestCaptureMerge::mergeLinksNcclOperations()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    MergeOptions o;
    o.output = test::path(tmp, "job.pipescope");
    mergeCaptureDir(tmp.path().toStdString(), o);
    sql::Database db(o.output, sql::Database::Mode::ReadOnly);
    // The all-reduce was enqueued at +100; the NCCL kernel launched first after
    // that (at +120) ran +1000..+1800: those are the operation's times.
    QCOMPARE(one(db, "SELECT start_ns FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 0"), kT0 + 1000);
    QCOMPARE(one(db, "SELECT end_ns FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 0"), kT0 + 1800);
    QCOMPARE(oneText(db, "SELECT s.value FROM nccl_ops n JOIN activities a ON a.id = n.activity_id "
                         "JOIN strings s ON s.id = a.name_id WHERE n.kind = 'AllReduce' AND n.seq = 0"),
             std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    // Recorded just after its launch (NCCL 2.28): the kernel launched just before.
    QCOMPARE(one(db, "SELECT start_ns FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 1"), kT0 + 3100);
    QCOMPARE(one(db, "SELECT end_ns FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 1"), kT0 + 3500);
    QCOMPARE(one(db, "SELECT start_ns FROM nccl_ops WHERE kind = 'Send'"), kT0 + 2000);
    QCOMPARE(one(db, "SELECT start_ns FROM nccl_ops WHERE kind = 'Recv'"), kT0 + 2100);
    QCOMPARE(one(db, "SELECT bytes FROM nccl_ops WHERE kind = 'Recv'"), 1024);
    QCOMPARE(oneText(db, "SELECT dtype FROM nccl_ops WHERE kind = 'Recv'"), std::string("ncclFloat32"));
}

// Two hosts whose clocks disagree by 5 us: with --align collectives the k-th
// send from rank 0 and the k-th receive on rank 1 end together.
void TestCaptureMerge::mergeAlignsByTransfers()
{
    QTemporaryDir tmp;
    for (int rank = 0; rank < 2; ++rank) {
        CaptureFileBuilder f(test::path(tmp, rank == 0 ? "rank0.a.1.pscap" : "rank1.b.2.pscap"));
        const int64_t skew = rank == 0 ? 0 : 5000;
        f.meta("rank", std::to_string(rank)).meta("world_size", "2").meta("host", rank == 0 ? "a" : "b");
        f.meta("boot_id", rank == 0 ? "boot-a" : "boot-b").meta("start_ns", std::to_string(kT0 + skew));
        f.kernel("gemm", kT0 + skew + 10, kT0 + skew + 20, 7, 1);
        f.comm(kPipe, "pp", 2, rank);
        for (int k = 0; k < 3; ++k) {
            const int64_t t = kT0 + skew + 1000 * k;
            f.op(kPipe, rank == 0 ? "Send" : "Recv", true, 1 - rank, k, t + (rank == 0 ? 0 : 10), t + 100);
        }
    }
    MergeOptions o;
    o.output = test::path(tmp, "job.pipescope");
    o.alignCollectives = true;
    auto report = mergeCaptureDir(tmp.path().toStdString(), o);
    QVERIFY(report.alignedByCollectives);
    QCOMPARE(report.offsets.size(), size_t(2));
    QCOMPARE(report.offsets[1].second, int64_t(-5000));
    sql::Database db(o.output, sql::Database::Mode::ReadOnly);
    QCOMPARE(one(db, "SELECT COUNT(*) FROM nccl_ops s JOIN nccl_ops r ON r.kind = 'Recv' AND s.kind = 'Send'"
                     " AND r.seq = s.seq AND r.end_ns = s.end_ns"),
             3);
    QCOMPARE(oneText(db, "SELECT alignment FROM sources WHERE rank = 1"), std::string("collectives"));
    // Without the option the host clocks are kept.
    o.output = test::path(tmp, "raw.pipescope");
    o.alignCollectives = false;
    QVERIFY(!mergeCaptureDir(tmp.path().toStdString(), o).alignedByCollectives);

    // The CLI prints the shifts as durations, not as nanosecond counts.
    auto r = test::runCli({"merge", tmp.path(), "--align", "collectives", "-o", tmp.path() + "/cli.pipescope"});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("Clock alignment: matched collectives and transfers\n"
                            "  rank  shift by collectives\n"
                            "     0                  0 ns\n"
                            "     1             -5.000 µs\n"),
             qPrintable(r.out));
}

void TestCaptureMerge::mergeMapsCommunicatorRanks()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    MergeOptions o;
    o.output = test::path(tmp, "job.pipescope");
    mergeCaptureDir(tmp.path().toStdString(), o);
    sql::Database db(o.output, sql::Database::Mode::ReadOnly);
    // Rank 0's peer 1 in "pp" is global rank 2, and the other way round.
    QCOMPARE(one(db, "SELECT peer FROM nccl_ops WHERE kind = 'Send'"), 2);
    QCOMPARE(one(db, "SELECT peer FROM nccl_ops WHERE kind = 'Recv'"), 0);
    QCOMPARE(oneText(db, "SELECT group_ranks FROM nccl_ops WHERE kind = 'Send'"), std::string("[0,2]"));
    QCOMPARE(oneText(db, "SELECT group_desc FROM nccl_ops WHERE kind = 'Send'"), std::string("pp"));
    QCOMPARE(oneText(db, "SELECT group_name FROM nccl_ops WHERE kind = 'Send'"), std::string("000000000000bbbb"));
    QCOMPARE(one(db, "SELECT group_size FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 0"), 3);
    // Rank 1 recorded nothing, so the world group's members are not all known.
    QCOMPARE(oneText(db, "SELECT group_ranks FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 0"), std::string("<null>"));
    QCOMPARE(one(db, "SELECT count(*) FROM process_groups"), 4);
    QCOMPARE(oneText(db, "SELECT ranks FROM process_groups WHERE rank = 2 AND desc = 'pp'"), std::string("[0,2]"));
}

void TestCaptureMerge::importSingleFile()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    std::string out = test::path(tmp, "one.pipescope");
    {
        StoreWriter w(out);
        ImportOptions io;
        auto src = importCapture(test::path(tmp, "rank0.node01.100.pscap"), w, io);
        QCOMPARE(src.ranks, std::vector<int>{0});
        QVERIFY(src.absoluteClock);
        // Recorded times are epoch ns already: nothing to add to reach the absolute clock.
        QCOMPARE(src.timeBase, TimeNs(0));
        QCOMPARE(src.records, int64_t(5 + 4 + 2 + 2 + 3));
        w.finish();
    }
    sql::Database db(out, sql::Database::Mode::ReadOnly);
    // Alone, only the world communicator maps its ranks (identity); "pp" does not.
    QCOMPARE(oneText(db, "SELECT group_ranks FROM nccl_ops WHERE kind = 'AllReduce' AND seq = 0"), std::string("[0,1,2]"));
    QCOMPARE(one(db, "SELECT peer FROM nccl_ops WHERE kind = 'Send'"), -1);

    std::string out2 = test::path(tmp, "forced.pipescope");
    StoreWriter w2(out2);
    ImportOptions forced;
    forced.rank = 5;
    QCOMPARE(importCapture(test::path(tmp, "rank2.node01.102.pscap"), w2, forced).ranks, std::vector<int>{5});
    QVERIFY(isCaptureFile(test::path(tmp, "rank2.node01.102.pscap")));
}

void TestCaptureMerge::importKeepsCaptureTimes()
{
    // `pipescope import` of capture files (docs/capture.md suggests it for
    // --align collectives) must keep the recorded epoch times, as merge does.
    QTemporaryDir tmp;
    writeJob(tmp.path());
    ImportJobOptions o;
    o.inputs = {test::path(tmp, "rank0.node01.100.pscap"), test::path(tmp, "rank2.node01.102.pscap")};
    o.output = test::path(tmp, "imported.pipescope");
    o.progress = false;
    auto report = importJob(o);
    QCOMPARE(report.offsets.size(), size_t(2));
    for (auto [rank, offset] : report.offsets)
        QCOMPARE(offset, TimeNs(0));
    sql::Database db(o.output, sql::Database::Mode::ReadOnly);
    QCOMPARE(one(db, "SELECT start_ns FROM activities a JOIN strings s ON s.id = a.name_id WHERE s.value = 'gemm'"),
             kT0 + 200);
    QCOMPARE(one(db, "SELECT min(start_ns) FROM activities WHERE rank = 2"), kT0 + 2100);
    QCOMPARE(one(db, "SELECT start_ns FROM cpu_ranges WHERE rank = 2 AND kind IN (3, 4)"), kT0 + 1950);
}

void TestCaptureMerge::refusesBadFiles()
{
    QTemporaryDir tmp;
    // A SQLite file that is not a capture.
    {
        sql::Database other(test::path(tmp, "other.pscap"), sql::Database::Mode::Create);
        other.exec("CREATE TABLE t(x)");
    }
    QVERIFY(!isCaptureFile(test::path(tmp, "other.pscap")));
    std::string out = test::path(tmp, "job.pipescope");
    MergeOptions o;
    o.output = out;
    try {
        mergeCaptureDir(tmp.path().toStdString(), o);
        QFAIL("merged a file that is not a capture");
    } catch (const FormatError& e) {
        QVERIFY(std::string(e.what()).find("other.pscap") != std::string::npos);
    }
    QVERIFY(!QFile::exists(QString::fromStdString(out)));
    QFile::remove(tmp.path() + "/other.pscap");

    // A capture from a newer pipescope.
    {
        CaptureFileBuilder f(test::path(tmp, "rank0.h.1.pscap"));
        f.meta("rank", "0");
    }
    {
        sql::Database db(test::path(tmp, "rank0.h.1.pscap"), sql::Database::Mode::ReadWrite);
        db.exec("PRAGMA user_version = " + std::to_string(capture::kCaptureVersion + 1));
    }
    try {
        mergeCaptureDir(tmp.path().toStdString(), o);
        QFAIL("merged a newer capture file");
    } catch (const FormatError& e) {
        QVERIFY(std::string(e.what()).find("newer") != std::string::npos);
    }
    QVERIFY(!QFile::exists(QString::fromStdString(out)));

    QTemporaryDir empty;
    QVERIFY_THROWS_EXCEPTION(Error, mergeCaptureDir(empty.path().toStdString(), o));
    QVERIFY_THROWS_EXCEPTION(Error, mergeCaptureDir((tmp.path() + "/missing").toStdString(), o));
}

// A rank file that breaks after some of its records were stored is skipped
// whole: none of its rows stay, the other ranks are merged as without it, and
// the store says which file is missing and why.
void TestCaptureMerge::mergeSkipsFileThatFailsPartWay()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    writeRankFailingPartWay(tmp.path());
    // And one that cannot even be opened: a SQLite header and then nothing.
    {
        QFile f(tmp.path() + "/rank4.node01.104.pscap");
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray("SQLite format 3\0", 16) + QByteArray(84, '\x01'));
    }
    MergeOptions o;
    o.output = test::path(tmp, "job.pipescope");
    auto report = mergeCaptureDir(tmp.path().toStdString(), o);
    QCOMPARE(report.files.size(), size_t(6));
    QCOMPARE(report.skipped.size(), size_t(2));
    QVERIFY(QString::fromStdString(report.skipped[0].first).endsWith("rank4.node01.104.pscap"));
    QVERIFY(QString::fromStdString(report.skipped[1].first).endsWith("rank1.node01.101.pscap"));
    QVERIFY2(report.skipped[1].second.find("memory_events") != std::string::npos, report.skipped[1].second.c_str());
    int skippedWarnings = 0;
    for (const auto& w : report.warnings)
        if (w.ends_with("; skipped"))
            ++skippedWarnings;
    QCOMPARE(skippedWarnings, 2);
    // The ranks that could be read, as in mergeAssignsRanksAndCounts; rank 1 stays free.
    QCOMPARE(report.sources.size(), size_t(3));
    QCOMPARE(report.rankFiles.size(), size_t(3));
    QVERIFY(!report.rankFiles.count(1));
    QCOMPARE(report.droppedRecords, int64_t(5)); // rank 1's 7 dropped records went with it

    sql::Database db(o.output, sql::Database::Mode::ReadOnly);
    for (const char* table : {"activities", "cpu_ranges", "nccl_ops", "memory_events", "streams", "ranks", "gpus", "sources",
                              "process_groups"})
        QCOMPARE(one(db, std::string("SELECT count(*) FROM ") + table + " WHERE rank = 1"), 0);
    QCOMPARE(one(db, "SELECT count(*) FROM strings WHERE value IN ('only_in_rank1', 'rank1 range')"), 0);
    QCOMPARE(one(db, "SELECT count(*) FROM sources"), 3);
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 0"), 5);
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 2"), 1);
    QCOMPARE(one(db, "SELECT count(*) FROM activities WHERE rank = 3"), 1);
    QCOMPARE(one(db, "SELECT count(*) FROM memory_events"), 2);
    // Rank 2 was read after rank 1 was taken back: its names resolve to its own strings.
    QCOMPARE(oneText(db, "SELECT s.value FROM activities a JOIN strings s ON s.id = a.name_id WHERE a.rank = 2"),
             std::string("ncclDevKernel_SendRecv"));
    QCOMPARE(oneText(db, "SELECT s.value FROM cpu_ranges c JOIN strings s ON s.id = c.name_id WHERE c.rank = 2"),
             std::string("cuLaunchKernelEx"));
    QCOMPARE(one(db, "SELECT count(*) FROM (SELECT value FROM strings GROUP BY value HAVING count(*) > 1)"), 0);
    QCOMPARE(one(db, "SELECT count(*) FROM diagnostics WHERE kind = 'capture_dropped:cupti_records'"), 1);
    QCOMPARE(one(db, "SELECT count FROM diagnostics WHERE kind = 'capture_dropped:cupti_records'"), 1);
    // Each skipped file is an error diagnostic of its own, naming it and why.
    QCOMPARE(oneText(db, "SELECT severity FROM diagnostics WHERE kind = 'capture_file_skipped:rank1.node01.101.pscap'"),
             std::string("error"));
    const std::string example =
        oneText(db, "SELECT example FROM diagnostics WHERE kind = 'capture_file_skipped:rank1.node01.101.pscap'");
    QVERIFY2(example.find("rank1.node01.101.pscap") != std::string::npos, example.c_str());
    QVERIFY2(example.find("memory_events") != std::string::npos, example.c_str());
    QVERIFY(example.ends_with("its rank is missing from the job"));
    QCOMPARE(oneText(db, "SELECT severity FROM diagnostics WHERE kind = 'capture_file_skipped:rank4.node01.104.pscap'"),
             std::string("error"));
}

void TestCaptureMerge::mergeFailsWhenNoFileMerges()
{
    QTemporaryDir tmp;
    writeRankFailingPartWay(tmp.path(), "rank1.a.1.pscap");
    writeRankFailingPartWay(tmp.path(), "rank1.b.2.pscap");
    MergeOptions o;
    o.output = test::path(tmp, "job.pipescope");
    try {
        mergeCaptureDir(tmp.path().toStdString(), o);
        QFAIL("merged a job none of whose files could be read");
    } catch (const FormatError& e) {
        const std::string what = e.what();
        QVERIFY2(what.find("none of its 2 capture files could be merged") != std::string::npos, e.what());
        QVERIFY2(what.find("rank1.a.1.pscap") != std::string::npos, e.what());
    }
    QVERIFY(!QFile::exists(QString::fromStdString(o.output)));
    // One file alone: its own message.
    QVERIFY(QFile::remove(tmp.path() + "/rank1.b.2.pscap"));
    try {
        mergeCaptureDir(tmp.path().toStdString(), o);
        QFAIL("merged a job whose only file could not be read");
    } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).starts_with(test::path(tmp, "rank1.a.1.pscap") + ": "), e.what());
    }
    QVERIFY(!QFile::exists(QString::fromStdString(o.output)));
}

void TestCaptureMerge::cliMergeSkipsBrokenFile()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    writeRankFailingPartWay(tmp.path());
    const QString out = tmp.path() + "/out.pipescope";
    auto r = test::runCli({"merge", tmp.path(), "-o", out});
    QVERIFY2(r.exitCode == 0, qPrintable(r.err));
    QVERIFY2(r.out.startsWith("Merged 3 ranks from 5 files into " + out + " (1 file skipped, see the warnings)\n"),
             qPrintable(r.out));
    const QString file = tmp.path() + "/rank1.node01.101.pscap";
    QVERIFY2(r.err.contains(QRegularExpression("^pipescope merge: warning: " + QRegularExpression::escape(file) +
                                               ": .*memory_events.*; skipped$",
                                               QRegularExpression::MultilineOption)),
             qPrintable(r.err));
    auto info = test::runCli({"info", out});
    QCOMPARE(info.exitCode, 0);
    QVERIFY(info.out.contains("capture_file_skipped:rank1.node01.101.pscap"));

    // Nothing could be merged: exit 1, no store.
    QTemporaryDir broken;
    writeRankFailingPartWay(broken.path(), "rank1.a.1.pscap");
    writeRankFailingPartWay(broken.path(), "rank1.b.2.pscap");
    r = test::runCli({"merge", broken.path()});
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.err.contains("none of its 2 capture files could be merged"), qPrintable(r.err));
    QVERIFY(!QFile::exists(broken.path() + "/job.pipescope"));
}

void TestCaptureMerge::cliMerge()
{
    QTemporaryDir tmp;
    writeJob(tmp.path());
    auto r = test::runCli({"merge", tmp.path(), "-o", tmp.path() + "/out.pipescope"});
    QCOMPARE(r.exitCode, 0);
    QVERIFY(r.out.contains("Merged 3 ranks"));
    QVERIFY(r.err.contains("names no rank"));
    QVERIFY(QFile::exists(tmp.path() + "/out.pipescope"));
    // Default output inside the directory.
    r = test::runCli({"merge", tmp.path(), "-q"});
    QCOMPARE(r.exitCode, 0);
    QVERIFY(QFile::exists(tmp.path() + "/job.pipescope"));

    QTemporaryDir empty;
    r = test::runCli({"merge", empty.path()});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(r.err.contains("holds no capture files"));
}

void TestCaptureMerge::cliCaptureRunsCommand()
{
    QTemporaryDir tmp;
    auto r = test::runCli({"capture", "-o", tmp.path() + "/cap", "--", "sh", "-c", "echo ran; exit 3"});
    QCOMPARE(r.exitCode, 3);
    QVERIFY(r.out.contains("ran"));
#ifdef PIPESCOPE_COLLECTORS_BUILT
    if (!haveDriver())
        QVERIFY2(r.err.contains("no CUDA driver found"), qPrintable(r.err));
#else
    // A build without the collectors (no CUDA toolkit, or turned off) says so and still runs the command.
    QVERIFY2(r.err.contains("libpipescope_cupti.so not found"), qPrintable(r.err));
#endif
    QVERIFY(QDir(tmp.path() + "/cap").exists());

    r = test::runCli({"capture", "-o", tmp.path() + "/cap", "--", "/nonexistent/program"});
    QCOMPARE(r.exitCode, 127);
    QVERIFY(r.err.contains("/nonexistent/program"));

    r = test::runCli({"capture", "--profiler-api", "--nvtx-range", "x", "--", "true"});
    QCOMPARE(r.exitCode, 1);
    // A folder with an earlier run's files is refused rather than mixed into this job.
    writeJob(tmp.path() + "/cap");
    r = test::runCli({"capture", "-o", tmp.path() + "/cap", "--", "sh", "-c", "echo ran"});
    QCOMPARE(r.exitCode, 1);
    QVERIFY(!r.out.contains("ran"));
    QVERIFY2(r.err.contains("earlier run"), qPrintable(r.err));
    r = test::runCli({"capture", "--no-merge", "-o", tmp.path() + "/cap", "--", "true"});
    QCOMPARE(r.exitCode, 0);
    r = test::runCli({"capture", "--delay", "-1", "--", "true"});
    QCOMPARE(r.exitCode, 2);
}

void TestCaptureMerge::cliCaptureSetsEnvironment()
{
    QTemporaryDir tmp;
    QString dir = tmp.path() + "/cap";
    auto r = test::runCli({"capture", "-o", dir, "--delay", "1.5", "--duration", "20", "--nvtx-range", "steps 10-20",
                           "--", "sh", "-c", "env > \"$PIPESCOPE_CAPTURE_DIR/../env.txt\""});
    QCOMPARE(r.exitCode, 0);
    QFile f(tmp.path() + "/env.txt");
    QVERIFY(f.open(QIODevice::ReadOnly));
    QString env = QString::fromUtf8(f.readAll());
    QVERIFY(env.contains("PIPESCOPE_CAPTURE_DIR=" + QDir(dir).canonicalPath() + "\n") ||
            env.contains("PIPESCOPE_CAPTURE_DIR=" + QDir(dir).absolutePath() + "\n"));
    QVERIFY(env.contains("PIPESCOPE_CAPTURE_DELAY=1.5\n"));
    QVERIFY(env.contains("PIPESCOPE_CAPTURE_DURATION=20\n"));
    QVERIFY(env.contains("PIPESCOPE_CAPTURE_START_ON=nvtx:steps 10-20\n"));
#ifdef PIPESCOPE_COLLECTORS_BUILT
    QVERIFY(env.contains("libpipescope_cupti.so\n"));
#endif
    // The injected libraries, when found, are existing files.
    for (const QString& line : env.split('\n')) {
        if (line.startsWith("CUDA_INJECTION64_PATH=") || line.startsWith("NCCL_PROFILER_PLUGIN="))
            QVERIFY2(QFile::exists(line.section('=', 1)), qPrintable(line));
    }
}

QTEST_GUILESS_MAIN(TestCaptureMerge)
#include "tst_capture_merge.moc"
