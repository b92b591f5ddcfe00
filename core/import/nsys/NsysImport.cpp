// Nsight Systems SQLite export -> store. One pass per table; names resolve
// through StringIds on first use; times stay relative to the session start,
// whose UTC epoch time becomes the source's time base.
#include "import/Import.h"

#include "import/nsys/NsysExport.h"
#include "util/Error.h"
#include "util/Limits.h"
#include "util/Progress.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <unordered_map>

namespace pipescope {

namespace {

using nsys::Export;
using OptInt = std::optional<int64_t>;

// globalTid and globalPid pack (vm, pid, tid) in 64 bits; a process's id is
// its threads' ids with the low 24 bits cleared, as Nsight's own scripts join
// them (k.globalPid = r.globalTid & 0xFFFFFFFFFF000000).
constexpr int64_t kThreadBits = 0xFFFFFF;
int64_t processOf(int64_t globalTid) { return globalTid & ~kThreadBits; }
int64_t osPid(int64_t globalPid) { return (globalPid >> 24) & 0xFFFFFF; }
int64_t osTid(int64_t globalTid) { return globalTid & kThreadBits; }

// Times beyond this are corrupt, and shifting or subtracting them later could overflow.
constexpr TimeNs kTimeLimit = TimeNs{1} << 62;

// CUPTI writes this for "no stream" (context and event synchronisation).
constexpr int64_t kInvalidStream = 0xFFFFFFFF;

constexpr int kProgressEvery = 1 << 16;

std::string syncName(OptInt type)
{
    // CUpti_ActivitySynchronizationType, named as Kineto names them.
    switch (type.value_or(0)) {
    case 1: return "Event Sync";
    case 2: return "Stream Wait Event";
    case 3: return "Stream Sync";
    case 4: return "Context Sync";
    default: return "Unknown Sync";
    }
}

class NsysImporter {
public:
    NsysImporter(Export& ex, StoreWriter& writer, const ImportOptions& options)
        : ex_(ex), w_(writer), opt_(options), progress_("Importing " + ex.path(), 0, options.progress)
    {
    }

    ImportedSource run();

private:
    struct Times {
        TimeNs start = 0, end = 0;
    };
    struct Placed {
        int rank = 0;
        int device = 0;
        int64_t stream = 0; // store id
        Times times;
        OptInt correlation;
    };

    void readEnums();
    void readGpus();
    void readStreamNames();
    void readTimeBase();
    void assignRanks();
    std::set<int64_t> gpuProcesses(bool& unknownProcess);
    std::set<int64_t> cpuProcesses();
    void addSource();

    void importKernels();
    void importMemcpys();
    void importMemsets();
    void importSyncs();
    void importApiCalls(const std::string& table, CpuRangeKind defaultKind);
    void importNvtx();
    void finishRanks();

    std::optional<Times> times(const char* what, OptInt start, OptInt end);
    std::string gpuColumns(const std::string& table);
    std::optional<Placed> place(sql::Statement& st, const char* what);
    ActivityRecord activity(const Placed& p, ActivityKind kind, StringId nameId) const;
    std::string memKind(OptInt kind) const;
    std::optional<int> rankOf(OptInt globalPid, const char* what);
    std::optional<int> device(OptInt deviceId, const char* what);
    int64_t streamOf(int rank, int device, OptInt stream, OptInt globalPid);
    StringId name(OptInt stringId);
    StringId text(std::string_view s) { return w_.intern(s); }
    void bad(const std::string& kind, const std::string& example, Severity s = Severity::Warning)
    {
        if (sourceId_ == 0)
            pending_.push_back({kind, example, s}); // the source row is added once the ranks are known
        else
            w_.diagnostic(sourceId_, s, kind, example);
    }
    void tick()
    {
        if (++rows_ % kProgressEvery == 0)
            progress_.update(rows_);
    }
    int64_t countRows(const char* table);

    Export& ex_;
    StoreWriter& w_;
    const ImportOptions& opt_;
    Progress progress_;
    int64_t sourceId_ = 0;
    struct Pending {
        std::string kind, example;
        Severity severity;
    };
    std::vector<Pending> pending_;
    uint64_t rows_ = 0;
    int64_t records_ = 0;

    ImportedSource result_;
    std::map<int, GpuInfo> gpus_;                 // TARGET_INFO_GPU by device id
    std::map<std::tuple<int64_t, int, int64_t>, std::string> streamNames_; // (pid, device, stream)
    std::map<int64_t, int> rankOfProcess_;    // globalPid -> rank
    std::set<int> ranks_;
    std::map<int, std::map<int, int64_t>> kernelsPerDevice_; // rank -> device -> kernels
    std::set<std::pair<int, int>> usedDevices_;
    std::unordered_map<int64_t, StringId> names_; // StringIds.id -> store string
    std::unordered_map<StringId, Collective> ncclKinds_; // NCCL kernel names: what they run
    std::optional<sql::Statement> lookup_;
    std::set<int64_t> runtimeClasses_, driverClasses_;
    std::set<int64_t> nvtxRangeTypes_;
    int64_t nvtxDomainCreate_ = 75;
    std::map<int64_t, std::string> memKinds_;
    nlohmann::json details_ = nlohmann::json::object();
};

int64_t NsysImporter::countRows(const char* table)
{
    if (!ex_.hasTable(table))
        return 0;
    auto st = ex_.prepare(std::string("SELECT COUNT(*) FROM \"") + table + "\"");
    st.step();
    return st.int64(0);
}

void NsysImporter::readEnums()
{
    // The enums travel with each export; read them rather than trust fixed
    // numbers, and fall back to the numbers 2.x and 3.x exports use.
    auto ids = [&](const char* table, std::initializer_list<std::string_view> names) {
        std::set<int64_t> out;
        if (!ex_.hasColumn(table, "id") || !ex_.hasColumn(table, "name"))
            return out;
        auto st = ex_.prepare(std::string("SELECT ") + ex_.intColumn(table, "id") + ", " +
                              ex_.textColumn(table, "name") + " FROM \"" + table + "\"");
        while (st.step()) {
            if (st.isNull(0) || st.isNull(1))
                continue;
            auto n = st.text(1);
            if (std::find(names.begin(), names.end(), n) != names.end())
                out.insert(st.int64(0));
        }
        return out;
    };
    runtimeClasses_ = ids("ENUM_NSYS_EVENT_CLASS", {"TRACE_PROCESS_EVENT_CUDA_RUNTIME"});
    driverClasses_ = ids("ENUM_NSYS_EVENT_CLASS", {"TRACE_PROCESS_EVENT_CUDA_DRIVER"});
    if (runtimeClasses_.empty() && driverClasses_.empty()) {
        runtimeClasses_ = {0};
        driverClasses_ = {1};
    }
    nvtxRangeTypes_ = ids("ENUM_NSYS_EVENT_TYPE",
                          {"NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange", "NvtxtStartEndRange"});
    if (nvtxRangeTypes_.empty())
        nvtxRangeTypes_ = {59, 60, 70, 71};
    auto domain = ids("ENUM_NSYS_EVENT_TYPE", {"NvtxDomainCreate"});
    if (domain.size() == 1)
        nvtxDomainCreate_ = *domain.begin();

    // Memory kinds as nsys numbers them (not CUPTI's order), for memcpy names.
    memKinds_ = {{0, "Pageable"}, {1, "Pinned"}, {2, "Device"}, {3, "Array"},
                 {4, "Managed"}, {5, "Device Static"}, {6, "Managed Static"}, {7, "Unknown"}};
    const char* mk = "ENUM_CUDA_MEM_KIND";
    if (ex_.hasColumn(mk, "id") && ex_.hasColumn(mk, "label")) {
        std::map<int64_t, std::string> kinds;
        auto st = ex_.prepare(std::string("SELECT ") + ex_.intColumn(mk, "id") + ", " + ex_.textColumn(mk, "label") +
                              " FROM \"" + mk + "\"");
        while (st.step())
            if (!st.isNull(0) && !st.isNull(1))
                kinds[st.int64(0)] = st.string(1).substr(0, 64);
        if (!kinds.empty())
            memKinds_ = std::move(kinds);
    }
}

void NsysImporter::readGpus()
{
    const std::string t = "TARGET_INFO_GPU";
    if (!ex_.hasTable(t))
        return;
    auto st = ex_.prepare("SELECT " + ex_.intColumn(t, "id") + ", " + ex_.textColumn(t, "name") + ", " +
                          ex_.intColumn(t, "totalMemory") + ", " + ex_.intColumn(t, "smCount") + ", " +
                          ex_.textColumn(t, "uuid") + ", " + ex_.intColumn(t, "computeMajor") + ", " +
                          ex_.intColumn(t, "computeMinor") + ", " + ex_.textColumn(t, "busLocation") +
                          " FROM \"" + t + "\"");
    auto list = nlohmann::json::array();
    while (st.step()) {
        OptInt id = st.optInt64(0);
        if (!id || *id < 0 || *id > INT_MAX) {
            bad("gpu:bad_device", "TARGET_INFO_GPU row without a usable device id");
            continue;
        }
        GpuInfo g;
        g.device = static_cast<int>(*id);
        g.name = st.string(1);
        g.memoryBytes = st.optInt64(2);
        if (auto sm = st.optInt64(3); sm && *sm >= 0 && *sm <= INT_MAX)
            g.smCount = static_cast<int>(*sm);
        g.uuid = st.string(4);
        if (!st.isNull(5) && !st.isNull(6))
            g.computeCapability = std::to_string(st.int64(5)) + "." + std::to_string(st.int64(6));
        list.push_back({{"device", g.device}, {"name", g.name}, {"busLocation", st.string(7)}});
        gpus_.try_emplace(g.device, std::move(g));
    }
    details_["gpus"] = std::move(list);
}

void NsysImporter::readStreamNames()
{
    const std::string t = "TARGET_INFO_NVTX_CUDA_STREAM";
    if (!ex_.hasTable(t))
        return;
    auto st = ex_.prepare("SELECT " + ex_.intColumn(t, "processId") + ", " + ex_.intColumn(t, "deviceId") + ", " +
                          ex_.intColumn(t, "streamId") + ", " + ex_.textColumn(t, "name") + " FROM \"" + t + "\"");
    while (st.step()) {
        if (st.isNull(0) || st.isNull(1) || st.isNull(2) || st.isNull(3))
            continue;
        int64_t dev = st.int64(1);
        if (dev < 0 || dev > INT_MAX)
            continue;
        streamNames_.emplace(std::make_tuple(st.int64(0), static_cast<int>(dev), st.int64(2)), st.string(3));
    }
}

void NsysImporter::readTimeBase()
{
    const std::string t = "TARGET_INFO_SESSION_START_TIME";
    if (!ex_.hasColumn(t, "utcEpochNs"))
        return;
    auto st = ex_.prepare("SELECT " + ex_.intColumn(t, "utcEpochNs") + " FROM \"" + t + "\" LIMIT 1");
    if (st.step() && !st.isNull(0)) {
        result_.timeBase = st.int64(0);
        result_.absoluteClock = true;
    }
}

// Processes that ran GPU work. `unknown` is set when some GPU rows do not say.
std::set<int64_t> NsysImporter::gpuProcesses(bool& unknown)
{
    std::set<int64_t> out;
    for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"}) {
        if (!ex_.hasTable(t))
            continue;
        auto st = ex_.prepare("SELECT DISTINCT " + ex_.intColumn(t, "globalPid") + " FROM \"" + t + "\"");
        while (st.step()) {
            if (st.isNull(0))
                unknown = true;
            else
                out.insert(st.int64(0));
        }
    }
    return out;
}

std::set<int64_t> NsysImporter::cpuProcesses()
{
    std::set<int64_t> out;
    for (const char* t : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER", "NVTX_EVENTS"}) {
        if (!ex_.hasTable(t))
            continue;
        auto st = ex_.prepare("SELECT DISTINCT " + ex_.intColumn(t, "globalTid") + " FROM \"" + t + "\"");
        while (st.step())
            if (!st.isNull(0))
                out.insert(processOf(st.int64(0)));
    }
    return out;
}

void NsysImporter::assignRanks()
{
    // MPI_RANKS, when the run was traced with MPI, says which process is which
    // rank. Otherwise every process with GPU work is one rank, numbered in pid
    // order from --rank (or 0).
    std::map<int64_t, int> mpi;
    const std::string t = "MPI_RANKS";
    if (ex_.hasTable(t)) {
        auto st = ex_.prepare("SELECT " + ex_.intColumn(t, "globalTid") + ", " + ex_.intColumn(t, "rank") +
                              " FROM \"" + t + "\"");
        while (st.step()) {
            OptInt tid = st.optInt64(0), rank = st.optInt64(1);
            if (!tid || !rank || !validRank(*rank)) {
                bad("mpi_ranks:bad_row", "MPI_RANKS row without a usable globalTid and a rank in 0.." + std::to_string(kMaxRank));
                continue;
            }
            auto [it, inserted] = mpi.emplace(processOf(*tid), static_cast<int>(*rank));
            if (!inserted && it->second != *rank)
                bad("mpi_ranks:conflict", "process " + std::to_string(osPid(it->first)) +
                                              " is listed as MPI rank " + std::to_string(it->second) + " and " +
                                              std::to_string(*rank) + "; the first is kept");
        }
    }
    std::set<int> mpiRanks;
    for (const auto& [p, r] : mpi)
        mpiRanks.insert(r);
    bool unknown = false;
    std::set<int64_t> gpu = gpuProcesses(unknown);
    if (!mpi.empty() && opt_.rank && mpiRanks.size() == 1) {
        for (const auto& [p, r] : mpi)
            rankOfProcess_[p] = *opt_.rank;
    } else if (!mpi.empty()) {
        rankOfProcess_ = std::move(mpi);
        if (opt_.rank)
            bad("rank_option_ignored", "the export lists several MPI ranks, so the rank given is not used",
                Severity::Info);
    } else {
        std::set<int64_t> procs = gpu;
        if (procs.empty() && !unknown)
            procs = cpuProcesses(); // a trace without GPU work still has its CPU side
        std::vector<int64_t> ordered(procs.begin(), procs.end());
        std::stable_sort(ordered.begin(), ordered.end(), [](int64_t a, int64_t b) { return osPid(a) < osPid(b); });
        int64_t base = opt_.rank.value_or(0);
        if (!validRank(base) || !validRank(base + std::max<int64_t>(0, static_cast<int64_t>(ordered.size()) - 1)))
            throw Error(ex_.path() + ": ranks from " + std::to_string(base) + " for its " + std::to_string(ordered.size()) +
                        " processes leave the supported ranks 0.." + std::to_string(kMaxRank) + "; pass a smaller --rank");
        for (size_t i = 0; i < ordered.size(); ++i)
            rankOfProcess_[ordered[i]] = static_cast<int>(base + static_cast<int64_t>(i));
    }
    for (const auto& [p, r] : rankOfProcess_)
        ranks_.insert(r);
    if (ranks_.empty() && unknown)
        ranks_.insert(opt_.rank.value_or(0));
}

void NsysImporter::addSource()
{
    const auto& s = ex_.schema();
    details_["schemaVersion"] = s.version;
    details_["metaTable"] = s.metaTable;
    if (!s.productVersion.empty())
        details_["productVersion"] = s.productVersion;
    details_["kernelNames"] = opt_.shortKernelNames ? "shortName" : "demangledName";
    details_["timeBase"] = result_.absoluteClock ? "session start, UTC epoch ns" : "unknown";
    auto procs = nlohmann::json::array();
    for (const auto& [p, r] : rankOfProcess_)
        procs.push_back({{"globalPid", p}, {"pid", osPid(p)}, {"rank", r}});
    details_["processes"] = std::move(procs);

    SourceRecord src;
    src.path = ex_.path();
    src.format = "nsys";
    if (ranks_.size() == 1)
        src.rank = *ranks_.begin();
    src.timeBase = result_.timeBase;
    // Export strings need not be UTF-8; a strict dump would throw on them.
    src.details = details_.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    sourceId_ = w_.addSource(src);
    for (const auto& d : pending_)
        w_.diagnostic(sourceId_, d.severity, d.kind, d.example);
    pending_.clear();
}

std::optional<NsysImporter::Times> NsysImporter::times(const char* what, OptInt start, OptInt end)
{
    if (!start || !end) {
        bad(std::string(what) + ":missing_time", std::string(what) + " row without an integer start and end");
        return std::nullopt;
    }
    if (*start <= -kTimeLimit || *start >= kTimeLimit || *end <= -kTimeLimit || *end >= kTimeLimit) {
        bad(std::string(what) + ":time_out_of_range",
            std::string(what) + " row with start " + std::to_string(*start) + ", end " + std::to_string(*end));
        return std::nullopt;
    }
    if (*end < *start) {
        bad(std::string(what) + ":end_before_start",
            std::string(what) + " row ending before it starts: start " + std::to_string(*start) + ", end " +
                std::to_string(*end));
        return std::nullopt;
    }
    return Times{*start, *end};
}

std::optional<int> NsysImporter::rankOf(OptInt globalPid, const char* what)
{
    if (globalPid) {
        auto it = rankOfProcess_.find(*globalPid);
        if (it != rankOfProcess_.end())
            return it->second;
    } else if (ranks_.size() == 1) {
        return *ranks_.begin();
    }
    // Dropping GPU work distorts busy time; a launcher's CPU ranges do not.
    bool gpuWork = std::string_view(what) != "runtime" && std::string_view(what) != "driver" &&
                   std::string_view(what) != "nvtx";
    bad(std::string(what) + ":process_not_a_rank",
        std::string(what) + " row of process " + (globalPid ? std::to_string(osPid(*globalPid)) : "(unknown)") +
            ", which is not one of the file's ranks; skipped",
        gpuWork ? Severity::Warning : Severity::Info);
    return std::nullopt;
}

std::optional<int> NsysImporter::device(OptInt deviceId, const char* what)
{
    if (!deviceId || *deviceId < 0 || *deviceId > INT_MAX) {
        bad(std::string(what) + ":bad_device", std::string(what) + " row without a usable deviceId");
        return std::nullopt;
    }
    int d = static_cast<int>(*deviceId);
    if (!gpus_.empty() && !gpus_.count(d))
        bad(std::string(what) + ":unknown_device",
            std::string(what) + " on device " + std::to_string(d) + ", which TARGET_INFO_GPU does not list; kept");
    return d;
}

int64_t NsysImporter::streamOf(int rank, int dev, OptInt stream, OptInt globalPid)
{
    int64_t s = stream.value_or(-1);
    if (s == kInvalidStream || s < 0)
        s = -1; // device-wide (context or event synchronisation), as Kineto shows it
    std::string_view label;
    if (globalPid) {
        auto it = streamNames_.find(std::make_tuple(osPid(*globalPid), dev, s));
        if (it != streamNames_.end())
            label = it->second;
    }
    usedDevices_.emplace(rank, dev);
    return w_.stream(rank, dev, s, label);
}

StringId NsysImporter::name(OptInt id)
{
    if (!id)
        return text("");
    auto it = names_.find(*id);
    if (it != names_.end())
        return it->second;
    if (!lookup_ && ex_.hasColumn("StringIds", "id") && ex_.hasColumn("StringIds", "value"))
        lookup_ = ex_.prepare("SELECT CAST(\"value\" AS TEXT) FROM \"StringIds\" WHERE \"id\" = ?1");
    if (lookup_)
        lookup_->bind(1, *id);
    StringId sid;
    if (lookup_ && lookup_->step() && !lookup_->isNull(0)) {
        std::string_view value = lookup_->text(0);
        sid = text(value);
        if (isNcclKernelName(value)) {
            // A Generic kernel (NCCL >= 2.19) does not say what it runs.
            Collective kind = collectiveFromKernelName(value).value_or(Collective::Unknown);
            if (kind == Collective::Generic)
                kind = Collective::Unknown;
            ncclKinds_.emplace(sid, kind);
        }
    } else {
        bad("strings:missing", "string id " + std::to_string(*id) + " is not in StringIds");
        sid = text("(string " + std::to_string(*id) + ")");
    }
    if (lookup_)
        lookup_->reset();
    names_.emplace(*id, sid);
    return sid;
}


std::string NsysImporter::gpuColumns(const std::string& t)
{
    auto c = [&](const char* col) { return ex_.intColumn(t, col); };
    return c("start") + ", " + c("end") + ", " + c("deviceId") + ", " + c("streamId") + ", " + c("correlationId") +
           ", " + c("globalPid");
}

// Reads the columns gpuColumns() selects; nullopt (and a diagnostic) for rows
// that cannot be placed on a rank's GPU stream.
std::optional<NsysImporter::Placed> NsysImporter::place(sql::Statement& st, const char* what)
{
    tick();
    auto tm = times(what, st.optInt64(0), st.optInt64(1));
    if (!tm)
        return std::nullopt;
    OptInt gpid = st.optInt64(5);
    auto rank = rankOf(gpid, what);
    if (!rank)
        return std::nullopt;
    auto dev = device(st.optInt64(2), what);
    if (!dev)
        return std::nullopt;
    Placed p;
    p.rank = *rank;
    p.device = *dev;
    p.stream = streamOf(*rank, *dev, st.optInt64(3), gpid);
    p.times = *tm;
    p.correlation = st.optInt64(4);
    return p;
}

ActivityRecord NsysImporter::activity(const Placed& p, ActivityKind kind, StringId nameId) const
{
    ActivityRecord a;
    a.rank = p.rank;
    a.streamId = p.stream;
    a.kind = kind;
    a.start = p.times.start;
    a.end = p.times.end;
    a.name = nameId;
    a.correlation = p.correlation;
    return a;
}

void NsysImporter::importKernels()
{
    const std::string t = "CUPTI_ACTIVITY_KIND_KERNEL";
    if (!ex_.hasTable(t))
        return;
    auto c = [&](const char* col) { return ex_.intColumn(t, col); };
    const char* primary = opt_.shortKernelNames ? "shortName" : "demangledName";
    const char* secondary = opt_.shortKernelNames ? "demangledName" : "shortName";
    auto st = ex_.prepare("SELECT " + gpuColumns(t) + ", " + c(primary) + ", " + c(secondary) + ", " + c("gridX") +
                          ", " + c("gridY") + ", " + c("gridZ") + ", " + c("blockX") + ", " + c("blockY") + ", " +
                          c("blockZ") + " FROM \"" + t + "\"");
    auto dims = [&](int i) -> std::string {
        if (st.isNull(i) || st.isNull(i + 1) || st.isNull(i + 2))
            return {};
        return std::to_string(st.int64(i)) + "," + std::to_string(st.int64(i + 1)) + "," +
               std::to_string(st.int64(i + 2));
    };
    while (st.step()) {
        auto p = place(st, "kernel");
        if (!p)
            continue;
        OptInt nameId = !st.isNull(6) ? st.optInt64(6) : st.optInt64(7);
        auto a = activity(*p, ActivityKind::Kernel, nameId ? name(nameId) : text("(unnamed kernel)"));
        a.grid = dims(8);
        a.block = dims(11);
        int64_t id = w_.addActivity(a);
        ++records_;
        ++kernelsPerDevice_[p->rank][p->device];

        // An export tells NCCL work only by the kernel's name.
        auto nccl = ncclKinds_.find(a.name);
        if (nccl == ncclKinds_.end())
            continue;
        NcclRecord op;
        op.rank = p->rank;
        op.activityId = id;
        op.kind = nccl->second;
        op.isP2p = isPointToPoint(nccl->second);
        op.start = a.start;
        op.end = a.end;
        op.streamId = a.streamId;
        w_.addNcclOp(op);
        ++records_;
    }
}

std::string NsysImporter::memKind(OptInt kind) const
{
    if (!kind)
        return "Unknown";
    auto it = memKinds_.find(*kind);
    return it != memKinds_.end() ? it->second : "Unknown";
}

void NsysImporter::importMemcpys()
{
    const std::string t = "CUPTI_ACTIVITY_KIND_MEMCPY";
    if (!ex_.hasTable(t))
        return;
    auto c = [&](const char* col) { return ex_.intColumn(t, col); };
    auto st = ex_.prepare("SELECT " + gpuColumns(t) + ", " + c("bytes") + ", " + c("copyKind") + ", " +
                          c("srcKind") + ", " + c("dstKind") + " FROM \"" + t + "\"");
    while (st.step()) {
        auto p = place(st, "memcpy");
        if (!p)
            continue;
        // CUpti_ActivityMemcpyKind; 11-13 are unified-memory migrations.
        int64_t k = st.optInt64(7).value_or(0);
        bool unified = k >= 11 && k <= 13;
        CopyKind kind = CopyKind::Unknown;
        if (k >= 0 && k <= 10)
            kind = static_cast<CopyKind>(k);
        else if (unified)
            kind = k == 11 ? CopyKind::HtoD : k == 12 ? CopyKind::DtoH : CopyKind::DtoD;
        std::string label = "Memcpy ";
        if (unified)
            label += "Unified ";
        label += kind == CopyKind::Unknown ? std::string("Unknown") : std::string(toString(kind));
        if (!st.isNull(8) || !st.isNull(9))
            label += " (" + memKind(st.optInt64(8)) + " -> " + memKind(st.optInt64(9)) + ")";
        auto a = activity(*p, ActivityKind::Memcpy, text(label));
        a.copyKind = kind;
        if (auto b = st.optInt64(6); b && *b >= 0)
            a.bytes = b;
        w_.addActivity(a);
        ++records_;
    }
}

void NsysImporter::importMemsets()
{
    const std::string t = "CUPTI_ACTIVITY_KIND_MEMSET";
    if (!ex_.hasTable(t))
        return;
    auto c = [&](const char* col) { return ex_.intColumn(t, col); };
    auto st = ex_.prepare("SELECT " + gpuColumns(t) + ", " + c("bytes") + ", " + c("memKind") + " FROM \"" + t + "\"");
    while (st.step()) {
        auto p = place(st, "memset");
        if (!p)
            continue;
        std::string label = st.isNull(7) ? std::string("Memset") : "Memset (" + memKind(st.optInt64(7)) + ")";
        auto a = activity(*p, ActivityKind::Memset, text(label));
        if (auto b = st.optInt64(6); b && *b >= 0)
            a.bytes = b;
        w_.addActivity(a);
        ++records_;
    }
}

void NsysImporter::importSyncs()
{
    const std::string t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
    if (!ex_.hasTable(t))
        return;
    auto st = ex_.prepare("SELECT " + gpuColumns(t) + ", " + ex_.intColumn(t, "syncType") + " FROM \"" + t + "\"");
    while (st.step()) {
        auto p = place(st, "sync");
        if (!p)
            continue;
        w_.addActivity(activity(*p, ActivityKind::Sync, text(syncName(st.optInt64(6)))));
        ++records_;
    }
}

void NsysImporter::importApiCalls(const std::string& t, CpuRangeKind defaultKind)
{
    if (!ex_.hasTable(t))
        return;
    bool classes = ex_.hasColumn(t, "eventClass");
    auto c = [&](const char* col) { return ex_.intColumn(t, col); };
    auto st = ex_.prepare("SELECT " + c("start") + ", " + c("end") + ", " + c("eventClass") + ", " + c("globalTid") +
                          ", " + c("correlationId") + ", " + c("nameId") + " FROM \"" + t + "\"");
    while (st.step()) {
        tick();
        CpuRangeKind kind = defaultKind;
        if (classes) {
            // Other event classes repeat the CUDA calls (e.g. as "CUDA API"
            // ranges); keeping them would count every call twice.
            OptInt cls = st.optInt64(2);
            if (cls && runtimeClasses_.count(*cls))
                kind = CpuRangeKind::Runtime;
            else if (cls && driverClasses_.count(*cls))
                kind = CpuRangeKind::Driver;
            else {
                bad("api:other_event_class", "CUDA API row of event class " +
                                                 (cls ? std::to_string(*cls) : std::string("(none)")) +
                                                 ", which repeats runtime or driver calls; skipped",
                    Severity::Info);
                continue;
            }
        }
        const char* what = kind == CpuRangeKind::Driver ? "driver" : "runtime";
        auto tm = times(what, st.optInt64(0), st.optInt64(1));
        if (!tm)
            continue;
        OptInt gtid = st.optInt64(3);
        auto rank = rankOf(gtid ? OptInt(processOf(*gtid)) : std::nullopt, what);
        if (!rank)
            continue;
        CpuRangeRecord r;
        r.rank = *rank;
        r.tid = gtid ? osTid(*gtid) : 0;
        r.kind = kind;
        r.start = tm->start;
        r.end = tm->end;
        r.name = st.isNull(5) ? text("(unnamed call)") : name(st.optInt64(5));
        r.correlation = st.optInt64(4);
        w_.addCpuRange(r);
        ++records_;
    }
}

void NsysImporter::importNvtx()
{
    const std::string t = "NVTX_EVENTS";
    if (!ex_.hasTable(t))
        return;
    auto c = [&](const char* col) { return ex_.intColumn(t, col); };
    auto label = [&](sql::Statement& st, int textCol, int idCol) -> std::optional<StringId> {
        if (!st.isNull(textCol))
            return text(st.text(textCol));
        if (!st.isNull(idCol))
            return name(st.optInt64(idCol));
        return std::nullopt;
    };

    // Domains are named by their creation event, per process.
    std::map<std::pair<int64_t, int64_t>, StringId> domains;
    {
        auto st = ex_.prepare("SELECT " + c("domainId") + ", " + c("globalTid") + ", " + ex_.textColumn(t, "text") +
                              ", " + c("textId") + " FROM \"" + t + "\" WHERE " + c("eventType") + " = ?1");
        st.bind(1, nvtxDomainCreate_);
        while (st.step()) {
            if (st.isNull(0))
                continue;
            int64_t proc = st.isNull(1) ? -1 : processOf(st.int64(1));
            if (auto n = label(st, 2, 3))
                domains.emplace(std::make_pair(proc, st.int64(0)), *n);
        }
    }

    auto st = ex_.prepare("SELECT " + c("start") + ", " + c("end") + ", " + c("eventType") + ", " +
                          ex_.textColumn(t, "text") + ", " + c("textId") + ", " + c("globalTid") + ", " +
                          c("domainId") + " FROM \"" + t + "\"");
    while (st.step()) {
        tick();
        OptInt type = st.optInt64(2);
        if (!type || !nvtxRangeTypes_.count(*type))
            continue; // marks, domain and category names, payload-only events
        if (!st.isNull(0) && st.isNull(1)) {
            bad("nvtx:unterminated_range", "NVTX range started at " + std::to_string(st.int64(0)) +
                                               " and not ended before the capture stopped; skipped",
                Severity::Info);
            continue;
        }
        auto tm = times("nvtx", st.optInt64(0), st.optInt64(1));
        if (!tm)
            continue;
        OptInt gtid = st.optInt64(5);
        auto rank = rankOf(gtid ? OptInt(processOf(*gtid)) : std::nullopt, "nvtx");
        if (!rank)
            continue;
        CpuRangeRecord r;
        r.rank = *rank;
        r.tid = gtid ? osTid(*gtid) : 0;
        r.kind = CpuRangeKind::Nvtx;
        r.start = tm->start;
        r.end = tm->end;
        r.name = label(st, 3, 4).value_or(text(""));
        if (OptInt dom = st.optInt64(6); dom && *dom != 0) {
            auto it = domains.find({gtid ? processOf(*gtid) : -1, *dom});
            if (it != domains.end())
                r.domain = it->second;
        }
        w_.addCpuRange(r);
        ++records_;
    }
}

void NsysImporter::finishRanks()
{
    std::map<int, std::vector<int64_t>> processes;
    for (const auto& [p, r] : rankOfProcess_)
        processes[r].push_back(p);
    for (int rank : ranks_) {
        RankInfo info;
        info.rank = rank;
        info.sourceId = sourceId_;
        if (processes[rank].size() == 1)
            info.pid = osPid(processes[rank].front());
        // The rank's GPU is the one that ran most of its kernels.
        int64_t best = -1;
        for (const auto& [dev, n] : kernelsPerDevice_[rank]) {
            if (n > best) {
                best = n;
                info.device = dev;
            }
        }
        if (!info.device) {
            auto it = usedDevices_.lower_bound({rank, INT_MIN});
            if (it != usedDevices_.end() && it->first == rank)
                info.device = it->second;
        }
        w_.addRank(info);
    }
    // GPUs the ranks used; the export also lists idle GPUs of the machine,
    // which are kept in the source's details only.
    for (const auto& [rank, dev] : usedDevices_) {
        auto it = gpus_.find(dev);
        GpuInfo g = it != gpus_.end() ? it->second : GpuInfo{};
        g.rank = rank;
        g.device = dev;
        w_.addGpu(g);
    }
}

ImportedSource NsysImporter::run()
{
    readEnums();
    readGpus();
    readStreamNames();
    readTimeBase();
    assignRanks();
    addSource();

    uint64_t total = 0;
    for (const char* t : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_RUNTIME",
                          "CUPTI_ACTIVITY_KIND_DRIVER", "NVTX_EVENTS"})
        total += static_cast<uint64_t>(countRows(t));
    // An export without a single kernel, copy, API call or range would import
    // as an empty job; as a whole it is unusable.
    if (total == 0)
        throw FormatError(ex_.path() + ": the Nsight export holds no CUDA activity, API calls or NVTX ranges; "
                                       "profile with CUDA tracing on (nsys profile -t cuda,nvtx) and export again");
    progress_.setTotal(total);

    importKernels();
    importMemcpys();
    importMemsets();
    importSyncs();
    importApiCalls("CUPTI_ACTIVITY_KIND_RUNTIME", CpuRangeKind::Runtime);
    importApiCalls("CUPTI_ACTIVITY_KIND_DRIVER", CpuRangeKind::Driver);
    importNvtx();
    finishRanks();
    progress_.done();

    result_.sourceId = sourceId_;
    result_.ranks.assign(ranks_.begin(), ranks_.end());
    result_.records = records_;
    return result_;
}

} // namespace

ImportedSource importNsys(const std::string& path, StoreWriter& writer, const ImportOptions& options)
{
    nsys::Export ex(path);
    try {
        NsysImporter importer(ex, writer, options);
        return importer.run();
    } catch (const FormatError&) {
        throw; // already says what is wrong with the file
    } catch (const Error& e) {
        // SQLite errors while reading (a corrupt page, a value over the size
        // limit) are the file's fault; errors writing the store are not.
        if (ex.raisedBy(e))
            ex.rethrowAsFormatError(e);
        throw;
    }
}

} // namespace pipescope
