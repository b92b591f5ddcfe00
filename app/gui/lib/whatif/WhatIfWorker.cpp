#include "whatif/WhatIfWorker.h"

#include "util/Error.h"
#include "util/Work.h"

#include <QPointer>
#include <QThread>

namespace pipescope::gui {

WhatIfWorker::WhatIfWorker(QObject* parent)
    : QObject(parent), thread_(new QThread), context_(new QObject), searchThread_(new QThread),
      searchContext_(new QObject)
{
    qRegisterMetaType<PredictionPtr>();
    qRegisterMetaType<ScenarioPtr>();
    qRegisterMetaType<SearchRowsPtr>();
    qRegisterMetaType<CostModelPtr>();
    thread_->setObjectName("pipescope what-if");
    searchThread_->setObjectName("pipescope what-if search");
    context_->moveToThread(thread_);
    searchContext_->moveToThread(searchThread_);
    thread_->start();
    searchThread_->start();
}

WhatIfWorker::~WhatIfWorker()
{
    stopSearch_ = true;
    stopBalance_ = true;
    {
        std::lock_guard lock(mutex_);
        queue_.clear();
    }
    for (auto [thread, context] : {std::pair{thread_, context_}, std::pair{searchThread_, searchContext_}}) {
        thread->quit();
        thread->wait();
        // A stopped thread's objects may be deleted from here; the session goes after, with the members.
        delete context;
        delete thread;
    }
}

quint64 WhatIfWorker::post(Request r)
{
    r.id = nextId_++;
    const quint64 id = r.id;
    quint64 dropped = 0;
    {
        std::lock_guard lock(mutex_);
        // A drag step supersedes the drag step still waiting: only the newest position matters.
        if (r.kind == Request::Boundaries && !queue_.empty() && queue_.back().kind == Request::Boundaries) {
            dropped = queue_.back().id;
            queue_.back() = std::move(r);
        } else {
            queue_.push_back(std::move(r));
        }
    }
    if (dropped)
        emit requestDropped(dropped); // on the posting thread, before any later answer
    QMetaObject::invokeMethod(context_, [this] { runNext(); }, Qt::QueuedConnection);
    return id;
}

int WhatIfWorker::pendingRequests() const
{
    std::lock_guard lock(mutex_);
    return static_cast<int>(queue_.size());
}

quint64 WhatIfWorker::setCostModel(whatif::CostModel model)
{
    Request r;
    r.kind = Request::Model;
    r.model = std::make_shared<whatif::CostModel>(std::move(model));
    return post(std::move(r));
}

quint64 WhatIfWorker::calibrate(std::shared_ptr<const Trace> trace, std::shared_ptr<const AnalysisResult> analysis,
                                whatif::FromMeasuredOptions options, QString modelFile, std::vector<double> replicaPace)
{
    Request r;
    r.kind = Request::Calibrate;
    r.trace = std::move(trace);
    r.analysis = std::move(analysis);
    r.measured = std::move(options);
    r.modelFile = std::move(modelFile);
    r.replicaPace = std::move(replicaPace);
    return post(std::move(r));
}

quint64 WhatIfWorker::setBoundaries(std::vector<int> boundaries)
{
    Request r;
    r.kind = Request::Boundaries;
    r.boundaries = std::move(boundaries);
    return post(std::move(r));
}

quint64 WhatIfWorker::apply(whatif::ScenarioChanges changes)
{
    Request r;
    r.kind = Request::Apply;
    r.changes = std::move(changes);
    return post(std::move(r));
}

quint64 WhatIfWorker::setScenario(whatif::Scenario scenario)
{
    Request r;
    r.kind = Request::SetScenario;
    r.scenario = std::move(scenario);
    return post(std::move(r));
}

quint64 WhatIfWorker::autoBalance()
{
    Request r;
    r.kind = Request::Balance;
    stopBalance_ = false; // a Cancel for an earlier balance does not stop this one
    return post(std::move(r));
}

void WhatIfWorker::cancelBalance() { stopBalance_ = true; }

quint64 WhatIfWorker::setGpuMemory(std::optional<int64_t> bytes)
{
    Request r;
    r.kind = Request::GpuMemory;
    r.gpuBytes = bytes;
    return post(std::move(r));
}

void WhatIfWorker::runNext()
{
    Request r;
    {
        std::lock_guard lock(mutex_);
        if (queue_.empty())
            return; // coalesced into a later request
        r = std::move(queue_.front());
        queue_.pop_front();
    }
    try {
        if (r.kind == Request::Calibrate) {
            if (!r.trace || !r.analysis)
                throw Error("no trace is loaded to calibrate on");
            std::optional<whatif::ModelDescription> md;
            if (!r.modelFile.isEmpty())
                md = whatif::loadModelDescription(r.modelFile.toStdString());
            whatif::CalibrateOptions co;
            co.model = md ? &*md : nullptr;
            co.measured = r.measured;
            co.replicaPace = r.replicaPace;
            r.model = std::make_shared<whatif::CostModel>(whatif::calibrate(*r.trace, *r.analysis, co));
            r.kind = Request::Model;
        }
        if (r.kind == Request::Model) {
            auto next = std::make_unique<whatif::Session>(*r.model);
            session_ = std::move(next);
            CostModelPtr model = r.model;
            const quint64 id = r.id;
            QMetaObject::invokeMethod(this, [this, model, id] { emit costModelReady(model, id); }, Qt::QueuedConnection);
            report(r, true);
            return;
        }
        if (!session_)
            throw Error("no job is loaded");
        switch (r.kind) {
        case Request::Boundaries: session_->setBoundaries(r.boundaries); break;
        case Request::Apply: session_->apply(r.changes); break;
        case Request::SetScenario: session_->setScenario(r.scenario); break;
        case Request::Balance: {
            WorkControl work;
            work.stop = &stopBalance_;
            work.onProgress = [this](std::string_view phase, double fraction) {
                const QString p = QString::fromUtf8(phase.data(), qsizetype(phase.size()));
                QMetaObject::invokeMethod(this, [this, p, fraction] { emit balanceProgress(p, fraction); },
                                          Qt::QueuedConnection);
            };
            whatif::BalanceOptions options;
            options.work = &work;
            checkpoint(&work, "balancing stages", 0); // cancelled while it waited
            session_->autoBalance(options);
            break;
        }
        case Request::GpuMemory: session_->setGpuMemory(r.gpuBytes); break;
        case Request::Model:
        case Request::Calibrate: break;
        }
        report(r, r.kind == Request::GpuMemory); // the measured run's OOM flag follows the GPU memory
    } catch (const Cancelled&) {
        reportCancelled(r.id);
    } catch (const ValueError& e) {
        reportError(r.id, QString::fromStdString(e.what()), QString::fromUtf8(toString(e.setting()).data(), qsizetype(toString(e.setting()).size())));
    } catch (const std::exception& e) {
        reportError(r.id, QString::fromStdString(e.what()), {});
    }
}

void WhatIfWorker::report(const Request& r, bool withMeasured)
{
    // The one copy of a prediction, taken here on the session thread: the
    // session overwrites its own on the next edit. From here on it is shared
    // and immutable; the controller and every view keep this same object.
    auto prediction = std::make_shared<const whatif::Prediction>(session_->prediction());
    auto scenario = std::make_shared<const whatif::Scenario>(session_->scenario());
    PredictionPtr measured;
    if (withMeasured)
        measured = std::make_shared<const whatif::Prediction>(session_->measured());
    const quint64 id = r.id;
    QMetaObject::invokeMethod(
        this,
        [this, prediction, scenario, measured, id] {
            if (measured)
                emit measuredReady(measured, id);
            emit scenarioApplied(scenario, id);
            emit predictionReady(prediction, id);
        },
        Qt::QueuedConnection);
}

void WhatIfWorker::reportCancelled(quint64 id)
{
    QMetaObject::invokeMethod(this, [this, id] { emit cancelled(id); }, Qt::QueuedConnection);
}

void WhatIfWorker::reportError(quint64 id, const QString& message, const QString& setting)
{
    QMetaObject::invokeMethod(this, [this, message, setting, id] { emit failed(message, setting, id); }, Qt::QueuedConnection);
}

quint64 WhatIfWorker::search(whatif::SearchSpace space)
{
    const quint64 id = nextId_++;
    stopSearch_ = false;
    // The search works on copies taken on the session thread, so drags go on meanwhile.
    QMetaObject::invokeMethod(context_, [this, id, space] {
        if (!session_) {
            reportError(id, "no job is loaded", {});
            return;
        }
        auto model = std::make_shared<const whatif::CostModel>(session_->model());
        auto base = std::make_shared<const whatif::Scenario>(session_->scenario());
        QMetaObject::invokeMethod(searchContext_, [this, id, space, model, base] {
            WorkControl work;
            work.stop = &stopSearch_;
            work.onProgress = [this](std::string_view phase, double fraction) {
                const QString p = QString::fromUtf8(phase.data(), qsizetype(phase.size()));
                QMetaObject::invokeMethod(this, [this, p, fraction] { emit searchProgress(p, fraction); },
                                          Qt::QueuedConnection);
            };
            whatif::BalanceOptions options;
            options.work = &work;
            try {
                auto rows = std::make_shared<const std::vector<whatif::SearchRow>>(
                    whatif::searchConfigurations(*model, *base, space, options));
                QMetaObject::invokeMethod(this, [this, rows, id] { emit searchFinished(rows, id); }, Qt::QueuedConnection);
            } catch (const Cancelled&) {
                reportCancelled(id);
            } catch (const ValueError& e) {
                reportError(id, QString::fromStdString(e.what()), QString::fromUtf8(toString(e.setting()).data(), qsizetype(toString(e.setting()).size())));
            } catch (const std::exception& e) {
                reportError(id, QString::fromStdString(e.what()), {});
            }
        }, Qt::QueuedConnection);
    }, Qt::QueuedConnection);
    return id;
}

void WhatIfWorker::cancelSearch() { stopSearch_ = true; }

} // namespace pipescope::gui
