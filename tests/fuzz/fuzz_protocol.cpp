// libFuzzer target for the remote protocol's parsers (core/remote/Protocol.h,
// docs/remote.md): the input is a byte stream as a client (or a server) may
// send it, cut into messages by FrameReader at a split point taken from its
// first byte, each payload then read as a request (parseRequest), as a
// response (parseResponse) and, where it is JSON, as a cost model
// (costModelFromWire: what a client takes from a server). Each must finish
// or throw pipescope::Error (ProtocolError, FormatError); a request accepted
// must have a known type and an id within 0..2^53, and no payload may pass
// the reader's limit. The first byte's top bit lets the reader take
// compressed messages ("PSR1 <len> z", a zlib stream, as after hello agreed
// on deflate): their inflated payloads are bounded the same way. The rest of
// the input is also inflated whole within a small bound, and deflated and
// inflated back. Seeds: tests/fuzz/seeds/protocol.
#include "remote/CostModelWire.h"
#include "remote/Protocol.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace pipescope;
    using namespace pipescope::remote;
    if (size == 0)
        return 0;
    const size_t split = size > 1 ? data[0] % size : 0;
    const char* bytes = reinterpret_cast<const char*>(data) + 1;
    const size_t n = size - 1;
    FrameReader reader(kMaxRequestBytes);
    reader.allowCompressed((data[0] & 0x80) != 0);
    try {
        reader.feed(bytes, std::min(split, n));
        for (int round = 0; round < 2; ++round) {
            while (auto payload = reader.next()) {
                if (payload->size() > kMaxRequestBytes)
                    std::abort();
                try {
                    const Request r = parseRequest(*payload);
                    if (r.id < 0 || r.id > (int64_t(1) << 53) || toString(r.type).empty() || !r.params.is_object())
                        std::abort();
                } catch (const Error&) {
                }
                try {
                    (void)parseResponse(*payload);
                } catch (const Error&) {
                }
            }
            if (round == 0 && split < n)
                reader.feed(bytes + split, n - split);
        }
    } catch (const Error&) {
    }
    // The whole input as a zlib stream: never more than the bound.
    constexpr size_t kBound = 4096;
    try {
        if (inflateBounded(std::string_view(bytes, n), kBound).size() > kBound)
            std::abort();
    } catch (const Error&) {
    }
    // Deflated and inflated back: the same bytes, and past the bound when longer.
    {
        const std::string z = deflateBytes(std::string_view(bytes, n), 1 + data[0] % 9);
        if (z.size() > deflatedBound(n) || inflateBounded(z, n) != std::string_view(bytes, n))
            std::abort();
        if (n > 0) {
            bool refused = false;
            try {
                inflateBounded(z, n - 1);
            } catch (const ProtocolError&) {
                refused = true;
            }
            if (!refused)
                std::abort();
        }
    }
    // The whole input as a cost model sent by a server.
    try {
        const nlohmann::json j = nlohmann::json::parse(bytes, bytes + n, nullptr, false);
        if (!j.is_discarded() && j.is_object())
            (void)costModelFromWire(j);
    } catch (const Error&) {
    }
    return 0;
}
