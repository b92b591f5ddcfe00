#pragma once
// The remote protocol of `pipescope serve` (docs/remote.md): a desktop app
// asks a server that runs where the job lies for what it draws, over SSH's
// standard input and output or a loopback port. Qt-free.
//
// Framing: one message is an ASCII header line "PSR1 <length>\n" (length in
// decimal, the payload's bytes) followed by exactly <length> bytes: one JSON
// object in UTF-8. Once hello has agreed on compression (protocol 2), a
// message may instead be "PSR1 <length> z\n" and <length> bytes of one zlib
// stream (RFC 1950) that inflates to the JSON; the limits below bound the
// inflated size, and inflating stops at the limit (a decompression bomb is a
// protocol error like any other oversized message). Requests are at most kMaxRequestBytes; responses at most
// responseLimit(type). Anything else (another header, a length beyond the
// limit, a payload that is not a JSON object of a known shape) is a protocol
// error: the server says so in one line on its standard error and ends the
// session with kExitProtocol.
#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::remote {

// The protocol version this build speaks (hello negotiates it) and the
// oldest it still answers.
// 2 adds compression (hello's "compression"), the analysis's summary
// (analysis "parts") and the steps request.
inline constexpr int kProtocolVersion = 2;
inline constexpr int kOldestProtocolVersion = 1;

inline constexpr std::string_view kMagic = "PSR1";
// "PSR1 " + at most 10 digits + " z" + "\n".
inline constexpr size_t kMaxHeaderBytes = 18;
inline constexpr size_t kMaxRequestBytes = 64 * 1024;
// The largest response of any kind; responseLimit() gives each kind's.
inline constexpr size_t kMaxResponseBytes = size_t(32) << 20;
// A JSON request nests a few levels; deeper is refused before parsing.
inline constexpr size_t kMaxRequestDepth = 8;

// Bounds of request fields.
inline constexpr int kMaxWidthPx = 16384;
inline constexpr size_t kMaxTileLanes = 4096;
// lanes x width_px of one tiles request: the response is bounded by pixels.
inline constexpr int64_t kMaxTilePixels = 2'000'000;
inline constexpr size_t kMaxPatternBytes = 1024;
inline constexpr int kMaxSearchHits = 1000;
inline constexpr size_t kMaxPathBytes = 4096;
// A name inside a tiles or search response is cut to this many bytes
// (details gives the whole of it).
inline constexpr size_t kMaxNameBytes = 256;
// Items of each kind one steps request may ask for (and its default).
inline constexpr int64_t kMaxStepItems = 1'000'000;
inline constexpr int64_t kDefaultStepItems = 100'000;
// Responses shorter than this are sent as they are, even when compressing.
inline constexpr size_t kCompressAbove = 1024;
// The compression's name in hello.
inline constexpr std::string_view kDeflate = "deflate";

// Exit status of a session ended by a malformed message.
inline constexpr int kExitProtocol = 3;

// The kinds of request, in the order docs/remote.md lists them.
enum class RequestType : uint8_t { Hello, Index, Analysis, Tiles, Details, Search, CostModel, Diff, Steps };
std::string_view toString(RequestType type);
std::optional<RequestType> requestTypeOf(std::string_view name);

// The most bytes a response to this kind of request may have (payload).
size_t responseLimit(RequestType type);

// A message that breaks the protocol. what() is one sentence for the
// server's error line.
class ProtocolError : public Error {
public:
    using Error::Error;
};

// "PSR1 <len>\n" + payload.
std::string frame(std::string_view payload);
// "PSR1 <len> z\n" + the payload deflated (a zlib stream, at this level).
std::string frameDeflated(std::string_view payload, int level = 1);
// One zlib stream of these bytes.
std::string deflateBytes(std::string_view bytes, int level = 1);
// The bytes one zlib stream inflates to. Throws ProtocolError when it is
// not one whole stream (and nothing after it), or as soon as it inflates
// past maxBytes (the rest is never inflated).
std::string inflateBounded(std::string_view compressed, size_t maxBytes);
// The most bytes a zlib stream of n bytes can take (zlib's compressBound).
size_t deflatedBound(size_t n);

// Cuts a byte stream into messages. feed() takes bytes as they come (any
// split); next() gives each complete payload once. Throws ProtocolError as
// soon as the bytes cannot be a message within maxPayload.
//
// A compressed message ("PSR1 <len> z") is accepted once allowCompressed()
// is set (after hello agreed on it); next() gives its inflated payload,
// bounded by maxPayload like any other.
class FrameReader {
public:
    explicit FrameReader(size_t maxPayload) : max_(maxPayload) {}
    void feed(const char* data, size_t size);
    std::optional<std::string> next();
    void allowCompressed(bool allowed) { compressedAllowed_ = allowed; }
    // Of the last payload next() gave: was it compressed, and its bytes on the wire.
    bool lastCompressed() const { return lastCompressed_; }
    size_t lastWireBytes() const { return lastWireBytes_; }
    // Bytes of an unfinished message are buffered (an end of stream now
    // would cut a message).
    bool midMessage() const { return !buffer_.empty() || length_.has_value(); }

private:
    void parseHeader();
    std::string buffer_;
    size_t max_;
    std::optional<size_t> length_; // the payload length once its header is read
    bool compressed_ = false;       // the message being read is compressed
    size_t headerBytes_ = 0;
    bool compressedAllowed_ = false;
    bool lastCompressed_ = false;
    size_t lastWireBytes_ = 0;
};

// A request, validated: id, type and its parameters, each of the type and
// range docs/remote.md gives (unknown keys are refused).
struct Request {
    int64_t id = 0;
    RequestType type = RequestType::Hello;
    nlohmann::json params = nlohmann::json::object(); // every key but id and type
};

// Throws ProtocolError naming what is wrong.
Request parseRequest(std::string_view payload);

// Error codes of a response that refuses a well-formed request (the session goes on).
namespace code {
inline constexpr const char* kRefused = "refused";       // outside what the server may read
inline constexpr const char* kNotFound = "not_found";    // no such lane, event, iteration
inline constexpr const char* kUnavailable = "unavailable"; // e.g. no cost model for this job
inline constexpr const char* kTooLarge = "too_large";    // the answer would pass its limit
inline constexpr const char* kFailed = "failed";         // the job could not be read or analysed
inline constexpr const char* kVersion = "version";       // no protocol version in common
inline constexpr const char* kOrder = "order";           // hello must come first, once
inline constexpr const char* kMalformed = "malformed";   // the last word of a session ended by a bad message
} // namespace code

// Response payloads (JSON text): {"id":..,"ok":true,"type":..,"result":..}
// and {"id":..,"ok":false,"type":..,"error":{"code":..,"message":..}}.
// A null id (json(nullptr)) answers a message whose id could not be read.
std::string okResponse(const nlohmann::json& id, RequestType type, const nlohmann::json& result);
// The same, with the result given as JSON text (a document kept as text is
// not parsed again to be sent).
std::string okResponseText(const nlohmann::json& id, RequestType type, std::string_view resultText);
std::string errorResponse(const nlohmann::json& id, std::optional<RequestType> type, std::string_view code,
                          std::string_view message);

// A response as the client reads it; throws ProtocolError when it is not one.
struct Response {
    int64_t id = -1; // -1: the server's last word on a malformed request (null id)
    bool ok = false;
    std::string type;
    nlohmann::json result;
    std::string errorCode, errorMessage;
};
Response parseResponse(std::string_view payload);

// A string from a trace, cut to at most maxBytes without splitting a UTF-8
// sequence (invalid bytes are replaced when the JSON is written).
std::string cutName(std::string_view name, size_t maxBytes = kMaxNameBytes);

} // namespace pipescope::remote
