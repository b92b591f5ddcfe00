// Sharded jobs: which task a launcher started, how rank files are grouped
// into shards, the job index the tasks complete together, and a sharded job
// read as the one store its traces make.
#include "EmittedJob.h"
#include "TestSupport.h"

#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"
#include "analysis/JobPart.h"
#include "analysis/JobSummaries.h"
#include "report/ChromeTrace.h"
#include "report/JobPartText.h"
#include "import/Import.h"
#include "import/ShardedImport.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/Error.h"
#include "util/JsonText.h"

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <limits>
#include <map>
#include <set>

using namespace pipescope;
using pipescope::test::emitJob;
using pipescope::test::path;

namespace {

ImportJobOptions options(const QString& input, const std::string& output)
{
    ImportJobOptions o;
    o.inputs = {input.toStdString()};
    o.output = output;
    o.progress = false;
    o.jobs = 1;
    return o;
}

std::string analysisJson(const std::string& path)
{
    Store store(path);
    const Trace trace = store.load();
    AnalyzeOptions ao;
    ao.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
    return jsonText(toJson(analyze(trace, ao), ao), 1);
}

// Per rank: each activity's (start, end, name, stream's own id), in order.
std::map<int, std::vector<std::tuple<TimeNs, TimeNs, std::string, int64_t>>> activitiesByRank(const Trace& t)
{
    std::map<int, std::vector<std::tuple<TimeNs, TimeNs, std::string, int64_t>>> out;
    for (const Activity& a : t.activities)
        out[a.rank].emplace_back(a.start, a.end, t.str(a.name), t.stream(a.streamId) ? t.stream(a.streamId)->stream : -1);
    return out;
}

std::function<const char*(const char*)> environment(std::map<std::string, std::string> vars)
{
    auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
    return [held](const char* name) -> const char* {
        auto it = held->find(name);
        return it == held->end() ? nullptr : it->second.c_str();
    };
}

QString errorOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    return {};
}

#ifdef PIPESCOPE_CLI
// The command-line tool with extra environment variables (a launcher's).
test::CliResult runCliWith(const QStringList& args, const std::map<QString, QString>& env = {})
{
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    for (const char* v : {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"})
        e.remove(v);
    for (const auto& [k, v] : env)
        e.insert(k, v);
    p.setProcessEnvironment(e);
    p.start(QString::fromUtf8(PIPESCOPE_CLI), args);
    p.waitForFinished(300000);
    test::CliResult r;
    r.exitCode = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = QString::fromUtf8(p.readAllStandardOutput());
    r.err = QString::fromUtf8(p.readAllStandardError());
    return r;
}
#endif

} // namespace

class TestSharded : public QObject {
    Q_OBJECT

    QTemporaryDir data_;
    QString job_; // 4 stages x 2 replicas

    // The job's traces in `traces`, with the odd ranks' (one pipeline's)
    // time base 5 ms later, as a host whose clock runs ahead writes them.
    bool oddPipelineLater(const QString& traces) const
    {
        QDir().mkpath(traces);
        for (int r = 0; r < 8; ++r) {
            QFile in(job_ + QString("/rank-%1.json").arg(r));
            if (!in.open(QIODevice::ReadOnly))
                return false;
            QByteArray text = in.readAll();
            if (r % 2 == 1) {
                const QByteArray base = "\"baseTimeNanoseconds\": 1704067200000000000";
                if (!text.contains(base))
                    return false;
                text.replace(base, "\"baseTimeNanoseconds\": 1704067200005000000");
            }
            QFile o(traces + QString("/rank-%1.json").arg(r));
            if (!o.open(QIODevice::WriteOnly) || o.write(text) != text.size())
                return false;
        }
        return true;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(data_.isValid());
        job_ = data_.path() + "/traces";
        QDir().mkpath(job_);
        emitJob(job_, 4, 2, 3);
    }

    void taskFromTheLauncher()
    {
        auto srun = shardTaskFromEnvironment(environment({{"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_NTASKS", "8"}}));
        QVERIFY(srun);
        QCOMPARE(srun->index, 3);
        QCOMPARE(srun->count, 8);
        QCOMPARE(QString::fromStdString(srun->source), QString("SLURM_PROCID/SLURM_STEP_NUM_TASKS"));
        // A batch script is one process, whatever --ntasks the allocation has.
        QVERIFY(!shardTaskFromEnvironment(environment({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}})));
        auto ompi = shardTaskFromEnvironment(environment({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
        QVERIFY(ompi && ompi->index == 1 && ompi->count == 2);
        // mpirun inside an allocation: its daemons' SLURM_PROCID counts nodes, the MPI rank counts tasks.
        auto both = shardTaskFromEnvironment(environment({{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"},
                                                          {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"}}));
        QVERIFY(both && both->index == 5 && both->count == 8);
        auto pmi = shardTaskFromEnvironment(environment({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}}));
        QVERIFY(pmi && pmi->index == 0 && pmi->count == 4);
        QVERIFY(!shardTaskFromEnvironment(environment({})));
        QVERIFY(errorOf([] { shardTaskFromEnvironment(environment({{"SLURM_PROCID", "x1"}, {"SLURM_STEP_NUM_TASKS", "2"}})); })
                    .startsWith("SLURM_PROCID=x1: not a task number"));
        QVERIFY(errorOf([] { shardTaskFromEnvironment(environment({{"SLURM_PROCID", "2"}, {"SLURM_STEP_NUM_TASKS", "2"}})); })
                    .contains("is not below SLURM_STEP_NUM_TASKS=2"));

        const ShardTask t = parseShardTask("2/4");
        QCOMPARE(t.index, 2);
        QCOMPARE(t.count, 4);
        for (const char* bad : {"4/4", "1/0", "a/2", "3", "-1/2", ""})
            QVERIFY2(errorOf([bad] { parseShardTask(bad); }).contains("expected K/N"), bad);
    }

    void plansKeepPipelinesWhole()
    {
        std::vector<std::string> files;
        std::vector<TraceHead> heads;
        for (int r = 0; r < 8; ++r) {
            files.push_back("rank-" + std::to_string(r) + ".json");
            TraceHead h;
            h.rank = r;
            h.bytes = 100 + r;
            // Megatron's layout: stages world/P = 2 ranks apart.
            h.pipelineGroups = {r % 2 == 0 ? std::vector<int>{0, 2, 4, 6} : std::vector<int>{1, 3, 5, 7}};
            heads.push_back(h);
        }
        ShardPlan plan = planShards(files, heads, 2);
        QCOMPARE(plan.files.size(), size_t(2));
        // The heavier group (odd ranks, 416 bytes) goes first, to shard 0.
        QCOMPARE(plan.files[0], (std::vector<std::string>{"rank-1.json", "rank-3.json", "rank-5.json", "rank-7.json"}));
        QCOMPARE(plan.files[1], (std::vector<std::string>{"rank-0.json", "rank-2.json", "rank-4.json", "rank-6.json"}));
        QVERIFY(QString::fromStdString(plan.groupedBy).startsWith("pipeline groups"));

        // Contiguous stages: the groups, not rank mod N, decide.
        for (int r = 0; r < 8; ++r)
            heads[static_cast<size_t>(r)].pipelineGroups = {r < 4 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7}};
        plan = planShards(files, heads, 2);
        QCOMPARE(plan.files[0], (std::vector<std::string>{"rank-4.json", "rank-5.json", "rank-6.json", "rank-7.json"}));
        QCOMPARE(plan.files[1], (std::vector<std::string>{"rank-0.json", "rank-1.json", "rank-2.json", "rank-3.json"}));

        // No groups in the heads: rank r to shard r mod N.
        for (auto& h : heads)
            h.pipelineGroups.clear();
        plan = planShards(files, heads, 3);
        QCOMPARE(plan.files[0], (std::vector<std::string>{"rank-0.json", "rank-3.json", "rank-6.json"}));
        QCOMPARE(plan.files[2], (std::vector<std::string>{"rank-2.json", "rank-5.json"}));
        QVERIFY(QString::fromStdString(plan.groupedBy).startsWith("rank modulo 3"));

        // Every task computes the same fingerprint from the same inputs; another N or size is another plan.
        QCOMPARE(planShards(files, heads, 3).fingerprint, plan.fingerprint);
        QVERIFY(planShards(files, heads, 2).fingerprint != plan.fingerprint);
        heads[0].bytes += 1;
        QVERIFY(planShards(files, heads, 3).fingerprint != plan.fingerprint);
    }

    void headsTellRankAndPipeline()
    {
        const TraceHead head = readTraceHead((job_ + "/rank-5.json").toStdString());
        QCOMPARE(head.rank, std::optional<int>(5));
        QCOMPARE(head.pipelineGroups.size(), size_t(1));
        QCOMPARE(head.pipelineGroups[0], (std::vector<int>{1, 3, 5, 7}));
        QVERIFY(head.bytes > 0);
    }

    void shardedJobReadsAsOneStore()
    {
        QTemporaryDir out;
        const std::string single = path(out, "single.pipescope");
        importJob(options(job_, single));
        const std::string folder = path(out, "job");

        // Each shard holds one whole pipeline (stages 2 ranks apart), the heavier one in shard 0.
        const std::vector<int> even{0, 2, 4, 6}, odd{1, 3, 5, 7};
        const ShardImportResult first = importShard(options(job_, folder), {1, 2, "--shard"});
        QVERIFY(first.record.ranks == even || first.record.ranks == odd);
        QVERIFY(!first.index.complete());
        QCOMPARE(first.index.missing(), std::vector<int>{0});
        // Until the other task ends, every reader says which shard is missing.
        const QString incomplete = errorOf([&] { Store s(folder); });
        QVERIFY2(incomplete.contains("the sharded job is incomplete: 1 of 2 shards are missing (0;"), qPrintable(incomplete));
        QVERIFY(incomplete.contains("--shard 0/2"));

        const ShardImportResult second = importShard(options(job_, folder), {0, 2, "--shard"});
        QCOMPARE(second.record.ranks, first.record.ranks == even ? odd : even);
        QVERIFY(second.record.inputBytes >= first.record.inputBytes);
        QVERIFY(second.index.complete());
        QCOMPARE(second.record.rankSummaries.size(), size_t(4));
        QVERIFY(second.record.rankSummaries[0].kernels > 0);

        Store one(single), sharded(folder);
        QVERIFY(sharded.jobIndex());
        QVERIFY(!one.jobIndex());
        const Trace a = one.load(), b = sharded.load();
        QCOMPARE(b.activities.size(), a.activities.size());
        QCOMPARE(b.ncclOps.size(), a.ncclOps.size());
        QCOMPARE(b.streams.size(), a.streams.size());
        QCOMPARE(b.ranks.size(), a.ranks.size());
        QVERIFY(activitiesByRank(a) == activitiesByRank(b));
        for (size_t i = 0; i < a.activities.size(); ++i)
            QCOMPARE(b.activities[i].ncclCount, a.activities[i].ncclCount);

        // Summaries agree rank by rank.
        const StoreSummary sa = one.summary(), sb = sharded.summary();
        QCOMPARE(sb.gpuSummaries.size(), sa.gpuSummaries.size());
        for (size_t i = 0; i < sa.gpuSummaries.size(); ++i) {
            QCOMPARE(sb.gpuSummaries[i].rank, sa.gpuSummaries[i].rank);
            QCOMPARE(sb.gpuSummaries[i].kernels, sa.gpuSummaries[i].kernels);
            QCOMPARE(sb.gpuSummaries[i].gpuBusy, sa.gpuSummaries[i].gpuBusy);
        }
        QCOMPARE(sb.first, sa.first);
        QCOMPARE(sb.last, sa.last);
        QCOMPARE(sb.activityCounts, sa.activityCounts);

        // Ids lead back to their shard: the launch of a shard-1 activity.
        const Activity* late = nullptr;
        for (const Activity& x : b.activities)
            if (x.rank == 6 && x.kind == ActivityKind::Kernel && x.launchStart) {
                late = &x;
                break;
            }
        QVERIFY(late);
        const auto launch = sharded.launchOf(late->id);
        QVERIFY(launch);
        QCOMPARE(launch->start, *late->launchStart);
        QCOMPARE(sharded.activityStart(6, 0), one.activityStart(6, 0));
        QCOMPARE(sharded.activityStart(7, 10), one.activityStart(7, 10));

        // The analysis of the sharded job is the single store's, field by field.
        const auto ja = nlohmann::json::parse(analysisJson(single)), jb = nlohmann::json::parse(analysisJson(folder));
        QVERIFY(ja["pipeline"]["found"].get<bool>());
        for (const auto& [key, value] : ja.items())
            QVERIFY2(jb[key] == value, key.c_str());
        QCOMPARE(jb.size(), ja.size());
    }

    // A few ranks are read through the stores' rank indexes, many by a scan
    // of each table: either way, exactly the rows the whole load has of them.
    void someRanksReadAsTheWholeHasThem()
    {
        QTemporaryDir out;
        const std::string single = path(out, "single.pipescope");
        importJob(options(job_, single));
        const std::string folder = path(out, "job");
        importShard(options(job_, folder), {0, 2, "--shard"});
        importShard(options(job_, folder), {1, 2, "--shard"});
        for (const std::string& input : {single, folder}) {
            Store store(input);
            LoadOptions all;
            all.cpuOps = all.runtimeCalls = true;
            const Trace whole = store.load(all);
            QCOMPARE(store.earliestRecord(), std::optional<TimeNs>(report::chromeTraceOrigin(store.load())));
            for (const std::vector<int>& ranks : {std::vector<int>{5}, std::vector<int>{6, 1}, std::vector<int>{0, 1, 2, 3, 4, 5}}) {
                LoadOptions some = all;
                some.ranks = ranks;
                const Trace part = store.load(some);
                auto wanted = [&](int r) { return std::find(ranks.begin(), ranks.end(), r) != ranks.end(); };
                std::vector<int64_t> a, b, c, d, e, f;
                for (const Activity& x : whole.activities)
                    if (wanted(x.rank))
                        a.push_back(x.id);
                for (const Activity& x : part.activities)
                    b.push_back(x.id);
                for (const CpuRange& x : whole.cpuRanges)
                    if (wanted(x.rank))
                        c.push_back(x.id);
                for (const CpuRange& x : part.cpuRanges)
                    d.push_back(x.id);
                for (const NcclOp& x : whole.ncclOps)
                    if (wanted(x.rank))
                        e.push_back(x.id);
                for (const NcclOp& x : part.ncclOps)
                    f.push_back(x.id);
                QVERIFY(!b.empty() && !d.empty() && !f.empty());
                QCOMPARE(b, a);
                QCOMPARE(d, c);
                QCOMPARE(f, e);
                // The process groups the ranks reported, and only theirs.
                std::vector<std::pair<int, std::string>> g, h;
                for (const ProcessGroup& x : whole.processGroups)
                    if (wanted(x.rank))
                        g.emplace_back(x.rank, x.name);
                for (const ProcessGroup& x : part.processGroups)
                    h.emplace_back(x.rank, x.name);
                QVERIFY(!h.empty());
                QVERIFY(h == g);
                // Their GPUs and trace files, not the rest of the job's.
                std::vector<int> gpuRanks, sourceRanks;
                for (const GpuInfo& x : part.gpus)
                    gpuRanks.push_back(x.rank);
                for (const SourceInfo& x : part.sources)
                    sourceRanks.push_back(x.rank.value_or(-1));
                std::sort(gpuRanks.begin(), gpuRanks.end());
                std::sort(sourceRanks.begin(), sourceRanks.end());
                std::vector<int> sorted = ranks;
                std::sort(sorted.begin(), sorted.end());
                QCOMPARE(gpuRanks, sorted);
                QCOMPARE(sourceRanks, sorted);
            }
        }
    }

    void clocksAlignAcrossShards()
    {
        // The odd pipeline's host runs 5 ms ahead: its files' time base says so.
        QTemporaryDir out;
        const QString traces = out.path() + "/traces";
        QVERIFY(oddPipelineLater(traces));
        ImportJobOptions o = options(traces, path(out, "single.pipescope"));
        o.alignment = Alignment::Collectives;
        importJob(o);
        o.output = path(out, "job");
        importShard(o, {0, 2, "--shard"});
        const ShardImportResult last = importShard(o, {1, 2, "--shard"});
        QVERIFY(last.index.complete());
        // Each shard is one pipeline; the one without rank 0 moves back 5 ms.
        QCOMPARE(last.index.shardClockOffsets.size(), size_t(2));
        const int odd = last.index.record(0)->ranks.front() % 2 == 1 ? 0 : 1;
        QCOMPARE(last.index.shardClockOffsets[static_cast<size_t>(odd)], TimeNs{-5'000'000});
        QCOMPARE(last.index.shardClockOffsets[static_cast<size_t>(1 - odd)], TimeNs{0});
        QCOMPARE(readJobIndex(o.output).shardClockOffsets, last.index.shardClockOffsets);

        Store one(path(out, "single.pipescope")), sharded(o.output);
        QVERIFY(activitiesByRank(one.load()) == activitiesByRank(sharded.load()));
        QCOMPARE(sharded.activityStart(3, 5), one.activityStart(3, 5));
        QCOMPARE(sharded.summary().last, one.summary().last);
        // The job's origin, read without loading it, moves with the shard.
        QCOMPARE(sharded.earliestRecord(), std::optional<TimeNs>(report::chromeTraceOrigin(sharded.load())));
        QCOMPARE(sharded.earliestRecord(), one.earliestRecord());
        const auto ja = nlohmann::json::parse(analysisJson(path(out, "single.pipescope"))), jb = nlohmann::json::parse(analysisJson(o.output));
        for (const auto& [key, value] : ja.items())
            QVERIFY2(jb[key] == value, key.c_str());
    }

    void localProcessesWriteTheShards()
    {
        QTemporaryDir out;
        const std::string folder = path(out, "job");
        const JobIndex index = importShardsLocally(options(job_, folder), 2);
        QVERIFY(index.complete());
        QCOMPARE(index.records.size(), size_t(2));
        QCOMPARE(index.records[0].ranks.size() + index.records[1].ranks.size(), size_t(8));
        QVERIFY(index.records[0].pid != index.records[1].pid);
        QCOMPARE(Store(folder).load().ranks.size(), size_t(8));
        QCOMPARE(readJobIndex(folder).plan, index.plan);
        QVERIFY(!QFile::exists(QString::fromStdString(folder) + "/.job.lock"));
    }

    void indexSummarisesStagesAcrossReplicas()
    {
        QTemporaryDir out;
        const std::string folder = path(out, "job");
        const JobIndex index = importShardsLocally(options(job_, folder), 2, summariseShard);
        QVERIFY(index.complete());

        // The whole job's analysis, for what each rank's shard said of it.
        Store whole(folder);
        const Trace trace = whole.load();
        const AnalysisResult full = analyze(trace);
        std::map<std::pair<std::string, int>, const RankIdle*> fullIdle;
        for (const RankIdle& r : full.idle)
            fullIdle[{full.iterations[static_cast<size_t>(r.iteration)].label, r.rank}] = &r;

        const JobIndex read = readJobIndex(folder);
        int summarised = 0;
        for (const ShardRecord& rec : read.records)
            for (const JobRankSummary& s : rec.rankSummaries) {
                QVERIFY(s.stage);
                QCOMPARE(s.iterations.size(), full.iterations.size());
                const RankIdle* f = fullIdle.at({s.iterations[1].label, s.rank});
                QCOMPARE(*s.stage, f->stage);
                QCOMPARE(s.iterations[1].busyNs, f->busyNs);
                ++summarised;
            }
        QCOMPARE(summarised, 8);

        const auto ov = overviewFromIndex(read);
        QVERIFY(ov);
        QCOMPARE(ov->ranks, 8);
        QCOMPARE(ov->stages.size(), size_t(4));
        for (const StageReplicas& st : ov->stages) {
            QCOMPARE(st.replicas, 2);
            QVERIFY(st.busyMin <= st.busyMedian && st.busyMedian <= st.busyMax);
            const RankIdle* busiest = fullIdle.at({ov->iteration, st.busiestRank});
            const RankIdle* idlest = fullIdle.at({ov->iteration, st.idlestRank});
            QCOMPARE(busiest->stage, st.stage);
            QCOMPARE(idlest->stage, st.stage);
            QCOMPARE(st.busyMax, busiest->busyNs);
            QCOMPARE(st.busyMin, idlest->busyNs);
        }
        // Of three iterations the first is left out; of the other two, the shorter median window.
        QVERIFY(ov->iteration != full.iterations.front().label);
        QCOMPARE(overviewFromIndex(read, full.iterations.back().label)->iteration, full.iterations.back().label);

        // The index knows the job's pipelines, and which one holds the busiest replica.
        QCOMPARE(read.pipelines, (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
        const auto b = busiestReplica(read, *ov);
        QVERIFY(b);
        QCOMPARE(b->pipeline, *read.pipelineOf(b->rank));
        QVERIFY(std::find(b->pipeline.begin(), b->pipeline.end(), b->rank) != b->pipeline.end());
        for (const StageReplicas& st : ov->stages)
            QVERIFY(st.busyMax <= b->busyNs);
        QCOMPARE(rankListText(b->pipeline), QString(b->rank % 2 ? "1,3,5,7" : "0,2,4,6").toStdString());
        // What a job too large to read whole reads: that pipeline.
        QCOMPARE(representativeRanks(read), b->pipeline);
        // Its what-if runs each stage at the pace of the stage's slowest replica.
        const std::vector<double> pace = replicaPaceFromIndex(read, *ov, b->pipeline);
        QCOMPARE(pace.size(), size_t(4));
        for (const StageReplicas& st : ov->stages) {
            const int loaded = b->pipeline[static_cast<size_t>(st.stage)];
            const double want = std::max(1.0, double(st.busyMax) / double(fullIdle.at({ov->iteration, loaded})->busyNs));
            QCOMPARE(pace[static_cast<size_t>(st.stage)], want);
        }
    }

    // A shard too large to analyse at once is analysed pipeline by pipeline:
    // each rank's summary is the one the whole shard's analysis gives it.
    void mapByPipelineEqualsTheWholeShards()
    {
        QTemporaryDir out;
        const std::string folder = path(out, "job");
        QVERIFY(importShardsLocally(options(job_, folder), 1, summariseShard).complete());
        const JobIndex read = readJobIndex(folder);
        QCOMPARE(read.records.size(), size_t(1));
        const ShardRecord& rec = read.records[0];
        QCOMPARE(rec.ranks.size(), size_t(8));
        QCOMPARE(read.pipelines.size(), size_t(2));
        const std::string shard = folder + "/" + rec.file;

        std::vector<JobRankSummary> whole = rec.rankSummaries, byPipeline = rec.rankSummaries;
        for (auto* v : {&whole, &byPipeline})
            for (JobRankSummary& s : *v) {
                s.stage.reset();
                s.iterations.clear();
            }
        summariseShardAbove(shard, whole, read.pipelines, std::numeric_limits<int64_t>::max());
        summariseShardAbove(shard, byPipeline, read.pipelines, 0);
        for (size_t i = 0; i < whole.size(); ++i) {
            const JobRankSummary &a = whole[i], &b = byPipeline[i];
            QVERIFY(a.stage);
            QCOMPARE(b.stage, a.stage);
            QCOMPARE(b.iterations.size(), a.iterations.size());
            QCOMPARE(a.iterations.size(), size_t(3));
            for (size_t k = 0; k < a.iterations.size(); ++k) {
                QCOMPARE(b.iterations[k].label, a.iterations[k].label);
                QCOMPARE(b.iterations[k].windowNs, a.iterations[k].windowNs);
                QCOMPARE(b.iterations[k].busyNs, a.iterations[k].busyNs);
                QVERIFY(b.iterations[k].idleByCause == a.iterations[k].idleByCause);
            }
        }
        // The index the import wrote holds the same (the shard is small: analysed whole).
        for (size_t i = 0; i < whole.size(); ++i)
            QCOMPARE(rec.rankSummaries[i].iterations[1].busyNs, whole[i].iterations[1].busyNs);
    }

    // A small index, the pace from it worked out by hand.
    void replicaPaceFromASmallIndex()
    {
        auto rank = [](int r, int stage, TimeNs busy) {
            JobRankSummary s;
            s.rank = r;
            s.stage = stage;
            for (const char* label : {"ProfilerStep#1", "ProfilerStep#2"}) {
                JobRankIteration it;
                it.label = label;
                it.windowNs = 1000;
                it.busyNs = busy;
                s.iterations.push_back(it);
            }
            return s;
        };
        JobIndex index;
        index.shards = 2;
        ShardRecord a, b;
        a.index = 0;
        a.ok = true;
        a.rankSummaries = {rank(0, 0, 100), rank(1, 1, 400)};
        b.index = 1;
        b.ok = true;
        b.rankSummaries = {rank(2, 0, 150), rank(3, 1, 400), rank(4, 0, 200)};
        index.records = {a, b};
        index.pipelines = {{0, 1}, {2, 3}};
        const auto ov = overviewFromIndex(index);
        QVERIFY(ov);
        QCOMPARE(ov->stages.size(), size_t(2));
        QCOMPARE(ov->stages[0].replicas, 3);
        QCOMPARE(ov->stages[0].busyMean, TimeNs(150));
        QCOMPARE(ov->stages[0].busyMax, TimeNs(200));
        // Stage 0 read on rank 0 (100): its slowest replica takes twice as long; stage 1's replicas are even.
        QCOMPARE(replicaPaceFromIndex(index, *ov, {0, 1}), (std::vector<double>{2.0, 1.0}));
        // Ranks 0 and 2 read: their mean is 125.
        QCOMPARE(replicaPaceFromIndex(index, *ov, {0, 1, 2}), (std::vector<double>{1.6, 1.0}));
        // The slowest read: no slower pace; nothing read of a stage: its own pace.
        QCOMPARE(replicaPaceFromIndex(index, *ov, {4}), (std::vector<double>{1.0, 1.0}));
        // The busiest replica (rank 1 or 3, 400) is in a pipeline the index knows.
        const std::vector<int> rep = representativeRanks(index);
        QVERIFY(rep == (std::vector<int>{0, 1}) || rep == (std::vector<int>{2, 3}));
        // Stage 0's busiest replica (rank 4, 200) is a third over its stage's median (150); stage 1's are even.
        const std::vector<IndexStraggler> stragglers = indexStragglers(*ov);
        QCOMPARE(stragglers.size(), size_t(1));
        QCOMPARE(stragglers[0].rank, 4);
        QCOMPARE(stragglers[0].stage, 0);
        QCOMPARE(stragglers[0].busyNs, TimeNs(200));
        QCOMPARE(stragglers[0].medianNs, TimeNs(150));
        QCOMPARE(report::indexStragglerText(stragglers[0]),
                 std::string("straggler across replicas: rank 4 (stage 0) busy 200 ns, +33.3% over its stage's median 150 ns"));
        index.pipelines.clear();
        QVERIFY(representativeRanks(index).empty());
    }

    void largeJobsAreReadOnePipeline()
    {
        QTemporaryDir out;
        const std::string single = path(out, "single.pipescope");
        importJob(options(job_, single));
        const std::string folder = path(out, "job");
        const JobIndex index = importShardsLocally(options(job_, folder), 2, summariseShard);
        const std::vector<int> busiest = representativeRanks(index);
        QCOMPARE(busiest.size(), size_t(4));
        Store store(folder);
        const int64_t whole = activitiesOf(store, {}), pipeline = activitiesOf(store, busiest);
        QVERIFY(pipeline > 0 && pipeline < whole);

        // Within the limits: whole. The count limit or the memory budget passed: the busiest pipeline.
        ReadLimits limits;
        limits.bytesPerActivity = 600;
        ReadPlan plan = planRead(store, {}, limits);
        QVERIFY(plan.ranks.empty() && !plan.chosen);
        QCOMPARE(plan.activities, whole);
        QCOMPARE(plan.jobRanks, 8);
        limits.budgetBytes = (whole - 1) * 600;
        plan = planRead(store, {}, limits);
        QCOMPARE(plan.ranks, busiest);
        QVERIFY(plan.chosen);
        QCOMPARE(plan.activities, pipeline);
        QCOMPARE(plan.jobActivities, whole);
        limits.budgetBytes = -1;
        limits.wholeJobAbove = whole - 1;
        QCOMPARE(planRead(store, {}, limits).ranks, busiest);
        limits.wholeJobAbove = whole;
        QVERIFY(planRead(store, {}, limits).ranks.empty());

        // What is said of the rest: a whole pipeline keeps its own stages.
        JobPart part = describePart(store, planRead(store, {}, {0, 600, -1}));
        QCOMPARE(part.loadedRanks, busiest);
        QVERIFY(part.chosen);
        QCOMPARE(part.jobRanks, 8);
        QCOMPARE(part.replicas(), 2);
        QVERIFY(part.stageMapFromIndex.empty());
        QCOMPARE(part.replicaPace, replicaPaceFromIndex(index, *overviewFromIndex(index), busiest));
        QVERIFY(part.busiest && part.busiest->pipeline == busiest);
        QCOMPARE(describeRanksRead(part), "4 of 8 ranks (" + rankListText(busiest) + "), the pipeline of the busiest replica (rank " +
                                              std::to_string(part.busiest->rank) + ", stage " + std::to_string(part.busiest->stage) + ")");
        // Ranks asked for, in any order, not whole pipelines: their stages from the index.
        part = describePart(store, planRead(store, {6, 1, 6}, limits));
        QCOMPARE(part.loadedRanks, (std::vector<int>{1, 6}));
        QVERIFY(!part.chosen);
        QCOMPARE(part.stageMapFromIndex.size(), size_t(2));
        std::map<int, int> indexStages;
        for (const ShardRecord& rec : index.records)
            for (const JobRankSummary& x : rec.rankSummaries)
                if (x.rank == 1 || x.rank == 6)
                    indexStages[x.rank] = x.stage.value_or(-1);
        QCOMPARE(part.stageMapFromIndex, indexStages);
        QCOMPARE(describeRanksRead(part), std::string("2 of 8 ranks (1,6)"));
        // Every rank asked for: read whole.
        QVERIFY(!describePart(store, planRead(store, {7, 6, 5, 4, 3, 2, 1, 0}, limits)).partial());

        // A store file has no index to choose from: read whole, whatever its size.
        Store file(single);
        limits.wholeJobAbove = 0;
        QVERIFY(planRead(file, {}, limits).ranks.empty());
        QVERIFY(!describePart(file, planRead(file, {}, limits)).overview);
        QCOMPARE(describePart(file, planRead(file, {}, limits)).replicas(), 0);

        // Ranks read are not missing from the job.
        LoadOptions lo;
        lo.ranks = std::vector<int>{6, 1};
        const Trace some = store.load(lo);
        QCOMPARE(some.ranksRead, (std::vector<int>{1, 6}));
        AnalyzeOptions ao;
        ao.stageMap = part.stageMapFromIndex;
        const AnalysisResult r = analyze(some, ao);
        for (const auto& w : r.warnings)
            QVERIFY2(w.kind != "missing_ranks", w.message.c_str());
    }

    void failedAndStaleShardsAreNamed()
    {
        QTemporaryDir out;
        const QString traces = out.path() + "/traces";
        QDir().mkpath(traces);
        for (const char* f : {"rank-0.json", "rank-1.json", "rank-2.json", "rank-3.json"})
            QVERIFY(QFile::copy(job_ + "/" + f, traces + "/" + f));
        // Rank 3's file is cut short: its pipeline ({1, 3}, now the lighter) goes to shard 1, which fails.
        QFile cut(traces + "/rank-3.json");
        QVERIFY(cut.open(QIODevice::ReadWrite));
        cut.resize(cut.size() / 2);
        cut.close();
        const std::string folder = path(out, "job");
        importShard(options(traces, folder), {0, 2, "--shard"});
        const QString failure = errorOf([&] { importShard(options(traces, folder), {1, 2, "--shard"}); });
        QVERIFY2(failure.contains("rank-3.json"), qPrintable(failure));
        const JobIndex index = readJobIndex(folder);
        QVERIFY(!index.complete());
        QVERIFY(index.failed().size() == 1);
        const QString message = errorOf([&] { Store s(folder); });
        QVERIFY2(message.contains("1 of 2 shards failed (") && message.contains("rank-3.json"), qPrintable(message));

        // Another import into the folder (other N) replaces the index at once.
        importShard(options(job_, folder), {0, 3, "--shard"});
        const JobIndex fresh = readJobIndex(folder);
        QCOMPARE(fresh.shards, 3);
        QCOMPARE(fresh.missing(), (std::vector<int>{1, 2}));
        QVERIFY(fresh.failed().empty());
    }

    void commandLine()
    {
#ifndef PIPESCOPE_CLI
        QSKIP("the command-line tool is not built");
#else
        QTemporaryDir out;
        const QString job = out.path() + "/job", single = out.path() + "/one.pipescope";
        auto r = runCliWith({"import", job_, "-o", job, "--shard", "2/2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--shard 2/2: expected K/N with 0 <= K < N"), qPrintable(r.err));
        r = runCliWith({"import", job_, "-o", job, "--shard", "0/2", "--shards", "2"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("exclude each other"), qPrintable(r.err));

        // Task 1 of 2 under srun: its shard, then a job waiting for the other.
        r = runCliWith({"import", job_, "-o", job}, {{"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NTASKS", "2"}});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("Imported shard 1 of 2 (from SLURM_PROCID/SLURM_STEP_NUM_TASKS)"), qPrintable(r.out));
        QVERIFY(r.out.contains("Waiting for the tasks of 1 more shard;"));
        r = runCliWith({"analyze", job});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("1 of 2 shards are missing (0;"), qPrintable(r.err));
        r = runCliWith({"import", job_, "-o", job}, {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("The job is complete: 2 shards"), qPrintable(r.out));

        // One task of a launcher, or a batch script: one store.
        r = runCliWith({"import", job_, "-q", "-o", single}, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(QFileInfo(single).isFile());

        // The analysis reads the same either way (the first line names the input).
        auto a = runCliWith({"analyze", single}), b = runCliWith({"analyze", job});
        QCOMPARE(a.exitCode, 0);
        QCOMPARE(b.exitCode, 0);
        QCOMPARE(b.out.section('\n', 1), a.out.section('\n', 1));
        r = runCliWith({"info", job});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("Sharded job: 2 shards, grouped by pipeline groups"));

        // A large job is read in part, or refused before it is read when memory would not do.
        r = runCliWith({"analyze", job, "--ranks", "0,2,4,6"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains(" on 4 ranks;") && r.out.contains("Read in part: 4 of 8 ranks (0,2,4,6).\n"), qPrintable(r.out));
        // A store file has no index to summarise the rest from.
        r = runCliWith({"analyze", single, "--ranks", "1,0"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("Read in part: 2 of 8 ranks (0,1).\n  What follows is of these ranks only.\n\nverdict:"),
                 qPrintable(r.out));
        // A what-if calibrated on one pipeline, the other's pace from the index.
        r = runCliWith({"whatif", job, "--ranks", "0,2,4,6", "--microbatches", "16"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("Calibrated on 4 of 8 ranks (0,2,4,6); each stage runs at its slowest replica's pace "
                                "from the job index (x"),
                 qPrintable(r.out));
        r = runCliWith({"analyze", job, "--ranks", "99"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--ranks: " + job + " holds none of these ranks (it holds 8 GPUs, ranks 0 to 7)"), qPrintable(r.err));
        r = runCliWith({"analyze", job, "--ranks", "3-1"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--ranks: '3-1' is not a list of ranks and ranges"), qPrintable(r.err));
        r = runCliWith({"report", job, "-o", out.path() + "/r.html"}, {{"PIPESCOPE_MEMORY_BUDGET", "1000000"}});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("analysing all 8 ranks (") && r.err.contains("is available; analyse fewer ranks with --ranks"),
                 qPrintable(r.err));
        // Even the pipeline of its busiest replica would not fit: both are said.
        QVERIFY2(r.err.contains(QRegularExpression("and the pipeline of its busiest replica alone \\(ranks (0,2,4,6|1,3,5,7), ")),
                 qPrintable(r.err));
        QVERIFY(!QFile::exists(out.path() + "/r.html"));
        r = runCliWith({"analyze", job, "--ranks", "0-7"}, {{"PIPESCOPE_MEMORY_BUDGET", "1000000"}});
        QCOMPARE(r.exitCode, 1);
        // Ranks asked for: the job index names the pipeline to read alone.
        QVERIFY2(r.err.contains("analysing 8 selected ranks (") &&
                     r.err.contains(QRegularExpression("`--ranks (0,2,4,6|1,3,5,7)` reads the pipeline of its busiest replica")),
                 qPrintable(r.err));

        // Beyond the memory budget a sharded job is read one pipeline, its busiest replica's, and says so.
        {
            Store store(job.toStdString());
            const std::vector<int> busiest = representativeRanks(*store.jobIndex());
            const int64_t budget = (activitiesOf(store, {}) + activitiesOf(store, busiest)) / 2 * 600;
            const std::map<QString, QString> env{{"PIPESCOPE_MEMORY_BUDGET", QString::number(budget)}};
            const QString ranks = QString::fromStdString(rankListText(busiest));
            r = runCliWith({"info", job}, env);
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.contains("analyze, report and whatif read the pipeline of its busiest replica (ranks " + ranks +
                                    "): the whole job would need about "),
                     qPrintable(r.out));
            QVERIFY(runCliWith({"info", job}).out.contains("analyze, report and whatif read the whole job (about "));
            r = runCliWith({"analyze", job}, env);
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.contains("Read in part: 4 of 8 ranks (" + ranks + "), the pipeline of the busiest replica (rank ") &&
                         r.out.contains("--ranks all reads every rank") && r.out.contains("Stages across replicas in ") &&
                         r.out.contains(" on 4 ranks;") && !r.out.contains("have no GPU activity") &&
                         r.out.contains("pipeline: p=4, dp=1 among the 4 of 8 ranks analysed, v=1"),
                     qPrintable(r.out));
            r = runCliWith({"analyze", job, "--json"}, env);
            QCOMPARE(r.exitCode, 0);
            const auto doc = nlohmann::json::parse(r.out.toStdString());
            QCOMPARE(doc["job"]["read"].get<std::vector<int>>(), busiest);
            QCOMPARE(doc["job"]["ranks"].get<int>(), 8);
            QVERIFY(doc["job"]["chosen"].get<bool>());
            QCOMPARE(doc["job"]["stages_across_replicas"]["stages"].size(), size_t(4));
            r = runCliWith({"analyze", job, "--ranks", "all"}, env);
            QCOMPARE(r.exitCode, 1);
            QVERIFY2(r.err.contains("analysing all 8 ranks ("), qPrintable(r.err));
            r = runCliWith({"whatif", job, "--microbatches", "16"}, env);
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.contains("Calibrated on 4 of 8 ranks (" + ranks + "), the pipeline of the busiest replica (rank ") &&
                         r.out.contains("--ranks all calibrates on every rank"),
                     qPrintable(r.out));
            const QString html = out.path() + "/part.html";
            r = runCliWith({"report", job, "-o", html}, env);
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.contains("; read in part: 4 of 8 ranks (" + ranks + "), the pipeline of the busiest replica (rank "),
                     qPrintable(r.out));
            QFile f(html);
            QVERIFY(f.open(QIODevice::ReadOnly));
            const QString page = QString::fromUtf8(f.readAll());
            QVERIFY(page.contains("id=\"read-in-part\"><strong>Read in part</strong>: 4 of 8 ranks (" + ranks + ")"));
            QVERIFY(page.contains("<table id=\"replicas-table\">"));
            QVERIFY(page.contains("\"job\":{\"chosen\":true"));
            // diff reads each run as analyze does, and says so first.
            r = runCliWith({"diff", job, job}, env);
            QCOMPARE(r.exitCode, 0);
            QVERIFY2(r.out.startsWith("A (" + job + "): read in part, 4 of 8 ranks (" + ranks + "), the pipeline of the busiest replica (rank ") &&
                         r.out.contains("\nB (" + job + "): read in part, 4 of 8 ranks (" + ranks + ")"),
                     qPrintable(r.out));
            // A store file has no pipeline to fall back on: beyond the memory available it is refused.
            r = runCliWith({"diff", job, single}, env);
            QCOMPARE(r.exitCode, 1);
            // diff has no --ranks: the message does not offer it.
            QVERIFY2(r.err.contains(single + ": comparing all 8 ranks (") && r.err.contains("; run where there is more memory") &&
                         !r.err.contains("--ranks"),
                     qPrintable(r.err));
        }

        r = runCliWith({"import", job_, "-o", out.path() + "/local", "--shards", "3"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.out.contains("Imported 3 shards side by side"), qPrintable(r.out));
#endif
    }

    void exportReadsOnlyTheRanksAsked()
    {
#ifndef PIPESCOPE_CLI
        QSKIP("the command-line tool is not built");
#else
        QTemporaryDir out;
        const std::string single = path(out, "single.pipescope"), folder = path(out, "job");
        importJob(options(job_, single));
        importShard(options(job_, folder), {0, 2, "--shard"});
        importShard(options(job_, folder), {1, 2, "--shard"});
        const QString job = QString::fromStdString(folder);
        auto exported = [&](const QStringList& args, const std::map<QString, QString>& env = {}) {
            const QString file = out.path() + "/x.json";
            QFile::remove(file);
            const test::CliResult r = runCliWith(QStringList{"export"} + args + QStringList{"-o", file}, env);
            if (r.exitCode != 0)
                qWarning("%s", qPrintable(r.err));
            QFile f(file);
            return f.open(QIODevice::ReadOnly) ? nlohmann::json::parse(f.readAll().toStdString()) : nlohmann::json();
        };
        // The events of some ranks, as a set of lines; flow ids are numbered
        // per file, so they are left out.
        auto eventsOf = [](const nlohmann::json& doc, const std::vector<int>& ranks) {
            std::multiset<std::string> lines;
            for (nlohmann::json e : doc["traceEvents"])
                if (std::find(ranks.begin(), ranks.end(), e["pid"].get<int>()) != ranks.end()) {
                    e.erase("id");
                    lines.insert(e.dump());
                }
            return lines;
        };
        const nlohmann::json whole = exported({job});
        QVERIFY(whole.contains("traceEvents"));
        // Ranks 1 and 3: stages 0 and 1 of one pipeline. Their pipeline is
        // read (their stages, idle causes and transfers are its analysis's),
        // not the other, and times count from the job's origin.
        Store store(folder);
        const int64_t budget = activitiesOf(store, {1, 3, 5, 7}) * 600 + 1;
        QVERIFY(budget < activitiesOf(store, {}) * 600);
        const std::map<QString, QString> env{{"PIPESCOPE_MEMORY_BUDGET", QString::number(budget)}};
        const nlohmann::json part = exported({job, "--ranks", "3,1"}, env);
        QVERIFY(part.contains("traceEvents"));
        QCOMPARE(part["baseTimeNanoseconds"].get<int64_t>(), whole["baseTimeNanoseconds"].get<int64_t>());
        // As the store file gives them, read whole.
        const nlohmann::json fromWhole = exported({QString::fromStdString(single), "--ranks", "1,3"});
        QCOMPARE(fromWhole["baseTimeNanoseconds"].get<int64_t>(), whole["baseTimeNanoseconds"].get<int64_t>());
        const auto a = eventsOf(fromWhole, {1, 3}), b = eventsOf(part, {1, 3});
        QVERIFY(a.size() > 100);
        QVERIFY(a == b);
        QVERIFY(b.count(R"j({"args":{"name":"rank 3 (stage 1)"},"name":"process_name","ph":"M","pid":3,"tid":0})j") == 1);
        QCOMPARE(eventsOf(part, {0, 2, 4, 5, 6, 7}).size(), size_t(0));
        // The whole job does not fit that budget: said before anything is written.
        test::CliResult r = runCliWith({"export", job, "-o", out.path() + "/all.json"}, env);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("exporting all 8 ranks (") && r.err.contains("is available; export fewer ranks with --ranks"),
                 qPrintable(r.err));
        QVERIFY(!QFile::exists(out.path() + "/all.json"));
        // A store file names stages from all its ranks, so it is read whole;
        // without stage names it reads the ranks asked for.
        r = runCliWith({"export", QString::fromStdString(single), "--ranks", "1,3", "-o", out.path() + "/s.json"}, env);
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("exporting all 8 ranks (") &&
                     r.err.contains("; --no-stages reads only the ranks asked for (their stages are not named)"),
                 qPrintable(r.err));
        const nlohmann::json bare = exported({QString::fromStdString(single), "--ranks", "1,3", "--no-stages"}, env);
        QCOMPARE(bare["baseTimeNanoseconds"].get<int64_t>(), whole["baseTimeNanoseconds"].get<int64_t>());
        QVERIFY(bare["traceEvents"].size() > 100);
        r = runCliWith({"export", job, "--ranks", "1,9", "-o", out.path() + "/n.json"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("--ranks: " + job + " has no rank 9 (its ranks: 0,1,2,3,4,5,6,7)"), qPrintable(r.err));

        // The odd pipeline starts 5 ms after the job: its export alone still
        // counts from the job's first record, so exports of parts line up.
        const QString traces = out.path() + "/later", later = out.path() + "/later-job";
        QVERIFY(oddPipelineLater(traces));
        importShard(options(traces, later.toStdString()), {0, 2, "--shard"});
        importShard(options(traces, later.toStdString()), {1, 2, "--shard"});
        const nlohmann::json odd = exported({later, "--ranks", "3"}), all = exported({later});
        QVERIFY(odd.contains("traceEvents"));
        QCOMPARE(odd["baseTimeNanoseconds"].get<int64_t>(), all["baseTimeNanoseconds"].get<int64_t>());
        double first = std::numeric_limits<double>::max();
        for (const auto& e : odd["traceEvents"])
            if (e["ph"] == "X")
                first = std::min(first, e["ts"].get<double>());
        QCOMPARE(first, 5000.0);
#endif
    }

    void infoOfManyRanksIsShort()
    {
#ifndef PIPESCOPE_CLI
        QSKIP("the command-line tool is not built");
#else
        // 48 ranks, a file and a GPU each: every kernel table has 48 rows.
        // Rank 5's kernels cover 200 of its 3000 ns span, rank 40's all of
        // it, every other rank's 2000. Each file reports skipped records.
        QTemporaryDir out;
        const std::string file = path(out, "many.pipescope");
        {
            StoreWriter w(file);
            const StringId name = w.intern("gemm");
            for (int r = 0; r < 48; ++r) {
                const int64_t src = w.addSource({"rank-" + std::to_string(r) + ".json", "kineto", r, 0, ""});
                RankInfo ri;
                ri.rank = r;
                ri.sourceId = src;
                w.addRank(ri);
                const int64_t stream = w.stream(r, 0, 7, "");
                std::vector<std::pair<TimeNs, TimeNs>> kernels{{0, 1000}, {2000, 3000}};
                if (r == 5)
                    kernels = {{0, 100}, {2900, 3000}};
                if (r == 40)
                    kernels = {{0, 3000}};
                for (const auto& [a, b] : kernels)
                    w.addActivity({r, stream, ActivityKind::Kernel, a, b, name, std::nullopt, std::nullopt, std::nullopt, {}, {}});
                w.diagnostic(src, Severity::Info, "skipped:python_function", "rank-" + std::to_string(r) + ".json: skipped", 2);
            }
            w.diagnostic(std::nullopt, Severity::Warning, "repaired:overlap", "two kernels overlapped", 1);
            w.finish();
        }
        const QString store = QString::fromStdString(file);
        test::CliResult r = runCliWith({"info", store});
        QCOMPARE(r.exitCode, 0);
        for (const char* what : {"sources", "ranks", "streams", "GPUs"})
            QVERIFY2(r.out.contains(QString("  ... and 32 more %1 (--all lists every one)\n").arg(what)), qPrintable(r.out));
        // Sources in rank order, the first 16.
        QVERIFY(r.out.indexOf("rank-2.json") < r.out.indexOf("rank-10.json"));
        QVERIFY(r.out.contains("rank-15.json") && !r.out.contains("rank-16.json"));
        // What the GPU rows left out would have said.
        QVERIFY2(r.out.contains("  busy % over all 48 GPUs with kernels: least 6.67% (rank 5), median 66.67%, most 100.00% (rank 40)\n"),
                 qPrintable(r.out));
        // One diagnostic row per kind, the most severe first, over every file.
        QVERIFY2(r.out.contains(QRegularExpression("  warning +repaired:overlap +1 +1  two kernels overlapped\n"
                                                   "  info +skipped:python_function +96 +48  rank-0.json: skipped\n"
                                                   "  \\(49 reports, one row per kind; --all lists each\\)\n")),
                 qPrintable(r.out));
        r = runCliWith({"info", store, "--all"});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("rank-47.json: skipped") && !r.out.contains("--all lists"));
        QCOMPARE(r.out.count("rank-47.json  "), 1); // the sources table
        // A small job's tables are whole.
        const std::string small = path(out, "small.pipescope");
        importJob(options(job_, small));
        r = runCliWith({"info", QString::fromStdString(small)});
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("Streams (24)") && !r.out.contains("--all lists"));
#endif
    }

    void badFoldersAreRefused()
    {
        QTemporaryDir out;
        QVERIFY(errorOf([&] { Store s(out.path().toStdString()); }).contains("without a job index"));
        QFile f(out.path() + "/job.json");
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("{\"format\": \"pipescope.job/9\", \"plan\": \"x\", \"shards\": 1, \"shard_list\": []}");
        f.close();
        QVERIFY(errorOf([&] { Store s(out.path().toStdString()); }).contains("newer than this build reads"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write("{\"format\": \"pipescope.job/1\", \"plan\": \"x\", \"shards\": 1, \"shard_list\": "
                "[{\"index\": 0, \"file\": \"../../etc/x\", \"status\": \"done\", \"ranks\": []}]}");
        f.close();
        QVERIFY(errorOf([&] { Store s(out.path().toStdString()); }).contains("the job index is damaged"));
        // A shard naming the folder itself is refused, not followed.
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write("{\"format\": \"pipescope.job/1\", \"plan\": \"x\", \"shards\": 1, \"shard_list\": "
                "[{\"index\": 0, \"file\": \".\", \"status\": \"done\", \"ranks\": [0]}]}");
        f.close();
        const QString itself = errorOf([&] { Store s(out.path().toStdString()); });
        QVERIFY2(itself.contains("shard 0 of 1 (.) is missing or not a store file"), qPrintable(itself));
        QVERIFY(errorOf([&] { importShard(options(job_, path(out, "job.json")), {0, 2, "--shard"}); })
                    .contains("exists and is not a folder"));

        // A shard replaced by something else is named, with the task that remakes it.
        const std::string folder = path(out, "two");
        importShardsLocally(options(job_, folder), 2);
        QFile shard(QString::fromStdString(folder) + "/" + QString::fromStdString(shardStoreName(1, 2)));
        QVERIFY(shard.open(QIODevice::WriteOnly | QIODevice::Truncate));
        shard.write("not a store");
        shard.close();
        const QString damaged = errorOf([&] { Store s(folder); });
        QVERIFY2(damaged.contains("shard 1 of 2 cannot be read") && damaged.contains("--shard 1/2"), qPrintable(damaged));
    }
};

QTEST_GUILESS_MAIN(TestSharded)
#include "tst_sharded.moc"
