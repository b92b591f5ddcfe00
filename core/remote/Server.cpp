#include "remote/Server.h"

#include "Version.h"
#include "analysis/AnalysisJson.h"
#include "analysis/JobSummaries.h"
#include "analysis/Verdict.h"
#include "compare/Diff.h"
#include "remote/CostModelWire.h"
#include "report/JobPartText.h"
#include "store/JobIndex.h"
#include "timeline/TimelineBuild.h"
#include "util/Demangle.h"
#include "util/Format.h"
#include "util/JsonText.h"
#include "whatif/Levers.h"
#include "whatif/Microbatches.h"
#include "whatif/WhatIfJson.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <tuple>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <new>
#include <limits>
#include <set>
#include <unistd.h>
#include <vector>

namespace pipescope::remote {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// What the analysis holds per GPU activity at its peak (as the CLI's
// kAnalysisBytesPerActivity), and the commands' budget.
constexpr int64_t kBytesPerActivity = 600;
constexpr int64_t kBudgetBytes = int64_t(2) << 30;
// The app reads a sharded job whole up to this many GPU activities.
constexpr int64_t kWholeJobAbove = 2'000'000;
// Analyses of other iterations kept.
constexpr size_t kMaxCachedAnalyses = 8;

json optionalJson(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

std::string_view codeName(timeline::LaneKind kind, uint8_t code)
{
    using timeline::LaneKind;
    switch (kind) {
    case LaneKind::Steps: {
        static constexpr std::string_view kSteps[] = {"F", "B", "I", "W"};
        return code < 4 ? kSteps[code] : "?";
    }
    case LaneKind::Bubbles: return code < kBubbleCauses ? toString(static_cast<BubbleCause>(code)) : "?";
    case LaneKind::Kernels:
    case LaneKind::Transfers: return code <= 6 ? toString(static_cast<WorkClass>(code)) : "?";
    case LaneKind::Cpu: return code <= 4 ? toString(static_cast<CpuRangeKind>(code)) : "?";
    case LaneKind::Memory: return "memory";
    }
    return "?";
}

} // namespace

ReadLimits ServerOptions::defaultLimits()
{
    ReadLimits l;
    l.wholeJobAbove = kWholeJobAbove;
    l.bytesPerActivity = kBytesPerActivity;
    l.budgetBytes = std::getenv("PIPESCOPE_MEMORY_BUDGET") ? -1 : kBudgetBytes;
    return l;
}

// A run analysed and calibrated: the served job, or a baseline.
struct RunData {
    ReadPlan plan;
    JobPart part;
    Trace trace;
    AnalysisResult analysis;
    AnalyzeOptions options;
    std::optional<whatif::CostModel> model;
    std::string modelWhyNot;
};

namespace {

void loadRun(Store& store, const std::string& name, const ReadLimits& limits, RunData& run)
{
    run.plan = planRead(store, {}, limits);
    if (!fitsInMemory(run.plan.activities, limits))
        throw Error(name + ": reading " + std::to_string(run.plan.ranksHeld) + " ranks (" + formatCount(run.plan.activities) +
                    " GPU activities) needs about " + formatBytes(run.plan.activities * kBytesPerActivity) +
                    " of memory, more than this machine has available; serve it where there is more memory");
    run.part = describePart(store, run.plan);
    LoadOptions lo;
    if (!run.plan.ranks.empty())
        lo.ranks = run.plan.ranks;
    run.trace = store.load(lo);
    run.options.stageMap = run.part.stageMapFromIndex;
    run.options.autogradSequences = [&store](const std::vector<int64_t>& ids) { return store.autogradSequences(ids); };
    try {
        run.analysis = analyze(run.trace, run.options);
    } catch (const Error& e) {
        throw Error(name + ": " + e.what());
    }
    run.options.autogradSequences = nullptr;
    if (!run.analysis.pipeline.found) {
        run.modelWhyNot = "no pipeline found in the trace";
        return;
    }
    try {
        whatif::CalibrateOptions co;
        co.replicaPace = run.part.replicaPace;
        run.model = whatif::calibrate(run.trace, run.analysis, co);
    } catch (const Error& e) {
        run.modelWhyNot = e.what();
    }
}

// What `analyze --json` adds to toJson's document (as cmd_analyze writes
// it): the job when it was read in part, the microbatch study and the levers.
json documentExtras(const RunData& run, const AnalysisResult& r)
{
    std::optional<whatif::MicrobatchStudy> study;
    whatif::Levers levers;
    if (r.pipeline.found) {
        try {
            whatif::CalibrateOptions co;
            co.replicaPace = run.part.replicaPace;
            const whatif::CostModel model = &r == &run.analysis && run.model ? *run.model : whatif::calibrate(run.trace, r, co);
            if (r.microbatchSpread.uneven)
                study = whatif::studyMicrobatches(model, whatif::measuredScenario(model));
            levers = whatif::rankLevers(model, r);
        } catch (const Error&) {
            // No replay of this pipeline: the analysis alone.
        }
    }
    json extras;
    if (run.part.partial())
        extras["job"] = report::jobPartJson(run.part);
    extras["cost"] = study && study->applies ? whatif::microbatchStudyToJson(*study) : json(nullptr);
    extras["levers"] = whatif::leversToJson(levers);
    return extras;
}

void applyExtras(json& doc, const json& extras)
{
    if (extras.contains("job"))
        doc["job"] = extras["job"];
    doc["microbatches"]["cost"] = extras["cost"];
    doc["levers"] = extras["levers"];
}

// The items of the three big arrays, as toJson writes them (the tests check
// that a summary and every item give back the whole document).
json stepItem(const Step& s)
{
    return {{"iteration", s.iteration}, {"rank", s.rank}, {"stage", s.stage}, {"chunk", s.chunk}, {"microbatch", s.microbatch},
            {"kind", std::string(1, toChar(s.kind))}, {"start", s.start}, {"end", s.end}, {"compute_ns", s.computeNs},
            {"annotated", s.annotated}};
}

json bubbleItem(const Bubble& b)
{
    return {{"iteration", b.iteration}, {"rank", b.rank}, {"start", b.start}, {"end", b.end}, {"cause", toString(b.cause)}};
}

json segmentItem(const PathSegment& s)
{
    return {{"rank", s.rank}, {"stage", s.stage}, {"kind", toString(s.kind)}, {"start", s.start}, {"end", s.end}};
}

} // namespace

// One iteration's analysis and its documents, made when first asked for.
struct Server::Analysed {
    AnalysisResult* result = nullptr; // the run's own analysis, or `own`
    std::unique_ptr<AnalysisResult> own;
    AnalyzeOptions options;
    std::optional<json> extras; // documentExtras
    std::string full, summary;  // JSON text
};

struct Server::Loaded {
    RunData run;
    timeline::TimelineModel model;
    Analysed selected;               // the analysed (representative) iteration
    std::map<int, Analysed> others;  // other iterations asked for
};

Server::Server(const std::string& jobPath, ServerOptions options)
    : jobPath_(jobPath), options_(options), store_(jobPath)
{
    std::error_code ec;
    jobCanonical_ = fs::canonical(jobPath, ec);
    if (ec)
        throw Error(jobPath + ": cannot resolve the path (" + ec.message() + ")");
}

Server::~Server() { settleWarm(); }

void Server::warmFirstFrame()
{
    // The app's next requests are the index and the analysis's summary
    // (protocol 2): two cores make them while hello's answer travels and
    // the client asks (one round trip, 100 ms through a 50 ms link). What
    // fails here is made again, and told, when asked for.
    if (!loaded_ || !indexText_.empty())
        return;
    warming_.push_back(std::async(std::launch::async, [this] {
        try {
            indexText_ = jsonText(index());
        } catch (...) {
            indexText_.clear();
        }
    }));
    if (version_ >= 2)
        warming_.push_back(std::async(std::launch::async, [this] {
            try {
                Request summary;
                summary.type = RequestType::Analysis;
                summary.params = {{"parts", "summary"}};
                analysisText(summary);
            } catch (...) {
            }
        }));
}

void Server::settleWarm()
{
    for (auto& f : warming_)
        f.wait();
    warming_.clear();
}

void Server::ensureLoaded()
{
    if (loaded_)
        return;
    if (!loadError_.empty())
        throw Error(loadError_);
    try {
        auto l = std::make_unique<Loaded>();
        loadRun(store_, jobPath_, options_.limits, l->run);
        l->model = timeline::buildMeasured(l->run.trace, l->run.analysis);
        loaded_ = std::move(l);
    } catch (const Error& e) {
        loadError_ = e.what();
        throw;
    } catch (const std::bad_alloc&) {
        loadError_ = jobPath_ + ": out of memory reading the job; serve it where there is more memory";
        throw Error(loadError_);
    }
}

const timeline::TimelineModel& Server::timelineModel()
{
    ensureLoaded();
    return loaded_->model;
}

Answer Server::handle(std::string_view payload)
{
    const Request r = parseRequest(payload); // throws ProtocolError
    if (!helloDone_ && r.type != RequestType::Hello)
        throw ProtocolError("a " + std::string(toString(r.type)) + " request before hello (hello comes first)");
    if (helloDone_ && r.type == RequestType::Hello)
        throw ProtocolError("a second hello in one session");
    // What protocol 2 added is malformed in a session that agreed on 1.
    if (helloDone_ && version_ < 2 && (r.type == RequestType::Steps || (r.type == RequestType::Analysis && r.params.contains("parts"))))
        throw ProtocolError(r.type == RequestType::Steps ? "a steps request in a protocol 1 session (it needs protocol 2)"
                                                         : "an analysis request with 'parts' in a protocol 1 session (it needs protocol 2)");
    settleWarm();
    Answer a;
    try {
        json result;
        switch (r.type) {
        case RequestType::Hello: {
            // Version first: a client we cannot speak to gets no job data.
            int chosen = 0;
            for (const json& v : r.params["versions"])
                if (const int x = v.get<int>(); x >= kOldestProtocolVersion && x <= kProtocolVersion)
                    chosen = std::max(chosen, x);
            if (chosen == 0) {
                a.payload = errorResponse(r.id, r.type, code::kVersion,
                                          "this server speaks protocol versions " + std::to_string(kOldestProtocolVersion) + " to " +
                                              std::to_string(kProtocolVersion) + " (pipescope " + kVersion +
                                              "); install a matching pipescope on one side");
                a.close = true;
                a.closeReason = "the client speaks no protocol version this server speaks (" + std::to_string(kOldestProtocolVersion) +
                                " to " + std::to_string(kProtocolVersion) + ")";
                return a;
            }
            version_ = chosen;
            helloDone_ = true;
            a.mayCompress = false;
            result = hello(r);
            warmFirstFrame();
            break;
        }
        case RequestType::Index:
            if (indexText_.empty())
                indexText_ = jsonText(index());
            a.payload = okResponseText(r.id, r.type, indexText_);
            break;
        case RequestType::Analysis:
            // The document is kept as text: sent as it is, not parsed again.
            a.payload = okResponseText(r.id, r.type, analysisText(r));
            break;
        case RequestType::Steps: result = steps(r); break;
        case RequestType::Tiles: result = tiles(r); break;
        case RequestType::Details: result = details(r); break;
        case RequestType::Search: result = search(r); break;
        case RequestType::CostModel: result = costModel(r); break;
        case RequestType::Diff: result = diff(r); break;
        }
        if (a.payload.empty())
            a.payload = okResponse(r.id, r.type, result);
    } catch (const ProtocolError&) {
        throw;
    } catch (const Answer& refused) {
        return refused;
    } catch (const Error& e) {
        a.payload = errorResponse(r.id, r.type, code::kFailed, printable(e.what(), 4096));
    } catch (const std::bad_alloc&) {
        a.payload = errorResponse(r.id, r.type, code::kFailed, "out of memory answering this request");
    }
    if (a.payload.size() > responseLimit(r.type))
        a.payload = errorResponse(r.id, r.type, code::kTooLarge,
                                  "the answer has " + std::to_string(a.payload.size()) + " bytes, over this request's limit of " +
                                      std::to_string(responseLimit(r.type)) + "; ask for less (" +
                                      (r.type == RequestType::Steps      ? "fewer ranks, a shorter range or a lower limit"
                                       : r.type == RequestType::Analysis ? "the summary, then steps by rank"
                                                                         : "fewer lanes, a narrower width") +
                                      ")");
    return a;
}

namespace {

// Thrown by a handler to answer with an error response.
[[noreturn]] void refuse(const Request& r, const char* code, const std::string& message)
{
    throw Answer{errorResponse(r.id, r.type, code, message), false, {}};
}

json iterationsJson(const AnalysisResult& a)
{
    json its = json::array();
    for (const Iteration& it : a.iterations)
        its.push_back({{"index", it.index}, {"label", cutName(it.label)}, {"start_ns", it.start}, {"end_ns", it.end}});
    return its;
}

} // namespace

json Server::hello(const Request& r)
{
    // Compression (protocol 2): the first name the client lists that this
    // server knows; this response itself goes uncompressed.
    compress_ = false;
    if (version_ >= 2 && r.params.contains("compression"))
        for (const json& name : r.params["compression"])
            compress_ = compress_ || name == kDeflate;
    ensureLoaded();
    const StoreSummary s = store_.summary();
    const JobIndex* job = store_.jobIndex();
    const RunData& run = loaded_->run;
    json j;
    j["path"] = jobCanonical_.string();
    j["name"] = jobCanonical_.filename().string();
    j["kind"] = job ? "sharded" : "store";
    j["format_version"] = job ? json(kJobFormat) : json("pipescope.store/" + std::to_string(store_.schemaVersion()));
    j["store_schema_version"] = s.schemaVersion;
    j["shards"] = job ? json(job->shards) : json(nullptr);
    j["ranks"] = run.plan.jobRanks;
    j["gpus"] = run.plan.gpus;
    j["activities"] = run.plan.jobActivities;
    j["simulated"] = s.meta.count("simulated") && s.meta.at("simulated") == "1";
    j["iterations"] = static_cast<int64_t>(run.analysis.iterations.size());
    j["selected_iteration"] = run.analysis.selectedIteration;
    j["pipeline_found"] = run.analysis.pipeline.found;
    j["read"] = {{"partial", run.part.partial()}, {"ranks_loaded", run.part.partial() ? run.part.loadedRanks.size() : size_t(run.plan.jobRanks)},
                 {"what", describeRanksRead(run.part)}};
    json limits{{"request_bytes", kMaxRequestBytes}, {"max_width_px", kMaxWidthPx}, {"max_tile_lanes", kMaxTileLanes},
                {"max_tile_pixels", kMaxTilePixels}, {"max_search_hits", kMaxSearchHits}, {"max_name_bytes", kMaxNameBytes}};
    json responses = json::object();
    const RequestType last = version_ >= 2 ? RequestType::Steps : RequestType::Diff;
    for (int t = 0; t <= static_cast<int>(last); ++t)
        responses[std::string(toString(static_cast<RequestType>(t)))] = responseLimit(static_cast<RequestType>(t));
    limits["response_bytes"] = responses;
    json out{{"protocol", version_}, {"server", std::string("pipescope ") + kVersion}, {"job", j}, {"limits", limits}};
    if (version_ >= 2) {
        out["limits"]["max_step_items"] = kMaxStepItems;
        out["compression"] = compress_ ? json(kDeflate) : json(nullptr);
    }
    return out;
}

json Server::index()
{
    ensureLoaded();
    const RunData& run = loaded_->run;
    const timeline::TimelineModel& m = loaded_->model;
    json j;
    j["ranks"] = run.plan.jobRankList;
    j["loaded_ranks"] = run.part.partial() ? run.part.loadedRanks : run.plan.jobRankList;
    j["partial"] = run.part.partial();
    if (const JobIndex* job = store_.jobIndex()) {
        json shards = json::array();
        for (const ShardRecord& r : job->records)
            shards.push_back({{"index", r.index}, {"ranks", r.ranks.size()}, {"first_rank", r.ranks.empty() ? json(nullptr) : json(r.ranks.front())},
                              {"records", r.records}, {"input_bytes", r.inputBytes}});
        j["job_index"] = {{"shards", job->shards}, {"grouped_by", cutName(job->groupedBy)}, {"records", shards},
                          {"pipelines", job->pipelines.size()}};
        if (const auto ov = overviewFromIndex(*job))
            j["stages_across_replicas"] = report::replicaOverviewJson(*ov, busiestReplica(*job, *ov));
    } else {
        j["job_index"] = nullptr;
    }
    j["iterations"] = iterationsJson(run.analysis);
    json lanes = json::array();
    for (size_t i = 0; i < m.lanes.size(); ++i) {
        const timeline::Lane& l = m.lanes[i];
        json lane{{"lane", i}, {"kind", timeline::toString(l.kind)}, {"rank", l.rank}, {"stage", l.stage}, {"replica", l.replica},
                  {"label", cutName(l.label)}, {"events", l.events.size()}};
        if (l.kind == timeline::LaneKind::Kernels) {
            lane["device"] = l.device;
            lane["stream"] = l.stream;
            lane["role"] = toString(l.role);
        } else if (l.kind == timeline::LaneKind::Cpu) {
            lane["tid"] = l.tid;
            lane["depth"] = l.depth;
        }
        lanes.push_back(std::move(lane));
    }
    j["timeline"] = {{"start_ns", m.start}, {"end_ns", m.end}, {"lanes", std::move(lanes)}};
    return j;
}

Server::Analysed& Server::analysed(const Request& r)
{
    ensureLoaded();
    Loaded& l = *loaded_;
    if (!l.selected.result) {
        l.selected.result = &l.run.analysis;
        l.selected.options = l.run.options;
    }
    if (!r.params.contains("iteration") || r.params["iteration"].get<int>() == l.run.analysis.selectedIteration)
        return l.selected;
    const int it = r.params["iteration"].get<int>();
    if (it >= static_cast<int>(l.run.analysis.iterations.size()))
        refuse(r, code::kNotFound,
               "iteration " + std::to_string(it) + " is not in the job (it has " + std::to_string(l.run.analysis.iterations.size()) +
                   ", numbered from 0)");
    if (auto hit = l.others.find(it); hit != l.others.end())
        return hit->second;
    Analysed a;
    a.options = l.run.options;
    a.options.iteration = it;
    a.options.autogradSequences = [this](const std::vector<int64_t>& ids) { return store_.autogradSequences(ids); };
    a.own = std::make_unique<AnalysisResult>(analyze(l.run.trace, a.options));
    a.options.autogradSequences = nullptr;
    a.result = a.own.get();
    if (l.others.size() >= kMaxCachedAnalyses)
        l.others.erase(l.others.begin());
    return l.others[it] = std::move(a);
}

const json& Server::extrasOf(Analysed& a)
{
    if (!a.extras)
        a.extras = documentExtras(loaded_->run, *a.result);
    return *a.extras;
}

std::string Server::analysisText(const Request& r)
{
    Analysed& a = analysed(r);
    if (r.params.value("parts", std::string("full")) == "full") {
        if (a.full.empty()) {
            json doc = toJson(*a.result, a.options);
            applyExtras(doc, extrasOf(a));
            a.full = jsonText(doc);
        }
        return a.full;
    }
    if (a.summary.empty()) {
        const json& extras = extrasOf(a);
        // The document without its three big arrays: they are set aside
        // while toJson writes the rest (no copy of them is made). The
        // verdict reads them: it is made before, from the whole analysis
        // (as toJson's verdict section writes it).
        AnalysisResult& res = *a.result;
        const Verdict v = verdict(res);
        struct SetAside {
            AnalysisResult& r;
            std::vector<Step> steps;
            std::vector<Bubble> bubbles;
            std::vector<PathSegment> segments;
            explicit SetAside(AnalysisResult& x) : r(x)
            {
                steps.swap(r.steps);
                bubbles.swap(r.bubbles);
                segments.swap(r.criticalPath.segments);
            }
            ~SetAside()
            {
                steps.swap(r.steps);
                bubbles.swap(r.bubbles);
                segments.swap(r.criticalPath.segments);
            }
        } aside(res);
        json doc = toJson(res, a.options);
        applyExtras(doc, extras);
        doc["verdict"] = {{"kind", toString(v.kind)}, {"headline", v.headline}, {"facts", v.facts}, {"loss_ns", v.lossNs}};
        doc.erase("steps");
        doc.erase("bubbles");
        doc["critical_path"].erase("segments");
        doc["summary"] = {{"steps", aside.steps.size()}, {"bubbles", aside.bubbles.size()},
                          {"critical_path_segments", aside.segments.size()}};
        a.summary = jsonText(doc);
    }
    return a.summary;
}

json Server::steps(const Request& r)
{
    Analysed& a = analysed(r);
    const AnalysisResult& res = *a.result;
    const auto& p = r.params;
    std::set<int> rankSet;
    int lo = 0, hi = std::numeric_limits<int>::max();
    if (p.contains("ranks"))
        for (const json& v : p["ranks"])
            rankSet.insert(v.get<int>());
    if (p.contains("rank_range")) {
        lo = p["rank_range"][0].get<int>();
        hi = p["rank_range"][1].get<int>();
    }
    const bool byTime = p.contains("from_ns");
    const TimeNs from = byTime ? p["from_ns"].get<int64_t>() : 0;
    const TimeNs to = byTime ? p["to_ns"].get<int64_t>() : 0;
    const int64_t limit = p.value("limit", kDefaultStepItems);
    auto wanted = [&](const std::string& part) {
        if (!p.contains("parts"))
            return true;
        for (const json& x : p["parts"])
            if (x == part)
                return true;
        return false;
    };
    auto keep = [&](int rank, TimeNs start, TimeNs end) {
        if (rank < lo || rank > hi || (!rankSet.empty() && !rankSet.count(rank)))
            return false;
        // Overlapping the range (an item of no length, at its start).
        return !byTime || (start < to && (end > from || (end == start && start >= from)));
    };
    json out{{"iteration", res.selectedIteration}};
    json total = json::object();
    bool truncated = false;
    auto collect = [&](const char* name, const auto& items, auto&& item) {
        if (!wanted(name))
            return;
        json arr = json::array();
        int64_t n = 0;
        for (const auto& x : items)
            if (keep(x.rank, x.start, x.end) && n++ < limit)
                arr.push_back(item(x));
        truncated = truncated || n > limit;
        total[name] = n;
        out[name] = std::move(arr);
    };
    collect("steps", res.steps, stepItem);
    collect("bubbles", res.bubbles, bubbleItem);
    collect("critical_path", res.criticalPath.segments, segmentItem);
    out["total"] = std::move(total);
    out["truncated"] = truncated;
    return out;
}

json Server::tiles(const Request& r)
{
    ensureLoaded();
    const timeline::TimelineModel& m = loaded_->model;
    const TimeNs from = r.params["from_ns"].get<int64_t>();
    const TimeNs to = r.params["to_ns"].get<int64_t>();
    const int width = r.params["width_px"].get<int>();
    timeline::DrawOptions draw;
    if (r.params.contains("fold_px"))
        draw.foldPx = r.params["fold_px"].get<double>();
    std::vector<int> lanes;
    if (r.params.contains("lanes")) {
        for (const json& v : r.params["lanes"]) {
            const int lane = v.get<int>();
            if (lane >= static_cast<int>(m.lanes.size()))
                refuse(r, code::kNotFound, "lane " + std::to_string(lane) + " is not in the timeline (it has " + std::to_string(m.lanes.size()) + ")");
            lanes.push_back(lane);
        }
    } else {
        std::set<int> ranks;
        if (r.params.contains("ranks"))
            for (const json& v : r.params["ranks"])
                ranks.insert(v.get<int>());
        for (size_t i = 0; i < m.lanes.size(); ++i)
            if (ranks.empty() || ranks.count(m.lanes[i].rank))
                lanes.push_back(static_cast<int>(i));
    }
    if (static_cast<int64_t>(lanes.size()) * width > kMaxTilePixels)
        refuse(r, code::kTooLarge,
               std::to_string(lanes.size()) + " lanes x " + std::to_string(width) + " px is over the limit of " + std::to_string(kMaxTilePixels) +
                   " pixels; ask for the lanes on screen");
    json out = json::array();
    std::set<int32_t> names;
    std::vector<timeline::DrawItem> items;
    int64_t count = 0;
    for (int lane : lanes) {
        items.clear();
        m.drawList(lane, from, to, width, items, draw);
        const timeline::Lane& l = m.lanes[static_cast<size_t>(lane)];
        json arr = json::array();
        for (const timeline::DrawItem& it : items) {
            int32_t name = 0, mb = -1;
            if (it.event >= 0) {
                const timeline::Event& e = l.events[static_cast<size_t>(it.event)];
                name = e.name;
                mb = e.microbatch;
                if (name > 0)
                    names.insert(name);
            }
            arr.push_back(json::array({it.start - from, it.end - from, it.count, it.code,
                                       static_cast<int>(std::lround(std::clamp(it.busyFraction, 0.0f, 1.0f) * 1000.0f)), it.event, name, mb}));
        }
        count += static_cast<int64_t>(items.size());
        out.push_back({{"lane", lane}, {"items", std::move(arr)}});
    }
    json nameTable = json::object();
    for (int32_t n : names)
        nameTable[std::to_string(n)] = cutName(m.name(n));
    return {{"origin_ns", from}, {"from_ns", from}, {"to_ns", to}, {"width_px", width}, {"items", count},
            {"lanes", std::move(out)}, {"names", std::move(nameTable)}};
}

json Server::details(const Request& r)
{
    ensureLoaded();
    const timeline::TimelineModel& m = loaded_->model;
    const Trace& trace = loaded_->run.trace;
    const int64_t laneIndex = r.params["lane"].get<int64_t>();
    const int64_t eventIndex = r.params["event"].get<int64_t>();
    if (laneIndex >= static_cast<int64_t>(m.lanes.size()))
        refuse(r, code::kNotFound, "lane " + std::to_string(laneIndex) + " is not in the timeline (it has " + std::to_string(m.lanes.size()) + ")");
    const timeline::Lane& lane = m.lanes[static_cast<size_t>(laneIndex)];
    if (eventIndex >= static_cast<int64_t>(lane.events.size()))
        refuse(r, code::kNotFound,
               "event " + std::to_string(eventIndex) + " is not on lane " + std::to_string(laneIndex) + " (it has " + std::to_string(lane.events.size()) + ")");
    const timeline::Event& e = lane.events[static_cast<size_t>(eventIndex)];
    json j{{"lane", laneIndex}, {"event", eventIndex}, {"lane_kind", timeline::toString(lane.kind)}, {"rank", lane.rank}, {"stage", lane.stage},
           {"replica", lane.replica}, {"start_ns", e.start}, {"end_ns", e.end}, {"duration_ns", e.duration()},
           {"name", cutName(m.name(e.name), 4096)}, {"code", e.code}, {"what", codeName(lane.kind, e.code)},
           {"microbatch", e.microbatch < 0 ? json(nullptr) : json(e.microbatch)}};
    using timeline::LaneKind;
    if (lane.kind == LaneKind::Steps || lane.kind == LaneKind::Bubbles) {
        j["iteration"] = e.detail;
        if (lane.kind == LaneKind::Steps)
            j["chunk"] = e.chunk;
    }
    if (lane.kind == LaneKind::Memory)
        j["bytes_in_use"] = int64_t(e.detail) * timeline::kMemoryUnitBytes;
    if (lane.kind == LaneKind::Kernels || lane.kind == LaneKind::Transfers) {
        j["stream"] = lane.stream;
        j["step"] = e.step == timeline::kNoStep ? json(nullptr) : json(std::string(1, "FBIW"[e.step & 3]));
        if (e.detail >= 0 && static_cast<size_t>(e.detail) < m.comms.size()) {
            const timeline::CommDetail& c = m.comms[static_cast<size_t>(e.detail)];
            j["comm"] = {{"bytes", c.bytes < 0 ? json(nullptr) : json(c.bytes)}, {"peer", c.peer < 0 ? json(nullptr) : json(c.peer)},
                         {"group_size", c.groupSize < 0 ? json(nullptr) : json(c.groupSize)}, {"op", cutName(m.name(c.op))}};
        }
    }
    if (e.activity >= 0 && static_cast<size_t>(e.activity) < trace.activities.size()) {
        const Activity& act = trace.activities[static_cast<size_t>(e.activity)];
        const std::string& raw = trace.str(act.name);
        json a{{"id", act.id}, {"kind", toString(act.kind)}, {"recorded_name", cutName(raw, 4096)},
               {"demangled", demangle(raw) ? json(cutName(*demangle(raw), 4096)) : json(nullptr)},
               {"bytes", act.bytes ? json(*act.bytes) : json(nullptr)}, {"correlation", act.correlation ? json(*act.correlation) : json(nullptr)}};
        if (act.kind == ActivityKind::Memcpy)
            a["copy_kind"] = toString(act.copyKind);
        json ops = json::array();
        for (int k = 0; act.ncclIndex >= 0 && k < act.ncclCount && k < 64; ++k) {
            const size_t at = static_cast<size_t>(act.ncclIndex) + static_cast<size_t>(k);
            if (at >= trace.ncclOps.size())
                break;
            const NcclOp& op = trace.ncclOps[at];
            ops.push_back({{"kind", toString(op.kind)}, {"p2p", op.isP2p}, {"bytes", optionalJson(op.bytes)},
                           {"peer", op.peer ? json(*op.peer) : json(nullptr)}, {"group_size", op.groupSize ? json(*op.groupSize) : json(nullptr)},
                           {"group_name", cutName(op.groupName)}, {"dtype", cutName(op.dtype, 32)}, {"seq", optionalJson(op.seq)}});
        }
        a["nccl"] = std::move(ops);
        if (auto call = store_.launchOf(act.id))
            a["launch"] = {{"name", cutName(call->name, 1024)}, {"tid", call->tid}, {"start_ns", call->start}, {"end_ns", call->end},
                           {"delay_ns", act.start - call->start}};
        else
            a["launch"] = nullptr;
        j["activity"] = std::move(a);
    }
    return j;
}

json Server::search(const Request& r)
{
    ensureLoaded();
    const timeline::TimelineModel& m = loaded_->model;
    const std::string& pattern = r.params["pattern"].get_ref<const std::string&>();
    const bool regex = r.params.value("regex", false);
    const bool caseSensitive = r.params.value("case_sensitive", false);
    const int limit = r.params.value("limit", 200);
    const timeline::SearchResult found = m.search(pattern, regex, caseSensitive);
    if (!found.error.empty())
        refuse(r, code::kRefused, printable(found.error, 300));
    struct Hit {
        TimeNs start;
        int lane;
        int64_t event;
    };
    std::vector<Hit> hits;
    for (size_t lane = 0; lane < found.perLane.size(); ++lane)
        for (int64_t e : found.perLane[lane])
            hits.push_back({m.lanes[lane].events[static_cast<size_t>(e)].start, static_cast<int>(lane), e});
    const size_t keep = std::min(hits.size(), static_cast<size_t>(limit));
    std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(keep), hits.end(), [](const Hit& a, const Hit& b) {
        return std::tie(a.start, a.lane, a.event) < std::tie(b.start, b.lane, b.event);
    });
    json arr = json::array();
    std::set<int32_t> names;
    for (size_t i = 0; i < keep; ++i) {
        const timeline::Event& e = m.lanes[static_cast<size_t>(hits[i].lane)].events[static_cast<size_t>(hits[i].event)];
        names.insert(e.name);
        arr.push_back(json::array({hits[i].lane, hits[i].event, e.start, e.end, e.name}));
    }
    json nameTable = json::object();
    for (int32_t n : names)
        nameTable[std::to_string(n)] = cutName(m.name(n));
    return {{"total", found.total}, {"truncated", static_cast<int64_t>(keep) < found.total}, {"hits", std::move(arr)},
            {"names", std::move(nameTable)}};
}

json Server::costModel(const Request& r)
{
    ensureLoaded();
    const RunData& run = loaded_->run;
    if (!run.model)
        refuse(r, code::kUnavailable, "no cost model for this job: " + printable(run.modelWhyNot, 300));
    return {{"schema", kCostModelWireSchema}, {"model", costModelToWire(*run.model)}, {"summary", whatif::costModelToJson(*run.model)}};
}

std::optional<fs::path> resolveBaseline(const fs::path& jobCanonical, const std::string& name, std::string& why)
{
    if (name.empty() || name.find('\0') != std::string::npos) {
        why = "an empty baseline name";
        return std::nullopt;
    }
    const fs::path folder = jobCanonical.parent_path();
    const fs::path given(name);
    const fs::path candidate = given.is_absolute() ? given : folder / given;
    std::error_code ec;
    const fs::path canonical = fs::canonical(candidate, ec);
    if (ec) {
        why = "'" + printable(name, 300) + "' is not a file or folder beside the job (" + ec.message() + ")";
        return std::nullopt;
    }
    if (canonical.parent_path() != folder) {
        why = "'" + printable(name, 300) + "' does not lie beside the job (in " + printable(folder.string(), 300) +
              "); this server reads only the job it serves and the baselines in its folder";
        return std::nullopt;
    }
    return canonical;
}

json Server::diff(const Request& r)
{
    ensureLoaded();
    std::string why;
    const auto path = resolveBaseline(jobCanonical_, r.params["baseline"].get<std::string>(), why);
    if (!path)
        refuse(r, code::kRefused, why);
    const RunData& job = loaded_->run;
    // Only stores and sharded jobs are read (a trace would need an import, a write).
    std::unique_ptr<Store> store;
    try {
        store = std::make_unique<Store>(path->string());
    } catch (const Error& e) {
        refuse(r, code::kRefused, printable(path->filename().string(), 200) + " is not a pipescope store or sharded job (" + printable(e.what(), 300) + ")");
    }
    RunData base;
    loadRun(*store, path->filename().string(), options_.limits, base);
    compare::RunInput a{path->filename().string(), &base.trace, &base.analysis, base.model ? &*base.model : nullptr};
    compare::RunInput b{jobCanonical_.filename().string(), &job.trace, &job.analysis, job.model ? &*job.model : nullptr};
    return compare::diffToJson(compare::diffRuns(a, b));
}

// ---- the session -----------------------------------------------------------

namespace {

bool writeAll(int fd, std::string_view bytes)
{
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
}

} // namespace

SessionResult serveSession(Server& server, int inFd, int outFd)
{
    SessionResult s;
    FrameReader reader(kMaxRequestBytes);
    std::vector<char> buf(64 * 1024);
    auto send = [&](const std::string& payload, bool compress = false) {
        // Compressed once hello agreed on it, when it is worth it.
        const std::string framed = compress && payload.size() >= kCompressAbove ? frameDeflated(payload) : frame(payload);
        s.bytesOut += static_cast<int64_t>(framed.size());
        s.payloadBytesOut += static_cast<int64_t>(payload.size());
        return writeAll(outFd, framed);
    };
    auto malformed = [&](const std::string& what) {
        // The client learns why too, when it still reads.
        send(errorResponse(json(nullptr), std::nullopt, code::kMalformed, what));
        s.exitCode = kExitProtocol;
        s.error = "malformed message: " + what + "; the session is closed";
        return s;
    };
    for (;;) {
        const ssize_t n = ::read(inFd, buf.data(), buf.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            s.exitCode = 1;
            s.error = std::string("cannot read the client's messages (") + std::strerror(errno) + ")";
            return s;
        }
        if (n == 0) {
            if (reader.midMessage())
                return malformed("the input ended inside a message");
            return s;
        }
        s.bytesIn += n;
        try {
            reader.feed(buf.data(), static_cast<size_t>(n));
            while (auto payload = reader.next()) {
                ++s.requests;
                const Answer a = server.handle(*payload);
                if (!send(a.payload, a.mayCompress && server.compressing())) {
                    s.exitCode = 1;
                    s.error = std::string("cannot write to the client (") + std::strerror(errno) + ")";
                    return s;
                }
                if (a.close) {
                    s.exitCode = kExitProtocol;
                    s.error = a.closeReason + "; the session is closed";
                    return s;
                }
                reader.allowCompressed(server.compressing());
            }
        } catch (const ProtocolError& e) {
            return malformed(e.what());
        }
    }
}

void preferHugePages()
{
    constexpr const char* kTunable = "glibc.malloc.hugetlb=1";
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables && std::strstr(tunables, "glibc.malloc.hugetlb"))
        return; // asked already (by us, or by the user's own choice)
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode;
    std::getline(thp, mode);
    if (mode.find("[madvise]") == std::string::npos)
        return;
    std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    for (size_t at = 0; at < raw.size();) {
        const size_t end = raw.find('\0', at);
        args.push_back(raw.substr(at, end == std::string::npos ? std::string::npos : end - at));
        at = end == std::string::npos ? raw.size() : end + 1;
    }
    if (args.empty())
        return;
    const std::string value = tunables && *tunables ? std::string(tunables) + ":" + kTunable : std::string(kTunable);
    if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0)
        return;
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    // Not re-executed: go on as we are, without the tunable in children's view.
    if (tunables)
        ::setenv("GLIBC_TUNABLES", tunables, 1);
    else
        ::unsetenv("GLIBC_TUNABLES");
}

} // namespace pipescope::remote
