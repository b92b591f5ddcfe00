// libFuzzer target for the remote protocol's parsers (core/remote/Protocol.h,
// docs/remote.md): the input is a byte stream as a client (or a server) may
// send it, cut into messages by FrameReader at a split point taken from its
// first byte, each payload then read as a request (parseRequest), as a
// response (parseResponse) and, where it is JSON, as a cost model
// (costModelFromWire: what a client takes from a server). Each must finish
// or throw pipescope::Error (ProtocolError, FormatError); a request accepted
// must have a known type and an id within 0..2^53, and no payload may pass
// the reader's limit. Seeds: tests/fuzz/seeds/protocol.
#include "remote/CostModelWire.h"
#include "remote/Protocol.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

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
    // The whole input as a cost model sent by a server.
    try {
        const nlohmann::json j = nlohmann::json::parse(bytes, bytes + n, nullptr, false);
        if (!j.is_discarded() && j.is_object())
            (void)costModelFromWire(j);
    } catch (const Error&) {
    }
    return 0;
}
