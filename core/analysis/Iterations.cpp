// Iterations: from ProfilerStep#N annotations, a user-named range, NVTX /
// annotation ranges named like iterations, or else the job's own periodic
// structure (the kernels that run exactly once per iteration).
#include "analysis/Classify.h"
#include "analysis/detail/Context.h"
#include "analysis/detail/IterationSteps.h"
#include "util/Error.h"

#include <cctype>
#include <cmath>
#include <set>
#include <unordered_map>

namespace pipescope::detail {

namespace {

struct RangeMark {
    TimeNs start = 0, end = 0;
    int64_t key = 0;
    std::string label;
};

struct RankIter {
    int64_t key = 0;
    std::string label;
    TimeNs start = 0, end = 0;
    bool any = false;

    // Widens the span to cover an activity.
    void cover(const Activity& act)
    {
        start = any ? std::min(start, act.start) : act.start;
        end = any ? std::max(end, act.end) : act.end;
        any = true;
    }
};

std::optional<int64_t> trailingNumber(std::string_view s)
{
    size_t e = s.size();
    size_t b = e;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(s[b - 1])))
        --b;
    if (b == e || e - b > 15)
        return std::nullopt;
    return std::stoll(std::string(s.substr(b)));
}

bool iequals(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

// "name", "name#3", "name 3", "name_3", "name:3".
bool matchesRangeName(std::string_view name, std::string_view wanted)
{
    if (name.size() < wanted.size() || !iequals(name.substr(0, wanted.size()), wanted))
        return false;
    auto rest = name.substr(wanted.size());
    if (rest.empty())
        return true;
    if (rest[0] != '#' && rest[0] != ' ' && rest[0] != '_' && rest[0] != ':' && rest[0] != '=')
        return false;
    rest.remove_prefix(1);
    while (!rest.empty() && (rest[0] == ' ' || rest[0] == '#'))
        rest.remove_prefix(1);
    if (rest.empty())
        return false;
    for (char c : rest)
        if (!std::isdigit(static_cast<unsigned char>(c)))
            return false;
    return true;
}

bool isProfilerStep(std::string_view name)
{
    return name.size() > 13 && name.substr(0, 13) == "ProfilerStep#"
           && name.find_first_not_of("0123456789", 13) == std::string_view::npos;
}

// Names frameworks and pipescope's own annotations give whole training iterations.
bool isIterationRangeName(std::string_view name)
{
    for (std::string_view w : {"pipescope/iteration", "iteration", "train_step", "training_step", "train_batch"})
        if (matchesRangeName(name, w))
            return true;
    return false;
}

std::vector<RankIter> assignToRanges(const Context& ctx, const RankData& rd, std::vector<RangeMark>& marks)
{
    std::sort(marks.begin(), marks.end(), [](const RangeMark& a, const RangeMark& b) { return a.start < b.start; });
    // Keep the outermost ranges: nested or repeated marks of the same iteration collapse.
    // Ranges that follow each other end to end (as the profiler writes
    // ProfilerStep#N) may overlap by a fraction of a microsecond once their
    // times are parsed: such a range is the next iteration, not the same one.
    constexpr TimeNs kTouching = 1000;
    std::vector<RangeMark> top;
    for (auto& m : marks) {
        if (!top.empty() && m.start < top.back().end && top.back().end - m.start < kTouching &&
            m.end > top.back().end + kTouching && m.start > top.back().start) {
            top.back().end = m.start;
            top.push_back(m);
            continue;
        }
        if (!top.empty() && m.start < top.back().end) {
            top.back().end = std::max(top.back().end, m.end);
            continue;
        }
        top.push_back(m);
    }
    std::vector<RankIter> iters(top.size());
    for (size_t i = 0; i < top.size(); ++i) {
        iters[i].key = top[i].key;
        iters[i].label = top[i].label;
    }
    for (uint32_t a : rd.acts) {
        const Activity& act = ctx.act(a);
        if (act.kind == ActivityKind::Sync)
            continue; // the host waiting, not GPU work
        TimeNs t = act.launchStart.value_or(act.start);
        auto it = std::upper_bound(top.begin(), top.end(), t, [](TimeNs v, const RangeMark& m) { return v < m.start; });
        if (it == top.begin())
            continue;
        --it;
        if (t >= it->end)
            continue;
        iters[static_cast<size_t>(it - top.begin())].cover(act);
    }
    std::vector<RankIter> kept;
    for (auto& ri : iters)
        if (ri.any)
            kept.push_back(std::move(ri));
    return kept;
}

// Step annotations that number microbatches (pipescope's "mb=3", torch's
// "2F3") start again from the beginning in every iteration: a forward of a
// (microbatch, chunk) already seen opens the next iteration. Returns, per
// iteration, the launch-time range of the rank's work in it: from the
// receives posted for its first step to its last collective or optimizer
// kernel (the data-parallel sync and optimizer step close an iteration).
std::vector<RangeMark> stepRestartRanges(const Context& ctx, const RankData& rd, std::vector<std::pair<CpuRange, StepLabel>>& labels)
{
    std::sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
    struct Seq {
        TimeNs first = 0, last = 0;
    };
    std::vector<Seq> seqs;
    std::set<std::pair<int, int>> seen;
    for (const auto& [r, l] : labels) {
        if (l.microbatch < 0)
            return {};
        auto key = std::make_pair(l.microbatch, std::max(l.chunk, 0));
        if (seqs.empty() || (l.kind == StepKind::F && seen.count(key))) {
            seqs.push_back({r.start, r.end});
            seen.clear();
        }
        if (l.kind == StepKind::F)
            seen.insert(key);
        seqs.back().last = std::max(seqs.back().last, r.end);
    }
    if (seqs.size() < 2)
        return {};

    // The rank's GPU work in launch order.
    std::vector<std::pair<TimeNs, uint32_t>> byLaunch;
    for (uint32_t a : rd.acts)
        if (ctx.act(a).kind != ActivityKind::Sync)
            byLaunch.push_back({ctx.act(a).launchStart.value_or(ctx.act(a).start), a});
    std::stable_sort(byLaunch.begin(), byLaunch.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    auto closesIteration = [&](uint32_t a) {
        return ctx.act(a).kind == ActivityKind::Kernel
               && (ctx.classOf(a) == WorkClass::Collective
                   || (ctx.classOf(a) == WorkClass::Compute && isOptimizerKernel(ctx.trace.str(ctx.act(a).name))));
    };
    auto at = [&](TimeNs t) {
        return static_cast<size_t>(std::lower_bound(byLaunch.begin(), byLaunch.end(), t,
                                                    [](const auto& x, TimeNs v) { return x.first < v; })
                                   - byLaunch.begin());
    };
    // Where iteration k's work begins: its first step, moved back over the
    // receives posted just before it (not over sends: they finish the previous step).
    auto lead = [&](size_t k, TimeNs notBefore) {
        TimeNs start = seqs[k].first;
        for (size_t i = at(seqs[k].first); i > 0; --i) {
            uint32_t a = byLaunch[i - 1].second;
            if (byLaunch[i - 1].first <= notBefore || ctx.classOf(a) != WorkClass::P2p || ctx.direction(a) == P2pDir::Send)
                break;
            start = byLaunch[i - 1].first;
        }
        return start;
    };
    std::vector<RangeMark> marks(seqs.size());
    std::map<StringId, int> tail; // collective and optimizer kernels after the last step of the previous iteration
    for (size_t k = 0; k < seqs.size(); ++k) {
        marks[k].key = static_cast<int64_t>(k);
        marks[k].label = "iteration " + std::to_string(k);
        if (k == 0)
            marks[k].start = lead(0, std::numeric_limits<TimeNs>::min());
        if (k + 1 < seqs.size()) {
            std::optional<TimeNs> lastClose;
            std::map<StringId, int> names;
            for (size_t i = at(seqs[k].last); i < byLaunch.size() && byLaunch[i].first < seqs[k + 1].first; ++i)
                if (closesIteration(byLaunch[i].second)) {
                    lastClose = byLaunch[i].first;
                }
            for (size_t i = at(seqs[k].last); lastClose && i < byLaunch.size() && byLaunch[i].first <= *lastClose; ++i)
                if (closesIteration(byLaunch[i].second))
                    ++names[ctx.act(byLaunch[i].second).name];
            TimeNs boundary = lastClose ? *lastClose + 1 : lead(k + 1, seqs[k].last);
            marks[k].end = boundary;
            marks[k + 1].start = boundary;
            tail = std::move(names);
        } else {
            // The last iteration ends once its tail holds what the previous one's did
            // (work after that, such as a final barrier, is not part of it).
            TimeNs end = seqs[k].last;
            std::map<StringId, int> need = tail;
            size_t i = at(seqs[k].last);
            for (; i < byLaunch.size() && !need.empty(); ++i) {
                uint32_t a = byLaunch[i].second;
                end = byLaunch[i].first + 1;
                if (closesIteration(a)) {
                    auto it = need.find(ctx.act(a).name);
                    if (it != need.end() && --it->second == 0)
                        need.erase(it);
                }
            }
            if (tail.empty())
                for (; i < byLaunch.size() && ctx.classOf(byLaunch[i].second) == WorkClass::P2p; ++i)
                    end = byLaunch[i].first + 1;
            marks[k].end = std::max(end, seqs[k].last);
        }
    }
    return marks;
}

// Kernels that run exactly once per iteration (the data-parallel collectives,
// the optimizer) repeat with a steady period; the fewest-times-repeating
// steady name gives the iteration count, and the last of those names within a
// period marks the iteration's end. Step kernels are not used: a single
// iteration's microbatches repeat just as steadily.
std::vector<RankIter> periodicIterations(const Context& ctx, const RankData& rd)
{
    std::unordered_map<StringId, bool> eligible;
    struct Stat {
        int64_t count = 0;
        TimeNs first = 0, second = 0, lastStart = 0;
        double sumGap = 0, sumGap2 = 0;
    };
    std::unordered_map<StringId, Stat> stats;
    if (rd.acts.empty())
        return {};
    for (uint32_t a : rd.acts) {
        const Activity& act = ctx.act(a);
        if (act.kind != ActivityKind::Kernel)
            continue;
        auto [el, inserted] = eligible.try_emplace(act.name, false);
        if (inserted)
            el->second = ctx.classOf(a) == WorkClass::Collective
                         || (ctx.classOf(a) == WorkClass::Compute && isOptimizerKernel(ctx.trace.str(act.name)));
        if (!el->second)
            continue;
        Stat& s = stats[act.name];
        if (s.count == 0)
            s.first = act.start;
        else {
            if (s.count == 1)
                s.second = act.start;
            double g = static_cast<double>(act.start - s.lastStart);
            s.sumGap += g;
            s.sumGap2 += g * g;
        }
        s.lastStart = act.start;
        ++s.count;
    }
    // A steady name marks iterations only when its periods hold most of the rank's compute
    // (a burst of gradient-bucket all-reduces inside one backward does not).
    const TimeNs totalBusy = totalLength(rd.busy);
    int64_t best = 0;
    double period = 0;
    for (const auto& [name, s] : stats) {
        if (s.count < 3)
            continue;
        double n = static_cast<double>(s.count - 1);
        double mean = s.sumGap / n;
        double var = std::max(0.0, s.sumGap2 / n - mean * mean);
        if (mean <= 0 || std::sqrt(var) > 0.1 * mean)
            continue;
        auto reach = static_cast<TimeNs>(mean);
        if (2 * busyWithin(rd.busy, s.first - reach, s.lastStart + reach) < totalBusy)
            continue;
        if (best == 0 || s.count < best) {
            best = s.count;
            period = mean;
        }
    }
    if (best == 0)
        return {};
    TimeNs minSecond = std::numeric_limits<TimeNs>::max();
    for (const auto& [name, s] : stats)
        if (s.count == best)
            minSecond = std::min(minSecond, s.second);
    StringId marker = 0;
    TimeNs markerFirst = std::numeric_limits<TimeNs>::min();
    for (const auto& [name, s] : stats)
        if (s.count == best && s.first < minSecond && (s.first > markerFirst || (s.first == markerFirst && name < marker))) {
            markerFirst = s.first;
            marker = name;
        }
    std::vector<TimeNs> bounds; // end of each marker occurrence
    for (uint32_t a : rd.acts)
        if (ctx.act(a).name == marker && ctx.act(a).kind == ActivityKind::Kernel)
            bounds.push_back(ctx.act(a).end);
    // Process start-up and communicator set-up precede the first iteration: it
    // begins after the longest idle stretch before its end, when that stretch
    // is longer than two periods.
    TimeNs firstStart = std::numeric_limits<TimeNs>::min();
    {
        TimeNs reached = std::numeric_limits<TimeNs>::min(), longest = 0;
        for (uint32_t a : rd.acts) {
            const Activity& act = ctx.act(a);
            if (act.kind == ActivityKind::Sync)
                continue;
            if (act.start >= bounds.front())
                break;
            if (reached != std::numeric_limits<TimeNs>::min() && act.start - reached > longest) {
                longest = act.start - reached;
                if (static_cast<double>(longest) > 2 * period)
                    firstStart = act.start;
            }
            reached = std::max(reached, act.end);
        }
    }
    std::vector<RankIter> iters(bounds.size());
    size_t k = 0;
    for (uint32_t a : rd.acts) {
        const Activity& act = ctx.act(a);
        if (act.kind == ActivityKind::Sync || act.start < firstStart)
            continue;
        while (k < bounds.size() && act.start >= bounds[k])
            ++k;
        if (k >= bounds.size())
            break;
        iters[k].cover(act);
    }
    for (size_t i = 0; i < iters.size(); ++i) {
        iters[i].key = static_cast<int64_t>(i);
        iters[i].label = "period " + std::to_string(i);
    }
    return iters;
}

// Which kind of range marks iterations: the user's name, else ProfilerStep#N, else iteration-like names.
enum Method { User = 0, ProfilerStep = 1, Named = 2 };

// The ranges that could mark iterations, by method and rank slot.
struct MarkedRanges {
    std::vector<std::vector<RangeMark>> byMethod[3];
};

bool isUserRange(const CpuRange& r)
{
    return r.kind == CpuRangeKind::Annotation || r.kind == CpuRangeKind::Nvtx || r.kind == CpuRangeKind::Other;
}

MarkedRanges collectRangeMarks(const Context& ctx, const std::string& wanted)
{
    const Trace& t = ctx.trace;
    MarkedRanges out;
    for (auto& v : out.byMethod)
        v.resize(ctx.ranks.size());
    for (const CpuRange& r : t.cpuRanges) {
        if (!isUserRange(r))
            continue;
        const RankData* rd = ctx.rankData(r.rank);
        if (!rd)
            continue;
        auto slot = static_cast<size_t>(&*rd - ctx.ranks.data());
        const std::string& name = t.str(r.name);
        int method = -1;
        if (!wanted.empty() && matchesRangeName(name, wanted))
            method = User;
        else if (isProfilerStep(name))
            method = ProfilerStep;
        else if (isIterationRangeName(name))
            method = Named;
        if (method < 0)
            continue;
        auto num = trailingNumber(name);
        RangeMark m{r.start, r.end, num ? *num : -1, name};
        out.byMethod[method][slot].push_back(std::move(m));
    }
    return out;
}

// The first method, in the order above, that marks any rank; -1 for none.
// The user's name is only looked for when given.
int chooseMethod(const MarkedRanges& marks, bool userNamed)
{
    for (int m = userNamed ? 0 : 1; m < 3; ++m)
        for (const auto& v : marks.byMethod[m])
            if (!v.empty())
                return m;
    return -1;
}

// Each rank's iterations from the chosen ranges; without a number on every
// range, they are numbered in start order per rank.
std::vector<std::vector<RankIter>> iterationsFromRanges(Context& ctx, std::vector<std::vector<RangeMark>>& byRank)
{
    std::vector<std::vector<RankIter>> perRank(ctx.ranks.size());
    bool numbered = true;
    for (size_t s = 0; s < ctx.ranks.size(); ++s)
        for (const auto& m : byRank[s])
            numbered = numbered && m.key >= 0;
    for (size_t s = 0; s < ctx.ranks.size(); ++s) {
        auto& marks = byRank[s];
        if (!numbered) {
            std::sort(marks.begin(), marks.end(), [](const RangeMark& a, const RangeMark& b) { return a.start < b.start; });
            for (size_t i = 0; i < marks.size(); ++i)
                marks[i].key = static_cast<int64_t>(i);
        }
        perRank[s] = assignToRanges(ctx, ctx.ranks[s], marks);
        if (perRank[s].empty())
            ctx.warn("rank_without_iterations", "rank " + std::to_string(ctx.ranks[s].rank)
                                                    + " has no GPU work inside the iteration ranges; it is left out of the per-iteration analysis");
    }
    return perRank;
}

// Each rank's step annotations with what their names say, in trace order.
std::vector<std::vector<std::pair<CpuRange, StepLabel>>> stepLabelsByRank(const Context& ctx)
{
    const Trace& t = ctx.trace;
    std::vector<std::vector<std::pair<CpuRange, StepLabel>>> labels(ctx.ranks.size());
    std::unordered_map<StringId, std::optional<StepLabel>> cache;
    for (const CpuRange& r : t.cpuRanges) {
        if (!isUserRange(r))
            continue;
        const RankData* rd = ctx.rankData(r.rank);
        if (!rd)
            continue;
        auto [it, inserted] = cache.try_emplace(r.name);
        if (inserted)
            it->second = parseStepLabel(t.str(r.name));
        if (it->second)
            labels[static_cast<size_t>(rd - ctx.ranks.data())].push_back({r, *it->second});
    }
    return labels;
}

// The whole of the rank's work as one iteration.
RankIter wholeTrace(const Context& ctx, const RankData& rd)
{
    RankIter ri;
    ri.any = true;
    ri.label = "whole trace";
    ri.start = ctx.act(rd.acts.front()).start;
    for (uint32_t a : rd.acts)
        ri.end = std::max(ri.end, ctx.act(a).end);
    return ri;
}

// Without iteration ranges: microbatch numbers of step annotations starting
// over, else the periodic structure; a rank where neither shows (or every
// rank, when none does) is analysed as one iteration. Fills perRank and
// returns how the iterations were found.
IterationSource iterationsWithoutRanges(Context& ctx, std::vector<std::vector<RankIter>>& perRank)
{
    IterationSource source = IterationSource::WholeTrace;
    auto labels = stepLabelsByRank(ctx);
    std::vector<std::vector<RangeMark>> restarts(ctx.ranks.size());
    bool any = false;
    for (size_t s = 0; s < ctx.ranks.size(); ++s) {
        restarts[s] = stepRestartRanges(ctx, ctx.ranks[s], labels[s]);
        any = any || !restarts[s].empty();
    }
    if (any) {
        source = IterationSource::StepRestart;
        for (size_t s = 0; s < ctx.ranks.size(); ++s)
            if (!restarts[s].empty())
                perRank[s] = assignToRanges(ctx, ctx.ranks[s], restarts[s]);
    } else {
        source = IterationSource::Periodic;
        for (size_t s = 0; s < ctx.ranks.size(); ++s) {
            perRank[s] = periodicIterations(ctx, ctx.ranks[s]);
            any = any || !perRank[s].empty();
        }
    }
    if (!any) {
        source = IterationSource::WholeTrace;
        ctx.warn("no_iterations", "no iteration markers (ProfilerStep#N, NVTX ranges) and no periodic structure were "
                                  "found; the whole trace is analysed as one iteration");
    }
    for (size_t s = 0; s < ctx.ranks.size(); ++s) {
        if (!perRank[s].empty())
            continue;
        if (any)
            ctx.warn("rank_without_iterations", std::string(source == IterationSource::Periodic ? "no periodic structure" : "no restarting step annotations")
                                                    + " was found on rank " + std::to_string(ctx.ranks[s].rank)
                                                    + "; it is analysed as one iteration");
        perRank[s].push_back(wholeTrace(ctx, ctx.ranks[s]));
    }
    return source;
}

// The job's iterations: the ranks' iterations of one key merged, spanning
// all of them, in key order.
void mergeRanks(const Context& ctx, const std::vector<std::vector<RankIter>>& perRank, IterationSource source, AnalysisResult& out)
{
    std::map<int64_t, Iteration> byKey;
    for (size_t s = 0; s < ctx.ranks.size(); ++s)
        for (const auto& ri : perRank[s]) {
            auto [it, inserted] = byKey.try_emplace(ri.key);
            Iteration& itn = it->second;
            if (inserted) {
                itn.label = ri.label;
                itn.source = source;
                itn.start = ri.start;
                itn.end = ri.end;
            }
            itn.start = std::min(itn.start, ri.start);
            itn.end = std::max(itn.end, ri.end);
            itn.ranks.push_back({ctx.ranks[s].rank, ri.start, ri.end});
        }
    for (auto& [key, itn] : byKey) {
        itn.index = static_cast<int>(out.iterations.size());
        out.iterations.push_back(std::move(itn));
    }
}

// The user's --iteration, checked, else a representative one.
void selectIteration(const AnalyzeOptions& options, AnalysisResult& out)
{
    const int n = static_cast<int>(out.iterations.size());
    if (options.iteration) {
        int k = *options.iteration;
        if (k < 0 || k >= n)
            throw Error("--iteration " + std::to_string(k) + " is out of range: the trace has " + std::to_string(n)
                        + " iteration" + (n == 1 ? "" : "s") + " (0.." + std::to_string(n - 1) + ")");
        out.selectedIteration = k;
    } else if (n > 0) {
        out.selectedIteration = representativeIteration(out.iterations);
    }
}

} // namespace

int representativeIteration(const std::vector<Iteration>& iterations)
{
    const int n = static_cast<int>(iterations.size());
    if (n == 0)
        return -1;
    // Skip the first (warm-up) when there are enough, then take the median duration.
    std::vector<int> cand;
    for (int i = n >= 3 ? 1 : 0; i < n; ++i)
        cand.push_back(i);
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) {
        return iterations[static_cast<size_t>(a)].end - iterations[static_cast<size_t>(a)].start
               < iterations[static_cast<size_t>(b)].end - iterations[static_cast<size_t>(b)].start;
    });
    return cand[(cand.size() - 1) / 2];
}

void detectIterations(Context& ctx, AnalysisResult& out)
{
    const std::string& wanted = ctx.options.iterationRange;
    MarkedRanges marks = collectRangeMarks(ctx, wanted);
    const int chosen = chooseMethod(marks, !wanted.empty());
    if (!wanted.empty() && chosen != User)
        ctx.warn("iteration_range_not_found", "no annotation or NVTX range named '" + wanted
                                                  + "' was found; iterations were detected another way");

    std::vector<std::vector<RankIter>> perRank(ctx.ranks.size());
    IterationSource source = IterationSource::WholeTrace;
    if (chosen >= 0) {
        source = chosen == ProfilerStep ? IterationSource::ProfilerStep : IterationSource::Range;
        perRank = iterationsFromRanges(ctx, marks.byMethod[chosen]);
    } else {
        source = iterationsWithoutRanges(ctx, perRank);
    }
    mergeRanks(ctx, perRank, source, out);
    selectIteration(ctx.options, out);
}

} // namespace pipescope::detail
