#include "remote/Protocol.h"

#include "util/BoundedJson.h"
#include "util/Format.h"
#include "util/JsonText.h"

#include <zlib.h>

#include <array>
#include <climits>
#include <cstring>
#include <limits>

namespace pipescope::remote {

using nlohmann::json;

namespace {

constexpr std::array<std::string_view, 9> kTypeNames{"hello", "index", "analysis", "tiles", "details", "search", "costmodel", "diff", "steps"};

// JSON's integers that every client reads exactly (2^53).
constexpr int64_t kMaxId = int64_t(1) << 53;

[[noreturn]] void bad(const std::string& what) { throw ProtocolError(what); }

} // namespace

std::string_view toString(RequestType type) { return kTypeNames.at(static_cast<size_t>(type)); }

std::optional<RequestType> requestTypeOf(std::string_view name)
{
    for (size_t i = 0; i < kTypeNames.size(); ++i)
        if (kTypeNames[i] == name)
            return static_cast<RequestType>(i);
    return std::nullopt;
}

size_t responseLimit(RequestType type)
{
    switch (type) {
    case RequestType::Hello: return 64 * 1024;
    case RequestType::Index: return size_t(8) << 20;
    case RequestType::Analysis: return size_t(32) << 20;
    case RequestType::Tiles: return size_t(16) << 20;
    case RequestType::Details: return 256 * 1024;
    case RequestType::Search: return size_t(1) << 20;
    case RequestType::CostModel: return size_t(8) << 20;
    case RequestType::Diff: return size_t(16) << 20;
    case RequestType::Steps: return size_t(16) << 20;
    }
    return 64 * 1024;
}

std::string frame(std::string_view payload)
{
    std::string out;
    out.reserve(payload.size() + kMaxHeaderBytes);
    out.append(kMagic).append(" ").append(std::to_string(payload.size())).append("\n");
    out.append(payload);
    return out;
}

std::string frameDeflated(std::string_view payload, int level)
{
    const std::string z = deflateBytes(payload, level);
    std::string out;
    out.reserve(z.size() + kMaxHeaderBytes);
    out.append(kMagic).append(" ").append(std::to_string(z.size())).append(" z\n");
    out.append(z);
    return out;
}

size_t deflatedBound(size_t n) { return static_cast<size_t>(::compressBound(static_cast<uLong>(n))); }

std::string deflateBytes(std::string_view bytes, int level)
{
    std::string out(deflatedBound(bytes.size()), '\0');
    uLongf size = static_cast<uLongf>(out.size());
    const int rc = ::compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(bytes.data()),
                               static_cast<uLong>(bytes.size()), std::clamp(level, 1, 9));
    if (rc != Z_OK)
        throw Error("cannot compress a message (zlib error " + std::to_string(rc) + ")");
    out.resize(static_cast<size_t>(size));
    return out;
}

std::string inflateBounded(std::string_view compressed, size_t maxBytes)
{
    if (compressed.size() > UINT_MAX)
        bad("a compressed message of " + std::to_string(compressed.size()) + " bytes, too long to inflate");
    z_stream zs{};
    if (::inflateInit(&zs) != Z_OK)
        throw Error("cannot start zlib to inflate a message");
    struct End {
        z_stream* z;
        ~End() { ::inflateEnd(z); }
    } end{&zs};
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
    zs.avail_in = static_cast<uInt>(compressed.size());
    // Room for one byte past the limit: reaching it is the proof of a bomb,
    // and nothing after it is inflated.
    const size_t cap = maxBytes + 1;
    std::string out;
    size_t produced = 0;
    auto bomb = [&] {
        bad("a compressed message of " + std::to_string(compressed.size()) + " bytes that inflates past the limit of " +
            std::to_string(maxBytes) + " bytes (inflating stopped there)");
    };
    for (;;) {
        if (produced == out.size()) {
            if (out.size() >= cap)
                bomb();
            out.resize(std::min(cap, std::max<size_t>(out.size() * 2, std::min<size_t>(cap, 64 * 1024))));
        }
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
        zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, UINT_MAX));
        const int rc = ::inflate(&zs, Z_NO_FLUSH);
        produced = static_cast<size_t>(zs.next_out - reinterpret_cast<Bytef*>(out.data()));
        if (produced > maxBytes)
            bomb();
        if (rc == Z_STREAM_END) {
            if (zs.avail_in != 0)
                bad("a compressed message with " + std::to_string(zs.avail_in) + " bytes after its zlib stream");
            break;
        }
        if (rc == Z_NEED_DICT || rc == Z_DATA_ERROR)
            bad("a compressed message that is not a zlib stream (" + printable(zs.msg ? zs.msg : "bad data", 80) + ")");
        if (rc == Z_MEM_ERROR)
            throw Error("out of memory inflating a message");
        if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0))
            bad("a compressed message whose zlib stream is cut short");
    }
    out.resize(produced);
    return out;
}

// ---- framing ---------------------------------------------------------------

void FrameReader::feed(const char* data, size_t size)
{
    buffer_.append(data, size);
    if (!length_)
        parseHeader();
}

void FrameReader::parseHeader()
{
    const size_t lf = buffer_.find('\n');
    // The magic is checked as soon as its bytes are here, so a stream of
    // something else is refused at once and not after a header's worth.
    const size_t have = std::min(buffer_.size(), kMagic.size() + 1);
    if (std::string_view(buffer_).substr(0, have) != std::string(kMagic).append(" ").substr(0, have))
        bad("not a pipescope remote message (it starts with '" + printable(std::string_view(buffer_).substr(0, 16), 64) +
            "', expected 'PSR1 <length>')");
    if (lf == std::string::npos) {
        if (buffer_.size() > kMaxHeaderBytes)
            bad("a message header longer than " + std::to_string(kMaxHeaderBytes) + " bytes (expected 'PSR1 <length>')");
        return;
    }
    if (lf + 1 > kMaxHeaderBytes)
        bad("a message header longer than " + std::to_string(kMaxHeaderBytes) + " bytes (expected 'PSR1 <length>')");
    std::string_view digits = std::string_view(buffer_).substr(kMagic.size() + 1, lf - kMagic.size() - 1);
    const bool z = digits.size() >= 2 && digits.substr(digits.size() - 2) == " z";
    if (z)
        digits.remove_suffix(2);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos || (digits.size() > 1 && digits[0] == '0'))
        bad("a message length that is not a decimal number ('" + printable(digits, 32) + "')");
    if (digits.size() > 10)
        bad("a message length of more than 10 digits ('" + printable(digits, 32) + "')");
    if (z && !compressedAllowed_)
        bad("a compressed message ('PSR1 <length> z') in a session that did not agree on compression in hello");
    uint64_t n = 0;
    for (char c : digits)
        n = n * 10 + uint64_t(c - '0');
    // A compressed message's bytes are bounded by the most that max_ bytes
    // can deflate to; what it inflates to is bounded by max_ (next()).
    const size_t limit = z ? deflatedBound(max_) : max_;
    if (n > limit)
        bad(std::string(z ? "a compressed message of " : "a message of ") + std::to_string(n) + " bytes, over the limit of " +
            std::to_string(limit) + " bytes");
    if (n < 2)
        bad("an empty message (a message is one JSON object)");
    length_ = static_cast<size_t>(n);
    compressed_ = z;
    headerBytes_ = lf + 1;
    buffer_.erase(0, lf + 1);
}

std::optional<std::string> FrameReader::next()
{
    if (!length_)
        parseHeader();
    if (!length_ || buffer_.size() < *length_)
        return std::nullopt;
    std::string payload = buffer_.substr(0, *length_);
    buffer_.erase(0, *length_);
    lastWireBytes_ = headerBytes_ + *length_;
    lastCompressed_ = compressed_;
    length_.reset();
    compressed_ = false;
    if (lastCompressed_)
        payload = inflateBounded(payload, max_);
    // The next header is read on the next call: a message is answered
    // before a bad one after it ends the session.
    return payload;
}

// ---- requests --------------------------------------------------------------

namespace {

json parseObject(std::string_view payload, const char* what)
{
    if (jsonDepth(payload, kMaxRequestDepth) > kMaxRequestDepth)
        bad(std::string(what) + " nested deeper than " + std::to_string(kMaxRequestDepth) + " levels");
    json j;
    try {
        j = json::parse(payload.begin(), payload.end());
    } catch (const json::exception& e) {
        // nlohmann's message names the byte; it quotes no input beyond a token.
        bad(std::string(what) + " that is not JSON (" + printable(e.what(), 160) + ")");
    }
    if (!j.is_object())
        bad(std::string(what) + " that is not a JSON object");
    return j;
}

std::string field(RequestType t, const std::string& key) { return "'" + key + "' of a " + std::string(toString(t)) + " request"; }

int64_t integerIn(const json& v, RequestType t, const std::string& key, int64_t lo, int64_t hi)
{
    if (!v.is_number_integer())
        bad(field(t, key) + " is not a whole number");
    int64_t x = 0;
    if (v.is_number_unsigned()) {
        if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            bad(field(t, key) + " is out of range");
        x = static_cast<int64_t>(v.get<uint64_t>());
    } else {
        x = v.get<int64_t>();
    }
    if (x < lo || x > hi)
        bad(field(t, key) + " is " + std::to_string(x) + ", outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
}

void stringOf(const json& v, RequestType t, const std::string& key, size_t minBytes, size_t maxBytes)
{
    if (!v.is_string())
        bad(field(t, key) + " is not a string");
    const auto& s = v.get_ref<const std::string&>();
    if (s.size() < minBytes || s.size() > maxBytes)
        bad(field(t, key) + " has " + std::to_string(s.size()) + " bytes, outside " + std::to_string(minBytes) + ".." +
            std::to_string(maxBytes));
    if (s.find('\0') != std::string::npos)
        bad(field(t, key) + " holds a NUL byte");
}

void integerList(const json& v, RequestType t, const std::string& key, size_t minItems, size_t maxItems, int64_t lo, int64_t hi)
{
    if (!v.is_array())
        bad(field(t, key) + " is not a list");
    if (v.size() < minItems || v.size() > maxItems)
        bad(field(t, key) + " has " + std::to_string(v.size()) + " items, outside " + std::to_string(minItems) + ".." +
            std::to_string(maxItems));
    for (const json& x : v)
        integerIn(x, t, key, lo, hi);
}

void boolean(const json& v, RequestType t, const std::string& key)
{
    if (!v.is_boolean())
        bad(field(t, key) + " is not true or false");
}

struct Key {
    const char* name;
    bool required;
};

void onlyKeys(const json& params, RequestType t, std::initializer_list<Key> keys)
{
    for (const auto& [k, v] : params.items()) {
        bool known = false;
        for (const Key& key : keys)
            known = known || k == key.name;
        if (!known)
            bad("a " + std::string(toString(t)) + " request with an unknown field '" + printable(k, 64) + "'");
    }
    for (const Key& key : keys)
        if (key.required && !params.contains(key.name))
            bad("a " + std::string(toString(t)) + " request without '" + key.name + "'");
}

void validate(RequestType t, const json& p)
{
    constexpr int64_t kTime = std::numeric_limits<int64_t>::max() / 4; // any trace time, with room to subtract
    switch (t) {
    case RequestType::Hello:
        onlyKeys(p, t, {{"versions", true}, {"client", false}, {"compression", false}});
        integerList(p["versions"], t, "versions", 1, 16, 1, 1'000'000);
        if (p.contains("client"))
            stringOf(p["client"], t, "client", 0, 256);
        if (p.contains("compression")) {
            const json& c = p["compression"];
            if (!c.is_array() || c.size() > 8)
                bad(field(t, "compression") + " is not a list of at most 8 names");
            for (const json& name : c)
                stringOf(name, t, "compression", 1, 32);
        }
        break;
    case RequestType::Index:
    case RequestType::CostModel:
        onlyKeys(p, t, {});
        break;
    case RequestType::Analysis:
        onlyKeys(p, t, {{"iteration", false}, {"parts", false}});
        if (p.contains("iteration"))
            integerIn(p["iteration"], t, "iteration", 0, 1'000'000);
        if (p.contains("parts") && p["parts"] != "summary" && p["parts"] != "full")
            bad(field(t, "parts") + " is not \"summary\" or \"full\"");
        break;
    case RequestType::Steps: {
        onlyKeys(p, t, {{"iteration", false}, {"ranks", false}, {"rank_range", false}, {"from_ns", false}, {"to_ns", false},
                        {"parts", false}, {"limit", false}});
        if (p.contains("iteration"))
            integerIn(p["iteration"], t, "iteration", 0, 1'000'000);
        if (p.contains("ranks") && p.contains("rank_range"))
            bad("a steps request with both 'ranks' and 'rank_range' (one or the other)");
        if (p.contains("ranks"))
            integerList(p["ranks"], t, "ranks", 1, 65'536, 0, std::numeric_limits<int32_t>::max());
        if (p.contains("rank_range")) {
            integerList(p["rank_range"], t, "rank_range", 2, 2, 0, std::numeric_limits<int32_t>::max());
            if (p["rank_range"][0].get<int64_t>() > p["rank_range"][1].get<int64_t>())
                bad("a steps request whose rank_range ends before it starts");
        }
        if (p.contains("from_ns") != p.contains("to_ns"))
            bad("a steps request with one of 'from_ns' and 'to_ns' (both or neither)");
        if (p.contains("from_ns")) {
            const int64_t from = integerIn(p["from_ns"], t, "from_ns", -kTime, kTime);
            const int64_t to = integerIn(p["to_ns"], t, "to_ns", -kTime, kTime);
            if (to <= from)
                bad("a steps request whose to_ns is not after its from_ns");
        }
        if (p.contains("parts")) {
            const json& parts = p["parts"];
            if (!parts.is_array() || parts.empty() || parts.size() > 3)
                bad(field(t, "parts") + " is not a list of 1 to 3 names");
            for (const json& x : parts)
                if (x != "steps" && x != "bubbles" && x != "critical_path")
                    bad(field(t, "parts") + " names something other than \"steps\", \"bubbles\" and \"critical_path\"");
        }
        if (p.contains("limit"))
            integerIn(p["limit"], t, "limit", 1, kMaxStepItems);
        break;
    }
    case RequestType::Tiles: {
        onlyKeys(p, t, {{"from_ns", true}, {"to_ns", true}, {"width_px", true}, {"lanes", false}, {"ranks", false}, {"fold_px", false}});
        const int64_t from = integerIn(p["from_ns"], t, "from_ns", -kTime, kTime);
        const int64_t to = integerIn(p["to_ns"], t, "to_ns", -kTime, kTime);
        if (to <= from)
            bad("a tiles request whose to_ns is not after its from_ns");
        const int64_t width = integerIn(p["width_px"], t, "width_px", 1, kMaxWidthPx);
        if (p.contains("lanes")) {
            integerList(p["lanes"], t, "lanes", 1, kMaxTileLanes, 0, std::numeric_limits<int32_t>::max());
            if (int64_t(p["lanes"].size()) * width > kMaxTilePixels)
                bad("a tiles request of " + std::to_string(p["lanes"].size()) + " lanes x " + std::to_string(width) +
                    " px, over the limit of " + std::to_string(kMaxTilePixels) + " pixels");
        }
        if (p.contains("ranks"))
            integerList(p["ranks"], t, "ranks", 1, 65'536, 0, std::numeric_limits<int32_t>::max());
        if (p.contains("fold_px")) {
            const json& f = p["fold_px"];
            if (!f.is_number() || !(f.get<double>() >= 1.0 && f.get<double>() <= 64.0))
                bad(field(t, "fold_px") + " is not a number from 1 to 64");
        }
        break;
    }
    case RequestType::Details:
        onlyKeys(p, t, {{"lane", true}, {"event", true}});
        integerIn(p["lane"], t, "lane", 0, std::numeric_limits<int32_t>::max());
        integerIn(p["event"], t, "event", 0, std::numeric_limits<int64_t>::max());
        break;
    case RequestType::Search:
        onlyKeys(p, t, {{"pattern", true}, {"regex", false}, {"case_sensitive", false}, {"limit", false}});
        stringOf(p["pattern"], t, "pattern", 1, kMaxPatternBytes);
        if (p.contains("regex"))
            boolean(p["regex"], t, "regex");
        if (p.contains("case_sensitive"))
            boolean(p["case_sensitive"], t, "case_sensitive");
        if (p.contains("limit"))
            integerIn(p["limit"], t, "limit", 1, kMaxSearchHits);
        break;
    case RequestType::Diff:
        onlyKeys(p, t, {{"baseline", true}});
        stringOf(p["baseline"], t, "baseline", 1, kMaxPathBytes);
        break;
    }
}

} // namespace

Request parseRequest(std::string_view payload)
{
    if (payload.size() > kMaxRequestBytes)
        bad("a request of " + std::to_string(payload.size()) + " bytes, over the limit of " + std::to_string(kMaxRequestBytes) + " bytes");
    json j = parseObject(payload, "a request");
    Request r;
    if (!j.contains("id"))
        bad("a request without an 'id'");
    if (!j["id"].is_number_integer() || (j["id"].is_number_unsigned() ? j["id"].get<uint64_t>() > uint64_t(kMaxId)
                                                                       : (j["id"].get<int64_t>() < 0 || j["id"].get<int64_t>() > kMaxId)))
        bad("a request whose 'id' is not a whole number from 0 to 2^53");
    r.id = j["id"].is_number_unsigned() ? static_cast<int64_t>(j["id"].get<uint64_t>()) : j["id"].get<int64_t>();
    if (!j.contains("type") || !j["type"].is_string())
        bad("a request without a 'type' string");
    const auto type = requestTypeOf(j["type"].get_ref<const std::string&>());
    if (!type)
        bad("a request of unknown type '" + printable(j["type"].get_ref<const std::string&>(), 64) + "'");
    r.type = *type;
    j.erase("id");
    j.erase("type");
    validate(r.type, j);
    r.params = std::move(j);
    return r;
}

// ---- responses -------------------------------------------------------------

std::string okResponse(const json& id, RequestType type, const json& result)
{
    json r{{"id", id}, {"ok", true}, {"type", toString(type)}, {"result", result}};
    return jsonText(r);
}

std::string okResponseText(const json& id, RequestType type, std::string_view resultText)
{
    // jsonText's object keys are sorted: id, ok, result, type.
    std::string out;
    out.reserve(resultText.size() + 64);
    out.append("{\"id\":").append(jsonText(id)).append(",\"ok\":true,\"result\":").append(resultText);
    out.append(",\"type\":\"").append(toString(type)).append("\"}");
    return out;
}

std::string errorResponse(const json& id, std::optional<RequestType> type, std::string_view code, std::string_view message)
{
    json r{{"id", id}, {"ok", false}, {"type", type ? json(toString(*type)) : json(nullptr)},
           {"error", {{"code", code}, {"message", message}}}};
    return jsonText(r);
}

Response parseResponse(std::string_view payload)
{
    if (payload.size() > kMaxResponseBytes)
        bad("a response of " + std::to_string(payload.size()) + " bytes, over the limit of " + std::to_string(kMaxResponseBytes) + " bytes");
    // Responses nest as deep as the analysis document does.
    if (jsonDepth(payload, kMaxJsonDepth) > kMaxJsonDepth)
        bad("a response nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    json j;
    try {
        j = json::parse(payload.begin(), payload.end());
    } catch (const json::exception& e) {
        bad("a response that is not JSON (" + printable(e.what(), 160) + ")");
    }
    if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean() || !j.contains("id"))
        bad("a response without 'id' and 'ok'");
    Response r;
    if (j["id"].is_null())
        r.id = -1;
    else if (j["id"].is_number_integer())
        r.id = j["id"].get<int64_t>();
    else
        bad("a response whose 'id' is not a whole number");
    r.ok = j["ok"].get<bool>();
    if (j.contains("type") && j["type"].is_string())
        r.type = j["type"].get<std::string>();
    if (r.ok) {
        if (!j.contains("result"))
            bad("a response without a 'result'");
        r.result = std::move(j["result"]);
    } else {
        const json& e = j.contains("error") ? j["error"] : json();
        if (!e.is_object() || !e.contains("code") || !e["code"].is_string() || !e.contains("message") || !e["message"].is_string())
            bad("an error response without 'error.code' and 'error.message'");
        r.errorCode = e["code"].get<std::string>();
        r.errorMessage = e["message"].get<std::string>();
    }
    if (!r.ok && r.errorCode.empty())
        bad("an error response with an empty code");
    return r;
}

std::string cutName(std::string_view name, size_t maxBytes)
{
    if (name.size() <= maxBytes)
        return std::string(name);
    size_t n = maxBytes;
    // Back off continuation bytes so a UTF-8 sequence is not split.
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80)
        --n;
    return std::string(name.substr(0, n));
}

} // namespace pipescope::remote
