#include "remote/RemoteJob.h"

#include "remote/AnalysisFromJson.h"
#include "remote/CostModelWire.h"
#include "remote/RemoteLink.h"

#include "util/Format.h"
#include "util/Work.h"
#include "whatif/Levers.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_map>

namespace pipescope::gui {

namespace {

using nlohmann::json;
using remote::RequestType;
using timeline::LaneKind;

// Pixels of one tiles pass, over all its lanes: the analysed iteration's
// (fine) and the rest of the job's (coarse). At 40 lanes the iteration gets
// 50,000 px a lane (as sharp as a local open at nearly every zoom); at
// 8,000 lanes, 256 (a lane is a row on screen: 50 of them show at once).
constexpr int64_t kFinePixels = 2'000'000;
constexpr int64_t kCoarsePixels = 400'000;
// Lanes of one tiles request, at most (see RemoteTimeline::pass).
constexpr int64_t kLanesPerTilesRequest = 1024;
// Items of one steps request, about (the server's limit is 16 MiB of JSON).
constexpr int64_t kStepItemsPerRequest = 150'000;
// The bubble list is fetched up to this many bubbles (about 1.3 MB
// deflated); beyond, it stays on the server and the bubbles tracks are drawn
// from tiles like the streams (at 1,024 ranks a job has about 700,000).
constexpr int64_t kMaxBubblesFetched = 100'000;

// The other iterations' steps and bubbles are fetched while there are at most
// this many iterations (the server keeps eight analyses) and this many of
// their items: a small job's timeline has every iteration's steps, as a
// local open's has; a large one's the analysed iteration's (each other
// iteration costs the server an analysis: at 1,024 ranks about a second).
constexpr int kMaxIterationsFetched = 8;
constexpr int64_t kOtherIterationItems = 10'000;

struct RemoteAnalysis {
    json doc;
    bool bubblesFetched = true;
    bool allIterations = false; // every iteration's steps (else the analysed one's)
    int64_t bubbles = 0;        // in the analysed iteration
};

void say(const WorkControl* work, const std::string& phase)
{
    if (work)
        work->checkpoint(phase, -1);
}

// One iteration's steps (and bubbles, and critical path) of every rank, a
// few hundred ranks a request, appended to the arrays.
struct StepArrays {
    json steps = json::array(), bubbles = json::array(), segments = json::array();
};

// The steps requests of one iteration, sent down a pipeline; their answers
// are read later (readSteps).
std::vector<int64_t> sendSteps(RemoteLink::Pipeline& pipe, const std::vector<int>& ranks, const json& params, size_t perRequest,
                               const json& parts)
{
    std::vector<int64_t> ids;
    for (size_t i = 0; i < ranks.size(); i += perRequest) {
        json p = params;
        p["ranks"] = std::vector<int>(ranks.begin() + static_cast<std::ptrdiff_t>(i),
                                      ranks.begin() + static_cast<std::ptrdiff_t>(std::min(ranks.size(), i + perRequest)));
        p["limit"] = remote::kMaxStepItems;
        p["parts"] = parts;
        ids.push_back(pipe.send(RequestType::Steps, p));
    }
    return ids;
}

void readSteps(RemoteLink& link, RemoteLink::Pipeline& pipe, const std::vector<int64_t>& ids, StepArrays& out, const WorkControl* work)
{
    for (size_t i = 0; i < ids.size(); ++i) {
        say(work, "reading the steps (" + std::to_string(i) + " of " + std::to_string(ids.size()) + " requests)");
        json part = pipe.result(ids[i]);
        if (part.value("truncated", false))
            throw Error(link.address().toString().toStdString() + ": the server cut the steps of ranks it was asked for; "
                                                                  "this job has too many to show remotely");
        for (const char* k : {"steps", "bubbles", "critical_path"})
            if (part.contains(k))
                for (json& x : part.at(k))
                    (k[0] == 's' ? out.steps : k[0] == 'b' ? out.bubbles : out.segments).push_back(std::move(x));
    }
}

// The analysis's steps requests, sent once its summary says how many items
// there are: every rank's steps, critical path and (up to
// kMaxBubblesFetched) bubbles; the other iterations' steps and bubbles too,
// as a local open has them, while they are few (kOtherIterationItems): the
// server analyses each on request.
struct StepRequests {
    std::map<int, std::vector<int64_t>> byIteration;
    int selected = 0;
    bool multipleRequests = false;
};

StepRequests sendStepRequests(RemoteLink::Pipeline& pipe, const json& summary, const json& index, const json& params, RemoteAnalysis& out)
{
    const json counts = summary.value("summary", json::object());
    out.bubbles = counts.value("bubbles", int64_t{0});
    out.bubblesFetched = out.bubbles <= kMaxBubblesFetched;
    const int64_t stepItems = counts.value("steps", int64_t{0}) + (out.bubblesFetched ? out.bubbles : 0);
    const int64_t items = stepItems + counts.value("critical_path_segments", int64_t{0});
    const std::vector<int> ranks = index.at("loaded_ranks").get<std::vector<int>>();
    const size_t perRequest = std::max<size_t>(
        1, static_cast<size_t>(kStepItemsPerRequest * static_cast<int64_t>(ranks.size()) / std::max<int64_t>(1, items)));
    json parts = out.bubblesFetched ? json::array({"steps", "bubbles", "critical_path"}) : json::array({"steps", "critical_path"});
    StepRequests r;
    r.selected = summary.at("selected_iteration").get<int>();
    r.multipleRequests = ranks.size() > perRequest;
    const int iterations = static_cast<int>(summary.at("iterations").size());
    r.byIteration[r.selected] = sendSteps(pipe, ranks, params, perRequest, parts);
    if (iterations > 1 && iterations <= kMaxIterationsFetched && stepItems * (iterations - 1) <= kOtherIterationItems) {
        parts.erase(parts.size() - 1); // critical_path: the analysed iteration's only
        for (int it = 0; it < iterations; ++it)
            if (it != r.selected) {
                json p = params;
                p["iteration"] = it;
                r.byIteration[it] = sendSteps(pipe, ranks, p, perRequest, parts);
            }
        out.allIterations = true;
    }
    return r;
}

// The whole analysis document: the summary with the steps' answers.
void readStepAnswers(RemoteLink& link, RemoteLink::Pipeline& pipe, const StepRequests& requests, json summary, RemoteAnalysis& out,
                     const WorkControl* work)
{
    std::map<int, StepArrays> byIteration;
    for (const auto& [it, ids] : requests.byIteration)
        readSteps(link, pipe, ids, byIteration[it], work);
    // The path's segments are in time order in the document; the requests gave them rank by rank.
    json& segments = byIteration[requests.selected].segments;
    if (requests.multipleRequests)
        std::stable_sort(segments.begin(), segments.end(),
                         [](const json& a, const json& b) { return a.at("start").get<TimeNs>() < b.at("start").get<TimeNs>(); });
    StepArrays all;
    for (auto& [it, arrays] : byIteration) {
        for (json& x : arrays.steps)
            all.steps.push_back(std::move(x));
        for (json& x : arrays.bubbles)
            all.bubbles.push_back(std::move(x));
    }
    out.doc = wholeAnalysisDocument(std::move(summary), std::move(all.steps), std::move(all.bubbles), std::move(segments));
}

LaneKind laneKind(const std::string& name)
{
    for (int k = 0; k <= static_cast<int>(LaneKind::Memory); ++k)
        if (timeline::toString(static_cast<LaneKind>(k)) == name)
            return static_cast<LaneKind>(k);
    throw FormatError("the server's index: unknown lane kind '" + name + "'");
}

StreamRole streamRole(const std::string& name)
{
    for (int k = 0; k < 4; ++k)
        if (toString(static_cast<StreamRole>(k)) == name)
            return static_cast<StreamRole>(k);
    return StreamRole::Compute;
}

std::string stepLabel(StepKind kind, int microbatch, int chunk)
{
    std::string s(1, toChar(kind));
    s += std::to_string(microbatch);
    if (chunk > 0)
        s += " chunk " + std::to_string(chunk);
    return s;
}

// The timeline: its lanes from the index; steps and bubbles from the
// analysis; every other lane (and the bubbles when their list stays on the
// server) from tiles, whose requests go down the open's pipeline beside the
// analysis's and are read when their answers come.
class RemoteTimeline {
public:
    RemoteTimeline(RemoteLink& link, const json& index, const WorkControl* work) : link_(link), work_(work)
    {
        m_.names = {""};
        const json& tl = index.at("timeline");
        start_ = tl.at("start_ns").get<TimeNs>();
        end_ = tl.at("end_ns").get<TimeNs>();
        readLanes(tl.at("lanes"));
    }

    // The tiles of the streams and CPU lanes (and, with bubblesFromTiles,
    // of the bubbles lanes): the analysed iteration [from, to) sharp, the
    // rest of the job coarser.
    void sendTiles(RemoteLink::Pipeline& pipe, TimeNs from, TimeNs to, bool bubbles)
    {
        std::vector<int> lanes;
        for (const auto& [server, local] : bubbles ? bubbleLanes_ : streamLanes_) {
            localLane_[server] = local;
            serverLanes_[local] = server;
            lanes.push_back(server);
        }
        if (lanes.empty() || end_ <= start_)
            return;
        // The widths follow the streams' lane count (the bubbles', when tiled, add theirs).
        const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(streamLanes_.size()));
        from = std::clamp(from, start_, end_);
        to = std::clamp(to, from, end_);
        const int coarse = static_cast<int>(std::clamp<int64_t>(kCoarsePixels / count, 64, 4096));
        if (from > start_)
            pass(pipe, lanes, start_, from, coarse, 3);
        if (to > from)
            pass(pipe, lanes, from, to, static_cast<int>(std::clamp<int64_t>(kFinePixels / count, 256, 65536)), 1);
        if (end_ > to)
            pass(pipe, lanes, to, end_ + 1, coarse, 3);
    }

    void readTiles(RemoteLink::Pipeline& pipe)
    {
        for (size_t i = 0; i < passes_.size(); ++i) {
            say(work_, "reading the timeline's tiles (" + std::to_string(i) + " of " + std::to_string(passes_.size()) + ")");
            addTiles(pipe.result(passes_[i].id), passes_[i].from, passes_[i].to);
        }
        passes_.clear();
    }

    timeline::TimelineModel build(const AnalysisResult& analysis, bool bubblesFromTiles)
    {
        for (const Step& s : analysis.steps) {
            timeline::Event e;
            e.start = s.start;
            e.end = s.end;
            e.code = static_cast<uint8_t>(s.kind);
            e.microbatch = s.microbatch;
            e.chunk = static_cast<uint8_t>(std::clamp(s.chunk, 0, 255));
            e.detail = s.iteration;
            e.name = intern(stepLabel(s.kind, s.microbatch, s.chunk));
            if (auto l = stepsLane_.find(s.rank); l != stepsLane_.end())
                m_.lanes[l->second].events.push_back(e);
        }
        if (!bubblesFromTiles)
            for (const Bubble& b : analysis.bubbles) {
                timeline::Event e;
                e.start = b.start;
                e.end = b.end;
                e.code = static_cast<uint8_t>(b.cause);
                e.detail = b.iteration;
                e.name = intern(std::string(toString(b.cause)));
                if (auto l = bubblesLane_.find(b.rank); l != bubblesLane_.end())
                    m_.lanes[l->second].events.push_back(e);
            }
        for (const timeline::IterationMark& it : iterationsOf(analysis))
            m_.iterations.push_back(it);
        // The server's event numbers follow the events: sorted as finalize() sorts them (by start, stably).
        for (size_t l = 0; l < m_.lanes.size(); ++l) {
            auto& events = m_.lanes[l].events;
            auto& numbers = serverEvents_[l];
            if (numbers.size() != events.size() ||
                std::is_sorted(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.start < b.start; }))
                continue;
            std::vector<size_t> order(events.size());
            for (size_t i = 0; i < order.size(); ++i)
                order[i] = i;
            std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return events[a].start < events[b].start; });
            std::vector<timeline::Event> e2;
            std::vector<int64_t> n2;
            for (size_t i : order) {
                e2.push_back(events[i]);
                n2.push_back(numbers[i]);
            }
            events = std::move(e2);
            numbers = std::move(n2);
        }
        m_.finalize();
        link_.setServerEvents(std::move(serverLanes_), std::move(serverEvents_));
        windows_.resize(m_.lanes.size());
        link_.setTileWindows(std::move(windows_));
        return std::move(m_);
    }

    int droppedMemoryLanes() const { return droppedMemory_; }

private:
    static std::vector<timeline::IterationMark> iterationsOf(const AnalysisResult& analysis)
    {
        std::vector<timeline::IterationMark> out;
        for (const Iteration& it : analysis.iterations)
            out.push_back({it.index, it.label, it.start, it.end});
        return out;
    }

    int32_t intern(const std::string& s)
    {
        if (s.empty())
            return 0;
        auto [it, added] = interned_.try_emplace(s, static_cast<int32_t>(m_.names.size()));
        if (added)
            m_.names.push_back(s);
        return it->second;
    }

    void readLanes(const json& lanes)
    {
        for (const json& l : lanes) {
            const LaneKind kind = laneKind(l.at("kind").get<std::string>());
            const int server = l.at("lane").get<int>();
            if (kind == LaneKind::Memory) {
                ++droppedMemory_; // its samples' values are not in the tiles
                continue;
            }
            timeline::Lane lane;
            lane.kind = kind;
            lane.rank = l.at("rank").get<int>();
            lane.stage = l.at("stage").get<int>();
            lane.replica = l.at("replica").get<int>();
            // The views group and size by these: a server's out of range is refused.
            if (lane.rank < 0 || lane.rank >= (1 << 24) || lane.stage < -1 || lane.stage >= (1 << 16) || lane.replica < 0 ||
                lane.replica >= (1 << 24))
                throw FormatError("the server's index: a lane of rank " + std::to_string(lane.rank) + ", stage " +
                                  std::to_string(lane.stage) + ", replica " + std::to_string(lane.replica));
            lane.label = l.at("label").get<std::string>();
            if (kind == LaneKind::Kernels) {
                lane.device = l.value("device", -1);
                lane.stream = l.value("stream", int64_t{-1});
                lane.role = streamRole(l.value("role", std::string()));
            } else if (kind == LaneKind::Cpu) {
                lane.tid = l.value("tid", int64_t{-1});
                lane.depth = l.value("depth", 0);
            }
            const size_t local = m_.lanes.size();
            if (kind == LaneKind::Steps)
                stepsLane_.emplace(lane.rank, local);
            else if (kind == LaneKind::Bubbles) {
                bubblesLane_.emplace(lane.rank, local);
                bubbleLanes_.emplace_back(server, local);
            } else
                streamLanes_.emplace_back(server, local);
            serverLanes_.push_back(-1); // set when its tiles are asked for
            windows_.emplace_back();
            serverEvents_.emplace_back();
            m_.lanes.push_back(std::move(lane));
        }
    }

    // Tiles of some lanes over [from, to) at `width` pixels a lane, sent.
    void pass(RemoteLink::Pipeline& pipe, const std::vector<int>& lanes, TimeNs from, TimeNs to, int width, int foldPx)
    {
        // Wider than one request allows: consecutive ranges of at most its width each.
        const int pieces = (width + remote::kMaxWidthPx - 1) / remote::kMaxWidthPx;
        const int pieceWidth = width / pieces;
        // At most kLanesPerTilesRequest lanes a request (about 6 KB of lane
        // numbers): the client keeps 32 KiB of requests in flight, so that
        // many small ones keep the server busy while the answers stream back.
        const size_t lanesPerRequest = static_cast<size_t>(
            std::clamp<int64_t>(remote::kMaxTilePixels / pieceWidth, 1, kLanesPerTilesRequest));
        for (int p = 0; p < pieces; ++p) {
            const TimeNs a = from + (to - from) * p / pieces, b = from + (to - from) * (p + 1) / pieces;
            if (b <= a)
                continue;
            for (size_t i = 0; i < lanes.size(); i += lanesPerRequest) {
                json some = json::array();
                for (size_t k = i; k < std::min(lanes.size(), i + lanesPerRequest); ++k)
                    some.push_back(lanes[k]);
                for (const json& l : some)
                    windows_[localLane_.at(l.get<int>())].push_back({a, b, double(foldPx) * double(b - a) / pieceWidth});
                passes_.push_back({pipe.send(RequestType::Tiles,
                                             {{"from_ns", a}, {"to_ns", b}, {"width_px", pieceWidth}, {"lanes", some}, {"fold_px", foldPx}}),
                                   a, b});
            }
        }
    }

    void addTiles(const json& t, TimeNs from, TimeNs to)
    {
        const TimeNs origin = t.at("origin_ns").get<TimeNs>();
        const json& names = t.at("names");
        for (const json& lt : t.at("lanes")) {
            auto local = localLane_.find(lt.at("lane").get<int>());
            if (local == localLane_.end())
                throw FormatError("the server's tiles name a lane that was not asked for");
            timeline::Lane& lane = m_.lanes[local->second];
            const int codes = lane.kind == LaneKind::Cpu       ? timeline::kMaxCodes
                              : lane.kind == LaneKind::Bubbles ? kBubbleCauses
                                                               : 7;
            for (const json& item : lt.at("items")) {
                if (!item.is_array() || item.size() != 8)
                    throw FormatError("the server's tiles: an item that is not [start, end, count, code, busy, event, name, microbatch]");
                timeline::Event e;
                e.start = origin + item[0].get<TimeNs>();
                e.end = origin + item[1].get<TimeNs>();
                const int64_t count = item[2].get<int64_t>();
                const int code = item[3].get<int>();
                // Untrusted values index the views' arrays: out of range, the item is left out.
                if (code < 0 || code >= codes || e.end < e.start || e.start < from || e.start > to || count < 0)
                    continue;
                // An event that runs on past the range is cut there: the next range has the rest.
                e.end = std::min(e.end, to);
                e.code = static_cast<uint8_t>(code);
                e.microbatch = item[7].get<int32_t>();
                serverEvents_[local->second].push_back(count == 1 ? item[5].get<int64_t>() : -1);
                if (count == 1 && item[5].get<int64_t>() >= 0) {
                    const std::string id = std::to_string(item[6].get<int64_t>());
                    e.name = names.contains(id) ? intern(names.at(id).get<std::string>()) : 0;
                } else if (count > 0) {
                    e.name = intern(formatCount(count) + " events, folded by the server at this resolution");
                } else {
                    // Busy time of events that started before the range: the part of them inside it.
                    e.name = intern("part of an event that started earlier, folded by the server at this resolution");
                }
                lane.events.push_back(e);
            }
        }
    }

    RemoteLink& link_;
    const WorkControl* work_;
    timeline::TimelineModel m_;
    TimeNs start_ = 0, end_ = 0;
    std::vector<std::pair<int, size_t>> streamLanes_, bubbleLanes_; // (server lane, local lane) of the lanes tiles may draw
    std::map<int, size_t> stepsLane_, bubblesLane_;                  // rank -> local lane
    struct Pass {
        int64_t id;
        TimeNs from, to;
    };
    std::vector<Pass> passes_; // tiles requests sent, answers not yet read
    std::vector<std::vector<RemoteLink::TileWindow>> windows_; // [local lane]
    std::map<int, size_t> localLane_;     // server lane -> index in m_.lanes
    std::vector<int> serverLanes_;        // [local lane]: the server's, -1 for lanes built here
    std::vector<std::vector<int64_t>> serverEvents_; // [local lane][event]: the server's event number, -1 none
    std::unordered_map<std::string, int32_t> interned_;
    int droppedMemory_ = 0;
};

std::shared_ptr<const Trace> remoteTrace(const json& hello, const json& index)
{
    auto trace = std::make_shared<Trace>();
    trace->strings = {""};
    for (int r : index.at("ranks").get<std::vector<int>>()) {
        RankInfo ri;
        ri.rank = r;
        trace->ranks.push_back(ri);
    }
    if (hello.at("job").value("simulated", false))
        trace->meta["simulated"] = "1";
    return trace;
}

void calibrateFromWire(const json& wire, Job& job, const WorkControl* work)
{
    try {
        job.costModel = remote::costModelFromWire(wire.at("model"));
        say(work, "pricing what would help most");
        job.levers = whatif::rankLevers(*job.costModel, *job.analysis);
    } catch (const FormatError& e) {
        job.whatIfError = QString::fromStdString(e.what());
    } catch (const json::exception& e) {
        job.whatIfError = QStringLiteral("the server's cost model: %1").arg(QString::fromUtf8(e.what()));
    }
}

// What a remote open does not apply, in one line (empty when all applied).
QString notApplied(const OpenOptions& options)
{
    QStringList ignored;
    if (options.layers > 0)
        ignored << QStringLiteral("--layers");
    if (!options.modelFile.isEmpty())
        ignored << QStringLiteral("--model");
    if (!options.measuredBoundaries.empty())
        ignored << QStringLiteral("--measured-boundaries");
    if (!options.commRulesFile.isEmpty())
        ignored << QStringLiteral("--comm-rules");
    if (ignored.isEmpty())
        return {};
    return QStringLiteral("%1 not applied: the server analyses and calibrates the remote job as `pipescope serve` does")
        .arg(ignored.join(QStringLiteral(", ")));
}

} // namespace

std::shared_ptr<const Job> loadRemote(const QString& text, const OpenOptions& options, const WorkControl* work)
{
    QString error;
    const auto address = RemoteAddress::parse(text, &error);
    if (!address)
        throw Error(error.toStdString());
    return loadRemote(RemoteLink::connect(*address, work), options, work);
}

std::shared_ptr<const Job> loadRemote(std::shared_ptr<RemoteLink> link, const OpenOptions& options, const WorkControl* work,
                                      [[maybe_unused]] const RemoteFirstFrame& firstFrame)
{
    const RemoteAddress* address = &link->address();
    auto job = std::make_shared<Job>();
    job->inputs = {address->toString()};
    job->title = address->shortName();
    job->options = options;
    job->protectedFiles = std::make_shared<const std::vector<AtomicOutput::InputGuard>>();
    job->remote = link;
    try {
        say(work, "reading the job's index");
        const json index = link->index().is_object() ? link->index() : link->result(RequestType::Index, json::object(), work);
        // Every request of the open goes down one pipeline: the analysis's
        // summary, the cost model and the tiles at once, the steps as soon
        // as the summary says how many there are. One round trip's latency
        // for all, where one after another paid it a dozen times.
        RemoteTimeline timeline(*link, index, work);
        RemoteAnalysis fetched;
        json params = json::object();
        if (options.iteration)
            params["iteration"] = *options.iteration;
        json wire;
        std::optional<remote::ServerRefused> noModel;
        {
            auto pipe = link->pipeline(work);
            say(work, "reading the analysis");
            json summaryParams = params;
            if (link->protocol() >= 2)
                summaryParams["parts"] = "summary";
            const int64_t summaryId = pipe.send(RequestType::Analysis, summaryParams);
            const int64_t modelId = pipe.send(RequestType::CostModel);
            // The analysed iteration, sharp: the one asked for, else the server's.
            const int selected = options.iteration ? *options.iteration : link->hello().at("job").value("selected_iteration", -1);
            TimeNs from = 0, to = 0;
            for (const json& it : index.value("iterations", json::array()))
                if (it.value("index", -2) == selected) {
                    from = it.at("start_ns").get<TimeNs>();
                    to = it.at("end_ns").get<TimeNs>();
                }
            timeline.sendTiles(pipe, from, to, false);
            json summary = pipe.result(summaryId);
            if (link->protocol() < 2) {
                fetched.doc = std::move(summary);
            } else {
                const StepRequests steps = sendStepRequests(pipe, summary, index, params, fetched);
                if (!fetched.bubblesFetched)
                    timeline.sendTiles(pipe, from, to, true);
                readStepAnswers(*link, pipe, steps, std::move(summary), fetched, work);
            }
            timeline.readTiles(pipe);
            say(work, "reading the cost model");
            try {
                wire = pipe.result(modelId);
            } catch (const remote::ServerRefused& e) {
                noModel = e;
            }
        }
        auto analysis = std::make_shared<AnalysisResult>(analysisFromJson(fetched.doc));
        job->trace = remoteTrace(link->hello(), index);
        job->simulated = job->trace->simulated();
        job->timeline = std::make_shared<timeline::TimelineModel>(timeline.build(*analysis, !fetched.bubblesFetched));
        job->analysis = std::move(analysis);
        if (noModel)
            job->whatIfError = QString::fromStdString(noModel->what());
        else
            calibrateFromWire(wire, *job, work);
        QStringList notes;
        if (const json read = link->hello().at("job").value("read", json::object()); read.value("partial", false))
            notes << QStringLiteral("the server read the job in part: %1").arg(QString::fromStdString(read.value("what", std::string())));
        if (!fetched.allIterations && job->analysis->iterations.size() > 1)
            notes << QStringLiteral("the steps shown are the analysed iteration's (the job's other iterations' stay on the server)");
        if (!fetched.bubblesFetched)
            notes << QStringLiteral("the list of the iteration's %1 bubbles stays on the server: their tracks are drawn from tiles, "
                                    "their totals per rank and cause are whole")
                         .arg(QString::fromStdString(formatCount(fetched.bubbles)));
        if (timeline.droppedMemoryLanes() > 0)
            notes << QStringLiteral("memory tracks are not shown for a remote job");
        if (const QString n = notApplied(options); !n.isEmpty())
            notes << n;
        job->notice = notes.join(QStringLiteral("; "));
    } catch (const FormatError& e) {
        throw Error(address->toString().toStdString() + ": " + e.what());
    } catch (const remote::ServerRefused& e) {
        throw Error(address->toString().toStdString() + ": the server refused: " + e.what());
    } catch (const json::exception& e) {
        throw Error(address->toString().toStdString() + ": the server's answer is not what this app reads (" + e.what() +
                    "); the server and this pipescope may differ in version");
    }
    const RemoteLink::Stats s = link->stats();
    link->setOpenFigures(std::chrono::duration<double>(std::chrono::steady_clock::now() - link->started()).count(),
                         s.bytesSent + s.bytesReceived);
    return job;
}

} // namespace pipescope::gui
