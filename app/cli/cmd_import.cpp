// pipescope import INPUTS... -o job.pipescope
#include "Command.h"
#include "NumberChecks.h"
#include "import/Import.h"
#include "analysis/JobSummaries.h"
#include "import/ShardedImport.h"
#include "store/Sqlite.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/Limits.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

namespace pipescope::cli {
namespace {

struct ImportArgs {
    std::vector<std::string> inputs;
    std::string output;
    std::string align = "time-base";
    std::optional<int> rank;
    bool quiet = false;
    bool shortNames = false;
    int jobs = 0;
    std::string shard;    // --shard K/N
    std::optional<int> shards; // --shards N
};

// Per rank, the time base its file's times were put on (an absolute time)
// and, with --align collectives, the shift added to it (a duration).
TextTable offsetTable(const ImportJobReport& report)
{
    const bool collectives = report.alignmentUsed == Alignment::Collectives;
    TextTable t(collectives ? std::vector<std::string>{">rank", "time base", ">shift by collectives"}
                            : std::vector<std::string>{">rank", "time base"});
    for (auto [r, offset] : report.offsets) {
        const ImportedSource* src = nullptr;
        for (const auto& s : report.sources)
            if (std::find(s.ranks.begin(), s.ranks.end(), r) != s.ranks.end())
                src = &s;
        const TimeNs base = src ? src->timeBase : 0;
        std::string baseText = base != 0              ? formatEpochTime(base)
                               : src && src->absoluteClock ? "none needed (times are absolute)"
                                                           : "none (the file's own clock)";
        if (collectives)
            t.add({std::to_string(r), baseText, formatShift(offset - base)});
        else
            t.add({std::to_string(r), baseText});
    }
    return t;
}

std::string rankList(const std::vector<int>& ranks)
{
    // Runs of consecutive ranks as a-b.
    std::string out;
    for (size_t i = 0; i < ranks.size();) {
        size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
            ++j;
        out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
        i = j + 1;
    }
    if (out.size() > 40) // a shard of many pipelines: its first and last ranks
        out = out.substr(0, out.find(',', out.find(',') + 1)) + ",...," + std::to_string(ranks.back()) + " (" +
              std::to_string(ranks.size()) + " ranks)";
    return out.empty() ? "-" : out;
}

// A large job imported into one store by one process: tell of sharding once.
void suggestShards(const ImportJobOptions& o)
{
    constexpr uint64_t kLarge = 2'000'000'000;
    std::vector<std::string> warnings;
    uint64_t bytes = 0;
    try {
        for (const auto& f : expandTraceInputs(o.inputs, warnings)) {
            std::error_code ec;
            const auto size = std::filesystem::file_size(f, ec);
            if (ec)
                return; // a pipe or device: its size is not known before it is read
            bytes += size;
        }
    } catch (const Error&) {
        return; // the import itself says what is wrong
    }
    const unsigned cores = std::thread::hardware_concurrency();
    if (bytes < kLarge || cores < 2)
        return;
    std::cerr << "pipescope import: note: " << formatBytes(static_cast<int64_t>(bytes)) << " of traces; `--shards " << cores
              << "` would import them in " << cores << " processes side by side into a job folder (docs/scale.md)\n";
}

TextTable shardTable(const JobIndex& index)
{
    TextTable t({">shard", "ranks", ">files", ">records", ">MB/s", ">seconds", ">peak memory", "host"});
    for (const ShardRecord& r : index.records) {
        char rate[32], secs[32];
        std::snprintf(rate, sizeof rate, "%.0f", r.seconds > 0 ? static_cast<double>(r.inputBytes) / 1e6 / r.seconds : 0.0);
        std::snprintf(secs, sizeof secs, "%.1f", r.seconds);
        t.add({std::to_string(r.index), r.ok ? rankList(r.ranks) : "failed", std::to_string(r.inputs.size()),
               formatCount(r.records), rate, secs, formatBytes(r.peakRssBytes), r.host});
    }
    return t;
}

void printJobState(const std::string& folder, const JobIndex& index, int tasksEnded = -1)
{
    if (index.complete()) {
        std::cout << "The job is complete: " << index.shards << (index.shards == 1 ? " shard" : " shards")
                  << ", grouped by " << index.groupedBy << "\n";
        if (!index.shardClockOffsets.empty()) {
            std::cout << "Clocks across shards, by the operations they share (added to each shard's times):\n";
            TextTable t({">shard", ">shift"});
            for (size_t k = 0; k < index.shardClockOffsets.size(); ++k)
                t.add({std::to_string(k), formatShift(index.shardClockOffsets[k])});
            std::cout << t.render();
        }
        std::cout << "Next: pipescope info " << folder << "   or   pipescope analyze " << folder << "\n";
    } else if (index.failed().empty()) {
        const size_t n = tasksEnded >= 0 ? static_cast<size_t>(index.shards - tasksEnded) : index.missing().size();
        std::cout << "Waiting for the tasks of " << n << (n == 1 ? " more shard" : " more shards") << "; the last to finish completes "
                  << folder << "/" << kJobIndexName << "\n";
    }
}

// Records the importers skipped are counted in the store's diagnostics;
// say so at the end of the import, and always name a skipped iteration
// marker (ProfilerStep#N): the job then has one iteration fewer.
void tellSkippedRecords(const std::string& store, bool quiet)
{
    sql::Database db(store, sql::Database::Mode::ReadOnly);
    auto st = db.prepare("SELECT kind, SUM(count), MIN(example) FROM diagnostics WHERE severity = 'warning' OR kind = "
                         "'skipped:iteration_marker' GROUP BY kind ORDER BY kind");
    std::string kinds;
    int64_t total = 0;
    while (st.step()) {
        const std::string kind = st.string(0);
        if (kind == "skipped:iteration_marker") {
            std::cerr << "pipescope import: warning: " << printable(st.string(2), 400) << "\n";
            continue;
        }
        total += st.int64(1);
        kinds += (kinds.empty() ? "" : ", ") + printable(kind, 60) + " " + formatCount(st.int64(1));
    }
    if (total > 0 && !quiet)
        std::cerr << "pipescope import: warning: " << formatCount(total) << " problem records (" << kinds
                  << "); `pipescope info " << store << "` lists them\n";
}

int runSharded(const ImportJobOptions& o, const ImportArgs& a, std::optional<ShardTask> task)
{
    if (!task) {
        const JobIndex index = importShardsLocally(o, *a.shards, summariseShard);
        if (!index.complete())
            throw Error(incompleteJobMessage(a.output, index));
        if (!a.quiet) {
            std::cout << "Imported " << index.shards << " shards side by side into " << a.output << "\n";
            std::cout << shardTable(index).render();
            printJobState(a.output, index);
        }
        return kExitOk;
    }
    const ShardImportResult r = importShard(o, *task, summariseShard);
    if (a.quiet)
        return kExitOk;
    std::cout << "Imported shard " << task->index << " of " << task->count << " (from " << task->source << ") into "
              << a.output << ": ranks " << rankList(r.record.ranks) << ", " << r.record.inputs.size()
              << (r.record.inputs.size() == 1 ? " file, " : " files, ") << formatCount(r.record.records) << " records\n";
    printJobState(a.output, r.index, r.tasksEnded);
    return kExitOk;
}

int runImport(const ImportArgs& a)
{
    std::optional<ShardTask> task;
    if (!a.shard.empty() && a.shards)
        throw FlagError("--shards", "--shard K/N and --shards N exclude each other: --shard is one task of a launcher's, "
                                    "--shards starts N tasks on this machine");
    if (!a.shard.empty())
        task = parseShardTask(a.shard);
    else if (!a.shards)
        task = shardTaskFromEnvironment([](const char* name) { return std::getenv(name); });
    if (task && task->count == 1 && task->source != "--shard")
        task.reset(); // one task of a launcher: a single store
    ImportJobOptions o;
    o.inputs = a.inputs;
    o.output = a.output;
    o.rank = a.rank;
    o.progress = !a.quiet;
    o.shortKernelNames = a.shortNames;
    o.jobs = a.jobs;
    if (a.align == "none")
        o.alignment = Alignment::None;
    else if (a.align == "time-base")
        o.alignment = Alignment::TimeBase;
    else
        o.alignment = Alignment::Collectives;
    o.warn = [](const std::string& w) { std::cerr << "pipescope import: warning: " << printable(w, 4096) << "\n"; };
    if (task || a.shards)
        return runSharded(o, a, task);
    if (!a.quiet)
        suggestShards(o);
    auto report = importJob(o);
    try {
        tellSkippedRecords(a.output, a.quiet);
    } catch (const Error&) {
        // The store was written; its diagnostics are for `info` to list.
    }
    if (a.quiet)
        return kExitOk;
    std::cout << "Imported " << report.files.size() << (report.files.size() == 1 ? " file" : " files") << " into "
              << a.output << "\n";
    TextTable files({"file", ">ranks", ">records"});
    for (size_t i = 0; i < report.files.size(); ++i) {
        std::string ranks;
        for (int r : report.sources[i].ranks)
            ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
        files.add({report.files[i], ranks.empty() ? "-" : ranks, formatCount(report.sources[i].records)});
    }
    std::cout << files.render();
    const char* how = report.alignmentUsed == Alignment::Collectives ? "matched collectives"
                      : report.alignmentUsed == Alignment::TimeBase ? "each file's time base"
                                                                     : "none";
    std::cout << "Clock alignment: " << how << "\n";
    if (report.alignmentUsed != Alignment::None && report.offsets.size() > 0)
        std::cout << offsetTable(report).render();
    std::cout << "Next: pipescope info " << a.output << "   or   pipescope analyze " << a.output << "\n";
    return kExitOk;
}

RegisterCommand reg{{"import",
                     "Import traces into one store: PyTorch profiler (Kineto) JSON, Nsight Systems SQLite, pipescope "
                     "captures, Megatron-LM step timings, per-operation timing tables (CSV/TSV)",
                     10,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<ImportArgs>();
                         app.add_option("inputs", a->inputs,
                                        "Trace files (.json, .json.gz, .sqlite, .pscap, .csv, .tsv, .csv.gz) or directories of per-rank traces")
                             ->required();
                         app.add_option("-o,--output", a->output, "Store file to write (e.g. job.pipescope)")->required();
                         app.add_option("--align", a->align,
                                        "Clock alignment across ranks: none, time-base (each file's absolute time base), "
                                        "or collectives (time base, then matched NCCL collective ends)")
                             ->check(CLI::IsMember({"none", "time-base", "collectives"}))
                             ->capture_default_str();
                         app.add_option("--rank", a->rank, "Rank of a single input file that does not say its rank")
                             ->check(wholeNumber(0, kMaxRank));
                         app.add_option("-j,--jobs", a->jobs,
                                        "Threads that parse Kineto JSON files (default: one per core, at most 8); "
                                        "the store is the same with any number")
                             ->check(wholeNumber(1, 256));
                         app.add_option("--shard", a->shard,
                                        "Import task K of N (K/N): this process writes shard K of the job folder -o, "
                                        "the last task completes its index (under srun or mpirun the task is read "
                                        "from the launcher's environment)");
                         app.add_option("--shards", a->shards,
                                        "Write a sharded job folder of N shards, imported by N processes side by side on this machine")
                             ->check(wholeNumber(1, 4096));
                         app.add_flag("-q,--quiet", a->quiet, "No summary and no progress output");
                         app.add_flag("--short-kernel-names", a->shortNames,
                                      "Nsight Systems exports: name kernels by their short name, not the demangled signature");
                         app.footer("Examples:\n  pipescope import traces/ -o job.pipescope\n"
                                    "  pipescope import rank-0.json.gz rank-1.json.gz --align collectives -o job.pipescope\n"
                                    "  pipescope import report.sqlite -o job.pipescope\n"
                                    "  pipescope import traces/ --shards 4 -o job/\n"
                                    "  srun -N 16 -n 64 pipescope import /lustre/run/traces -o /lustre/run/job   (docs/scale.md)");
                         return [a] { return runImport(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
