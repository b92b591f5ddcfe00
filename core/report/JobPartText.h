#pragma once
// What every front end says of a sharded job beyond the ranks it read: each
// stage across all its replicas from the job index (`pipescope info`, and
// `analyze` and `report` of a job read in part), and, for a job read in
// part, which ranks were read and why, and the stragglers the index shows
// among the replicas that were not.
#include "analysis/JobPart.h"

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>

namespace pipescope::report {

// "Stages across replicas in ProfilerStep#3 (...)" and its table, then the
// busiest replica and (suggest) the command that analyses its pipeline alone.
void printReplicaOverview(std::ostream& os, const JobOverview& overview, const std::optional<BusiestReplica>& busiest,
                          const std::string& file, bool suggest = true);
nlohmann::json replicaOverviewJson(const JobOverview& overview, const std::optional<BusiestReplica>& busiest);

// For a job read in part: "Read in part: 4 of 1024 ranks (...)", the
// stages across replicas and the index's stragglers. Nothing for a job
// read whole.
void printJobPart(std::ostream& os, const JobPart& part, const std::string& file);
// {"ranks": 1024, "read": [...], "chosen": true, "stages_across_replicas": ...,
//  "stragglers": [...], "replica_pace": [...]}; null for a job read whole.
nlohmann::json jobPartJson(const JobPart& part);

// The straggler lines alone: "  straggler across replicas: rank 9 (stage 1)
// busy 12.0 ms, +9.1% over its stage's median 11.0 ms".
std::string indexStragglerText(const IndexStraggler& s);

} // namespace pipescope::report
