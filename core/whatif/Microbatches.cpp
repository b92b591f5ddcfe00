#include "whatif/Microbatches.h"

#include "util/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace pipescope::whatif {

namespace {

double quantile(std::vector<double> v, double q)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

TimeNs mean(TimeNs total, int n)
{
    return n > 0 ? static_cast<TimeNs>(std::llround(static_cast<double>(total) / n)) : 0;
}

} // namespace

MicrobatchStudy studyMicrobatches(const CostModel& model, const Scenario& scenario)
{
    MicrobatchStudy st;
    st.microbatches = scenario.microbatches;
    if (!model.unevenFor(scenario.microbatches, MicrobatchOrder::Given))
        return st;
    st.applies = true;
    st.source = model.microbatchSizes->source;
    st.size = model.microbatchSizes->size();
    st.spread = model.microbatchSizes->spread();
    st.minSize = *std::min_element(st.size.begin(), st.size.end());
    st.maxSize = *std::max_element(st.size.begin(), st.size.end());
    st.p50Size = quantile(st.size, 0.5);
    st.p95Size = quantile(st.size, 0.95);

    const Schedule schedule = scheduleFor(model, scenario);
    const Partition partition = partitionFor(model, scenario, schedule.stages);
    Replay replay;
    ReplayOptions fast;
    fast.timeline = false;
    auto run = [&](const ReplayCosts& costs) { return replay.run(schedule, costs, fast); };

    const ReplayResult given = run(model.replayCosts(partition, schedule, MicrobatchOrder::Given));
    const ReplayCosts equalCosts = model.replayCosts(partition, schedule, MicrobatchOrder::Equal);
    const ReplayResult equal = run(equalCosts);
    // Equal stages: every virtual stage the mean stage, the same total work.
    ReplayCosts balancedCosts = equalCosts;
    {
        TimeNs f = 0, b = 0, i = 0, w = 0;
        for (const StageCost& c : equalCosts.stages) {
            f += c.forward;
            b += c.backward;
            i += c.backwardInput;
            w += c.backwardWeight;
        }
        const int S = static_cast<int>(equalCosts.stages.size());
        for (StageCost& c : balancedCosts.stages)
            c = StageCost{mean(f, S), mean(b, S), mean(i, S), mean(w, S)};
        // The end-of-iteration work, too, as the ranks' mean.
        auto flatten = [](std::vector<TimeNs>& v) {
            TimeNs total = 0;
            for (TimeNs t : v)
                total += t;
            const TimeNs m = mean(total, static_cast<int>(v.size()));
            std::fill(v.begin(), v.end(), m);
        };
        flatten(balancedCosts.allReduceNs);
        flatten(balancedCosts.optimizerNs);
    }
    const ReplayResult balanced = run(balancedCosts);
    st.givenNs = given.iterationNs;
    st.equalNs = equal.iterationNs;
    st.balancedNs = balanced.iterationNs;
    st.spreadCostNs = st.givenNs - st.equalNs;
    st.imbalanceCostNs = st.equalNs - st.balancedNs;
    for (size_t r = 0; r < given.ranks.size(); ++r) {
        // Waiting between a rank's first and last step: what a neighbour's
        // long microbatch or a slow stage makes it do. (Idle to the
        // iteration's end differs by the same amount on every rank.)
        auto waits = [&](const ReplayResult& x) {
            const auto& acts = x.ranks[r].actions;
            if (acts.empty())
                return TimeNs{0};
            TimeNs busy = 0;
            for (const TimedAction& a : acts)
                busy += a.end - a.start;
            return acts.back().end - acts.front().start - busy;
        };
        MicrobatchRankIdle ri;
        ri.rank = static_cast<int>(r);
        ri.idleNs = waits(given);
        ri.spreadNs = waits(given) - waits(equal);
        ri.imbalanceNs = waits(equal) - waits(balanced);
        ri.scheduleNs = waits(balanced);
        st.ranks.push_back(ri);
    }
    st.orders.push_back({MicrobatchOrder::Given, st.givenNs, 0});
    for (MicrobatchOrder o : {MicrobatchOrder::LongestFirst, MicrobatchOrder::ShortestFirst, MicrobatchOrder::LongShort}) {
        const TimeNs t = run(model.replayCosts(partition, schedule, o)).iterationNs;
        st.orders.push_back({o, t, st.givenNs - t});
        if (st.givenNs - t > st.bestGainNs) {
            st.bestGainNs = st.givenNs - t;
            st.bestOrder = o;
        }
    }
    st.orders.push_back({MicrobatchOrder::Equal, st.equalNs, st.givenNs - st.equalNs});
    return st;
}

std::string microbatchStudyText(const MicrobatchStudy& st)
{
    if (!st.applies)
        return {};
    std::ostringstream o;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.2fx to %.2fx of the mean (p50 %.2fx, p95 %.2fx, CV %.2f)", st.minSize, st.maxSize,
                  st.p50Size, st.p95Size, st.spread);
    const std::string from = st.source == SizeSource::Trace    ? "as measured"
                             : st.source == SizeSource::Tokens ? "from the tokens file"
                                                               : std::string(toString(st.source));
    o << "uneven microbatches (" << st.microbatches << ", sizes " << from << "): " << buf << "\n";
    auto share = [&](TimeNs t) { return st.givenNs > 0 ? formatPercent(static_cast<double>(t) / static_cast<double>(st.givenNs)) : std::string("-"); };
    o << "  the spread costs " << formatDuration(st.spreadCostNs) << " per iteration (" << share(st.spreadCostNs)
      << "): equal microbatches would take " << formatDuration(st.equalNs) << " instead of " << formatDuration(st.givenNs)
      << "\n";
    o << "  stage imbalance costs " << formatDuration(st.imbalanceCostNs) << " more (" << share(st.imbalanceCostNs)
      << "): equal stages too would take " << formatDuration(st.balancedNs) << "\n";
    o << "  waits between each rank's first and last step:\n";
    TextTable t({"rank", ">waits", ">from spread", ">from imbalance", ">from schedule"});
    for (const MicrobatchRankIdle& r : st.ranks)
        t.add({std::to_string(r.rank), formatDuration(r.idleNs), formatDuration(r.spreadNs), formatDuration(r.imbalanceNs),
               formatDuration(r.scheduleNs)});
    o << t.render("    ");
    o << "  orders:";
    for (const MicrobatchOrderRow& r : st.orders)
        if (r.order != MicrobatchOrder::Equal)
            o << "  " << toString(r.order) << " " << formatDuration(r.iterationNs);
    o << "\n";
    if (st.bestGainNs > 0)
        o << "  running them " << toString(st.bestOrder) << " saves " << formatDuration(st.bestGainNs) << " ("
          << share(st.bestGainNs) << ")\n";
    else
        o << "  no reordering beats the given order\n";
    return o.str();
}

nlohmann::json microbatchStudyToJson(const MicrobatchStudy& st)
{
    nlohmann::json j;
    j["applies"] = st.applies;
    j["microbatches"] = st.microbatches;
    if (!st.applies)
        return j;
    j["source"] = toString(st.source);
    j["size"] = st.size;
    j["spread_cv"] = st.spread;
    j["size_min"] = st.minSize;
    j["size_p50"] = st.p50Size;
    j["size_p95"] = st.p95Size;
    j["size_max"] = st.maxSize;
    j["given_ns"] = st.givenNs;
    j["equal_ns"] = st.equalNs;
    j["balanced_ns"] = st.balancedNs;
    j["spread_cost_ns"] = st.spreadCostNs;
    j["imbalance_cost_ns"] = st.imbalanceCostNs;
    nlohmann::json ranks = nlohmann::json::array();
    for (const MicrobatchRankIdle& r : st.ranks)
        ranks.push_back({{"rank", r.rank},
                         {"idle_ns", r.idleNs},
                         {"spread_ns", r.spreadNs},
                         {"imbalance_ns", r.imbalanceNs},
                         {"schedule_ns", r.scheduleNs}});
    j["ranks"] = std::move(ranks);
    nlohmann::json orders = nlohmann::json::array();
    for (const MicrobatchOrderRow& r : st.orders)
        orders.push_back({{"order", std::string(toString(r.order))}, {"iteration_ns", r.iterationNs}, {"gain_ns", r.gainNs}});
    j["orders"] = std::move(orders);
    j["best_order"] = std::string(toString(st.bestOrder));
    j["best_gain_ns"] = st.bestGainNs;
    return j;
}

} // namespace pipescope::whatif
