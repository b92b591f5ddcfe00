#include "util/TraceEventWriter.h"

#include "util/Error.h"
#include "util/JsonText.h"

#include <algorithm>
#include <cassert>
#include <charconv>

namespace pipescope {

TraceEventWriter::TraceEventWriter(std::ostream& out, const TraceEventStyle& style)
    : style_(style), os_(&out), buf_(own_)
{
    own_.reserve(kChunk + 4096);
}

TraceEventWriter::TraceEventWriter(std::string& out, const TraceEventStyle& style) : style_(style), buf_(out) {}

void TraceEventWriter::appendQuoted(std::string& out, std::string_view text)
{
    // Printable ASCII other than the quote and the backslash is what
    // nlohmann::json writes unchanged; anything else is escaped by it, so that
    // the escapes and the replacement of invalid UTF-8 are exactly its own.
    const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u >= 0x20 && u < 0x7f && c != '"' && c != '\\';
    });
    if (plain) {
        out += '"';
        out.append(text);
        out += '"';
    } else {
        out += jsonText(nlohmann::json(std::string(text)));
    }
}

std::string TraceEventWriter::quoted(std::string_view text)
{
    std::string s;
    appendQuoted(s, text);
    return s;
}

void TraceEventWriter::appendMicros(std::string& out, int64_t ns)
{
    // Unsigned arithmetic: the magnitude of INT64_MIN does not fit int64.
    const uint64_t mag = ns < 0 ? uint64_t(0) - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    char tmp[32];
    char* p = tmp;
    if (ns < 0)
        *p++ = '-';
    p = std::to_chars(p, tmp + sizeof tmp, mag / 1000).ptr;
    *p++ = '.';
    const uint64_t frac = mag % 1000;
    *p++ = static_cast<char>('0' + frac / 100);
    *p++ = static_cast<char>('0' + frac / 10 % 10);
    *p++ = static_cast<char>('0' + frac % 10);
    out.append(tmp, p);
}

std::string TraceEventWriter::micros(int64_t ns)
{
    std::string s;
    appendMicros(s, ns);
    return s;
}

// --- the document ---

void TraceEventWriter::beginDocument()
{
    buf_ += style_.open;
}

void TraceEventWriter::member(std::string_view key, std::string_view value)
{
    buf_ += style_.memberIndent;
    appendQuoted(buf_, key);
    buf_ += style_.colon;
    appendQuoted(buf_, value);
    buf_ += ",\n";
    flushIfFull();
}

void TraceEventWriter::member(std::string_view key, RawJson value)
{
    buf_ += style_.memberIndent;
    appendQuoted(buf_, key);
    buf_ += style_.colon;
    buf_ += value.text;
    buf_ += ",\n";
    flushIfFull();
}

void TraceEventWriter::raw(std::string_view text)
{
    buf_ += text;
    flushIfFull();
}

void TraceEventWriter::number(int64_t v)
{
    appendNumber(v);
}

void TraceEventWriter::beginEvents()
{
    buf_ += style_.eventsOpen;
}

void TraceEventWriter::endDocument()
{
    buf_ += style_.close;
    if (!os_)
        return;
    flush();
    os_->flush();
    if (!*os_)
        throw Error("cannot write the trace: the output stream failed (disk full?)");
}

// --- events ---

void TraceEventWriter::beginEvent(std::string_view ph)
{
    buf_ += events_ ? style_.nextEvent : style_.firstEvent;
    ++events_;
    open('{');
    key("ph");
    appendQuoted(buf_, ph);
}

void TraceEventWriter::beginComplete(std::string_view cat, std::string_view name, int64_t pid, int64_t tid,
                                     int64_t tsNs, int64_t durNs)
{
    beginEvent("X");
    arg("cat", cat);
    arg("name", name);
    arg("pid", pid);
    arg("tid", tid);
    key("ts");
    appendMicros(buf_, tsNs);
    key("dur");
    appendMicros(buf_, durNs);
}

void TraceEventWriter::beginComplete(std::string_view cat, RawJson name, int64_t pid, int64_t tid, int64_t tsNs,
                                     int64_t durNs)
{
    beginEvent("X");
    arg("cat", cat);
    arg("name", name);
    arg("pid", pid);
    arg("tid", tid);
    key("ts");
    appendMicros(buf_, tsNs);
    key("dur");
    appendMicros(buf_, durNs);
}

void TraceEventWriter::beginInstant(std::string_view cat, std::string_view scope, std::string_view name, int64_t pid,
                                    int64_t tid, int64_t tsNs)
{
    beginEvent("i");
    arg("cat", cat);
    arg("s", scope);
    arg("name", name);
    arg("pid", pid);
    arg("tid", tid);
    key("ts");
    appendMicros(buf_, tsNs);
}

void TraceEventWriter::endEvent()
{
    close('}');
    flushIfFull();
}

void TraceEventWriter::metadata(std::string_view name, int64_t pid, int64_t tid, std::string_view argKey,
                                std::string_view value)
{
    beginEvent("M");
    arg("name", name);
    arg("pid", pid);
    arg("tid", tid);
    beginArgs();
    arg(argKey, value);
    endArgs();
    endEvent();
}

void TraceEventWriter::metadata(std::string_view name, int64_t pid, int64_t tid, std::string_view argKey,
                                int64_t value)
{
    beginEvent("M");
    arg("name", name);
    arg("pid", pid);
    arg("tid", tid);
    beginArgs();
    arg(argKey, value);
    endArgs();
    endEvent();
}

void TraceEventWriter::flowEvent(std::string_view ph, std::string_view cat, std::string_view name, int64_t id,
                                 int64_t pid, int64_t tid, int64_t tsNs, bool bindEnclosing)
{
    beginEvent(ph);
    arg("id", id);
    arg("pid", pid);
    arg("tid", tid);
    key("ts");
    appendMicros(buf_, tsNs);
    arg("cat", cat);
    arg("name", name);
    if (bindEnclosing)
        arg("bp", "e");
    endEvent();
}

void TraceEventWriter::flowStart(std::string_view cat, std::string_view name, int64_t id, int64_t pid, int64_t tid,
                                 int64_t tsNs)
{
    flowEvent("s", cat, name, id, pid, tid, tsNs, false);
}

void TraceEventWriter::flowEnd(std::string_view cat, std::string_view name, int64_t id, int64_t pid, int64_t tid,
                               int64_t tsNs)
{
    flowEvent("f", cat, name, id, pid, tid, tsNs, true);
}

// --- args ---

void TraceEventWriter::beginArgs()
{
    key("args");
    open('{');
}

void TraceEventWriter::endArgs()
{
    close('}');
}

void TraceEventWriter::arg(std::string_view k, int64_t value)
{
    key(k);
    appendNumber(value);
}

void TraceEventWriter::arg(std::string_view k, std::string_view value)
{
    key(k);
    appendQuoted(buf_, value);
}

void TraceEventWriter::arg(std::string_view k, RawJson value)
{
    key(k);
    buf_ += value.text;
}

void TraceEventWriter::beginArrayArg(std::string_view k)
{
    key(k);
    open('[');
}

void TraceEventWriter::endArrayArg()
{
    close(']');
}

void TraceEventWriter::beginObject()
{
    if (!first_[depth_])
        buf_ += style_.comma;
    first_[depth_] = false;
    open('{');
}

void TraceEventWriter::endObject()
{
    close('}');
}

// --- tokens ---

void TraceEventWriter::key(std::string_view k)
{
    if (!first_[depth_])
        buf_ += style_.comma;
    first_[depth_] = false;
    appendQuoted(buf_, k);
    buf_ += style_.colon;
}

void TraceEventWriter::open(char bracket)
{
    buf_ += bracket;
    assert(depth_ + 1 < first_.size());
    first_[++depth_] = true;
}

void TraceEventWriter::close(char bracket)
{
    buf_ += bracket;
    assert(depth_ > 0);
    --depth_;
}

void TraceEventWriter::appendNumber(int64_t v)
{
    char tmp[24];
    const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
}

void TraceEventWriter::flushIfFull()
{
    if (os_ && buf_.size() >= kChunk)
        flush();
}

void TraceEventWriter::flush()
{
    os_->write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
    if (!*os_)
        throw Error("cannot write the trace: the output stream failed (disk full?)");
}

} // namespace pipescope
