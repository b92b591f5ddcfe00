#pragma once
// Turns CUPTI activity records into capture-file rows. Uses only CUPTI's
// record layouts (headers), never its functions, so tests can feed it
// hand-made records without a GPU or libcupti.
#include "CaptureDb.h"

#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>

namespace pipescope::collect {

class ActivityTranslator {
public:
    // Name of a runtime (kind 0) or driver (kind 1) API callback id.
    using ApiNameFn = std::function<std::string(int kind, uint32_t cbid)>;

    explicit ActivityTranslator(ApiNameFn apiName) : apiName_(std::move(apiName)) {}

    // Stores one record; returns false for kinds the capture does not keep.
    bool store(const CUpti_Activity* record, CaptureDb& db);
    // Keeps only API calls starting at a time for which the filter says yes
    // (recording windows); without one, all are kept.
    void setApiFilter(std::function<bool(int64_t)> keep) { keepApi_ = std::move(keep); }
    // Writes NVTX ranges that never closed (end NULL) and the sums of CUPTI's
    // overhead records (meta cupti.overhead.<kind>.count / .ns); call before
    // closing the file.
    void finish(CaptureDb& db);

    int64_t stored() const { return stored_; }
    int64_t skipped() const { return skipped_; }

private:
    int64_t apiNameId(int kind, uint32_t cbid, CaptureDb& db);
    void storeMarker(const CUpti_ActivityMarker2& m, CaptureDb& db);

    struct OpenMarker {
        int64_t tid = 0, start = 0, nameId = 0;
        std::optional<int64_t> domainId;
    };
    ApiNameFn apiName_;
    std::function<bool(int64_t)> keepApi_;
    std::unordered_map<uint64_t, int64_t> apiNames_;
    std::map<uint32_t, OpenMarker> openMarkers_;
    struct OverheadSum {
        int64_t count = 0, ns = 0;
    };
    std::map<uint32_t, OverheadSum> overhead_;
    int64_t stored_ = 0, skipped_ = 0;
};

// Name of a CUpti_ActivityOverheadKind in meta keys ("instrumentation", ...).
const char* overheadKindName(uint32_t kind);

} // namespace pipescope::collect
