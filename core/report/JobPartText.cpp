#include "report/JobPartText.h"

#include "util/Format.h"

namespace pipescope::report {

void printReplicaOverview(std::ostream& os, const JobOverview& ov, const std::optional<BusiestReplica>& busiest,
                          const std::string& file, bool suggest)
{
    os << "\nStages across replicas in " << ov.iteration
       << " (from the job index: each shard's analysis of its pipelines; medians over the replicas)\n";
    TextTable t({">stage", ">replicas", ">iteration", ">busy min", ">busy median", ">busy max", ">busiest", ">idlest",
                 ">fill/drain", ">wait neighbor", ">p2p", ">dp sync", ">other idle"});
    for (const StageReplicas& st : ov.stages) {
        auto cause = [&](BubbleCause c) { return st.idleMedian[static_cast<size_t>(c)]; };
        const TimeNs other = cause(BubbleCause::AllToAll) + cause(BubbleCause::HostBound) + cause(BubbleCause::StepOverhead) +
                            cause(BubbleCause::LaunchGap) + cause(BubbleCause::Other);
        t.add({std::to_string(st.stage), std::to_string(st.replicas), formatDuration(st.windowNs), formatDuration(st.busyMin),
               formatDuration(st.busyMedian), formatDuration(st.busyMax), "rank " + std::to_string(st.busiestRank),
               "rank " + std::to_string(st.idlestRank), formatDuration(cause(BubbleCause::FillDrain)),
               formatDuration(cause(BubbleCause::WaitNeighbor)), formatDuration(cause(BubbleCause::P2pTransfer)),
               formatDuration(cause(BubbleCause::DpSync)), formatDuration(other)});
    }
    os << t.render();
    if (busiest) {
        os << "The busiest replica: rank " << busiest->rank << " (stage " << busiest->stage << ", busy "
           << formatDuration(busiest->busyNs) << ")";
        if (suggest && !busiest->pipeline.empty())
            os << "; its pipeline alone: pipescope analyze " << file << " --ranks " << rankListText(busiest->pipeline);
        os << "\n";
    }
}

nlohmann::json replicaOverviewJson(const JobOverview& ov, const std::optional<BusiestReplica>& busiest)
{
    nlohmann::json stages = nlohmann::json::array();
    for (const StageReplicas& st : ov.stages) {
        nlohmann::json idle = nlohmann::json::object();
        for (int c = 0; c < kBubbleCauses; ++c)
            idle[std::string(toString(static_cast<BubbleCause>(c)))] = st.idleMedian[static_cast<size_t>(c)];
        stages.push_back({{"stage", st.stage}, {"replicas", st.replicas}, {"window_ns", st.windowNs},
                          {"busy_min_ns", st.busyMin}, {"busy_median_ns", st.busyMedian}, {"busy_max_ns", st.busyMax},
                          {"busiest_rank", st.busiestRank}, {"idlest_rank", st.idlestRank}, {"idle_median_ns_by_cause", idle}});
    }
    nlohmann::json b = nullptr;
    if (busiest)
        b = {{"rank", busiest->rank}, {"stage", busiest->stage}, {"busy_ns", busiest->busyNs}, {"pipeline", busiest->pipeline}};
    return {{"iteration", ov.iteration}, {"ranks", ov.ranks}, {"stages", stages}, {"busiest_replica", b}};
}

std::string indexStragglerText(const IndexStraggler& s)
{
    return "straggler across replicas: rank " + std::to_string(s.rank) + " (stage " + std::to_string(s.stage) + ") busy " +
           formatDuration(s.busyNs) + ", " + formatSignedPercent(s.relative - 1.0) + " over its stage's median " +
           formatDuration(s.medianNs);
}

void printJobPart(std::ostream& os, const JobPart& part, const std::string& file)
{
    if (!part.partial())
        return;
    os << "Read in part: " << describeRanksRead(part) << ".\n";
    if (part.chosen)
        os << "  The whole job (" << formatCount(part.jobActivities)
           << " GPU activities) is more than is read at once; --ranks all reads every rank, --ranks LIST others.\n";
    if (!part.overview) {
        os << "  What follows is of these ranks only.\n\n";
        return;
    }
    os << "  What follows is of these ranks; the other replicas are summarised from the job index.\n";
    printReplicaOverview(os, *part.overview, part.busiest, file, !part.busiest || part.busiest->pipeline != part.loadedRanks);
    for (const IndexStraggler& s : indexStragglers(*part.overview))
        os << "  " << indexStragglerText(s) << "\n";
    os << "\n";
}

nlohmann::json jobPartJson(const JobPart& part)
{
    if (!part.partial())
        return nullptr;
    nlohmann::json stragglers = nlohmann::json::array();
    if (part.overview)
        for (const IndexStraggler& s : indexStragglers(*part.overview))
            stragglers.push_back({{"stage", s.stage}, {"rank", s.rank}, {"busy_ns", s.busyNs}, {"median_ns", s.medianNs},
                                  {"relative", s.relative}});
    return {{"ranks", part.jobRanks},
            {"read", part.loadedRanks},
            {"chosen", part.chosen},
            {"stages_across_replicas", part.overview ? replicaOverviewJson(*part.overview, part.busiest) : nlohmann::json(nullptr)},
            {"stragglers", stragglers},
            {"replica_pace", part.replicaPace}};
}

} // namespace pipescope::report
