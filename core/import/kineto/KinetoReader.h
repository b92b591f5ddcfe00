#pragma once
// Streams a Kineto (PyTorch profiler) JSON trace event by event. The file is
// parsed with nlohmann::json's SAX interface straight from InputFile's chunks,
// so memory stays bounded by one event whatever the file's size: only the
// fields pipescope uses are kept, and only until the event ends. Small
// top-level values (distributedInfo, deviceProperties, ...) are handed over
// whole, as they are rarely more than a few kilobytes.
#include <array>
#include <cstdint>
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace pipescope {
class InputFile;
}

namespace pipescope::kineto {

// One JSON value of an event field. Numbers keep their token text (`text`)
// when they are not integers, so decimal microseconds convert exactly.
struct Value {
    enum class Type : uint8_t { Absent, Null, Bool, Int, Float, String, Array, Object };
    Type type = Type::Absent;
    bool flag = false; // Bool
    int64_t i = 0;     // Int
    // String: the text; Float: the token as written; Array: its integer
    // elements joined by commas ("512,1,1").
    std::string text;
    // Array: elements past kMaxStringBytes of text were dropped while parsing.
    bool clipped = false;

    bool present() const { return type != Type::Absent; }
    std::optional<int64_t> asInt() const { return type == Type::Int ? std::optional<int64_t>(i) : std::nullopt; }
    // Integers also written as strings ("2560") or with a label ("stream 7").
    std::optional<int64_t> asLenientInt() const;
    std::string_view str() const { return type == Type::String ? std::string_view(text) : std::string_view(); }
};

// The event fields pipescope reads; everything else is skipped while parsing.
enum class Field : uint8_t {
    Ph, Cat, Name, Pid, Tid, Ts, Dur, Id, Bp,
    // inside "args"
    Device, Stream, Correlation, Bytes, ExternalId, CollectiveName, InNelems, OutNelems, Dtype, GroupSize,
    GroupName, GroupDesc, GroupRanks, SrcRank, DstRank, Seq, Grid, Block, CopyKindArg, ArgName,
    MemDeviceType, MemDeviceId, MemBytes, MemAddr, MemTotalAllocated, MemTotalReserved, SequenceNumber,
    Count
};
inline constexpr size_t kFieldCount = static_cast<size_t>(Field::Count);

struct Event {
    std::array<Value, kFieldCount> fields;
    const Value& operator[](Field f) const { return fields[static_cast<size_t>(f)]; }
    Value& operator[](Field f) { return fields[static_cast<size_t>(f)]; }
    void clear();
};

class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void onEvent(const Event& event) = 0;
    // An element of traceEvents that is not an object.
    virtual void onBadEvent(std::string_view what) = 0;
    // A top-level key other than traceEvents that pipescope reads.
    virtual void onTopLevel(std::string_view key, const nlohmann::json& value) = 0;
    // A top-level value larger than kMaxMetadataBytes (util/Limits.h) was not kept.
    virtual void onOversizedTopLevel(std::string_view /*key*/) {}
    // Called once per chunk read from disk, for progress reports.
    virtual void onProgress(uint64_t bytesOnDisk) { (void)bytesOnDisk; }
};

// The file is JSON but not a trace at all (a top-level array, an object
// without "traceEvents"): a folder import skips such files with a warning,
// where a damaged trace stays an error.
class NotATraceError : public FormatError {
public:
    using FormatError::FormatError;
};

struct ReadResult {
    bool sawTraceEvents = false;
};

// Parses the whole file, calling the sink as values complete. Throws
// FormatError naming the file for an empty file, invalid JSON (with line,
// column and byte offset), a top level that is not an object, or a
// traceEvents that is not an array.
ReadResult readTrace(InputFile& file, EventSink& sink);

// The top-level baseTimeNanoseconds as the last bytes of an uncompressed
// trace state it (Kineto writes it after traceEvents), or nullopt. A guess
// for storing times early: readTrace() hands over the value that counts.
std::optional<int64_t> peekBaseTime(const std::string& path);

} // namespace pipescope::kineto
