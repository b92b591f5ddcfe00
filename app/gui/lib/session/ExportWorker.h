#pragma once
// File > Save HTML report and File > Export Chrome trace off the UI thread:
// one export at a time on a thread of its own, written through core's
// AtomicOutput (a cancelled or failed export leaves no file behind), with
// progress and Cancel through core's WorkControl, as AppSession loads.
#include "session/AppSession.h"

#include "report/ChromeTrace.h"
#include "report/Report.h"

#include <QObject>
#include <QString>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

namespace pipescope::gui {

class ExportWorker : public QObject {
    Q_OBJECT
public:
    explicit ExportWorker(QObject* parent = nullptr);
    ~ExportWorker() override; // cancels the export in flight and waits for it

    // The report of the job's own analysis (no second analysis); modelFile, when
    // given, is loaded for options.calibrate.model on the worker.
    void saveReport(std::shared_ptr<const Job> job, report::ReportOptions options, QString modelFile, QString path);
    // The trace as Chrome Trace Event JSON. A job that is only a first frame
    // has its whole store read for an export without a range.
    void saveChromeTrace(std::shared_ptr<const Job> job, report::ChromeTraceOptions options, QString path);
    void cancel();
    bool busy() const { return !finished_; }

Q_SIGNALS:
    void progress(const QString& phase, double fraction); // fraction < 0: unknown
    void finished(const QString& path, const QString& message); // message: one line for the status bar
    void failed(const QString& message);
    void cancelled();

private:
    // body writes the file and returns the status line.
    void start(const QString& path, std::function<QString(const WorkControl&)> body);
    void join();

    std::thread worker_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> finished_{true};
};

} // namespace pipescope::gui
