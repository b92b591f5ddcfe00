#pragma once
// One connection to a rank's capture file (schema in
// core/import/capture/CaptureSchema.h). Single-threaded: the writer thread
// owns it. Nothing here throws; the first SQLite error is kept and reported
// once, and later calls become no-ops so the profiled program runs on.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

struct sqlite3;
struct sqlite3_stmt;

namespace pipescope::collect {

// Facts about the profiled process, written to `meta` when the file opens.
struct ProcessMeta {
    std::optional<int> rank, worldSize, localRank;
    std::string rankVar;
    std::string host;
    long pid = 0;
    std::string bootId;
    std::string command;
    int64_t startNs = 0;
};
ProcessMeta currentProcessMeta();

struct DeviceRow {
    int64_t id = 0;
    std::string name, uuid;
    std::optional<int64_t> memoryBytes, smCount, ccMajor, ccMinor;
};

struct GpuActivityRow {
    int kind = 0; // capture::GpuActivityKind
    int64_t start = 0, end = 0;
    std::optional<int64_t> device, context, stream, correlation;
    int64_t nameId = 0;
    std::optional<int64_t> bytes, copyKind;
    std::optional<int64_t> grid[3], block[3];
    std::optional<int64_t> graphId;
};

struct ApiCallRow {
    int kind = 0; // capture::ApiKind
    int64_t cbid = 0, nameId = 0, tid = 0, start = 0, end = 0, correlation = 0;
};

struct NvtxRow {
    int kind = 0; // capture::NvtxKind
    int64_t tid = 0, start = 0;
    std::optional<int64_t> end;
    int64_t nameId = 0;
    std::optional<int64_t> domainId;
};

struct MemoryRow {
    int64_t device = 0, ts = 0, bytes = 0;
    std::optional<int64_t> address, memoryKind;
};

struct NcclCommRow {
    uint64_t commHash = 0;
    std::string name;
    int nranks = 0, rank = 0;
    std::optional<int> nnodes;
    int64_t initNs = 0;
};

struct NcclOpRow {
    uint64_t commHash = 0;
    std::string func;
    bool isP2p = false;
    std::optional<int64_t> count;
    std::string dtype;
    std::optional<int64_t> bytes;
    std::optional<int64_t> peer, root, seq;
    std::string algo, proto;
    std::optional<int64_t> nchannels;
    int64_t start = 0, end = 0;
};

class CaptureDb {
public:
    CaptureDb() = default;
    ~CaptureDb();
    CaptureDb(const CaptureDb&) = delete;
    CaptureDb& operator=(const CaptureDb&) = delete;

    // Opens or creates the file and its schema, then records `meta`. Several
    // connections (the CUPTI collector and the NCCL plugin of one process) may
    // share a file. Returns false and sets `error` on failure.
    bool open(const std::string& path, const ProcessMeta& meta, std::string& error);
    void close();
    bool ok() const { return db_ != nullptr && failed_.empty(); }
    const std::string& error() const { return failed_; }
    const std::string& path() const { return path_; }

    bool begin();
    bool commit();

    void setMeta(std::string_view key, std::string_view value);
    // Keeps the larger of the stored and the given integer (end time from two connections).
    void setMetaMax(std::string_view key, int64_t value);
    int64_t intern(std::string_view text);

    void addDevice(const DeviceRow& d);
    void addContext(int64_t context, int64_t device);
    void addGpuActivity(const GpuActivityRow& a);
    void addApiCall(const ApiCallRow& a);
    void addNvtx(const NvtxRow& r);
    void addMemory(const MemoryRow& m);
    void addNcclComm(const NcclCommRow& c);
    void addNcclOp(const NcclOpRow& op);
    void addWindow(int64_t start, std::optional<int64_t> end, std::string_view reason);
    // Adds to the dropped-record count of `source`.
    void addDropped(std::string_view source, int64_t count);

private:
    sqlite3_stmt* prepare(const char* sql);
    bool exec(const char* sql);
    bool step(sqlite3_stmt* st);
    void fail(const std::string& what);

    sqlite3* db_ = nullptr;
    std::string path_;
    std::string failed_;
    bool inTransaction_ = false;
    // Looked up by string_view: no allocation per record for names seen before.
    struct StringHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> strings_;
    sqlite3_stmt *insString_ = nullptr, *selString_ = nullptr, *insMeta_ = nullptr, *insMetaMax_ = nullptr,
                 *insDevice_ = nullptr, *insContext_ = nullptr, *insGpu_ = nullptr, *insApi_ = nullptr,
                 *insNvtx_ = nullptr, *insMemory_ = nullptr, *insComm_ = nullptr, *insNccl_ = nullptr,
                 *insWindow_ = nullptr, *insDropped_ = nullptr;
};

} // namespace pipescope::collect
