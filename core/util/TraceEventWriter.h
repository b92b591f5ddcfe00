#pragma once
// Chrome Trace Event JSON, the format Perfetto, chrome://tracing and the
// PyTorch profiler share, written event by event. One writer serves both
// documents pipescope writes: the Perfetto export (report/ChromeTrace.cpp,
// compact) and the simulator's per-rank profiler traces
// (simulate/KinetoEmitter.cpp, laid out as the PyTorch profiler writes them).
// The style decides only the whitespace between the tokens; keys come in the
// order the caller writes them, so each document keeps its own layout.
//
// Strings are escaped exactly as nlohmann::json writes them with
// util/JsonText.h: quotes, backslashes and control characters escaped, valid
// UTF-8 kept as it is, invalid bytes replaced by U+FFFD. Times are
// nanoseconds written as microseconds with exactly three decimals, so no
// digit of an epoch timestamp is lost.
//
// A document is written as
//   beginDocument(); [member(...) / raw(...)]; beginEvents();
//   events...; endDocument();
// and an event with arguments as
//   beginComplete(...); beginArgs(); arg(...)...; endArgs(); endEvent();
#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace pipescope {

// Text that is JSON already (a number, null, an array, or a string quoted
// and escaped beforehand, e.g. a kernel name escaped once and written many
// times): written as it is.
struct RawJson {
    std::string_view text;
};

// The whitespace of a document.
struct TraceEventStyle {
    std::string_view open;         // the document's opening brace and what follows it
    std::string_view memberIndent; // before each member of the document ahead of the events
    std::string_view eventsOpen;   // the "traceEvents" key and the array's bracket
    std::string_view firstEvent;   // before the first event
    std::string_view nextEvent;    // before every later event
    std::string_view close;        // after the last event: the array's and the document's ends
    std::string_view colon;        // between a key and its value
    std::string_view comma;        // between the members of an object and the elements of an array

    // {"displayTimeUnit":"ns",...,\n"traceEvents":[\n{"ph":"X",...},\n{...}\n]}\n
    static constexpr TraceEventStyle compact() { return {"{", "", "\"traceEvents\":[", "\n", ",\n", "\n]}\n", ":", ","}; }
    // {\n "schemaVersion": 1,\n  "traceEvents": [\n  {"ph": "X", ...},\n  {...}\n  ]\n}\n
    static constexpr TraceEventStyle kineto()
    {
        return {"{\n", " ", "  \"traceEvents\": [\n", "  ", ",\n  ", "\n  ]\n}\n", ": ", ", "};
    }
};

class TraceEventWriter {
public:
    // Streams to `out` in chunks of about a megabyte. Throws Error when the
    // stream fails.
    TraceEventWriter(std::ostream& out, const TraceEventStyle& style);
    // Appends to `out`: a document built in memory and written whole elsewhere.
    TraceEventWriter(std::string& out, const TraceEventStyle& style);
    TraceEventWriter(const TraceEventWriter&) = delete;
    TraceEventWriter& operator=(const TraceEventWriter&) = delete;

    // --- the document ---
    void beginDocument();
    // A member of the document ahead of its events: "key":value and ",\n".
    void member(std::string_view key, std::string_view value);
    void member(std::string_view key, RawJson value);
    // Text as it is, e.g. document members that are laid out elsewhere.
    void raw(std::string_view text);
    void number(int64_t v);
    void beginEvents();
    // Closes the events and the document; with a stream, writes the rest of
    // it and flushes the stream.
    void endDocument();

    // --- events ---
    // Each begin... opens an event (ph, then the keys in the order listed)
    // that endEvent() closes; beginArgs() ... endArgs() in between add its args.
    // {"ph":"X","cat":CAT,"name":NAME,"pid":PID,"tid":TID,"ts":TS,"dur":DUR
    void beginComplete(std::string_view cat, std::string_view name, int64_t pid, int64_t tid, int64_t tsNs,
                       int64_t durNs);
    void beginComplete(std::string_view cat, RawJson name, int64_t pid, int64_t tid, int64_t tsNs, int64_t durNs);
    // {"ph":"i","cat":CAT,"s":SCOPE,"name":NAME,"pid":PID,"tid":TID,"ts":TS
    void beginInstant(std::string_view cat, std::string_view scope, std::string_view name, int64_t pid, int64_t tid,
                      int64_t tsNs);
    void endEvent();

    // Whole events.
    // {"ph":"M","name":NAME,"pid":PID,"tid":TID,"args":{ARGKEY:VALUE}}
    void metadata(std::string_view name, int64_t pid, int64_t tid, std::string_view argKey, std::string_view value);
    void metadata(std::string_view name, int64_t pid, int64_t tid, std::string_view argKey, int64_t value);
    // {"ph":"s","id":ID,"pid":PID,"tid":TID,"ts":TS,"cat":CAT,"name":NAME}
    void flowStart(std::string_view cat, std::string_view name, int64_t id, int64_t pid, int64_t tid, int64_t tsNs);
    // The same with "ph":"f" and "bp":"e": the flow ends on the enclosing slice.
    void flowEnd(std::string_view cat, std::string_view name, int64_t id, int64_t pid, int64_t tid, int64_t tsNs);

    // --- args of the open event ---
    void beginArgs(); // ,"args":{
    void endArgs();   // }
    void arg(std::string_view key, int64_t value);
    void arg(std::string_view key, std::string_view value); // a string, escaped
    void arg(std::string_view key, RawJson value);
    // An array of objects as an arg: beginArrayArg, then per element
    // beginObject, arg..., endObject; then endArrayArg.
    void beginArrayArg(std::string_view key);
    void endArrayArg();
    void beginObject();
    void endObject();

    // Events written so far.
    int64_t events() const { return events_; }

    // "text" as JSON: quoted and escaped.
    static std::string quoted(std::string_view text);
    static void appendQuoted(std::string& out, std::string_view text);
    // "1234.567": nanoseconds as microseconds with exactly three decimals.
    static std::string micros(int64_t ns);
    static void appendMicros(std::string& out, int64_t ns);

private:
    void beginEvent(std::string_view ph);
    void key(std::string_view k);
    void open(char bracket);
    void close(char bracket);
    void flowEvent(std::string_view ph, std::string_view cat, std::string_view name, int64_t id, int64_t pid,
                   int64_t tid, int64_t tsNs, bool bindEnclosing);
    void appendNumber(int64_t v);
    void flushIfFull();
    void flush();

    static constexpr size_t kChunk = size_t(1) << 20;
    TraceEventStyle style_;
    std::ostream* os_ = nullptr; // null: the document is built in a string
    std::string own_;            // the buffer when streaming
    std::string& buf_;
    // Whether the open object or array (innermost last) has no member yet.
    std::array<bool, 8> first_{};
    size_t depth_ = 0;
    int64_t events_ = 0;
};

} // namespace pipescope
