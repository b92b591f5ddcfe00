// pipescope info FILE [--json]
#include "Command.h"
#include "RankSelection.h"
#include "analysis/JobSummaries.h"
#include "report/JobPartText.h"
#include "util/JsonText.h"
#include "store/Store.h"
#include "util/Error.h"
#include "util/Format.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

namespace pipescope::cli {
namespace {

using nlohmann::json;

json optJson(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

json infoJson(const std::string& path, const StoreSummary& s)
{
    json j;
    j["schema"] = "pipescope.info/1";
    j["file"] = path;
    j["store_schema_version"] = s.schemaVersion;
    auto meta = [&](const char* k) { auto it = s.meta.find(k); return it == s.meta.end() ? json(nullptr) : json(it->second); };
    j["created_by"] = meta("created_by");
    j["created_at"] = meta("created_at");
    j["simulated"] = s.meta.count("simulated") && s.meta.at("simulated") == "1";
    for (const auto& src : s.sources)
        j["sources"].push_back({{"id", src.id}, {"path", src.path}, {"format", src.format},
                                {"rank", src.rank ? json(*src.rank) : json(nullptr)}, {"time_base_ns", src.timeBase},
                                {"clock_offset_ns", src.clockOffset}, {"alignment", src.alignment}});
    for (const auto& r : s.ranks)
        j["ranks"].push_back({{"rank", r.rank}, {"world_size", r.worldSize ? json(*r.worldSize) : json(nullptr)},
                              {"host", r.host}, {"pid", optJson(r.pid)},
                              {"device", r.device ? json(*r.device) : json(nullptr)}});
    for (const auto& g : s.gpus)
        j["gpus"].push_back({{"rank", g.rank}, {"device", g.device}, {"name", g.name},
                             {"memory_bytes", optJson(g.memoryBytes)},
                             {"sm_count", g.smCount ? json(*g.smCount) : json(nullptr)}});
    for (const auto& st : s.streams) {
        json c = json::object();
        if (auto it = s.streamCounts.find(st.id); it != s.streamCounts.end())
            for (int k = 0; k < 4; ++k)
                c[std::string(toString(static_cast<ActivityKind>(k)))] = it->second[static_cast<size_t>(k)];
        j["streams"].push_back({{"id", st.id}, {"rank", st.rank}, {"device", st.device}, {"stream", st.stream},
                                {"name", st.name}, {"counts", c}});
    }
    j["activities"] = json::object();
    for (const auto& [k, n] : s.activityCounts)
        j["activities"][k] = n;
    j["nccl_ops"] = json::object();
    for (const auto& [k, n] : s.ncclCounts)
        j["nccl_ops"][k] = n;
    j["cpu_ranges"] = json::object();
    for (const auto& [k, n] : s.cpuRangeCounts)
        j["cpu_ranges"][k] = n;
    j["first_ns"] = optJson(s.first);
    j["last_ns"] = optJson(s.last);
    j["span_ns"] = s.first && s.last ? json(*s.last - *s.first) : json(nullptr);
    for (const auto& g : s.gpuSummaries)
        j["gpu_busy"].push_back({{"rank", g.rank}, {"device", g.device}, {"kernels", g.kernels},
                                 {"kernel_first_ns", optJson(g.kernelFirst)}, {"kernel_last_ns", optJson(g.kernelLast)},
                                 {"kernel_busy_ns", g.kernelBusy}, {"gpu_first_ns", optJson(g.gpuFirst)},
                                 {"gpu_last_ns", optJson(g.gpuLast)}, {"gpu_busy_ns", g.gpuBusy}});
    j["diagnostics"] = json::array();
    for (const auto& d : s.diagnostics)
        j["diagnostics"].push_back({{"source_id", optJson(d.sourceId)}, {"severity", toString(d.severity)},
                                    {"kind", d.kind}, {"count", d.count}, {"example", d.example}});
    return j;
}

// What was added to a source's times: its time base (an absolute time, named
// as such), the time base plus a shift by collectives, or a plain shift.
std::string offsetText(TimeNs offset, TimeNs timeBase)
{
    constexpr TimeNs kLargestShift = 100LL * 24 * 3600 * 1'000'000'000; // 100 days: beyond, no clock shift but a time
    if (timeBase != 0 && offset == timeBase)
        return "time base";
    if (timeBase != 0 && offset - timeBase > -kLargestShift && offset - timeBase < kLargestShift &&
        (offset > kLargestShift || offset < -kLargestShift))
        return "time base " + formatShift(offset - timeBase);
    if (offset > kLargestShift || offset < -kLargestShift)
        return formatEpochTime(offset);
    return formatShift(offset);
}

// Median, least and most of a non-empty list of (value, rank), for a line that
// stands for a table left out.
struct Spread {
    double min = 0, median = 0, max = 0;
    int minRank = 0, maxRank = 0;
};
Spread spreadOf(std::vector<std::pair<double, int>> v)
{
    std::sort(v.begin(), v.end());
    return {v.front().first, v[v.size() / 2].first, v.back().first, v.front().second, v.back().second};
}

void printInfo(const std::string& path, const StoreSummary& s, bool all)
{
    auto meta = [&](const char* k) { auto it = s.meta.find(k); return it == s.meta.end() ? std::string("?") : it->second; };
    std::cout << path << "  (store schema " << s.schemaVersion << ", written by " << meta("created_by") << " on "
              << meta("created_at") << ")\n";
    if (s.meta.count("simulated") && s.meta.at("simulated") == "1")
        std::cout << "NOTE: SIMULATED trace (generated by " << meta("simulated_by")
                  << "), not a measurement of real hardware.\n";

    std::cout << "\nSources\n";
    TextTable src({">id", "format", ">rank", "path", "time base", ">clock offset", "alignment"});
    // In rank order (rank-2 before rank-10), then by path; files of no rank last.
    std::vector<const SourceInfo*> sources;
    for (const auto& x : s.sources)
        sources.push_back(&x);
    std::stable_sort(sources.begin(), sources.end(), [](const SourceInfo* a, const SourceInfo* b) {
        return std::make_tuple(!a->rank, a->rank.value_or(0), a->path) < std::make_tuple(!b->rank, b->rank.value_or(0), b->path);
    });
    const RowLimit srcRows(sources.size(), all);
    for (size_t i = 0; i < sources.size() && srcRows.show(i); ++i) {
        const SourceInfo& x = *sources[i];
        src.add({std::to_string(x.id), x.format, x.rank ? std::to_string(*x.rank) : "-", x.path,
                 x.timeBase != 0 ? formatEpochTime(x.timeBase) : "-", offsetText(x.clockOffset, x.timeBase),
                 x.alignment});
    }
    std::cout << src.render() << srcRows.more("sources", "--all lists every one");

    std::cout << "\nRanks (" << s.ranks.size() << ")\n";
    TextTable ranks({">rank", ">world", "host", ">pid", ">device", "GPU"});
    const RowLimit rankRows(s.ranks.size(), all);
    for (size_t i = 0; i < s.ranks.size() && rankRows.show(i); ++i) {
        const RankInfo& r = s.ranks[i];
        std::string gpu;
        for (const auto& g : s.gpus)
            if (g.rank == r.rank && (!r.device || g.device == *r.device) && !g.name.empty())
                gpu = g.name + (g.memoryBytes ? " (" + formatBytes(*g.memoryBytes) + ")" : "");
        ranks.add({std::to_string(r.rank), r.worldSize ? std::to_string(*r.worldSize) : "-", r.host.empty() ? "-" : r.host,
                   r.pid ? std::to_string(*r.pid) : "-", r.device ? std::to_string(*r.device) : "-", gpu.empty() ? "-" : gpu});
    }
    std::cout << ranks.render() << rankRows.more("ranks", "--all lists every one");

    std::cout << "\nStreams (" << s.streams.size() << ")\n";
    TextTable streams({">rank", ">device", ">stream", ">kernels", ">memcpy", ">memset", ">sync"});
    const RowLimit streamRows(s.streams.size(), all);
    for (size_t i = 0; i < s.streams.size() && streamRows.show(i); ++i) {
        const StreamInfo& st = s.streams[i];
        std::array<int64_t, 4> c{};
        if (auto it = s.streamCounts.find(st.id); it != s.streamCounts.end())
            c = it->second;
        streams.add({std::to_string(st.rank), std::to_string(st.device), std::to_string(st.stream), formatCount(c[0]),
                     formatCount(c[1]), formatCount(c[2]), formatCount(c[3])});
    }
    std::cout << streams.render() << streamRows.more("streams", "--all lists every one");

    std::cout << "\nGPU activities:";
    for (const auto& [k, n] : s.activityCounts)
        std::cout << "  " << k << " " << formatCount(n);
    std::cout << "\nNCCL operations:";
    if (s.ncclCounts.empty())
        std::cout << "  none";
    for (const auto& [k, n] : s.ncclCounts)
        std::cout << "  " << k << " " << formatCount(n);
    std::cout << "\nCPU ranges:";
    if (s.cpuRangeCounts.empty())
        std::cout << "  none";
    for (const auto& [k, n] : s.cpuRangeCounts)
        std::cout << "  " << k << " " << formatCount(n);
    std::cout << "\n";
    if (s.first && s.last)
        std::cout << "Time span: " << formatDuration(*s.last - *s.first) << " (GPU activity, all ranks)\n";

    std::cout << "\nGPU busy time (union of intervals over all streams of a GPU)\n";
    TextTable busy({">rank", ">device", ">kernels", ">kernel span", ">kernel busy", ">busy %", ">busy incl. copies"});
    const RowLimit busyRows(s.gpuSummaries.size(), all);
    std::vector<std::pair<double, int>> busyShare; // kernel busy over kernel span, per GPU with kernels
    for (size_t i = 0; i < s.gpuSummaries.size(); ++i) {
        const GpuSummary& g = s.gpuSummaries[i];
        TimeNs span = g.kernelFirst && g.kernelLast ? *g.kernelLast - *g.kernelFirst : 0;
        if (span > 0)
            busyShare.emplace_back(double(g.kernelBusy) / double(span), g.rank);
        if (!busyRows.show(i))
            continue;
        busy.add({std::to_string(g.rank), std::to_string(g.device), formatCount(g.kernels), formatDuration(span),
                  formatDuration(g.kernelBusy), span > 0 ? formatPercent(double(g.kernelBusy) / double(span)) : "-",
                  formatDuration(g.gpuBusy)});
    }
    std::cout << busy.render() << busyRows.more("GPUs", "--all lists every one");
    if (busyRows.cut() && !busyShare.empty()) {
        const Spread sp = spreadOf(busyShare);
        std::cout << "  busy % over all " << formatCount(static_cast<int64_t>(busyShare.size())) << " GPUs with kernels: least "
                  << formatPercent(sp.min) << " (rank " << sp.minRank << "), median " << formatPercent(sp.median) << ", most "
                  << formatPercent(sp.max) << " (rank " << sp.maxRank << ")\n";
    }

    if (!s.diagnostics.empty()) {
        std::cout << "\nImport diagnostics (records skipped or repaired)\n";
        if (all || s.diagnostics.size() <= kRowsWhole) {
            TextTable d({"severity", "kind", ">count", "example"});
            for (const auto& x : s.diagnostics)
                d.add({std::string(toString(x.severity)), x.kind, formatCount(x.count), x.example});
            std::cout << d.render();
        } else {
            // One row per kind, over all the files that reported it.
            struct Kind {
                int64_t count = 0, files = 0;
                std::string example;
            };
            std::map<std::pair<int, std::string>, Kind> kinds; // (severity, kind), most severe first
            for (const auto& x : s.diagnostics) {
                Kind& k = kinds[{-static_cast<int>(x.severity), x.kind}];
                k.count += x.count;
                ++k.files;
                if (k.example.empty())
                    k.example = x.example;
            }
            TextTable d({"severity", "kind", ">count", ">reports", "example"});
            for (const auto& [key, k] : kinds)
                d.add({std::string(toString(static_cast<Severity>(-key.first))), key.second, formatCount(k.count), formatCount(k.files),
                       k.example});
            std::cout << d.render() << "  (" << formatCount(static_cast<int64_t>(s.diagnostics.size()))
                      << " reports, one row per kind; --all lists each)\n";
        }
    }
}

// A sharded job's stages across their replicas, from the index alone.
void printOverview(const JobIndex& job, const std::string& file)
{
    if (const auto ov = overviewFromIndex(job))
        report::printReplicaOverview(std::cout, *ov, busiestReplica(job, *ov), file);
}

nlohmann::json overviewJson(const JobIndex& job)
{
    const auto ov = overviewFromIndex(job);
    if (!ov)
        return nullptr;
    return report::replicaOverviewJson(*ov, busiestReplica(job, *ov));
}

RegisterCommand reg{{"info", "Summarise a store: ranks, GPUs, streams, counts, time span, GPU busy time", 20,
                     [](CLI::App& app) -> RunFn {
                         auto file = std::make_shared<std::string>();
                         auto asJson = std::make_shared<bool>(false);
                         app.add_option("file", *file, "Store file (.pipescope) or sharded job folder")->required();
                         app.add_flag("--json", *asJson, "Print JSON (schema pipescope.info/1) instead of tables");
                         auto all = std::make_shared<bool>(false);
                         app.add_flag("--all", *all, "List every row of every table (by default a table of more than 40 rows shows 16)");
                         return [file, asJson, all] {
                             Store store(*file);
                             auto s = store.summary();
                             const JobIndex* job = store.jobIndex();
                             if (*asJson) {
                                 nlohmann::json doc = infoJson(*file, s);
                                 if (job) {
                                     nlohmann::json shards = nlohmann::json::array();
                                     for (const ShardRecord& r : job->records)
                                         shards.push_back({{"index", r.index}, {"file", r.file}, {"ranks", r.ranks},
                                                           {"records", r.records}, {"input_bytes", r.inputBytes}});
                                     doc["shards"] = shards;
                                     doc["grouped_by"] = job->groupedBy;
                                     doc["stages_across_replicas"] = overviewJson(*job);
                                 }
                                 std::cout << jsonText(doc, 2) << "\n";
                             } else {
                                 printInfo(*file, s, *all);
                                 if (job) {
                                     std::cout << "\nSharded job: " << job->shards << " shards, grouped by " << job->groupedBy << "\n";
                                     TextTable t({">shard", "file", ">ranks", ">records", ">input"});
                                     const RowLimit shardRows(job->records.size(), *all);
                                     for (size_t i = 0; i < job->records.size() && shardRows.show(i); ++i) {
                                         const ShardRecord& r = job->records[i];
                                         t.add({std::to_string(r.index), r.file.empty() ? "-" : r.file,
                                                std::to_string(r.ranks.size()), formatCount(r.records), formatBytes(r.inputBytes)});
                                     }
                                     std::cout << t.render() << shardRows.more("shards", "--all lists every one");
                                     printOverview(*job, *file);
                                     // What analyze, report and whatif will read of it by default.
                                     const ReadPlan plan = planRead(store, {}, commandLimits(""));
                                     const int64_t need = plan.jobActivities * kAnalysisBytesPerActivity;
                                     if (plan.chosen)
                                         std::cout << "analyze, report and whatif read the pipeline of its busiest replica (ranks "
                                                   << rankListShort(plan.ranks) << "): the whole job would need about "
                                                   << formatBytes(need) << ", beyond their budget; --ranks all reads it whole\n";
                                     else
                                         std::cout << "analyze, report and whatif read the whole job (about " << formatBytes(need)
                                                   << " of memory)\n";
                                 }
                             }
                             return kExitOk;
                         };
                     }}};

} // namespace
} // namespace pipescope::cli
