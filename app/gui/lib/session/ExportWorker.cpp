#include "session/ExportWorker.h"

#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "whatif/ModelDescription.h"

#include <QMetaObject>
#include <QPointer>

#include <fstream>

namespace pipescope::gui {

ExportWorker::ExportWorker(QObject* parent) : QObject(parent) {}

ExportWorker::~ExportWorker()
{
    stop_ = true;
    join();
}

void ExportWorker::join()
{
    if (worker_.joinable())
        worker_.join();
}

void ExportWorker::cancel() { stop_ = true; }

void ExportWorker::start(const QString& path, std::function<QString(const WorkControl&)> body)
{
    join(); // the previous export has finished (callers check busy())
    stop_ = false;
    finished_ = false;
    QPointer<ExportWorker> self(this);
    worker_ = std::thread([this, self, path, body = std::move(body)] {
        WorkControl work;
        work.stop = &stop_;
        work.onProgress = [self](std::string_view phase, double fraction) {
            const QString p = QString::fromUtf8(phase.data(), static_cast<qsizetype>(phase.size()));
            QMetaObject::invokeMethod(self, [self, p, fraction] {
                if (self)
                    Q_EMIT self->progress(p, fraction);
            }, Qt::QueuedConnection);
        };
        QString done, error;
        bool wasCancelled = false;
        try {
            done = body(work);
        } catch (const Cancelled&) {
            wasCancelled = true;
        } catch (const std::bad_alloc&) {
            error = QStringLiteral("out of memory while exporting; export a narrower range");
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
        finished_ = true;
        QMetaObject::invokeMethod(self, [self, path, done, error, wasCancelled] {
            if (!self)
                return;
            if (wasCancelled)
                Q_EMIT self->cancelled();
            else if (!error.isEmpty())
                Q_EMIT self->failed(error);
            else
                Q_EMIT self->finished(path, done);
        }, Qt::QueuedConnection);
    });
}

void ExportWorker::saveReport(std::shared_ptr<const Job> job, report::ReportOptions options, QString modelFile, QString path)
{
    start(path, [job = std::move(job), options = std::move(options), modelFile, path](const WorkControl& work) mutable {
        std::optional<whatif::ModelDescription> md;
        if (!modelFile.isEmpty())
            md = whatif::loadModelDescription(modelFile.toStdString());
        options.calibrate.model = md ? &*md : nullptr;
        options.work = &work;
        const std::string html = report::renderReport(*job->trace, *job->analysis, options);
        checkpoint(&work, "writing the report", 1.0); // a Cancel pressed meanwhile leaves no file
        AtomicOutput::writeFile(path.toStdString(), html);
        return QStringLiteral("Report saved to %1").arg(path);
    });
}

void ExportWorker::saveChromeTrace(std::shared_ptr<const Job> job, report::ChromeTraceOptions options, QString path)
{
    start(path, [job = std::move(job), options = std::move(options), path](const WorkControl& work) mutable {
        const bool whole = !options.from && !options.to;
        std::shared_ptr<const Trace> trace = job->trace;
        if (whole && !job->complete) {
            // A first frame holds one window: the whole store (or the ranks
            // of a job read in part) is read for this export.
            Store store(job->storePath.toStdString());
            LoadOptions lo;
            lo.work = &work;
            if (job->partial())
                lo.ranks = job->part.loadedRanks;
            trace = std::make_shared<const Trace>(store.load(lo));
        }
        if (job->partial() && !options.origin) {
            // Times count from the whole job's earliest record, as the CLI's export of some ranks.
            Store store(job->storePath.toStdString());
            options.origin = store.earliestRecord();
        }
        options.work = &work;
        AtomicOutput out(path.toStdString(), AtomicOutput::Target::FileOrStream);
        {
            std::ofstream stream(out.direct() ? out.finalPath() : out.tempPath(), std::ios::binary | std::ios::trunc);
            report::writeChromeTrace(*trace, stream, options);
            stream.flush();
            if (!stream)
                throw Error(path.toStdString() + ": cannot write the trace (disk full?)");
        }
        checkpoint(&work, "writing the Chrome trace", 1.0);
        out.commit();
        if (!whole)
            return QStringLiteral("Chrome trace of the visible range saved to %1").arg(path);
        return job->partial() ? QStringLiteral("Chrome trace of the %1 ranks read saved to %2").arg(job->part.loadedRanks.size()).arg(path)
                              : QStringLiteral("Chrome trace of the whole store saved to %1").arg(path);
    });
}

} // namespace pipescope::gui
