// `pipescope import`: expands inputs, picks the importer per file, checks
// that ranks are distinct, aligns the ranks' clocks and finishes the store.
#include "import/Import.h"
#include "import/common/ClockAlignment.h"

#include "import/kineto/KinetoReader.h"
#include "import/megatron/MegatronTiming.h"
#include "import/optable/OpTable.h"
#include "import/kineto/ParseAhead.h"
#include "util/StreamInput.h"
#include "store/JobIndex.h"
#include "store/Schema.h"
#include "util/Error.h"
#include "util/AtomicOutput.h"
#include "util/Format.h"
#include "util/Limits.h"

#if __has_include("import/capture/ImportCapture.h")
#include "import/capture/ImportCapture.h"
#define PIPESCOPE_HAVE_CAPTURE_IMPORT 1
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sqlite3.h>
#include <sys/stat.h>
#include <thread>
#include <zlib.h>

namespace pipescope {

namespace fs = std::filesystem;

namespace {

bool hasSuffix(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool looksLikeTraceName(const std::string& name)
{
    return hasSuffix(name, ".json") || hasSuffix(name, ".json.gz") || hasSuffix(name, ".sqlite") ||
           hasSuffix(name, ".pscap");
}

} // namespace

std::vector<std::string> expandTraceInputs(const std::vector<std::string>& inputs, std::vector<std::string>& warnings)
{
    std::vector<std::string> files;
    for (const auto& in : inputs) {
        std::error_code ec;
        if (!fs::exists(in, ec))
            throw Error(in + ": no such file or directory");
        if (!fs::is_directory(in, ec)) {
            files.push_back(in);
            continue;
        }
        if (isShardedJob(in))
            throw Error(in + ": is a pipescope job folder (a sharded import's result), not a folder of traces; open it "
                             "with `pipescope info " + in + "` or `pipescope analyze " + in +
                             "`, or import the traces it was made from");
        std::vector<std::string> found;
        for (const auto& entry : fs::directory_iterator(in, ec)) {
            auto name = entry.path().filename().string();
            if (name.starts_with("."))
                continue;
            std::error_code linkEc;
            if (entry.is_symlink(linkEc) && !fs::exists(entry.path(), linkEc) && looksLikeTraceName(name)) {
                warnings.push_back(entry.path().string() + ": a symbolic link to " +
                                   fs::read_symlink(entry.path(), linkEc).string() +
                                   ", which does not exist; skipped (re-create the link or copy the trace)");
                continue;
            }
            if (!entry.is_regular_file())
                continue;
            if (looksLikeTraceName(name))
                found.push_back(entry.path().string());
        }
        if (ec)
            throw Error(in + ": cannot list directory: " + ec.message());
        if (found.empty())
            throw Error(in + ": directory holds no traces (*.json, *.json.gz, *.sqlite, *.pscap); pass trace files or another directory");
        std::sort(found.begin(), found.end());
        files.insert(files.end(), found.begin(), found.end());
    }
    return files;
}

std::string detectFormat(const std::string& path)
{
    // A FIFO would block the open until a writer comes: streams are spooled
    // to a file before their format is asked (util/StreamInput.h).
    if (isStreamInput(path))
        throw FormatError(path + ": is a pipe or device; its format is read from a copy: import it with "
                                 "`pipescope import " + path + " -o job.pipescope`, or save it to a file first");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        throw Error(path + ": cannot open: " + std::strerror(errno));
    char head[4096] = {};
    size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (n == 0) {
        struct stat st{};
        if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
            throw FormatError(path + ": is not a regular file (a pipe or device) and gave no data; "
                                     "save the trace to a file and import that");
        throw FormatError(path + ": file is empty; expected a Kineto JSON trace or an Nsight Systems SQLite export");
    }
    if (n >= 2 && static_cast<unsigned char>(head[0]) == 0x1f && static_cast<unsigned char>(head[1]) == 0x8b) {
        // Compressed JSON: Megatron step timings or (by far the most often) a
        // Kineto trace. The bytes already read decompress far enough to tell;
        // a damaged stream is left for the Kineto reader to name.
        char text[4096];
        z_stream z{};
        size_t produced = 0;
        if (inflateInit2(&z, 15 + 32) == Z_OK) {
            z.next_in = reinterpret_cast<Bytef*>(head);
            z.avail_in = static_cast<uInt>(n);
            z.next_out = reinterpret_cast<Bytef*>(text);
            z.avail_out = sizeof text;
            inflate(&z, Z_NO_FLUSH);
            produced = sizeof text - z.avail_out;
            inflateEnd(&z);
        }
        if (looksLikeMegatronTiming(std::string_view(text, produced)))
            return "megatron-timing";
        if (auto table = opTableFormat(path, std::string_view(text, produced)))
            return *table;
        return "kineto";
    }
    if (n >= 16 && std::memcmp(head, "SQLite format 3", 16) == 0) {
        // Opened read-only and immutable: detection leaves no -shm or lock beside the input.
        std::string kind;
        try {
            sql::Database db(path, sql::Database::Mode::ReadOnly);
            auto appIdQuery = db.prepare("PRAGMA application_id");
            const int appId = appIdQuery.step() ? static_cast<int>(appIdQuery.int64(0)) : 0;
            if (appId == 0x50534343) // "PSCC": a per-rank capture file (import/capture/CaptureSchema.h)
                kind = "capture";
            else if (appId == kApplicationId)
                kind = "store";
            else if (db.tableExists("META_DATA_EXPORT") || db.tableExists("EXPORT_META_DATA") ||
                     db.tableExists("CUPTI_ACTIVITY_KIND_KERNEL") || db.tableExists("StringIds"))
                kind = "nsys";
        } catch (const FormatError&) {
            throw;
        } catch (const Error& e) {
            throw FormatError(path + ": damaged or truncated SQLite file (" + printable(e.what(), 200) +
                              "); re-copy or re-export it");
        }
        if (kind.empty())
            throw FormatError(path + ": SQLite file is neither an Nsight Systems export nor a pipescope capture; "
                                     "export Nsight reports with `nsys export --type sqlite`");
        return kind;
    }
    // The JSON reader accepts a UTF-8 byte order mark; so does detection.
    const size_t bom = n >= 3 && std::memcmp(head, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    for (size_t i = bom; i < n; ++i) {
        char c = head[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        if (c == '[' && looksLikeMegatronTiming(std::string_view(head + i, n - i)))
            return "megatron-timing";
        if (c == '{' || c == '[')
            return "kineto";
        break;
    }
    if (auto table = opTableFormat(path, std::string_view(head, n)))
        return *table;
    if (hasSuffix(path, ".nsys-rep") || hasSuffix(path, ".qdrep"))
        throw FormatError(path + ": Nsight Systems report files cannot be read directly; export them first with "
                                 "`nsys export --type sqlite " + path + "`");
    throw FormatError(path + ": unknown trace format; expected Kineto JSON (.json, .json.gz) or an Nsight Systems SQLite export");
}

namespace {


// Files of different jobs must not make one "pipeline": a folder may still
// hold the traces of an earlier run beside the new ones.
void refuseMixedJobs(const ImportJobReport& report)
{
    size_t jobFile = 0, worldFile = 0;
    bool haveJob = false, haveWorld = false;
    for (size_t i = 0; i < report.sources.size(); ++i) {
        const auto& src = report.sources[i];
        if (!src.jobId.empty()) {
            if (haveJob && src.jobId != report.sources[jobFile].jobId)
                throw Error(report.files[i] + " and " + report.files[jobFile] +
                            " belong to different jobs (their job ids differ); import the files of one job only");
            if (!haveJob)
                jobFile = i;
            haveJob = true;
        }
        if (src.worldSize) {
            if (haveWorld && *src.worldSize != *report.sources[worldFile].worldSize)
                throw Error(report.files[i] + " says the job has " + std::to_string(*src.worldSize) + " ranks but " +
                            report.files[worldFile] + " says " + std::to_string(*report.sources[worldFile].worldSize) +
                            "; they come from different jobs, import the files of one job only");
            if (!haveWorld)
                worldFile = i;
            haveWorld = true;
        }
    }
}

} // namespace


namespace {

// Piped inputs (a pipe, FIFO or device named on the command line) are copied
// into a private folder first: format detection, the end-of-file time base
// and SQLite exports need a file they can read more than once. Messages and
// the store name the input as the user gave it.
class SpooledInputs {
public:
    ~SpooledInputs()
    {
        if (dir_.empty())
            return;
        std::error_code ec;
        fs::remove_all(dir_, ec);
        AtomicOutput::untrackTemporary(tracked_);
    }
    std::string add(const std::string& input)
    {
        if (dir_.empty()) {
            std::error_code ec;
            fs::path base = fs::temp_directory_path(ec);
            if (ec)
                base = "/tmp";
            std::string templ = (base / "pipescope-input-XXXXXX").string();
            if (!::mkdtemp(templ.data()))
                throw Error(input + ": is a pipe or device, and pipescope cannot make a folder in " + base.string() +
                            " to read it into (" + std::strerror(errno) + "); set TMPDIR to a writable folder");
            dir_ = templ;
            tracked_ = AtomicOutput::trackTemporary(dir_);
        }
        const fs::path sub = fs::path(dir_) / std::to_string(copies_.size());
        fs::create_directory(sub);
        std::string copy = spoolStreamInput(input, sub.string());
        copies_.emplace_back(copy, input);
        return copy;
    }
    bool empty() const { return copies_.empty(); }
    // The input a copy stands for, or the path itself.
    std::string original(const std::string& path) const
    {
        for (const auto& [copy, input] : copies_)
            if (copy == path)
                return input;
        return path;
    }
    std::string restore(std::string text) const
    {
        for (const auto& [copy, input] : copies_)
            for (size_t at = text.find(copy); at != std::string::npos; at = text.find(copy, at + input.size()))
                text.replace(at, copy.size(), input);
        return text;
    }

private:
    std::string dir_;
    int tracked_ = -1;
    std::vector<std::pair<std::string, std::string>> copies_;
};

ImportJobReport importJobFromFiles(const ImportJobOptions& options, const SpooledInputs* spooled);

} // namespace

ImportJobReport importJob(const ImportJobOptions& options)
{
    if (options.inputs.empty())
        throw Error("no input traces given; pass trace files or a directory of per-rank traces");
    SpooledInputs spooled;
    ImportJobOptions own;
    const ImportJobOptions* opts = &options;
    for (size_t i = 0; i < options.inputs.size(); ++i) {
        if (!isStreamInput(options.inputs[i]))
            continue;
        if (opts == &options) {
            own = options;
            opts = &own;
        }
        own.inputs[i] = spooled.add(options.inputs[i]);
    }
    if (spooled.empty())
        return importJobFromFiles(options, nullptr);
    try {
        return importJobFromFiles(*opts, &spooled);
    } catch (const FormatError& e) {
        throw FormatError(spooled.restore(e.what()));
    } catch (const Error& e) {
        throw Error(spooled.restore(e.what()));
    }
}

namespace {

// Keeps a warning in the report and tells it as it arises.
void warnNow(const ImportJobOptions& options, ImportJobReport& report, std::string warning)
{
    report.warnings.push_back(std::move(warning));
    if (options.warn)
        options.warn(report.warnings.back());
}

// The input files, directories expanded (their warnings told); --rank names
// the rank of exactly one.
void listInputs(const ImportJobOptions& options, ImportJobReport& report)
{
    report.files = expandTraceInputs(options.inputs, report.warnings);
    if (options.warn)
        for (const auto& w : report.warnings)
            options.warn(w);
    if (options.rank && report.files.size() != 1)
        throw Error("--rank applies to a single input file, but " + std::to_string(report.files.size()) +
                    " were given; name ranks in the file names (rank-N) instead");
}

// Each file's format. A file found in a folder that is not a trace at all
// (notes.json, an empty file) is dropped from report.files with a warning; a
// file named is an error, and so is a pipescope store.
std::vector<std::string> detectFormats(const ImportJobOptions& options, const std::set<std::string>& named, ImportJobReport& report)
{
    std::vector<std::string> formats;
    std::vector<std::string> kept;
    for (const auto& f : report.files) {
        std::string fmt;
        try {
            fmt = detectFormat(f);
        } catch (const FormatError& e) {
            if (named.count(f))
                throw;
            warnNow(options, report, std::string(e.what()) + "; skipped");
            continue;
        }
        if (fmt == "store")
            throw FormatError(f + ": is already a pipescope store; open it with `pipescope info` or `pipescope analyze`");
        formats.push_back(fmt);
        kept.push_back(f);
    }
    report.files = std::move(kept);
    if (report.files.empty())
        throw NoTraceFound("no trace among the files found in " + options.inputs.front() +
                          "; pass Kineto JSON traces or Nsight Systems SQLite exports");
    return formats;
}

// No input may be written over, whatever name the output is given.
std::vector<AtomicOutput::InputGuard> guardInputs(const std::vector<std::string>& files)
{
    std::vector<AtomicOutput::InputGuard> guards;
    for (const auto& f : files)
        guards.emplace_back(f);
    return guards;
}

// Nsight exports whose write-ahead log holds data a read-only reader does not see.
void warnUnreadLogs(const ImportJobOptions& options, const std::vector<std::string>& formats, ImportJobReport& report)
{
    for (size_t i = 0; i < report.files.size(); ++i) {
        std::error_code ec;
        if (formats[i] == "nsys" && fs::file_size(report.files[i] + "-wal", ec) > 0 && !ec) {
            std::string warning = sql::Database(report.files[i], sql::Database::Mode::ReadOnly).walWarning();
            warnNow(options, report, std::move(warning));
        }
    }
}

ImportOptions importOptions(const ImportJobOptions& options)
{
    ImportOptions io;
    io.rank = options.rank;
    io.progress = options.progress;
    io.shortKernelNames = options.shortKernelNames;
    io.work = options.work;
    io.applyTimeBase = options.alignment != Alignment::None;
    io.settleInMemoryRecords = options.settleInMemoryRecords;
    return io;
}

// Kineto files are parsed on worker threads ahead of this one, which alone
// writes the store, file by file in their order. How many workers: by
// default one per core, up to 8 (the writer takes the files in order, so
// further workers would mostly wait with their queues full); 0 for none (one
// job, or no Kineto file).
int parseAheadWorkers(const ImportJobOptions& options, const std::vector<bool>& kinetoFiles)
{
    const int jobs = options.jobs > 0 ? options.jobs
                                      : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    return jobs > 1 && std::find(kinetoFiles.begin(), kinetoFiles.end(), true) != kinetoFiles.end() ? jobs : 0;
}

// Imports the files into the store one by one, in their order.
class FileImporter {
public:
    struct Setup {
        const ImportJobOptions& options;
        const std::set<std::string>& named; // the inputs as given
        const std::vector<std::string>& formats;
        const ImportOptions& io;
        const MegatronJobPlan& megatron;
        std::optional<kineto::ParseAhead>& ahead;
        StoreWriter& writer;
        const SpooledInputs* spooled;
    };
    explicit FileImporter(const Setup& setup) : s_(setup) {}

    std::map<int, std::string> rankOwner; // rank -> the file holding it
    std::vector<size_t> skipped;          // files that turned out not to be traces

    void importAll(ImportJobReport& report)
    {
        for (size_t i = 0; i < report.files.size(); ++i) {
            const auto& file = report.files[i];
            checkpoint(s_.options.work, "importing " + file, static_cast<double>(i) / static_cast<double>(report.files.size()));
            const StoreWriter::Mark before = s_.writer.mark();
            std::optional<ImportedSource> src = read(i, file, report);
            if (!src) {
                skipped.push_back(i);
                continue;
            }
            claimRanks(file, *src);
            applyTimeBase(*src, before);
            if (s_.spooled && s_.spooled->original(file) != file)
                s_.writer.setSourcePath(src->sourceId, s_.spooled->original(file));
            report.sources.push_back(*src);
        }
    }

private:
    // File i through its format's importer; nullopt for a JSON file found in
    // a folder that is not a trace at all (notes.json, a top-level array),
    // skipped with a warning. A damaged trace stays an error.
    std::optional<ImportedSource> read(size_t i, const std::string& file, ImportJobReport& report)
    {
        const std::string& format = s_.formats[i];
        if (format == "kineto" && !s_.named.count(file)) {
            s_.writer.beginInput();
            ImportedSource src;
            try {
                src = s_.ahead ? s_.ahead->import(i, s_.writer) : importKineto(file, s_.writer, s_.io);
            } catch (const kineto::NotATraceError& e) {
                s_.writer.discardInput();
                warnNow(s_.options, report, std::string(e.what()) + "; skipped");
                return std::nullopt;
            } catch (...) {
                s_.writer.discardInput();
                throw;
            }
            s_.writer.keepInput();
            return src;
        }
        if (format == "kineto")
            return s_.ahead ? s_.ahead->import(i, s_.writer) : importKineto(file, s_.writer, s_.io);
        if (format == "nsys")
            return importNsys(file, s_.writer, s_.io);
        if (format == "megatron-timing") {
            if (auto skip = s_.megatron.skipped.find(file); skip != s_.megatron.skipped.end()) {
                warnNow(s_.options, report, skip->second);
                return std::nullopt;
            }
            return importMegatronTiming(file, s_.writer, s_.io, s_.megatron.pipelineDegree);
        }
        if (format == "optable")
            return importOpTable(file, s_.writer, s_.io);
#ifdef PIPESCOPE_HAVE_CAPTURE_IMPORT
        if (format == "capture")
            return importCapture(file, s_.writer, s_.io);
#endif
        throw FormatError(file + ": " + format + " files are not supported by this build");
    }

    // Each rank is imported once.
    void claimRanks(const std::string& file, const ImportedSource& src)
    {
        for (int r : src.ranks) {
            auto [it, fresh] = rankOwner.emplace(r, file);
            if (!fresh)
                throw Error(file + ": holds rank " + std::to_string(r) + ", which " + it->second +
                            " also holds; import each rank once (name files rank-N, or import them separately)");
        }
    }

    // Time-base alignment: what the importer did not add as it stored the
    // times is added now, while the file's rows are the last ones written
    // (a pass over them, not one over every table per rank).
    void applyTimeBase(const ImportedSource& src, const StoreWriter::Mark& before)
    {
        if (s_.options.alignment == Alignment::None || src.timeBase == src.timeBaseApplied)
            return;
        auto shift = [&](TimeNs offset) {
            std::map<int, TimeNs> offsets;
            for (int r : src.ranks)
                offsets[r] = offset;
            s_.writer.shiftRanks(offsets, before);
        };
        TimeNs rest = 0;
        if (!__builtin_sub_overflow(src.timeBase, src.timeBaseApplied, &rest)) {
            shift(rest);
        } else {
            shift(-src.timeBaseApplied);
            shift(src.timeBase);
        }
    }

    Setup s_;
};

// Clock alignment. Time-base alignment puts every source on the epoch
// clock; collective alignment then corrects each rank by matched
// collectives (hosts' clocks disagree by more than kernels last). Records
// each rank's offset and the alignment used in the report.
void alignClocks(const ImportJobOptions& options, StoreWriter& writer, const std::vector<int>& ranks, ImportJobReport& report)
{
    std::map<int, TimeNs> offsets;
    report.alignmentUsed = Alignment::None;
    if (options.alignment != Alignment::None) {
        // Each file's rows were shifted by its time base once it was read.
        for (const auto& src : report.sources) {
            TimeNs off = src.timeBase;
            for (int r : src.ranks)
                offsets[r] = off;
            writer.setSourceAlignment(src.sourceId, off, "time_base");
        }
        report.alignmentUsed = Alignment::TimeBase;
    }
    if (options.alignment == Alignment::Collectives && ranks.size() > 1) {
        checkpoint(options.work, "aligning clocks by collectives", -1);
        // Times pushed out of range by a time base are dropped before any are
        // compared across ranks (otherwise finish() drops them).
        writer.dropOutOfRangeTimes();
        auto corr = alignByOperations(writer, ranks);
        if (!corr.empty()) {
            for (const auto& [r, delta] : corr)
                offsets[r] += delta;
            for (const auto& src : report.sources) {
                if (src.ranks.size() == 1 && corr.count(src.ranks[0]))
                    writer.setSourceAlignment(src.sourceId, offsets[src.ranks[0]], "collectives");
            }
            report.alignmentUsed = Alignment::Collectives;
        }
    }
    for (int r : ranks)
        report.offsets.emplace_back(r, offsets.count(r) ? offsets[r] : 0);
}

void finishStore(const ImportJobOptions& options, StoreWriter& writer)
{
    checkpoint(options.work, "finishing the store", -1);
    if (options.work && options.work->onProgress)
        writer.setProgress([work = options.work](std::string_view step) { work->onProgress(step, -1); });
    writer.finish();
}

ImportJobReport importJobFromFiles(const ImportJobOptions& options, const SpooledInputs* spooled)
{
    ImportJobReport report;
    listInputs(options, report);
    const std::set<std::string> named = options.inputsFoundInFolders
                                            ? std::set<std::string>()
                                            : std::set<std::string>(options.inputs.begin(), options.inputs.end());
    const std::vector<std::string> formats = detectFormats(options, named, report);
    const std::vector<AtomicOutput::InputGuard> guards = guardInputs(report.files);
    warnUnreadLogs(options, formats, report);

    StoreWriter writer(options.output);
    const ImportOptions io = importOptions(options);
    std::vector<bool> kinetoFiles;
    for (const auto& fmt : formats)
        kinetoFiles.push_back(fmt == "kineto");
    std::optional<kineto::ParseAhead> ahead;
    if (const int workers = parseAheadWorkers(options, kinetoFiles); workers > 0)
        ahead.emplace(report.files, kinetoFiles, io, workers);
    const MegatronJobPlan megatron = planMegatronJob(options.inputs, report.files, formats, options.rank);

    FileImporter files({options, named, formats, io, megatron, ahead, writer, spooled});
    files.importAll(report);
    ahead.reset();
    for (auto it = files.skipped.rbegin(); it != files.skipped.rend(); ++it)
        report.files.erase(report.files.begin() + static_cast<std::ptrdiff_t>(*it));
    if (report.sources.empty())
        throw NoTraceFound("no trace among the files found in " + options.inputs.front() +
                          "; pass Kineto JSON traces or Nsight Systems SQLite exports");
    refuseMixedJobs(report);

    std::vector<int> ranks;
    for (const auto& [r, f] : files.rankOwner)
        ranks.push_back(r);
    alignClocks(options, writer, ranks, report);
    finishStore(options, writer);
    if (spooled) {
        for (auto& f : report.files)
            f = spooled->original(f);
        for (auto& w : report.warnings)
            w = spooled->restore(w);
    }
    return report;
}

} // namespace

} // namespace pipescope
