// libFuzzer target for stores: open, load and analyze a store file.
//
// As for Nsight exports, byte mutation rarely yields a valid SQLite file,
// and a crafted store is mostly odd rows in a valid one. So an input is
// either a database file (it starts with "SQLite format 3"), loaded as it
// is, or SQL run on a copy of a small valid store (built at start from
// tests/data/kineto/distinfo-after-events.json) that is then loaded. The
// SQL can insert any value into any table, drop tables and change ids.
// Opening, loading and analysing must finish or throw pipescope::Error.
#include "analysis/Analysis.h"
#include "import/Import.h"
#include "store/Sqlite.h"
#include "store/Store.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

std::string g_dir;
std::string g_seedStore; // bytes of the valid store

int denyFileAccess(void*, int action, const char*, const char*, const char*, const char*)
{
    // Fuzz SQL must not reach other files or change how SQLite stores this one.
    switch (action) {
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
    case SQLITE_PRAGMA:
        return SQLITE_DENY;
    default:
        return SQLITE_OK;
    }
}

void writeBytes(const std::string& path, const char* data, size_t size)
{
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(data, static_cast<std::streamsize>(size));
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    char pattern[] = "/tmp/fuzz_store.XXXXXX";
    if (!mkdtemp(pattern))
        std::abort();
    g_dir = pattern;
    const std::string seed = g_dir + "/seed.pipescope";
    {
        pipescope::StoreWriter writer(seed);
        pipescope::ImportOptions options;
        options.progress = false;
        pipescope::importKineto(std::string(PIPESCOPE_TESTDATA) + "/kineto/distinfo-after-events.json", writer, options);
        writer.finish();
    }
    std::ifstream in(seed, std::ios::binary);
    g_seedStore.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::atexit([] {
        std::error_code ec;
        std::filesystem::remove_all(g_dir, ec);
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string path = g_dir + "/input.pipescope";
    std::filesystem::remove(path + "-journal");
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
    const char* text = reinterpret_cast<const char*>(data);
    if (size >= 15 && std::memcmp(text, "SQLite format 3", 15) == 0) {
        writeBytes(path, text, size);
    } else {
        writeBytes(path, g_seedStore.data(), g_seedStore.size());
        sqlite3* db = nullptr;
        if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
            sqlite3_set_authorizer(db, denyFileAccess, nullptr);
            const std::string sql(text, size);
            sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
        }
        sqlite3_close(db);
    }
    try {
        pipescope::Store store(path);
        const pipescope::Trace trace = store.load();
        (void)pipescope::analyze(trace);
    } catch (const pipescope::Error&) {
    }
    return 0;
}
