#include "session/AppSession.h"
#include "remote/RemoteAddress.h"
#include "remote/RemoteJob.h"
#include "store/JobIndex.h"
#include "util/Format.h"
#include "util/Memory.h"

#include "analysis/CommRules.h"
#include "import/Import.h"
#include "store/Store.h"
#include "timeline/TimelineBuild.h"
#include "util/Error.h"
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <QCryptographicHash>
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QMetaObject>
#include <QPointer>
#include <QStandardPaths>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

namespace pipescope::gui {

namespace {

bool isStore(const QString& path)
{
    // A sharded job's folder opens as a store does (store/JobIndex.h).
    if (isShardedJob(path.toStdString()))
        return true;
    QFileInfo fi(path);
    if (!fi.isFile())
        return false;
    if (path.endsWith(QLatin1String(".pipescope")))
        return true;
    // A store under another name (pipescope import -o job.db) is one by its
    // content, as the command line reads it.
    try {
        return detectFormat(path.toStdString()) == "store";
    } catch (const Error&) {
        return false;
    }
}

QString title(const QStringList& inputs)
{
    if (inputs.size() == 1 && isShardedJob(inputs.front().toStdString())) {
        // A job folder says how many shards it reads from.
        try {
            const int n = readJobIndex(inputs.front().toStdString()).shards;
            return QStringLiteral("%1 (%2 shards)").arg(QFileInfo(QDir::cleanPath(inputs.front())).fileName()).arg(n);
        } catch (const std::exception&) {
            // Opening it will say what is wrong.
        }
    }
    if (inputs.size() == 1)
        return QFileInfo(inputs.front()).fileName();
    return QStringLiteral("%1 (+%2 files)").arg(QFileInfo(inputs.front()).fileName()).arg(inputs.size() - 1);
}

} // namespace

AppSession::AppSession(QObject* parent) : QObject(parent)
{
    qRegisterMetaType<std::shared_ptr<const pipescope::gui::Job>>();
}

AppSession::~AppSession()
{
    stop_ = true;
    join();
}

void AppSession::join()
{
    if (worker_.joinable())
        worker_.join();
}

QString AppSession::cacheFolder()
{
    QString base = qEnvironmentVariable("PIPESCOPE_CACHE_DIR");
    if (base.isEmpty())
        base = QStandardPaths::writableLocation(QStandardPaths::GenericCacheLocation) + QStringLiteral("/pipescope");
    return base + QStringLiteral("/imports");
}

QString AppSession::cachedStorePath(const QStringList& inputs)
{
    // The key covers every file an input stands for, so a changed rank file
    // inside an opened folder makes a new import.
    QCryptographicHash h(QCryptographicHash::Sha256);
    QStringList sorted = inputs;
    sorted.sort();
    for (const QString& in : sorted) {
        QFileInfo fi(in);
        h.addData(fi.absoluteFilePath().toUtf8());
        QStringList files;
        if (fi.isDir()) {
            QDirIterator it(fi.absoluteFilePath(), QDir::Files, QDirIterator::Subdirectories);
            while (it.hasNext())
                files << it.next();
            files.sort();
        } else {
            files << fi.absoluteFilePath();
        }
        for (const QString& f : files) {
            QFileInfo ff(f);
            h.addData(QStringLiteral("%1|%2|%3\n").arg(f).arg(ff.size()).arg(ff.lastModified().toMSecsSinceEpoch()).toUtf8());
        }
    }
    return cacheFolder() + QLatin1Char('/') + QString::fromLatin1(h.result().toHex().left(24)) + QStringLiteral(".pipescope");
}

namespace {

// Temporary stores made when the cache was unusable, by cache key: the first
// frame and the whole load of one open share one import.
std::mutex gScratchMutex;
std::map<QString, std::weak_ptr<const QTemporaryDir>> gScratch;

// The job's inputs, title and store, importing the inputs into the cache when they are not a store.
std::shared_ptr<Job> prepareJob(const QStringList& inputs, const OpenOptions& options, const WorkControl* work)
{
    if (inputs.isEmpty())
        throw Error("nothing to open: give a .pipescope store, Kineto JSON files, a folder of rank files or Nsight SQLite exports");
    for (const QString& in : inputs)
        if (!QFileInfo::exists(in))
            throw Error(in.toStdString() + ": no such file or folder");

    auto job = std::make_shared<Job>();
    job->inputs = inputs;
    job->title = title(inputs);
    job->options = options;
    auto guards = std::make_shared<std::vector<AtomicOutput::InputGuard>>();
    for (const QString& in : inputs) {
        if (QFileInfo(in).isDir()) {
            for (const QFileInfo& f : QDir(in).entryInfoList(QDir::Files))
                guards->emplace_back(f.filePath().toStdString());
        } else {
            guards->emplace_back(in.toStdString());
        }
    }
    if (inputs.size() == 1 && isStore(inputs.front())) {
        job->storePath = inputs.front();
    } else {
        job->storePath = AppSession::cachedStorePath(inputs);
        const QString key = job->storePath;
        {
            std::lock_guard lock(gScratchMutex);
            auto it = gScratch.find(key);
            if (it != gScratch.end()) {
                if (auto alive = it->second.lock(); alive && QFileInfo::exists(alive->filePath(QStringLiteral("import.pipescope")))) {
                    job->storePath = alive->filePath(QStringLiteral("import.pipescope"));
                    job->scratch = alive;
                    job->notice = QStringLiteral("The import cache folder %1 is unusable; this import is kept in a "
                                                 "temporary file and will be redone next time (set PIPESCOPE_CACHE_DIR "
                                                 "to a writable folder)")
                                      .arg(AppSession::cacheFolder());
                } else {
                    gScratch.erase(it);
                }
            }
        }
        if (!job->scratch && !QFileInfo::exists(job->storePath)) {
            ImportJobOptions io;
            for (const QString& in : inputs)
                io.inputs.push_back(in.toStdString());
            io.progress = false;
            io.work = work;
            io.alignment = Alignment::TimeBase;
            // The cache only saves a re-import: when its folder cannot be made
            // or written (read-only, full, a file in its place), the trace is
            // imported into a temporary store instead and the user is told.
            const QString folder = AppSession::cacheFolder();
            QString why;
            if (!QDir().mkpath(folder) || !QFileInfo(folder).isDir())
                why = QStringLiteral("cannot be created");
            else if (!QFileInfo(folder).isWritable())
                why = QStringLiteral("is not writable");
            if (why.isEmpty()) {
                io.output = job->storePath.toStdString();
                try {
                    importJob(io);
                } catch (const FormatError&) {
                    throw; // the input's fault: a temporary store would fail the same way
                } catch (const Error& e) {
                    // Only a failure to write the cache falls back; its messages name the store.
                    if (QString::fromStdString(e.what()).indexOf(job->storePath) < 0)
                        throw;
                    why = QStringLiteral("could not be written (%1)").arg(QString::fromStdString(e.what()).section(QStringLiteral(": "), -1));
                }
            }
            if (!why.isEmpty()) {
                auto scratch = std::make_shared<QTemporaryDir>(QDir::tempPath() + QStringLiteral("/pipescope-open-XXXXXX"));
                if (!scratch->isValid())
                    throw Error("the import cache folder " + folder.toStdString() + " " + why.toStdString() +
                                ", and no temporary folder can be made in " + QDir::tempPath().toStdString() +
                                " either; set PIPESCOPE_CACHE_DIR or TMPDIR to a writable folder");
                job->storePath = scratch->filePath(QStringLiteral("import.pipescope"));
                io.output = job->storePath.toStdString();
                importJob(io);
                {
                    std::lock_guard lock(gScratchMutex);
                    gScratch[key] = scratch;
                }
                job->scratch = std::move(scratch);
                job->notice = QStringLiteral("The import cache folder %1 %2; this import is kept in a temporary file "
                                             "and will be redone next time (set PIPESCOPE_CACHE_DIR to a writable folder)")
                                  .arg(folder, why);
            }
        }
        guards->emplace_back(job->storePath.toStdString());
    }
    job->protectedFiles = std::move(guards);
    return job;
}

// Analysis and timeline of a loaded trace, into the job.
void analyseInto(Job& job, std::shared_ptr<const Trace> trace, const OpenOptions& options, const WorkControl* work)
{
    job.simulated = trace->simulated();
    AnalyzeOptions ao;
    ao.iteration = options.iteration;
    ao.allIterations = true; // the timeline shows steps and bubbles of every iteration
    ao.work = work;
    ao.autogradSequences = autogradSequencesAt(job.storePath.toStdString());
    ao.stageMap = job.part.stageMapFromIndex;
    if (!options.commRulesFile.isEmpty())
        ao.commRules = std::make_shared<const CommRules>(CommRules::fromFile(options.commRulesFile.toStdString()));
    auto analysis = std::make_shared<AnalysisResult>(analyze(*trace, ao));

    checkpoint(work, "building the timeline", -1);
    job.timeline = std::make_shared<timeline::TimelineModel>(timeline::buildMeasured(*trace, *analysis));
    job.trace = std::move(trace);
    job.analysis = std::move(analysis);
}

} // namespace

std::optional<std::pair<TimeNs, TimeNs>> AppSession::firstFrameWindow(Store& store, const StoreSummary& summary)
{
    std::map<int, int64_t> perRank;
    int64_t total = 0;
    for (const GpuSummary& g : summary.gpuSummaries) {
        const int64_t n = g.kernels + g.memcpys + g.memsets + g.syncs;
        perRank[g.rank] += n;
        total += n;
    }
    int rank = -1;
    int64_t n = 0;
    for (const auto& [r, c] : perRank)
        if (c > n) {
            rank = r;
            n = c;
        }
    if (rank < 0)
        return std::nullopt;
    int64_t k = n / 20;
    if (total > 20 * kFirstFrameActivities)
        k = static_cast<int64_t>(static_cast<double>(n) * static_cast<double>(kFirstFrameActivities) / static_cast<double>(total));
    k = std::max<int64_t>(1, k);
    const int64_t lo = (n - k) / 2;
    const auto from = store.activityStart(rank, lo);
    if (!from)
        return std::nullopt;
    const auto to = store.activityStart(rank, lo + k);
    return std::make_pair(*from, to && *to > *from ? *to : *from + 1);
}

namespace {

// What the app holds per GPU activity once a job is open (the trace, its
// analysis, the timeline model and the what-if model): bench/bench_scale
// measures 253 bytes at 1,024 ranks of a sharded job; a single store's
// mapped pages add up to its size (about 270 bytes per activity) while it loads.
constexpr int64_t kAppBytesPerActivity = 480;

ReadLimits appLimits(const OpenOptions& options)
{
    ReadLimits limits;
    limits.wholeJobAbove = options.wholeJobAbove;
    limits.bytesPerActivity = kAppBytesPerActivity;
    return limits;
}

bool fitsInMemory(int64_t activities)
{
    return pipescope::fitsInMemory(activities, appLimits({}));
}

// A job too large for the memory left is not read whole: its first frame
// (a window of it, shown whatever the job's size) stays, and the user is
// told what the whole would need.
void checkMemoryForWholeJob(int64_t activities, const QString& title)
{
    if (fitsInMemory(activities))
        return;
    const int64_t needed = activities * kAppBytesPerActivity;
    const int64_t available = availableMemory().value_or(0);
    throw Error(title.toStdString() + ": the whole job (" + formatCount(activities) + " GPU activities) needs about " +
                formatBytes(needed) + " of memory, and " + formatBytes(available) +
                " is available; `pipescope analyze --ranks` analyses some ranks (one pipeline's), "
                "and for a sharded job `pipescope info` shows each stage across its replicas");
}

void checkMemoryForRanks(const ReadPlan& plan, const QString& title)
{
    if (plan.activities == 0)
        throw Error(title.toStdString() + ": the job holds none of the ranks asked for (" + rankListShort(plan.ranks) + ")");
    if (fitsInMemory(plan.activities))
        return;
    throw Error(title.toStdString() + ": " + std::to_string(plan.ranks.size()) + " ranks (" + formatCount(plan.activities) +
                " GPU activities) need about " + formatBytes(plan.activities * kAppBytesPerActivity) + " of memory, and " +
                formatBytes(availableMemory().value_or(0)) + " is available; load fewer of them");
}

} // namespace

std::shared_ptr<const Job> AppSession::loadFirstFrame(const QStringList& inputs, const OpenOptions& options, const WorkControl* work)
{
    if (options.firstFrameAbove < 0 || !options.ranks.empty())
        return nullptr; // some ranks of a job already shown: the job stays on screen while they load
    if (!inputs.isEmpty() && RemoteAddress::isRemote(inputs.front()))
        return nullptr; // the server sends only what is drawn: its first frame is the job
    auto job = prepareJob(inputs, options, work);
    // Import errors went up above; one in the window (a damaged row, an analysis
    // that cannot make sense of a slice) is left for the full load to report.
    try {
        std::shared_ptr<Trace> trace;
        {
            Store store(job->storePath.toStdString());
            // gpu_summary: counts and span without reading the activities.
            const StoreSummary summary = store.summary();
            int64_t activities = 0;
            for (const auto& [kind, n] : summary.activityCounts)
                activities += n;
            if (activities <= options.firstFrameAbove && fitsInMemory(activities))
                return nullptr;
            // A job read in part shows its pipeline sooner than a window of every rank.
            if (!planRead(store, {}, appLimits(options)).ranks.empty())
                return nullptr;
            const auto window = firstFrameWindow(store, summary);
            if (!window)
                return nullptr;
            const auto [from, to] = *window;
            LoadOptions lo;
            lo.work = work;
            lo.from = from;
            lo.to = to;
            lo.startsInWindow = true;
            trace = std::make_shared<Trace>(store.load(lo));
            job->complete = false;
            job->windowFrom = from;
            job->windowTo = to;
        }
        analyseInto(*job, std::move(trace), options, work);
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception&) {
        return nullptr;
    }
    job->whatIfError = QStringLiteral("The what-if model is calibrated once the whole trace has loaded.");
    return job;
}

std::shared_ptr<const Job> AppSession::load(const QStringList& inputs, const OpenOptions& options, const WorkControl* work)
{
    if (!inputs.isEmpty() && RemoteAddress::isRemote(inputs.front())) {
        if (inputs.size() > 1)
            throw Error("open one remote job at a time (" + inputs.join(QStringLiteral(", ")).toStdString() + ")");
        return loadRemote(inputs.front(), options, work);
    }
    auto job = prepareJob(inputs, options, work);
    std::shared_ptr<Trace> trace;
    {
        // Closed before the analysis: its memory-mapped pages leave the process.
        Store store(job->storePath.toStdString());
        const ReadPlan plan = planRead(store, options.ranks, appLimits(options));
        if (plan.ranks.empty())
            checkMemoryForWholeJob(plan.activities, job->title);
        else
            checkMemoryForRanks(plan, job->title);
        LoadOptions lo;
        lo.work = work;
        if (!plan.ranks.empty())
            lo.ranks = plan.ranks;
        trace = std::make_shared<Trace>(store.load(lo));
        job->part = describePart(store, plan);
    }
    analyseInto(*job, trace, options, work);

    checkpoint(work, "calibrating the what-if model", -1);
    try {
        std::optional<whatif::ModelDescription> md;
        if (!options.modelFile.isEmpty())
            md = whatif::loadModelDescription(options.modelFile.toStdString());
        whatif::CalibrateOptions co;
        co.model = md ? &*md : nullptr;
        if (options.layers > 0)
            co.measured.layers = options.layers;
        co.measured.measuredBoundaries = options.measuredBoundaries;
        co.replicaPace = job->part.replicaPace;
        job->costModel = whatif::calibrate(*job->trace, *job->analysis, co);
        checkpoint(work, "pricing what would help most", -1);
        job->levers = whatif::rankLevers(*job->costModel, *job->analysis);
    } catch (const Cancelled&) {
        throw;
    } catch (const std::exception& e) {
        job->whatIfError = QString::fromStdString(e.what());
    }
    return job;
}

void AppSession::cancel() { stop_ = true; }

void AppSession::open(const QStringList& inputs, const OpenOptions& options)
{
    stop_ = true;
    join();
    stop_ = false;
    finished_ = false;
    const unsigned generation = ++generation_;
    QPointer<AppSession> self(this);
    worker_ = std::thread([this, self, inputs, options, generation] {
        WorkControl work;
        work.stop = &stop_;
        work.onProgress = [self](std::string_view phase, double fraction) {
            const QString p = QString::fromUtf8(phase.data(), static_cast<qsizetype>(phase.size()));
            QMetaObject::invokeMethod(self, [self, p, fraction] {
                if (self)
                    Q_EMIT self->progress(p, fraction);
            }, Qt::QueuedConnection);
        };
        std::shared_ptr<const Job> job;
        QString error;
        bool wasCancelled = false;
        try {
            if (auto first = loadFirstFrame(inputs, options, &work))
                QMetaObject::invokeMethod(self, [self, first, generation] {
                    if (self && generation == self->generation_) {
                        self->job_ = first;
                        Q_EMIT self->firstFrame(first);
                    }
                }, Qt::QueuedConnection);
            job = load(inputs, options, &work);
        } catch (const Cancelled&) {
            wasCancelled = true;
        } catch (const std::bad_alloc&) {
            error = QStringLiteral("out of memory while opening %1").arg(inputs.join(QStringLiteral(", ")));
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
        finished_ = true;
        QMetaObject::invokeMethod(self, [self, job, error, wasCancelled, generation] {
            if (!self || generation != self->generation_)
                return; // superseded by a newer open()
            if (wasCancelled)
                Q_EMIT self->cancelled();
            else if (!error.isEmpty())
                Q_EMIT self->failed(error);
            else {
                self->job_ = job;
                Q_EMIT self->loaded(job);
            }
        }, Qt::QueuedConnection);
    });
}

} // namespace pipescope::gui
