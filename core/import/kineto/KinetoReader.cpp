#include "import/kineto/KinetoReader.h"

#include "import/kineto/JsonStream.h"

#include "util/Error.h"
#include "util/InputFile.h"
#include "util/Limits.h"

#include <charconv>
#include <cstdio>
#include <vector>

namespace pipescope::kineto {

std::optional<int64_t> Value::asLenientInt() const
{
    if (type == Type::Int)
        return i;
    if (type != Type::String)
        return std::nullopt;
    // "123", or a label ending in the number ("stream 7", as older profilers wrote tids).
    size_t end = text.size();
    size_t begin = end;
    while (begin > 0 && text[begin - 1] >= '0' && text[begin - 1] <= '9')
        --begin;
    if (begin == end || end - begin > 18)
        return std::nullopt;
    if (begin > 0 && text[begin - 1] == '-')
        --begin;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data() + begin, text.data() + end, v);
    if (ec != std::errc() || p != text.data() + end)
        return std::nullopt;
    return v;
}

void Event::clear()
{
    for (Value& v : fields) {
        v.type = Value::Type::Absent;
        v.text.clear();
        v.clipped = false;
    }
}

namespace {

using json = nlohmann::json;

constexpr Field kNone = Field::Count;

Field eventField(std::string_view k)
{
    switch (k.size()) {
    case 2:
        if (k == "ph") return Field::Ph;
        if (k == "ts") return Field::Ts;
        if (k == "id") return Field::Id;
        if (k == "bp") return Field::Bp;
        break;
    case 3:
        if (k == "cat") return Field::Cat;
        if (k == "pid") return Field::Pid;
        if (k == "tid") return Field::Tid;
        if (k == "dur") return Field::Dur;
        break;
    case 4:
        if (k == "name") return Field::Name;
        break;
    default:
        break;
    }
    return kNone;
}

Field argField(std::string_view k)
{
    switch (k.size()) {
    case 3:
        if (k == "Seq" || k == "seq") return Field::Seq;
        break;
    case 4:
        if (k == "name") return Field::ArgName;
        if (k == "grid") return Field::Grid;
        if (k == "kind") return Field::CopyKindArg;
        if (k == "Addr") return Field::MemAddr;
        break;
    case 5:
        if (k == "bytes") return Field::Bytes;
        if (k == "block") return Field::Block;
        if (k == "dtype") return Field::Dtype;
        if (k == "Bytes") return Field::MemBytes;
        break;
    case 6:
        if (k == "device") return Field::Device;
        if (k == "stream") return Field::Stream;
        break;
    case 8:
        if (k == "Src Rank") return Field::SrcRank;
        if (k == "Dst Rank") return Field::DstRank;
        break;
    case 9:
        if (k == "Device Id") return Field::MemDeviceId;
        break;
    case 10:
        if (k == "Group size") return Field::GroupSize;
        break;
    case 11:
        if (k == "correlation") return Field::Correlation;
        if (k == "External id") return Field::ExternalId;
        if (k == "Device Type") return Field::MemDeviceType;
        break;
    case 13:
        if (k == "In msg nelems") return Field::InNelems;
        break;
    case 14:
        if (k == "Out msg nelems") return Field::OutNelems;
        if (k == "Total Reserved") return Field::MemTotalReserved;
        break;
    case 15:
        if (k == "Collective name") return Field::CollectiveName;
        if (k == "Sequence number") return Field::SequenceNumber;
        if (k == "Total Allocated") return Field::MemTotalAllocated;
        break;
    case 18:
        if (k == "Process Group Name") return Field::GroupName;
        break;
    case 19:
        if (k == "Process Group Ranks") return Field::GroupRanks;
        break;
    case 25:
        if (k == "Process Group Description") return Field::GroupDesc;
        break;
    default:
        break;
    }
    return kNone;
}

bool capturedTopLevelKey(std::string_view k)
{
    return k == "distributedInfo" || k == "deviceProperties" || k == "pipescope" || k == "baseTimeNanoseconds" ||
           k == "host_name" || k == "hostname" || k == "traceName" || k == "schemaVersion" || k == "displayTimeUnit";
}

class SaxHandler {
public:
    explicit SaxHandler(EventSink& sink) : sink_(sink) {}

    bool null()
    {
        return scalar([] { return json(nullptr); }, [](Value& v) { v.type = Value::Type::Null; });
    }
    bool boolean(bool b)
    {
        return scalar([b] { return json(b); }, [b](Value& v) {
            v.type = Value::Type::Bool;
            v.flag = b;
        });
    }
    bool integer(int64_t n)
    {
        if (arrayTarget_ && depth_ == arrayDepth_) {
            appendArrayInt(n);
            return true;
        }
        return scalar([n] { return json(n); }, [n](Value& v) {
            v.type = Value::Type::Int;
            v.i = n;
        });
    }
    bool unsignedInteger(uint64_t n)
    {
        return scalar([n] { return json(n); }, [n](Value& v) {
            v.type = Value::Type::Float;
            v.text = std::to_string(n);
        });
    }
    bool floating(std::string_view text)
    {
        return scalar(
            [text] {
                double d = 0;
                std::from_chars(text.data(), text.data() + text.size(), d);
                return json(d);
            },
            [text](Value& v) {
                v.type = Value::Type::Float;
                v.text.assign(text);
            });
    }
    bool string(std::string_view s)
    {
        return scalar([s] { return json(std::string(s)); }, [s](Value& v) {
            v.type = Value::Type::String;
            v.text.assign(s);
        });
    }

    bool startObject() { return open(true); }
    bool startArray() { return open(false); }
    bool endObject() { return close(); }
    bool endArray() { return close(); }

    bool key(std::string_view k)
    {
        if (depth_ == 1) {
            topKey_.assign(k);
            return true;
        }
        if (mode_ == Mode::Capture) {
            captureKey_.assign(k);
            return true;
        }
        if (mode_ != Mode::Events)
            return true;
        if (depth_ == 3) {
            argsNext_ = k == "args";
            Field f = argsNext_ ? kNone : eventField(k);
            target_ = f == kNone ? nullptr : &event_[f];
        } else if (depth_ == 4 && inArgs_) {
            Field f = argField(k);
            target_ = f == kNone ? nullptr : &event_[f];
        } else {
            target_ = nullptr;
        }
        return true;
    }

    const std::string& error() const { return error_; }
    bool sawTraceEvents() const { return sawTraceEvents_; }
    bool isNotATrace() const { return notATrace_; }
    bool sawTopObject() const { return sawTopObject_; }

private:
    enum class Mode { Skip, Capture, Events };

    // `make` builds the JSON value only where one is kept (top level,
    // captured values); event fields are filled by `set` without one.
    template <typename MakeJson, typename SetValue>
    bool scalar(MakeJson make, SetValue set)
    {
        if (depth_ == 0)
            return notATrace("the top level is not a JSON object; expected a Kineto trace object with \"traceEvents\"");
        if (depth_ == 1) {
            if (topKey_ == "traceEvents")
                return structural("\"traceEvents\" is not an array");
            if (capturedTopLevelKey(topKey_))
                sink_.onTopLevel(topKey_, make());
            return true;
        }
        if (mode_ == Mode::Capture) {
            add(make());
            return true;
        }
        if (mode_ != Mode::Events)
            return true;
        if (depth_ == 2) {
            sink_.onBadEvent("an element of traceEvents is not an object");
            return true;
        }
        if (target_ && (depth_ == 3 || depth_ == 4)) {
            touch(target_);
            set(*target_);
            target_ = nullptr;
        }
        return true;
    }

    bool open(bool object)
    {
        if (depth_ == 0) {
            if (!object)
                return notATrace("the top level is a JSON array; expected a Kineto trace object with \"traceEvents\"");
            sawTopObject_ = true;
            depth_ = 1;
            return true;
        }
        if (depth_ == 1) {
            if (topKey_ == "traceEvents") {
                if (object)
                    return structural("\"traceEvents\" is not an array");
                sawTraceEvents_ = true;
                mode_ = Mode::Events;
            } else if (capturedTopLevelKey(topKey_)) {
                mode_ = Mode::Capture;
                captured_ = object ? json::object() : json::array();
                stack_.assign(1, &captured_);
            } else {
                mode_ = Mode::Skip;
            }
            ++depth_;
            return true;
        }
        if (mode_ == Mode::Capture) {
            json* child = add(object ? json::object() : json::array());
            stack_.push_back(child);
            ++depth_;
            return true;
        }
        ++depth_;
        if (mode_ != Mode::Events)
            return true;
        switch (depth_) {
        case 3: // an event
            if (object) {
                clearEvent();
                inArgs_ = false;
            } else {
                sink_.onBadEvent("an element of traceEvents is an array, not an object");
            }
            lastEventWasArray_ = !object;
            target_ = nullptr;
            break;
        case 4: // a field's value
            if (object && argsNext_) {
                inArgs_ = true;
            } else if (target_) {
                touch(target_);
                target_->type = object ? Value::Type::Object : Value::Type::Array;
                if (!object) {
                    arrayTarget_ = target_;
                    arrayDepth_ = depth_;
                }
            }
            argsNext_ = false;
            target_ = nullptr;
            break;
        case 5: // an argument's value
            if (target_ && inArgs_) {
                touch(target_);
                target_->type = object ? Value::Type::Object : Value::Type::Array;
                if (!object) {
                    arrayTarget_ = target_;
                    arrayDepth_ = depth_;
                }
            }
            target_ = nullptr;
            break;
        default:
            break;
        }
        return true;
    }

    bool close()
    {
        --depth_;
        if (arrayTarget_ && depth_ < arrayDepth_)
            arrayTarget_ = nullptr;
        if (depth_ == 0)
            return true;
        if (mode_ == Mode::Capture) {
            stack_.pop_back();
            if (depth_ == 1) {
                if (captureOverflow_)
                    sink_.onOversizedTopLevel(topKey_);
                else
                    sink_.onTopLevel(topKey_, captured_);
                captured_ = json();
                discard_ = json();
                captureBytes_ = 0;
                captureOverflow_ = false;
                mode_ = Mode::Skip;
            }
            return true;
        }
        if (depth_ == 1) {
            mode_ = Mode::Skip;
            return true;
        }
        if (mode_ != Mode::Events)
            return true;
        if (depth_ == 2) {
            if (!inArrayEvent())
                sink_.onEvent(event_);
            lastEventWasArray_ = false;
        } else if (depth_ == 3) {
            inArgs_ = false;
        }
        return true;
    }

    bool inArrayEvent() const { return lastEventWasArray_; }

    // The fields an event set, so that the next event clears only those
    // (Event::clear() would visit every field of every event).
    static_assert(kFieldCount <= 64, "touched_ has a bit per field");
    void touch(const Value* v) { touched_ |= uint64_t{1} << (v - event_.fields.data()); }
    void clearEvent()
    {
        for (uint64_t m = touched_; m != 0; m &= m - 1) {
            Value& v = event_.fields[static_cast<size_t>(__builtin_ctzll(m))];
            v.type = Value::Type::Absent;
            v.text.clear();
            v.clipped = false;
        }
        touched_ = 0;
    }

    void appendArrayInt(int64_t n)
    {
        std::string& t = arrayTarget_->text;
        // Bounded like every value: a huge array in a small compressed file
        // must not grow memory or the store.
        if (t.size() > kMaxStringBytes) {
            arrayTarget_->clipped = true;
            return;
        }
        if (!t.empty())
            t.push_back(',');
        char buf[24];
        auto [p, ec] = std::to_chars(buf, buf + sizeof buf, n);
        (void)ec;
        t.append(buf, p);
    }

    json* add(json value)
    {
        // Metadata is kept whole only up to a bound: past it the rest of the
        // value is parsed and dropped, so memory stays small whatever the file says.
        captureBytes_ += 16 + captureKey_.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0);
        if (captureBytes_ > kMaxMetadataBytes)
            captureOverflow_ = true;
        if (captureOverflow_) {
            discard_ = json();
            return &discard_;
        }
        json* top = stack_.back();
        if (top->is_array()) {
            top->push_back(std::move(value));
            return &top->back();
        }
        json& slot = (*top)[captureKey_];
        slot = std::move(value);
        return &slot;
    }

    bool structural(std::string message)
    {
        error_ = std::move(message);
        return false;
    }
    bool notATrace(std::string message)
    {
        notATrace_ = true;
        return structural(std::move(message));
    }


    EventSink& sink_;
    int depth_ = 0;
    Mode mode_ = Mode::Skip;
    std::string topKey_;
    bool sawTraceEvents_ = false;
    bool sawTopObject_ = false;
    bool notATrace_ = false;

    // Events mode
    Event event_;
    uint64_t touched_ = 0;         // fields of event_ set since it was cleared (touch())
    Value* target_ = nullptr;      // field the next scalar fills
    Value* arrayTarget_ = nullptr; // field whose array elements are being collected
    int arrayDepth_ = 0;
    bool argsNext_ = false;
    bool inArgs_ = false;
    bool lastEventWasArray_ = false;

    // Capture mode
    json captured_;
    json discard_;
    size_t captureBytes_ = 0;
    bool captureOverflow_ = false;
    std::vector<json*> stack_;
    std::string captureKey_;

    std::string error_;
};

} // namespace

ReadResult readTrace(InputFile& file, EventSink& sink)
{
    // The first chunk is read on opening: nothing read means nothing there (a file or a pipe).
    if (file.bytesOnDisk() == 0)
        throw FormatError(file.path() + ": the file is empty; expected a PyTorch profiler (Kineto) JSON trace");
    SaxHandler handler(sink);
    JsonParser<SaxHandler> parser(
        [&file, &sink] {
            std::string_view chunk = file.read();
            sink.onProgress(file.bytesOnDisk());
            return chunk;
        },
        handler);
    if (!parser.parse()) {
        std::string message = handler.error();
        if (message.empty()) {
            const JsonError& e = parser.error();
            message = "invalid JSON at line " + std::to_string(e.line) + ", column " + std::to_string(e.column) +
                      " (byte offset " + std::to_string(e.offset) + "): " + e.what;
        }
        if (handler.isNotATrace())
            throw NotATraceError(file.path() + ": " + message + "; not a PyTorch profiler (Kineto) JSON trace");
        throw FormatError(file.path() + ": " + message + "; expected a PyTorch profiler (Kineto) JSON trace");
    }
    ReadResult result;
    result.sawTraceEvents = handler.sawTraceEvents();
    return result;
}

std::optional<int64_t> peekBaseTime(const std::string& path)
{
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        return std::nullopt;
    char tail[4096];
    size_t n = 0;
    if (std::fseek(f, -static_cast<long>(sizeof tail), SEEK_END) == 0 || std::fseek(f, 0, SEEK_SET) == 0)
        n = std::fread(tail, 1, sizeof tail, f);
    std::fclose(f);
    const std::string_view text(tail, n);
    constexpr std::string_view key = "\"baseTimeNanoseconds\"";
    const size_t at = text.rfind(key);
    if (at == std::string_view::npos)
        return std::nullopt;
    auto isSpace = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    size_t p = at + key.size();
    while (p < n && isSpace(text[p]))
        ++p;
    if (p >= n || text[p] != ':')
        return std::nullopt;
    ++p;
    while (p < n && isSpace(text[p]))
        ++p;
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data() + p, text.data() + n, value);
    if (ec != std::errc())
        return std::nullopt;
    p = static_cast<size_t>(end - text.data());
    while (p < n && isSpace(text[p]))
        ++p;
    // The last member of the top-level object, or one followed by another.
    if (p >= n || (text[p] != '}' && text[p] != ','))
        return std::nullopt;
    return value;
}

} // namespace pipescope::kineto
