// libFuzzer target for the Kineto importer. Each input is checked twice:
//
// 1. The streaming JSON parser against nlohmann::json, fed in chunks whose
//    size comes from the input's first byte (so tokens straddle chunk
//    boundaries everywhere): both must accept or both reject, and when they
//    accept they must report the same values in the same order. Known,
//    intended differences: numbers beyond double's range ("1e400"), which
//    nlohmann rejects and this parser keeps as text; nesting deeper than
//    10000 levels, which this parser refuses; and a NUL byte, which nlohmann
//    takes for the end of input and this parser rejects as not JSON.
// 2. The whole importer on the input as a file: it must finish or throw
//    pipescope::Error, never crash or trip a sanitizer.
//
// Seeds: tests/data/kineto/*.json and the small real traces; see
// docs/import-kineto.md for the command line.
#include "import/Import.h"
#include "import/kineto/JsonStream.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Values = std::vector<std::string>;

// Records what the streaming parser reports.
struct StreamRecorder {
    Values out;
    bool null() { return add("n"); }
    bool boolean(bool b) { return add(b ? "t" : "f"); }
    bool integer(int64_t v) { return add("i" + std::to_string(v)); }
    bool unsignedInteger(uint64_t v) { return add("u" + std::to_string(v)); }
    bool floating(std::string_view t) { return add("d" + std::string(t)); }
    bool string(std::string_view s) { return add("s" + std::string(s)); }
    bool key(std::string_view s) { return add("k" + std::string(s)); }
    bool startObject() { return add("{"); }
    bool endObject() { return add("}"); }
    bool startArray() { return add("["); }
    bool endArray() { return add("]"); }
    bool add(std::string v)
    {
        out.push_back(std::move(v));
        return true;
    }
};

// Records what nlohmann::json's SAX parser reports, in the same notation.
struct NlohmannRecorder {
    Values out;
    std::string error;
    bool null() { return add("n"); }
    bool boolean(bool b) { return add(b ? "t" : "f"); }
    bool number_integer(int64_t v) { return add("i" + std::to_string(v)); }
    bool number_unsigned(uint64_t v)
    {
        return add(v <= static_cast<uint64_t>(INT64_MAX) ? "i" + std::to_string(v) : "u" + std::to_string(v));
    }
    bool number_float(double, const std::string& t) { return add("d" + t); }
    bool string(std::string& s) { return add("s" + s); }
    bool binary(nlohmann::json::binary_t&) { return add("b"); }
    bool key(std::string& s) { return add("k" + s); }
    bool start_object(std::size_t) { return add("{"); }
    bool end_object() { return add("}"); }
    bool start_array(std::size_t) { return add("["); }
    bool end_array() { return add("]"); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e)
    {
        error = e.what();
        return false;
    }
    bool add(std::string v)
    {
        out.push_back(std::move(v));
        return true;
    }
};

void differential(const uint8_t* data, size_t size)
{
    if (size == 0)
        return;
    size_t chunk = 1 + data[0] % 16;
    std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

    StreamRecorder mine;
    size_t at = 0;
    pipescope::kineto::JsonParser<StreamRecorder> parser(
        [&] {
            std::string_view c = text.substr(at, chunk);
            at += c.size();
            return c;
        },
        mine);
    bool mineOk = parser.parse();

    NlohmannRecorder theirs;
    bool theirsOk = nlohmann::json::sax_parse(text.begin(), text.end(), &theirs);

    if (mineOk == theirsOk) {
        if (mineOk && mine.out != theirs.out) {
            std::fprintf(stderr, "values differ\n");
            std::abort();
        }
        return;
    }
    if (mineOk && theirs.error.find("number overflow") != std::string::npos)
        return;
    if (!mineOk && parser.error().what.find("levels deep") != std::string::npos)
        return;
    // nlohmann takes a NUL byte for the end of input; it is not JSON.
    if (!mineOk && parser.error().offset < text.size() && text[parser.error().offset] == '\0')
        return;
    std::fprintf(stderr, "verdicts differ: streaming parser %s (%s), nlohmann %s (%s)\n", mineOk ? "accepts" : "rejects",
                 parser.error().what.c_str(), theirsOk ? "accepts" : "rejects", theirs.error.c_str());
    std::abort();
}

std::string g_dir;
std::unique_ptr<pipescope::StoreWriter> g_writer;
int g_uses = 0;

void importer(const uint8_t* data, size_t size)
{
    std::string input = g_dir + "/input.json";
    {
        std::ofstream f(input, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    // One store for many inputs keeps the fuzzer fast; a fresh one now and
    // then keeps it small.
    if (!g_writer || ++g_uses > 500) {
        g_writer.reset();
        g_writer = std::make_unique<pipescope::StoreWriter>(g_dir + "/store.pipescope");
        g_uses = 0;
    }
    pipescope::ImportOptions options;
    options.progress = false;
    try {
        pipescope::importKineto(input, *g_writer, options);
    } catch (const pipescope::Error&) {
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    char pattern[] = "/tmp/fuzz_kineto.XXXXXX";
    if (!mkdtemp(pattern))
        std::abort();
    g_dir = pattern;
    std::atexit([] {
        g_writer.reset();
        std::error_code ec;
        std::filesystem::remove_all(g_dir, ec);
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    differential(data, size);
    importer(data, size);
    return 0;
}
