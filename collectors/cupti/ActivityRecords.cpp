#include "ActivityRecords.h"

#include "import/capture/CaptureSchema.h"

#include <cstdio>
#include <cstdlib>

namespace pipescope::collect {

namespace {

std::string uuidText(const CUuuid& u)
{
    char buf[64];
    const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
    std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return buf;
}

const char* copyKindName(uint8_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "Memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "Memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "Memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "Memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "Memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "Memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "Memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "Memcpy PtoP";
    default: return "Memcpy";
    }
}

const char* syncName(CUpti_ActivitySynchronizationType t)
{
    switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "Event synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "Stream wait event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "Stream synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "Context synchronize";
    default: return "Synchronize";
    }
}

// CUPTI marks "no stream" and "no value" with all-ones.
constexpr uint32_t kInvalid32 = 0xffffffffu;

std::optional<int64_t> opt32(uint32_t v)
{
    return v == kInvalid32 ? std::nullopt : std::optional<int64_t>(v);
}

// Device-to-host, host-to-device and peer-to-peer copies arrive as different
// record types with the same fields.
template <typename Record>
GpuActivityRow copyRow(const Record& c, CaptureDb& db)
{
    GpuActivityRow a;
    a.kind = capture::kMemcpy;
    a.start = static_cast<int64_t>(c.start);
    a.end = static_cast<int64_t>(c.end);
    a.device = c.deviceId;
    a.context = c.contextId;
    a.stream = c.streamId;
    a.correlation = c.correlationId;
    a.nameId = db.intern(copyKindName(c.copyKind));
    a.bytes = static_cast<int64_t>(c.bytes);
    a.copyKind = c.copyKind;
    return a;
}

} // namespace

const char* overheadKindName(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "driver_compiler";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "buffer_flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "resource";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: return "module_loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "lazy_function_loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "command_buffer_full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "buffer_request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "uvm_init";
    default: return "unknown";
    }
}

int64_t ActivityTranslator::apiNameId(int kind, uint32_t cbid, CaptureDb& db)
{
    uint64_t key = (static_cast<uint64_t>(kind) << 32) | cbid;
    if (auto it = apiNames_.find(key); it != apiNames_.end())
        return it->second;
    std::string name = apiName_ ? apiName_(kind, cbid) : std::string();
    if (name.empty())
        name = (kind == capture::kRuntime ? "cudaRuntime#" : "cuDriver#") + std::to_string(cbid);
    int64_t id = db.intern(name);
    apiNames_.emplace(key, id);
    return id;
}

void ActivityTranslator::storeMarker(const CUpti_ActivityMarker2& m, CaptureDb& db)
{
    int64_t tid = m.objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? static_cast<int64_t>(m.objectId.pt.threadId) : 0;
    auto ts = static_cast<int64_t>(m.timestamp);
    if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
        NvtxRow r;
        r.kind = capture::kMark;
        r.tid = tid;
        r.start = ts;
        r.end = ts;
        r.nameId = db.intern(m.name ? m.name : "");
        if (m.domain)
            r.domainId = db.intern(m.domain);
        db.addNvtx(r);
        ++stored_;
    } else if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        OpenMarker o;
        o.tid = tid;
        o.start = ts;
        o.nameId = db.intern(m.name ? m.name : "");
        if (m.domain)
            o.domainId = db.intern(m.domain);
        openMarkers_[m.id] = o;
    } else if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = openMarkers_.find(m.id);
        if (it == openMarkers_.end()) {
            ++skipped_; // its start was before the capture window
            return;
        }
        NvtxRow r;
        // Push/pop ranges end on the thread that opened them; start/end ranges may not.
        r.kind = it->second.tid == tid ? capture::kPushPop : capture::kStartEnd;
        r.tid = it->second.tid;
        r.start = it->second.start;
        r.end = ts;
        r.nameId = it->second.nameId;
        r.domainId = it->second.domainId;
        db.addNvtx(r);
        openMarkers_.erase(it);
        ++stored_;
    } else {
        ++skipped_;
    }
}

bool ActivityTranslator::store(const CUpti_Activity* record, CaptureDb& db)
{
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        GpuActivityRow a;
        a.kind = capture::kKernel;
        a.start = static_cast<int64_t>(k.start);
        a.end = static_cast<int64_t>(k.end);
        a.device = k.deviceId;
        a.context = k.contextId;
        a.stream = k.streamId;
        a.correlation = k.correlationId;
        a.nameId = db.intern(k.name ? k.name : "<unnamed kernel>");
        a.grid[0] = k.gridX, a.grid[1] = k.gridY, a.grid[2] = k.gridZ;
        a.block[0] = k.blockX, a.block[1] = k.blockY, a.block[2] = k.blockZ;
        if (k.graphId)
            a.graphId = k.graphId;
        db.addGpuActivity(a);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& c = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        GpuActivityRow a = copyRow(c, db);
        if (c.graphId)
            a.graphId = c.graphId;
        db.addGpuActivity(a);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        db.addGpuActivity(copyRow(*reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record), db));
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& s = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        GpuActivityRow a;
        a.kind = capture::kMemset;
        a.start = static_cast<int64_t>(s.start);
        a.end = static_cast<int64_t>(s.end);
        a.device = s.deviceId;
        a.context = s.contextId;
        a.stream = s.streamId;
        a.correlation = s.correlationId;
        a.nameId = db.intern("Memset");
        a.bytes = static_cast<int64_t>(s.bytes);
        if (s.graphId)
            a.graphId = s.graphId;
        db.addGpuActivity(a);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto& s = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
        GpuActivityRow a;
        a.kind = capture::kSync;
        a.start = static_cast<int64_t>(s.start);
        a.end = static_cast<int64_t>(s.end);
        a.context = s.contextId;
        a.stream = opt32(s.streamId);
        a.correlation = s.correlationId;
        a.nameId = db.intern(syncName(s.type));
        db.addGpuActivity(a);
        break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto& api = *reinterpret_cast<const CUpti_ActivityAPI*>(record);
        if (keepApi_ && !keepApi_(static_cast<int64_t>(api.start))) {
            ++skipped_;
            return false;
        }
        ApiCallRow r;
        r.kind = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? capture::kRuntime : capture::kDriver;
        r.cbid = api.cbid;
        r.nameId = apiNameId(r.kind, api.cbid, db);
        r.tid = api.threadId;
        r.start = static_cast<int64_t>(api.start);
        r.end = static_cast<int64_t>(api.end);
        r.correlation = api.correlationId;
        db.addApiCall(r);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER:
        storeMarker(*reinterpret_cast<const CUpti_ActivityMarker2*>(record), db);
        return true;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        // Summed, not stored one by one: a diagnostic of what CUPTI itself costs.
        const auto& o = *reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
        OverheadSum& sum = overhead_[static_cast<uint32_t>(o.overheadKind)];
        ++sum.count;
        if (o.end > o.start)
            sum.ns += static_cast<int64_t>(o.end - o.start);
        // CUPTI allocates the details and leaves them to the client to free.
        std::free(o.overheadData);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemory4*>(record);
        if (m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
            && m.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
            ++skipped_;
            return false;
        }
        MemoryRow r;
        r.device = m.deviceId;
        r.ts = static_cast<int64_t>(m.timestamp);
        auto bytes = static_cast<int64_t>(m.bytes);
        r.bytes = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE ? -bytes : bytes;
        r.address = static_cast<int64_t>(m.address);
        r.memoryKind = m.memoryKind;
        db.addMemory(r);
        break;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
        const auto& d = *reinterpret_cast<const CUpti_ActivityDevice5*>(record);
        DeviceRow r;
        r.id = d.id;
        r.name = d.name ? d.name : "";
        r.uuid = uuidText(d.uuid);
        r.memoryBytes = static_cast<int64_t>(d.globalMemorySize);
        r.smCount = d.numMultiprocessors;
        r.ccMajor = d.computeCapabilityMajor;
        r.ccMinor = d.computeCapabilityMinor;
        db.addDevice(r);
        break;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
        const auto& c = *reinterpret_cast<const CUpti_ActivityContext3*>(record);
        db.addContext(c.contextId, c.deviceId);
        break;
    }
    default:
        ++skipped_;
        return false;
    }
    ++stored_;
    return true;
}

void ActivityTranslator::finish(CaptureDb& db)
{
    for (auto& [id, o] : openMarkers_) {
        NvtxRow r;
        r.kind = capture::kPushPop;
        r.tid = o.tid;
        r.start = o.start;
        r.nameId = o.nameId;
        r.domainId = o.domainId;
        db.addNvtx(r);
    }
    openMarkers_.clear();
    for (auto& [kind, sum] : overhead_) {
        std::string key = std::string("cupti.overhead.") + overheadKindName(kind);
        db.setMeta(key + ".count", std::to_string(sum.count));
        db.setMeta(key + ".ns", std::to_string(sum.ns));
    }
}

} // namespace pipescope::collect
