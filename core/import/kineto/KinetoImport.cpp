// Kineto (PyTorch profiler) JSON -> store records. docs/import-kineto.md
// describes the mapping; this file keeps the decisions next to the code.
#include "import/kineto/KinetoImport.h"

#include "import/Import.h"
#include "import/common/FileNames.h"
#include "import/kineto/KinetoNames.h"
#include "import/kineto/KinetoReader.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/Limits.h"
#include "util/TimeParse.h"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace pipescope {

namespace {

using kineto::Event;
using kineto::Field;
using kineto::Value;
using json = nlohmann::json;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

std::optional<TimeNs> toNanos(const Value& v)
{
    switch (v.type) {
    case Value::Type::Int:
        if (v.i > kMaxInt64 / 1000 || v.i < -kMaxInt64 / 1000)
            return std::nullopt;
        return v.i * 1000;
    case Value::Type::Float: {
        // Kineto writes "1712195495505582.988": up to 15 integer digits and 3
        // decimals fit int64 nanoseconds directly; anything else (exponents,
        // more decimals to round) takes the general exact parser.
        const std::string& t = v.text;
        const char* p = t.data();
        const char* const e = p + t.size();
        const char* q = p;
        int64_t whole = 0;
        while (q < e && q - p < 15 && *q >= '0' && *q <= '9')
            whole = whole * 10 + (*q++ - '0');
        if (q > p && q < e && *q == '.' && e - q >= 2 && e - q <= 4) {
            int64_t frac = 0;
            const char* f = q + 1;
            while (f < e && *f >= '0' && *f <= '9')
                frac = frac * 10 + (*f++ - '0');
            if (f == e) {
                for (auto k = e - q - 1; k < 3; ++k)
                    frac *= 10;
                return whole * 1000 + frac;
            }
        }
        return parseMicrosToNanos(t);
    }
    default:
        return std::nullopt;
    }
}

// ProfilerStep#N, the profiler's own iteration ranges (analysis/Iterations.cpp
// reads iterations from them).
bool isIterationMarker(std::string_view name)
{
    return name.size() > 13 && name.starts_with("ProfilerStep#") &&
           name.find_first_not_of("0123456789", 13) == std::string_view::npos;
}

std::optional<int> toInt(std::optional<int64_t> v)
{
    if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max())
        return std::nullopt;
    return static_cast<int>(*v);
}

std::optional<int64_t> jsonInt(const json& j, const char* key)
{
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer())
        return std::nullopt;
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(kMaxInt64))
        return std::nullopt;
    return it->get<int64_t>();
}

std::string jsonString(const json& j, const char* key)
{
    auto it = j.find(key);
    if (it == j.end() || !it->is_string())
        return {};
    const auto& text = it->get_ref<const std::string&>();
    return text.size() <= kMaxStringBytes ? text : text.substr(0, kMaxStringBytes);
}

// Process group member lists come as a JSON array or as its text ("[0, 1]").
std::optional<std::vector<int>> rankList(const json& j)
{
    const json* list = &j;
    json parsed;
    if (j.is_string()) {
        parsed = json::parse(j.get<std::string>(), nullptr, false);
        list = &parsed;
    }
    if (!list->is_array())
        return std::nullopt;
    std::vector<int> ranks;
    for (const json& r : *list) {
        if (!r.is_number_integer())
            return std::nullopt;
        auto v = toInt(r.get<int64_t>());
        if (!v || !validRank(*v))
            return std::nullopt;
        ranks.push_back(*v);
    }
    return ranks;
}

enum class Category {
    Kernel, Memcpy, Memset, Sync, Runtime, Driver, CpuOp, UserAnnotation, GpuUserAnnotation, PythonFunction,
    Trace, Derived, Other
};

Category category(std::string_view cat)
{
    if (cat == "kernel") return Category::Kernel;
    if (cat == "cpu_op") return Category::CpuOp;
    if (cat == "cuda_runtime") return Category::Runtime;
    if (cat == "gpu_memcpy") return Category::Memcpy;
    if (cat == "gpu_memset") return Category::Memset;
    if (cat == "user_annotation") return Category::UserAnnotation;
    if (cat == "gpu_user_annotation") return Category::GpuUserAnnotation;
    if (cat == "cuda_driver") return Category::Driver;
    if (cat == "cuda_sync") return Category::Sync;
    if (cat == "python_function") return Category::PythonFunction;
    if (cat == "Trace") return Category::Trace;
    // pipescope's own analysis tracks in its Chrome export (report/ChromeTrace.h):
    // derived, not recorded; the analysis finds them again.
    if (cat.substr(0, 10) == "pipescope.") return Category::Derived;
    // Other accelerators' launch APIs (xpu_runtime, mtia_runtime, privateuse1_driver, ...)
    // play the same part as CUDA's.
    auto endsWith = [&](std::string_view suffix) {
        return cat.size() > suffix.size() && cat.substr(cat.size() - suffix.size()) == suffix;
    };
    if (endsWith("_runtime")) return Category::Runtime;
    if (endsWith("_driver")) return Category::Driver;
    return Category::Other;
}

// NCCL facts from a kernel's or a CPU op's args.
struct CommArgs {
    std::optional<Collective> kind;     // from a `Collective name` arg
    std::optional<Collective> nameKind; // from a CPU op's name (nccl:all_reduce, c10d::allreduce_)
    std::optional<int64_t> inNelems, outNelems, seq;
    std::optional<int> groupSize, src, dst;
    std::string dtype, groupName, groupDesc, groupRanks;

    bool hasArgs() const
    {
        return inNelems || outNelems || seq || groupSize || src || dst || !dtype.empty() || !groupName.empty() ||
               !groupRanks.empty();
    }
    bool useful() const { return hasArgs() || kind || nameKind; }
    // How much a CPU op can tell a kernel: a named collective with sizes beats sizes alone.
    int score() const { return (hasArgs() ? 2 : 0) + (kind ? 1 : 0); }
    void fillFrom(const CommArgs& o)
    {
        auto fillStr = [](std::string& a, const std::string& b) {
            if (a.empty())
                a = b;
        };
        auto fillOpt = [](auto& a, const auto& b) {
            if (!a)
                a = b;
        };
        fillOpt(kind, o.kind);
        fillOpt(nameKind, o.nameKind);
        fillOpt(inNelems, o.inNelems);
        fillOpt(outNelems, o.outNelems);
        fillOpt(seq, o.seq);
        fillOpt(groupSize, o.groupSize);
        fillOpt(src, o.src);
        fillOpt(dst, o.dst);
        fillStr(dtype, o.dtype);
        fillStr(groupName, o.groupName);
        fillStr(groupDesc, o.groupDesc);
        fillStr(groupRanks, o.groupRanks);
    }
};

// An NCCL kernel waiting for the end of the file, where the CPU op that
// launched it (record_param_comms) can lend it the args it lacks.
struct PendingNccl {
    int64_t activityId = 0;
    TimeNs start = 0, end = 0;
    int64_t streamId = 0;
    std::optional<int64_t> externalId, correlation;
    std::optional<Collective> kernelKind; // from the kernel's name
    CommArgs args;
    std::optional<size_t> from; // the CPU op (cpuComms_) that lent its args
};

// A collective seen on the CPU side (record_param_comms, nccl:*, c10d::*).
struct CpuComm {
    std::optional<int64_t> externalId;
    int64_t tid = 0;
    TimeNs start = 0, end = 0;
    CommArgs args;
    bool paramComms = false; // record_param_comms: the op that carries the args
};

// A flow event (ac2g, async_cpu_to_gpu) kept to give a correlation to
// activities or launch calls that were written without one.
struct Flow {
    int64_t pid, tid;
    TimeNs ts;
    int64_t id;
    bool start; // 's': the CPU side
    auto key() const { return std::tie(pid, tid, ts); }
};

struct PendingFlow {
    bool activity; // activities row, else cpu_ranges row
    int64_t rowId;
    int64_t pid, tid;
    TimeNs ts;
};

struct DeviceUse {
    int64_t kernels = 0;
    int64_t activities = 0;
};

// Parses one file into record batches (any thread), then, on the thread that
// writes the store, settles what needs the whole file (see KinetoImport.h).
class KinetoImporter final : public kineto::EventSink {
public:
    KinetoImporter(const std::string& path, const ImportOptions& options) : path_(path), options_(options) {}

    void parse(const kineto::KinetoFileImport::Deliver& handOver);
    ImportedSource finish(kineto::BatchWriter& out);

    void onEvent(const Event& e) override;
    void onBadEvent(std::string_view what) override
    {
        ++events_;
        diag(Severity::Warning, "bad_event", what);
    }
    void onTopLevel(std::string_view key, const json& value) override;
    void onOversizedTopLevel(std::string_view key) override
    {
        diag(Severity::Warning, "truncated:metadata",
             "the top-level \"" + printable(key, 60) + "\" is larger than " + std::to_string(kMaxMetadataBytes >> 20) +
                 " MiB and was not read");
    }
    void onProgress(uint64_t bytes) override
    {
        // Progress and cancellation are reported by the thread that writes
        // the batches; this one only stops early.
        if (options_.work && options_.work->stopRequested())
            throw Cancelled();
        batch_.bytesRead = bytes;
        deliver();
    }

private:
    // A file's bad records are counted here and handed to the store in
    // finish(): only this file writes its source's counts, so the store's
    // diagnostics come out as if each had been written as it arose.
    void diag(Severity s, std::string_view kind, std::string_view example)
    {
        auto it = diags_.find(kind);
        if (it == diags_.end())
            it = diags_.emplace(std::string(kind), Diag{s, 0, path_ + ": " + std::string(example)}).first;
        it->second.severity = std::max(it->second.severity, s);
        ++it->second.count;
    }
    // A skipped event is one bad record of its kind (a warning), CPU range
    // or GPU activity alike. When it is an iteration marker (ProfilerStep#N)
    // the analysis finds one iteration fewer: an info diagnostic names it as
    // well, so a damaged step does not silently turn two iterations into one
    // (info, so that the record is counted once among the warnings).
    void skipped(const Event& e, std::string_view kind, std::string_view example, std::string_view why)
    {
        diag(Severity::Warning, kind, example);
        if (const std::string_view n = e[Field::Name].str(); isIterationMarker(n))
            diag(Severity::Info, "skipped:iteration_marker",
                 "the iteration marker \"" + printable(n, 60) + "\" was skipped (" + std::string(why) +
                     "); iterations are found without it");
    }
    int rank();
    int64_t streamId(int device, int64_t stream);
    StringId intern(std::string_view text);
    // isNcclKernelName(name), remembered per file-local string: a file
    // launches the same few hundred kernels over and over.
    bool isNcclKernel(StringId local, std::string_view name)
    {
        const auto k = static_cast<size_t>(local);
        if (k >= ncclNames_.size())
            ncclNames_.resize(k + 1, -1);
        if (ncclNames_[k] < 0)
            ncclNames_[k] = isNcclKernelName(name) ? 1 : 0;
        return ncclNames_[k] == 1;
    }
    int64_t addActivity(const ActivityRecord& a)
    {
        shiftFixed_ = true;
        batch_.activities.push_back(a);
        return ++activities_;
    }
    int64_t addCpuRange(const CpuRangeRecord& r)
    {
        shiftFixed_ = true;
        batch_.cpuRanges.push_back(r);
        return ++cpuRanges_;
    }
    // The time base, added to every time as it is stored (applyTimeBase),
    // once known and until the first record: all of a file's records get the same.
    void offerTimeShift(TimeNs base)
    {
        if (options_.applyTimeBase && !shiftFixed_ && base >= -kMaxShift && base <= kMaxShift)
            timeShift_ = base;
    }
    // Hands the batch over (to be written, or queued for the writing thread),
    // or keeps it while the file is held (settleInMemory()).
    void deliver()
    {
        batch_.timeShift = timeShift_;
        if (holding_) {
            heldRecords_ += static_cast<int64_t>(batch_.records());
            if (heldRecords_ <= options_.settleInMemoryRecords) {
                held_.push_back(std::move(batch_));
                batch_ = kineto::RecordBatch{};
                // The next batch is most likely the size of this one: room
                // for it at once, rather than growing row by row.
                const kineto::RecordBatch& last = held_.back();
                batch_.activities.reserve(last.activities.size());
                batch_.cpuRanges.reserve(last.cpuRanges.size());
                return;
            }
            release(); // too large to hold: finish() settles it
        }
        deliver_(batch_);
        batch_.clear();
    }
    // Hands the held batches over, in order, and holds no more.
    void release()
    {
        holding_ = false;
        for (kineto::RecordBatch& b : held_)
            deliver_(b);
        std::vector<kineto::RecordBatch>().swap(held_);
    }
    void settleInMemory();
    template <typename SetActivity, typename SetCpu>
    void resolveFlowsWith(const SetActivity& setActivity, const SetCpu& setCpu);
    void complete(const Event& e);
    void gpuActivity(const Event& e, Category cat, TimeNs start, TimeNs end, std::string_view name);
    void cpuRange(const Event& e, Category cat, TimeNs start, TimeNs end, std::string_view name);
    void flow(const Event& e, char phase);
    void instant(const Event& e);
    void metadata(const Event& e);
    CommArgs commArgs(const Event& e);
    std::string normaliseRanks(const Value& v);
    void noteGroup(const CommArgs& a);
    void writePendingNccl(); // joinPendingNccl's last part: each pending kernel's NCCL records
    void writeNccl(int64_t activityId, TimeNs start, TimeNs end, int64_t streamId, const CommArgs& a,
                   std::optional<Collective> kernelKind);
    void resolveFlows(kineto::BatchWriter& out);
    void joinPendingNccl(kineto::BatchWriter& out);
    void finishRank(kineto::BatchWriter& out);
    void checkTime(TimeNs ns) { minTs_ = std::min(minTs_, ns); }

    std::string path_;
    ImportOptions options_;
    kineto::KinetoFileImport::Deliver deliver_;
    kineto::RecordBatch batch_;
    // A file is held whole while it has at most settleInMemoryRecords
    // records; parse() then settles its launch links and nesting (settled_).
    bool holding_ = false, settled_ = false;
    int64_t heldRecords_ = 0;
    std::vector<kineto::RecordBatch> held_;
    // File-local numbers (RecordBatch.h); strings and streams count from 0.
    int64_t activities_ = 0, cpuRanges_ = 0, stringCount_ = 0, streamCount_ = 0;
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, StringId, StringHash, std::equal_to<>> stringIds_;
    std::vector<int8_t> ncclNames_; // by file-local string: -1 not yet known, else isNcclKernelName
    struct Diag {
        Severity severity;
        int64_t count = 0;
        std::string example;
    };
    std::map<std::string, Diag, std::less<>> diags_;
    bool compressed_ = false;
    TimeNs timeShift_ = 0;    // RecordBatch::timeShift
    bool shiftFixed_ = false; // a record was made: timeShift_ stays as it is
    // A shift no valid time (util/Limits.h) can overflow with.
    static constexpr TimeNs kMaxShift = kMaxInt64 - kMaxTimeNs;

    // Rank: final once known; otherwise records carry kRankNotYetKnown until
    // finishRank() moves them to it (see rank()).
    std::optional<int> rank_;
    bool provisional_ = false;
    std::optional<int> distRank_, worldSize_;
    std::vector<int64_t> myStreams_; // file-local

    struct StreamKey {
        int device;
        int64_t stream;
        int64_t id;
    };
    struct StreamHash {
        size_t operator()(const std::pair<int, int64_t>& k) const
        {
            return std::hash<int64_t>{}(k.second * 1000003 + k.first);
        }
    };
    std::unordered_map<std::pair<int, int64_t>, StreamKey, StreamHash> streams_;
    const StreamKey* lastStream_ = nullptr;
    std::map<int, DeviceUse> devices_;
    std::map<int, GpuInfo> deviceProps_;
    std::map<std::string, ProcessGroup> groups_;
    std::string host_;
    std::optional<int64_t> cpuPid_;
    std::optional<TimeNs> baseTime_;
    json details_ = json::object();

    ActivityRecord activity_;
    CpuRangeRecord range_;

    std::vector<Flow> flows_;
    std::map<int64_t, std::string> threadNames_; // tid -> thread_name, written with the final rank
    std::vector<PendingFlow> pendingFlows_;
    struct LastCorrelated {
        std::optional<int64_t> correlation, pid, tid;
        TimeNs ts = 0;
    } last_;
    void noteCorrelated(const Event& e, std::optional<int64_t> correlation, TimeNs ts)
    {
        last_.correlation = correlation;
        last_.pid = e[Field::Pid].asLenientInt();
        last_.tid = e[Field::Tid].asLenientInt();
        last_.ts = ts;
    }
    std::vector<PendingNccl> pendingNccl_;
    std::vector<CpuComm> cpuComms_;
    std::string lastRanksIn_, lastRanksOut_;

    TimeNs minTs_ = kMaxInt64;
    int64_t events_ = 0, records_ = 0, ncclKernels_ = 0;
    bool simulated_ = false;
    std::string simulatedBy_;
    std::string jobId_;
};

void KinetoImporter::onTopLevel(std::string_view key, const json& v)
{
    if (key == "distributedInfo") {
        if (!v.is_object()) {
            diag(Severity::Warning, "bad_type:distributedInfo", "distributedInfo is not an object");
            return;
        }
        if (v.contains("rank")) {
            auto r = jsonInt(v, "rank");
            if (!r)
                diag(Severity::Warning, "bad_type:distributedInfo.rank", "distributedInfo.rank is not an integer");
            else if (!validRank(*r))
                throw FormatError(path_ + ": distributedInfo.rank " + std::to_string(*r) + " is outside the supported ranks 0.." +
                                  std::to_string(kMaxRank) + "; pass the rank with --rank N");
            else
                distRank_ = static_cast<int>(*r);
        }
        worldSize_ = toInt(jsonInt(v, "world_size"));
        if (worldSize_ && (*worldSize_ < 1 || *worldSize_ > kMaxWorldSize)) {
            diag(Severity::Warning, "bad_value:distributedInfo.world_size",
                 "distributedInfo.world_size " + std::to_string(*worldSize_) + " is outside 1.." +
                     std::to_string(kMaxWorldSize) + " and was ignored");
            worldSize_.reset();
        }
        for (const char* k : {"backend", "nccl_version"}) {
            if (v.contains(k) && v[k].is_primitive())
                details_[k] = v[k];
        }
        auto pgs = v.find("pg_config");
        if (pgs != v.end() && pgs->is_array()) {
            for (const json& pg : *pgs) {
                if (!pg.is_object())
                    continue;
                ProcessGroup g;
                g.name = jsonString(pg, "pg_name");
                if (g.name.empty()) {
                    if (auto n = jsonInt(pg, "pg_name"))
                        g.name = std::to_string(*n);
                    else
                        continue;
                }
                g.desc = jsonString(pg, "pg_desc");
                g.size = toInt(jsonInt(pg, "pg_size"));
                if (auto r = pg.find("ranks"); r != pg.end()) {
                    if (auto ranks = rankList(*r))
                        g.ranks = *ranks;
                }
                groups_[g.name] = g;
            }
        }
    } else if (key == "deviceProperties") {
        if (!v.is_array())
            return;
        for (const json& d : v) {
            if (!d.is_object())
                continue;
            auto id = toInt(jsonInt(d, "id"));
            if (!id)
                continue;
            GpuInfo g;
            g.device = *id;
            g.name = jsonString(d, "name");
            g.memoryBytes = jsonInt(d, "totalGlobalMem");
            g.smCount = toInt(jsonInt(d, "numSms"));
            auto major = jsonInt(d, "computeMajor"), minor = jsonInt(d, "computeMinor");
            if (major && minor)
                g.computeCapability = std::to_string(*major) + "." + std::to_string(*minor);
            deviceProps_[*id] = g;
        }
    } else if (key == "baseTimeNanoseconds") {
        if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxInt64))) {
            baseTime_ = v.get<int64_t>();
            offerTimeShift(*baseTime_);
        } else {
            diag(Severity::Warning, "bad_type:baseTimeNanoseconds", "baseTimeNanoseconds is not an integer");
        }
    } else if (key == "host_name" || key == "hostname") {
        if (v.is_string())
            host_ = v.get<std::string>();
    } else if (key == "pipescope") {
        if (v.is_object()) {
            auto sim = v.find("simulated");
            simulated_ = sim != v.end() && ((sim->is_boolean() && sim->get<bool>()) || (sim->is_number() && *sim != 0));
            for (const char* k : {"simulated_by", "generator", "by"}) {
                if (simulatedBy_.empty())
                    simulatedBy_ = jsonString(v, k);
            }
            jobId_ = jsonString(v, "job");
        }
    } else if (v.is_primitive() && !(v.is_string() && v.get_ref<const std::string&>().size() > kMaxStringBytes)) {
        // traceName, schemaVersion, displayTimeUnit: kept for `pipescope info`.
        details_[std::string(key)] = v;
    }
}

int KinetoImporter::rank()
{
    if (rank_)
        return *rank_;
    if (options_.rank) {
        rank_ = options_.rank;
    } else if (distRank_) {
        rank_ = distRank_;
    } else {
        // distributedInfo may still come after traceEvents. Until then rows
        // carry a placeholder that BatchWriter makes this source's own.
        rank_ = kineto::kRankNotYetKnown;
        provisional_ = true;
    }
    return *rank_;
}

int64_t KinetoImporter::streamId(int device, int64_t stream)
{
    // The last hit is usually the next one; a hash map keeps files with
    // hundreds of thousands of streams linear.
    if (lastStream_ && lastStream_->device == device && lastStream_->stream == stream)
        return lastStream_->id;
    auto [it, fresh] = streams_.try_emplace({device, stream}, StreamKey{device, stream, 0});
    if (fresh) {
        batch_.streams.push_back({rank(), device, stream});
        it->second.id = streamCount_++;
        myStreams_.push_back(it->second.id);
    }
    lastStream_ = &it->second;
    return it->second.id;
}

StringId KinetoImporter::intern(std::string_view text)
{
    // An oversized string is handed over each time it occurs: the store
    // counts every truncation (StoreWriter::intern).
    if (text.size() > kMaxStringBytes) {
        batch_.strings.emplace_back(text);
        return stringCount_++;
    }
    auto it = stringIds_.find(text);
    if (it != stringIds_.end())
        return it->second;
    batch_.strings.emplace_back(text);
    stringIds_.emplace(std::string(text), stringCount_);
    return stringCount_++;
}

void KinetoImporter::onEvent(const Event& e)
{
    ++events_;
    const Value& ph = e[Field::Ph];
    if (ph.type != Value::Type::String || ph.text.size() != 1) {
        diag(Severity::Warning, ph.present() ? "bad_type:ph" : "missing_field:ph",
             "an event without a one-letter \"ph\" (phase) was skipped");
        return;
    }
    switch (ph.text[0]) {
    case 'X':
        complete(e);
        break;
    case 's':
    case 'f':
    case 't':
        flow(e, ph.text[0]);
        break;
    case 'i':
    case 'I':
        instant(e);
        break;
    case 'B':
    case 'E':
        diag(Severity::Info, "unsupported_phase:B/E",
             "begin/end (\"B\"/\"E\") events are not imported; Kineto writes complete (\"X\") events");
        break;
    case 'M':
        metadata(e);
        break;
    default: // counters, async and other phases carry nothing pipescope uses
        break;
    }
    if (batch_.records() >= kineto::kBatchRecords)
        deliver();
}

void KinetoImporter::complete(const Event& e)
{
    const Value& catValue = e[Field::Cat];
    Category cat = category(catValue.str());
    if (cat == Category::Trace || cat == Category::Derived)
        return; // the profiler's own span; pipescope's analysis tracks
    // Of the Python stacks only nn.Module calls are kept (as annotation ranges,
    // which every load reads, nested by time like any range): they give the
    // module tree that per-layer costs come from. Every other frame is skipped.
    if (cat == Category::PythonFunction && !e[Field::Name].str().starts_with(kineto::kModulePrefix)) {
        diag(Severity::Info, "skipped:python_function",
             "python_function events other than nn.Module calls (Python stacks) are not imported");
        return;
    }
    auto skip = [&](std::string_view kind, std::string_view example, std::string_view why) {
        skipped(e, kind, example, why);
    };
    auto start = toNanos(e[Field::Ts]);
    if (!start) {
        if (e[Field::Ts].present())
            skip("bad_value:ts", "an event whose \"ts\" is not a number of microseconds was skipped",
                 "its \"ts\" is not a number of microseconds");
        else
            skip("missing_field:ts", "an event without \"ts\" was skipped", "it has no \"ts\"");
        return;
    }
    const Value& durValue = e[Field::Dur];
    auto dur = toNanos(durValue);
    if (!dur) {
        if (durValue.present())
            skip("bad_value:dur", "a complete event whose \"dur\" is not a number of microseconds was skipped",
                 "its \"dur\" is not a number of microseconds");
        else
            skip("missing_field:dur", "a complete (\"X\") event without \"dur\" was skipped", "it has no \"dur\"");
        return;
    }
    if (*dur < 0) {
        skip("negative_duration", "an event with a negative \"dur\" was skipped", "its \"dur\" is negative");
        return;
    }
    if (!validTime(*start) || *dur > kMaxTimeNs || !validTime(*start + *dur)) {
        skip("bad_value:ts", "an event outside the representable time range was skipped",
             "its time lies outside the representable range");
        return;
    }
    TimeNs end = *start + *dur;
    std::string_view name = e[Field::Name].str();
    if (e[Field::Name].type != Value::Type::String)
        diag(Severity::Info, e[Field::Name].present() ? "bad_type:name" : "missing_field:name",
             "an event without a \"name\" string was imported with an empty name");
    switch (cat) {
    case Category::Kernel:
    case Category::Memcpy:
    case Category::Memset:
        gpuActivity(e, cat, *start, end, name);
        break;
    case Category::Sync:
        // cuda_sync on a GPU lane (args.device/stream) is the GPU waiting; without
        // them it is the host's view of a synchronisation.
        if (e[Field::Device].present() || e[Field::Stream].present())
            gpuActivity(e, cat, *start, end, name);
        else
            cpuRange(e, Category::Other, *start, end, name);
        break;
    default:
        if (cat == Category::Other) {
            std::string example = "events of category \"" + printable(catValue.str(), 60) +
                                  "\" were imported as CPU ranges of kind other";
            diag(Severity::Info, "other_category", example);
        }
        cpuRange(e, cat, *start, end, name);
        break;
    }
}

void KinetoImporter::gpuActivity(const Event& e, Category cat, TimeNs start, TimeNs end, std::string_view name)
{
    auto device = toInt(e[Field::Device].asInt());
    if (!device)
        device = toInt(e[Field::Pid].asLenientInt());
    auto stream = e[Field::Stream].asInt();
    if (!stream)
        stream = e[Field::Tid].asLenientInt();
    // Context-wide synchronisations are written on stream 0xFFFFFFFF (tid -1):
    // one lane, named -1 as the tid does.
    if (stream && *stream == 0xFFFFFFFFLL)
        stream = -1;
    if (!device || !stream) {
        diag(Severity::Warning, !device ? "missing_field:device" : "missing_field:stream",
             "a GPU event without a device (args.device or an integer pid) or stream (args.stream or tid) was skipped");
        return;
    }
    ActivityRecord& a = activity_;
    a.rank = rank();
    a.streamId = streamId(*device, *stream);
    a.start = start;
    a.end = end;
    a.name = intern(name);
    a.correlation = e[Field::Correlation].asInt();
    a.bytes.reset();
    a.copyKind.reset();
    a.grid.clear();
    a.block.clear();
    switch (cat) {
    case Category::Kernel: {
        a.kind = ActivityKind::Kernel;
        const Value& grid = e[Field::Grid];
        const Value& block = e[Field::Block];
        // A launch shape is up to three numbers; anything longer is not one
        // and is dropped (and diagnosed), not stored.
        auto shape = [this](const Value& v, std::string& to, const char* field) {
            if (v.type != Value::Type::Array)
                return;
            if (v.clipped || std::count(v.text.begin(), v.text.end(), ',') > 2) {
                diag(Severity::Warning, std::string("bad_value:") + field,
                     std::string("a kernel's ") + field + " array has more than three elements; it was dropped");
                return;
            }
            to = v.text;
        };
        shape(grid, a.grid, "grid");
        shape(block, a.block, "block");
        break;
    }
    case Category::Memcpy: {
        a.kind = ActivityKind::Memcpy;
        a.bytes = e[Field::Bytes].asInt();
        CopyKind k = kineto::copyKindFromName(name);
        if (k == CopyKind::Unknown)
            k = kineto::copyKindFromName(e[Field::CopyKindArg].str());
        a.copyKind = k;
        break;
    }
    case Category::Memset:
        a.kind = ActivityKind::Memset;
        a.bytes = e[Field::Bytes].asInt();
        break;
    default:
        a.kind = ActivityKind::Sync;
        break;
    }
    int64_t id = addActivity(a);
    ++records_;
    checkTime(start);
    DeviceUse& use = devices_[*device];
    ++use.activities;
    if (a.kind == ActivityKind::Kernel)
        ++use.kernels;
    noteCorrelated(e, a.correlation, start);
    if (!a.correlation) {
        auto pid = e[Field::Pid].asLenientInt(), tid = e[Field::Tid].asLenientInt();
        if (pid && tid)
            pendingFlows_.push_back({true, id, *pid, *tid, start});
    }
    if (a.kind == ActivityKind::Kernel && isNcclKernel(a.name, name)) {
        ++ncclKernels_;
        CommArgs args = commArgs(e);
        std::optional<Collective> kernelKind = collectiveFromKernelName(name);
        if (kernelKind == Collective::Generic || kernelKind == Collective::Unknown)
            kernelKind.reset(); // the name does not say what the kernel runs
        // A coalesced batch waits for the end of the file too: its sends and
        // receives are on the CPU ops before the one that launched it.
        if (args.kind && args.hasArgs() && args.kind != Collective::Coalesced) {
            writeNccl(id, start, end, a.streamId, args, kernelKind);
        } else {
            PendingNccl p;
            p.activityId = id;
            p.start = start;
            p.end = end;
            p.streamId = a.streamId;
            p.externalId = e[Field::ExternalId].asInt();
            p.correlation = a.correlation;
            p.kernelKind = std::move(kernelKind);
            p.args = std::move(args);
            pendingNccl_.push_back(std::move(p));
        }
    }
}

void KinetoImporter::cpuRange(const Event& e, Category cat, TimeNs start, TimeNs end, std::string_view name)
{
    auto tid = e[Field::Tid].asLenientInt();
    if (!tid) {
        skipped(e, "bad_value:tid", "a CPU event without an integer \"tid\" was skipped", "it has no integer \"tid\"");
        return;
    }
    CpuRangeRecord& r = range_;
    r.rank = rank();
    r.tid = *tid;
    r.start = start;
    r.end = end;
    r.name = intern(name);
    r.correlation.reset();
    switch (cat) {
    case Category::Runtime:
        r.kind = CpuRangeKind::Runtime;
        r.correlation = e[Field::Correlation].asInt();
        break;
    case Category::Driver:
        r.kind = CpuRangeKind::Driver;
        r.correlation = e[Field::Correlation].asInt();
        break;
    case Category::CpuOp: {
        r.kind = CpuRangeKind::CpuOp;
        // Autograd's sequence number links a backward op to the forward op
        // that made its node; cpu ops have no launch correlation, so the
        // column carries it (docs/trace-format.md).
        auto seq = e[Field::SequenceNumber].asLenientInt();
        if (seq && *seq >= 0)
            r.correlation = seq;
        break;
    }
    case Category::UserAnnotation:
    case Category::PythonFunction: // nn.Module calls only (see complete())
        r.kind = CpuRangeKind::Annotation;
        break;
    case Category::GpuUserAnnotation:
        r.kind = CpuRangeKind::GpuAnnotation;
        break;
    default:
        r.kind = CpuRangeKind::Other;
        break;
    }
    int64_t id = addCpuRange(r);
    ++records_;
    checkTime(start);
    if (r.kind == CpuRangeKind::Runtime || r.kind == CpuRangeKind::Driver) {
        noteCorrelated(e, r.correlation, start);
        if (!r.correlation) {
            if (auto pid = e[Field::Pid].asLenientInt())
                pendingFlows_.push_back({false, id, *pid, *tid, start});
        }
    }
    if (!cpuPid_ && (r.kind == CpuRangeKind::CpuOp || r.kind == CpuRangeKind::Runtime))
        cpuPid_ = e[Field::Pid].asLenientInt();

    if (r.kind == CpuRangeKind::CpuOp || r.kind == CpuRangeKind::Annotation) {
        bool paramComms = name == "record_param_comms";
        bool named = name.rfind("nccl:", 0) == 0 || name.rfind("c10d::", 0) == 0;
        if (paramComms || named) {
            CpuComm c;
            c.args = commArgs(e);
            if (named)
                c.args.nameKind = collectiveFromCallName(name.substr(name.find(':') + 1));
            if (c.args.useful()) {
                c.externalId = e[Field::ExternalId].asInt();
                c.tid = *tid;
                c.start = start;
                c.end = end;
                c.paramComms = paramComms;
                cpuComms_.push_back(std::move(c));
            }
        }
    }
}

void KinetoImporter::flow(const Event& e, char phase)
{
    std::string_view cat = e[Field::Cat].str();
    if (cat != "ac2g" && cat != "async_cpu_to_gpu")
        return; // fwdbwd and other flows do not link launches
    auto id = e[Field::Id].asLenientInt();
    auto pid = e[Field::Pid].asLenientInt(), tid = e[Field::Tid].asLenientInt();
    auto ts = toNanos(e[Field::Ts]);
    if (!id || !pid || !tid || !ts) {
        diag(Severity::Info, "bad_flow", "a launch flow event without integer id/pid/tid or a ts was skipped");
        return;
    }
    // Kineto writes a flow right after the event it binds to (same pid, tid
    // and ts), with that event's correlation as its id; such flows add
    // nothing and are not kept, so memory stays small.
    if (last_.correlation && *last_.correlation == *id && last_.pid == pid && last_.tid == tid && last_.ts == *ts)
        return;
    flows_.push_back({*pid, *tid, *ts, *id, phase == 's'});
}

void KinetoImporter::instant(const Event& e)
{
    // The allocator's "[memory]" events: Device Type 1 is CUDA (HIP builds too).
    if (e[Field::Name].str() != "[memory]")
        return;
    auto type = e[Field::MemDeviceType].asInt();
    auto device = toInt(e[Field::MemDeviceId].asInt());
    auto bytes = e[Field::MemBytes].asInt();
    auto ts = toNanos(e[Field::Ts]);
    if (!type || *type != 1)
        return;
    if (!device || !bytes || !ts || !validTime(*ts)) {
        diag(Severity::Info, "bad_memory_event", "a [memory] event without Device Id, Bytes or ts was skipped");
        return;
    }
    MemoryEvent m;
    m.rank = rank();
    m.device = *device;
    m.ts = *ts;
    m.bytes = *bytes;
    m.address = e[Field::MemAddr].asInt();
    // The allocator's totals after the event (PyTorch writes them when known;
    // older versions wrote -1 for unknown).
    auto total = [&](Field f) {
        auto v = e[f].asInt();
        return v && *v >= 0 ? v : std::nullopt;
    };
    m.totalAllocated = total(Field::MemTotalAllocated);
    m.totalReserved = total(Field::MemTotalReserved);
    shiftFixed_ = true;
    batch_.memoryEvents.push_back(m);
}

std::string KinetoImporter::normaliseRanks(const Value& v)
{
    if (v.type == Value::Type::Array)
        return "[" + v.text + "]";
    if (v.type != Value::Type::String || v.text.empty())
        return {};
    // Every NCCL kernel of a group repeats the same text; parse it once.
    if (v.text == lastRanksIn_)
        return lastRanksOut_;
    lastRanksIn_ = v.text;
    auto ranks = rankList(json(v.text));
    if (!ranks) {
        diag(Severity::Info, "bad_value:Process Group Ranks", "a \"Process Group Ranks\" that is not a list of ranks was ignored");
        lastRanksOut_.clear();
    } else {
        lastRanksOut_ = json(*ranks).dump();
    }
    return lastRanksOut_;
}

CommArgs KinetoImporter::commArgs(const Event& e)
{
    CommArgs a;
    if (const std::string_view named = e[Field::CollectiveName].str(); !named.empty())
        a.kind = collectiveFromCallName(named);
    a.inNelems = e[Field::InNelems].asLenientInt();
    a.outNelems = e[Field::OutNelems].asLenientInt();
    a.seq = e[Field::Seq].asLenientInt();
    a.groupSize = toInt(e[Field::GroupSize].asLenientInt());
    a.src = toInt(e[Field::SrcRank].asLenientInt());
    a.dst = toInt(e[Field::DstRank].asLenientInt());
    a.dtype = std::string(e[Field::Dtype].str());
    const Value& g = e[Field::GroupName];
    if (g.type == Value::Type::String)
        a.groupName = g.text;
    else if (g.type == Value::Type::Int)
        a.groupName = std::to_string(g.i);
    a.groupDesc = std::string(e[Field::GroupDesc].str());
    a.groupRanks = normaliseRanks(e[Field::GroupRanks]);
    return a;
}

void KinetoImporter::noteGroup(const CommArgs& a)
{
    if (a.groupName.empty())
        return;
    ProcessGroup& g = groups_[a.groupName];
    g.name = a.groupName;
    if (g.desc.empty())
        g.desc = a.groupDesc;
    if (!g.size)
        g.size = a.groupSize;
    if (g.ranks.empty() && !a.groupRanks.empty()) {
        if (auto ranks = rankList(json::parse(a.groupRanks, nullptr, false)))
            g.ranks = *ranks;
    }
}

void KinetoImporter::writeNccl(int64_t activityId, TimeNs start, TimeNs end, int64_t stream, const CommArgs& a,
                               std::optional<Collective> kernelKind)
{
    NcclRecord r;
    r.rank = rank();
    r.activityId = activityId;
    // An explicit `Collective name` says what the user called; the kernel's
    // name says how NCCL ran it (all_to_all runs SendRecv kernels); a CPU
    // op's name is the last resort (NCCL >= 2.19 names every kernel Generic).
    // NCCL runs all-to-all, gather and scatter as SendRecv kernels: a CPU op
    // naming a collective (nccl:all_to_all, c10d::alltoall_base_) outranks a
    // point-to-point kernel name, so the embedding exchange of a DLRM job is
    // not read as pipeline transfers.
    const bool collectiveByName = a.nameKind && isGroupCollective(*a.nameKind);
    r.kind = a.kind                                                              ? *a.kind
             : kernelKind && !(collectiveByName && isPointToPoint(*kernelKind)) ? *kernelKind
             : a.nameKind                                                        ? *a.nameKind
                                                                                 : Collective::Unknown;
    r.isP2p = isPointToPoint(r.kind);
    r.inNelems = a.inNelems;
    r.outNelems = a.outNelems;
    // The message size as nccl-tests counts it: the larger of the two buffers
    // (all-gather's output, reduce-scatter's input).
    auto size = kineto::dtypeSize(a.dtype);
    std::optional<int64_t> nelems = a.inNelems;
    if (a.outNelems && (!nelems || *a.outNelems > *nelems))
        nelems = a.outNelems;
    if (size && nelems && *nelems >= 0 && *nelems <= kMaxInt64 / 16)
        r.bytes = *nelems * *size;
    r.dtype = a.dtype;
    r.groupName = a.groupName;
    r.groupDesc = a.groupDesc;
    r.groupRanks = a.groupRanks;
    r.groupSize = a.groupSize;
    if (r.kind == Collective::Send)
        r.peer = a.dst ? a.dst : a.src;
    else if (r.kind == Collective::Recv)
        r.peer = a.src ? a.src : a.dst;
    else if (r.isP2p)
        r.peer = a.dst ? a.dst : a.src;
    r.seq = a.seq;
    r.start = start;
    r.end = end;
    r.streamId = stream;
    batch_.ncclOps.push_back(std::move(r));
    ++records_;
    noteGroup(a);
}

template <typename SetActivity, typename SetCpu>
void KinetoImporter::resolveFlowsWith(const SetActivity& setActivity, const SetCpu& setCpu)
{
    std::sort(flows_.begin(), flows_.end(), [](const Flow& a, const Flow& b) { return a.key() < b.key(); });
    std::unordered_map<int64_t, size_t> ncclByActivity;
    for (size_t i = 0; i < pendingNccl_.size(); ++i)
        ncclByActivity.emplace(pendingNccl_[i].activityId, i);
    int64_t unresolved = 0;
    for (const PendingFlow& p : pendingFlows_) {
        Flow probe{p.pid, p.tid, p.ts, 0, false};
        auto it = std::lower_bound(flows_.begin(), flows_.end(), probe,
                                   [](const Flow& a, const Flow& b) { return a.key() < b.key(); });
        std::optional<int64_t> id;
        // A GPU activity binds the flow's end ('f'), a launch call its start ('s').
        for (; it != flows_.end() && it->key() == probe.key(); ++it) {
            if (it->start != p.activity) {
                id = it->id;
                break;
            }
            if (!id)
                id = it->id;
        }
        if (!id) {
            ++unresolved;
            continue;
        }
        if (p.activity)
            setActivity(p.rowId, *id);
        else
            setCpu(p.rowId, *id);
        if (p.activity) {
            if (auto n = ncclByActivity.find(p.rowId); n != ncclByActivity.end())
                pendingNccl_[n->second].correlation = id;
        }
    }
    if (unresolved > 0)
        diag(Severity::Info, "no_correlation",
             std::to_string(unresolved) + " GPU activities or launch calls have neither args.correlation nor a launch flow");
    std::vector<Flow>().swap(flows_);
    std::vector<PendingFlow>().swap(pendingFlows_);
}

void KinetoImporter::resolveFlows(kineto::BatchWriter& out)
{
    if (pendingFlows_.empty())
        return;
    StoreWriter& store = out.store();
    resolveFlowsWith([&](int64_t row, int64_t id) { store.setActivityCorrelation(out.activityId(row), id); },
                     [&](int64_t row, int64_t id) { store.setCpuRangeCorrelation(out.cpuRangeId(row), id); });
}

// The held file's launch flows, launch links and range nesting, settled as
// StoreWriter::finish() would settle them from the stored rows: the file
// holds all of its rank's rows (importJob refuses a rank from two files;
// StoreWriter::settled() checks), times differ from the stored ones by one
// shift, and file-local numbers keep the order of store ids.
void KinetoImporter::settleInMemory()
{
    std::vector<ActivityRecord*> acts;
    std::vector<CpuRangeRecord*> cpus;
    acts.reserve(static_cast<size_t>(activities_));
    cpus.reserve(static_cast<size_t>(cpuRanges_));
    for (kineto::RecordBatch& b : held_) {
        for (ActivityRecord& a : b.activities)
            acts.push_back(&a);
        for (CpuRangeRecord& r : b.cpuRanges)
            cpus.push_back(&r);
    }
    if (static_cast<int64_t>(acts.size()) != activities_ || static_cast<int64_t>(cpus.size()) != cpuRanges_)
        return; // not every record is held: finish() settles the file
    if (!pendingFlows_.empty()) {
        resolveFlowsWith([&](int64_t row, int64_t id) { acts[static_cast<size_t>(row - 1)]->correlation = id; },
                         [&](int64_t row, int64_t id) { cpus[static_cast<size_t>(row - 1)]->correlation = id; });
    }
    // Launches: the first runtime or driver call with the activity's correlation.
    {
        std::unordered_map<int64_t, int64_t> launchOf; // correlation -> local row
        for (size_t i = 0; i < cpus.size(); ++i) {
            const CpuRangeRecord& r = *cpus[i];
            if (r.correlation && (r.kind == CpuRangeKind::Runtime || r.kind == CpuRangeKind::Driver))
                launchOf.emplace(*r.correlation, static_cast<int64_t>(i + 1));
        }
        for (ActivityRecord* a : acts) {
            if (!a->correlation)
                continue;
            auto it = launchOf.find(*a->correlation);
            if (it == launchOf.end())
                continue;
            a->launchId = it->second;
            a->launchNs = cpus[static_cast<size_t>(it->second - 1)]->start;
        }
    }
    // Nesting, in (tid, start, end, row) order as StoreWriter reads the index.
    {
        struct Key {
            int64_t tid;
            TimeNs start, end;
            int64_t row;
        };
        std::vector<Key> keys;
        keys.reserve(cpus.size());
        for (size_t i = 0; i < cpus.size(); ++i)
            keys.push_back({cpus[i]->tid, cpus[i]->start, cpus[i]->end, static_cast<int64_t>(i + 1)});
        std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
            return std::tie(a.tid, a.start, a.end, a.row) < std::tie(b.tid, b.start, b.end, b.row);
        });
        RangeNester nester;
        for (const Key& k : keys)
            nester.add(0, k.tid, k.start, k.end, k.row);
        nester.finish();
        for (const auto& p : nester.found) {
            CpuRangeRecord& r = *cpus[static_cast<size_t>(p.id - 1)];
            r.depth = p.depth;
            r.parentId = p.parent;
        }
    }
    settled_ = true;
}

void KinetoImporter::joinPendingNccl(kineto::BatchWriter& out)
{
    if (pendingNccl_.empty())
        return;
    // 1. The kernel's External id names the CPU op that launched it; with
    // record_param_comms that is the op carrying the args.
    std::unordered_map<int64_t, size_t> byExternal;
    for (size_t i = 0; i < cpuComms_.size(); ++i) {
        if (!cpuComms_[i].externalId)
            continue;
        auto [it, inserted] = byExternal.emplace(*cpuComms_[i].externalId, i);
        if (!inserted && cpuComms_[i].paramComms && !cpuComms_[it->second].paramComms)
            it->second = i;
    }
    std::vector<size_t> unmatched;
    for (size_t k = 0; k < pendingNccl_.size(); ++k) {
        PendingNccl& p = pendingNccl_[k];
        auto it = p.externalId ? byExternal.find(*p.externalId) : byExternal.end();
        if (it != byExternal.end() && cpuComms_[it->second].args.useful()) {
            p.args.fillFrom(cpuComms_[it->second].args);
            p.from = it->second;
        } else if (p.correlation && !cpuComms_.empty())
            unmatched.push_back(k);
    }
    // 2. Otherwise the launch call (same correlation) runs inside the
    // collective's CPU op on the same thread. One pass over this file's launch
    // calls finds them all.
    if (!unmatched.empty()) {
        std::vector<std::pair<int64_t, int64_t>> wanted;
        for (size_t k : unmatched)
            wanted.push_back({*pendingNccl_[k].correlation, static_cast<int64_t>(k)});
        for (const StoreWriter::LaunchCall& call : out.store().launchCallsWith(wanted, out.before().cpuRanges)) {
            PendingNccl& p = pendingNccl_[static_cast<size_t>(call.key)];
            int64_t tid = call.tid;
            TimeNs at = call.start - timeShift_; // as the file writes it
            const CpuComm* best = nullptr;
            for (const CpuComm& c : cpuComms_) {
                if (c.tid != tid || c.start > at || c.end < at)
                    continue;
                // Prefer the op that tells most, then the innermost.
                if (!best || c.args.score() > best->args.score() ||
                    (c.args.score() == best->args.score() && c.start >= best->start))
                    best = &c;
            }
            if (best) {
                p.args.fillFrom(best->args);
                p.from = static_cast<size_t>(best - cpuComms_.data());
            }
        }
    }
    writePendingNccl();
}

void KinetoImporter::writePendingNccl()
{
    auto kindOf = [](const CommArgs& a) { return a.kind ? a.kind : a.nameKind; };
    // A coalesced batch (batch_isend_irecv) runs in one kernel the sends and
    // receives recorded on the launching thread since its previous batch:
    // one NCCL op each, all on that kernel.
    auto coalesced = [&](const PendingNccl& p) { return p.from && kindOf(p.args) == Collective::Coalesced; };
    std::unordered_map<int64_t, std::vector<size_t>> byTid; // cpuComms_ per thread, by start
    if (std::any_of(pendingNccl_.begin(), pendingNccl_.end(), coalesced)) {
        for (size_t i = 0; i < cpuComms_.size(); ++i)
            byTid[cpuComms_[i].tid].push_back(i);
        for (auto& [tid, v] : byTid)
            std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) { return cpuComms_[a].start < cpuComms_[b].start; });
    }
    // The ops of each coalesced CPU op, found once (kernels may share one).
    std::unordered_map<size_t, std::vector<const CpuComm*>> opsOfBatch;
    for (const PendingNccl& p : pendingNccl_) {
        if (coalesced(p)) {
            const CpuComm& c = cpuComms_[*p.from];
            auto [slot, fresh] = opsOfBatch.try_emplace(*p.from);
            std::vector<const CpuComm*>& ops = slot->second; // latest first
            const auto& v = byTid[c.tid];
            auto at = std::lower_bound(v.begin(), v.end(), c.start,
                                       [&](size_t i, TimeNs t) { return cpuComms_[i].start < t; });
            for (int n = 0; fresh && at != v.begin() && n < 4096; ++n) {
                const CpuComm& o = cpuComms_[*--at];
                const std::optional<Collective> k = kindOf(o.args);
                if (k == Collective::Coalesced && o.end <= c.start)
                    break; // the previous batch
                if (k != Collective::Send && k != Collective::Recv)
                    continue;
                // nccl:send and the record_param_comms inside it are one op.
                if (!ops.empty() && ops.back()->start >= o.start && ops.back()->end <= o.end)
                    continue;
                ops.push_back(&o);
            }
            for (auto op = ops.rbegin(); op != ops.rend(); ++op) {
                CommArgs a = (*op)->args;
                a.kind = kindOf(a);
                // The batch's group when the op does not name it.
                CommArgs group;
                group.groupName = p.args.groupName;
                group.groupDesc = p.args.groupDesc;
                group.groupRanks = p.args.groupRanks;
                group.groupSize = p.args.groupSize;
                a.fillFrom(group);
                writeNccl(p.activityId, p.start, p.end, p.streamId, a, p.kernelKind);
            }
            if (!ops.empty())
                continue;
        }
        writeNccl(p.activityId, p.start, p.end, p.streamId, p.args, p.kernelKind);
    }
    std::vector<PendingNccl>().swap(pendingNccl_);
}

void KinetoImporter::finishRank(kineto::BatchWriter& out)
{
    int finalRank = 0;
    std::string rankFrom = "default";
    if (options_.rank) {
        finalRank = *options_.rank;
        rankFrom = "option";
    } else if (distRank_) {
        finalRank = *distRank_;
        rankFrom = "distributedInfo";
    } else if (auto fromName = rankFromFileName(path_)) {
        if (!validRank(*fromName))
            throw FormatError(path_ + ": the rank in the file name (" + std::to_string(*fromName) +
                              ") is outside the supported ranks 0.." + std::to_string(kMaxRank) + "; pass the rank with --rank N");
        finalRank = *fromName;
        rankFrom = "file_name";
    } else {
        diag(Severity::Info, "rank_unknown",
             "no distributedInfo.rank and no rank-N in the file name; the trace was imported as rank 0");
    }
    details_["rank_from"] = rankFrom;
    if (provisional_ && rank_ && *rank_ != finalRank) {
        std::vector<int64_t> streams;
        for (int64_t local : myStreams_)
            streams.push_back(out.streamId(local));
        try {
            out.store().relabelRank(out.rank(*rank_), finalRank, out.before(), streams);
        } catch (const Error&) {
            throw FormatError(path_ + ": rank " + std::to_string(finalRank) +
                              " was already imported from another file; import each rank once");
        }
    }
    rank_ = finalRank;
    for (const auto& [tid, name] : threadNames_)
        out.store().threadName(finalRank, tid, name);
}

// Kineto names the CPU threads: {"ph":"M","name":"thread_name","pid":P,
// "tid":T,"args":{"name":"thread 4242 (python3)"}}. Other metadata (process
// names, sort indices, labels) carries nothing pipescope uses.
void KinetoImporter::metadata(const Event& e)
{
    if (e[Field::Name].str() != "thread_name")
        return;
    const auto tid = e[Field::Tid].asLenientInt();
    const Value& name = e[Field::ArgName];
    if (!tid || name.type != Value::Type::String || name.str().empty())
        return;
    threadNames_[*tid] = printable(name.str(), 200);
}

void KinetoImporter::parse(const kineto::KinetoFileImport::Deliver& handOver)
{
    deliver_ = handOver;
    InputFile file(path_);
    compressed_ = file.compressed();
    // Kineto writes baseTimeNanoseconds after traceEvents; read from the end
    // of the file, it is known before the first record (and checked when the
    // parser reaches it).
    if (options_.applyTimeBase && !compressed_) {
        if (auto base = kineto::peekBaseTime(path_))
            offerTimeShift(*base);
    }
    holding_ = options_.settleInMemoryRecords > 0;
    auto result = kineto::readTrace(file, *this);
    if (!result.sawTraceEvents)
        throw kineto::NotATraceError(path_ + ": no \"traceEvents\" array; not a PyTorch profiler (Kineto) JSON trace");
    if (records_ == 0)
        throw FormatError(path_ + ": no usable events (" + std::to_string(events_) +
                          " in traceEvents, none a GPU activity or CPU range with valid times); "
                          "check that the profiler recorded activities");
    deliver();
    if (holding_) {
        settleInMemory();
        release();
    }
}

ImportedSource KinetoImporter::finish(kineto::BatchWriter& out)
{
    // From here on records go straight to the store.
    deliver_ = [&out](kineto::RecordBatch& b) { out.write(b); };
    deliver();
    StoreWriter& writer = out.store();
    const int64_t sourceId = out.sourceId();

    resolveFlows(out);
    joinPendingNccl(out);
    deliver(); // the NCCL operations joinPendingNccl() wrote
    if (ncclKernels_ == 0 && !cpuComms_.empty())
        diag(Severity::Info, "nccl_without_kernels",
             std::to_string(cpuComms_.size()) + " collective calls on the CPU side, but no NCCL kernels on a GPU");
    std::vector<CpuComm>().swap(cpuComms_);
    finishRank(out);
    int r = *rank_;
    if (settled_) {
        const auto& before = out.before();
        writer.settled(r, before.activities, before.activities + activities_, before.cpuRanges,
                       before.cpuRanges + cpuRanges_);
    }

    // The rank's GPU is the one that ran the most kernels; GPUs are those with
    // activities (deviceProperties lists every GPU on the host).
    std::optional<int> mainDevice;
    int64_t most = -1;
    for (const auto& [device, use] : devices_) {
        GpuInfo g;
        if (auto it = deviceProps_.find(device); it != deviceProps_.end())
            g = it->second;
        g.rank = r;
        g.device = device;
        writer.addGpu(g);
        if (use.kernels > most) {
            most = use.kernels;
            mainDevice = device;
        }
    }
    RankInfo info;
    info.rank = r;
    info.worldSize = worldSize_;
    if (host_.empty()) {
        // torch.profiler's tensorboard handler names files after the host.
        if (auto fromName = hostFromFileName(path_))
            host_ = fromName->host;
    }
    info.host = host_;
    info.pid = cpuPid_;
    info.device = mainDevice;
    info.sourceId = sourceId;
    writer.addRank(info);
    for (auto& [name, g] : groups_) {
        g.rank = r;
        writer.addProcessGroup(g);
    }
    if (simulated_) {
        writer.setMeta("simulated", "1");
        writer.setMeta("simulated_by", simulatedBy_.empty() ? std::string("pipescope simulate") : simulatedBy_);
    }

    ImportedSource source;
    source.sourceId = sourceId;
    source.ranks = {r};
    source.records = records_;
    source.jobId = jobId_;
    source.worldSize = worldSize_;
    // Kineto writes microseconds since the epoch, or since baseTimeNanoseconds
    // when the trace has it (to keep doubles precise). Both are the host's
    // wall clock, shared across hosts as far as NTP keeps them in step. Times
    // that are neither (an older profiler's process-relative clock) start
    // before 2001 when read as epoch microseconds.
    source.timeBase = baseTime_.value_or(0);
    source.timeBaseApplied = timeShift_;
    source.absoluteClock = baseTime_.has_value() || (minTs_ != kMaxInt64 && minTs_ >= 1'000'000'000'000'000'000);
    details_["events"] = events_;
    details_["compressed"] = compressed_;
    details_["absolute_clock"] = source.absoluteClock;
    if (baseTime_)
        details_["baseTimeNanoseconds"] = *baseTime_;
    writer.setSourceRank(sourceId, r, source.timeBase, details_.dump(-1, ' ', false, json::error_handler_t::replace));
    for (const auto& [kind, d] : diags_)
        writer.diagnostic(sourceId, d.severity, kind, d.example, d.count);
    out.done();
    return source;
}

} // namespace

namespace kineto {

struct KinetoFileImport::Importer {
    Importer(const std::string& path, const ImportOptions& options) : importer(path, options) {}
    KinetoImporter importer;
};

KinetoFileImport::KinetoFileImport(const std::string& path, const ImportOptions& options)
    : importer_(std::make_unique<Importer>(path, options))
{
}

KinetoFileImport::~KinetoFileImport() = default;

void KinetoFileImport::parse(const Deliver& deliver) { importer_->importer.parse(deliver); }

ImportedSource KinetoFileImport::finish(BatchWriter& out) { return importer_->importer.finish(out); }

} // namespace kineto

ImportedSource importKineto(const std::string& path, StoreWriter& writer, const ImportOptions& options)
{
    kineto::KinetoFileImport file(path, options);
    kineto::BatchWriter out(writer, path, options);
    file.parse([&out](kineto::RecordBatch& batch) { out.write(batch); });
    return file.finish(out);
}

} // namespace pipescope
