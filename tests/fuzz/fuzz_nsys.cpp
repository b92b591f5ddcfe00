// libFuzzer target for the Nsight Systems importer.
//
// Byte-level mutation rarely yields a valid SQLite file, and what the importer
// must survive is mostly odd schemas and values inside valid files. So an
// input is one of:
//   - a database file (it starts with "SQLite"): imported as it is;
//   - anything else: SQL run on top of a small valid export
//     (tests/data/nsys/export-3x.sql), then imported. The SQL can drop and
//     add tables and columns, and store any type in any cell.
// Either way the importer must finish or throw pipescope::Error; the store is
// then finished too, so its post-processing sees the same data.
#include "import/Import.h"
#include "store/Sqlite.h"
#include "store/StoreWriter.h"
#include "util/Error.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace {

std::string g_dir;
std::string g_seedSql;

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

int stopLongQueries(void* steps)
{
    return ++*static_cast<int*>(steps) > 2000; // x 1000 VM instructions
}

bool mentionsVacuum(const std::string& sql)
{
    // VACUUM INTO writes a new file wherever it is told.
    std::string lower(sql.size(), '\0');
    for (size_t i = 0; i < sql.size(); ++i)
        lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(sql[i])));
    return lower.find("vacuum") != std::string::npos;
}

bool buildFromSql(const std::string& path, const std::string& sql)
{
    if (mentionsVacuum(sql))
        return false;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return false;
    }
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 20);
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_exec(db, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF", nullptr, nullptr, nullptr);
    sqlite3_exec(db, g_seedSql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_set_authorizer(db, denyFileAccess, nullptr);
    int steps = 0;
    sqlite3_progress_handler(db, 1000, stopLongQueries, &steps);
    // Errors are expected: the SQL runs up to its first bad statement.
    sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return true;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    g_dir = (std::filesystem::temp_directory_path() / ("fuzz_nsys." + std::to_string(getpid()))).string();
    std::filesystem::create_directories(g_dir);
    std::ifstream in(std::string(PIPESCOPE_TESTDATA) + "/nsys/export-3x.sql", std::ios::binary);
    g_seedSql.assign(std::istreambuf_iterator<char>(in), {});
    if (g_seedSql.empty()) {
        std::fprintf(stderr, "fuzz_nsys: cannot read the seed export SQL under %s\n", PIPESCOPE_TESTDATA);
        std::abort();
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string input = g_dir + "/input.sqlite";
    const std::string output = g_dir + "/output.pipescope";
    std::filesystem::remove(input);
    std::string bytes(reinterpret_cast<const char*>(data), size);
    if (bytes.rfind("SQLite", 0) == 0) {
        std::ofstream(input, std::ios::binary) << bytes;
    } else if (!buildFromSql(input, bytes)) {
        return 0;
    }
    try {
        pipescope::StoreWriter writer(output);
        pipescope::ImportOptions options;
        options.progress = false;
        options.shortKernelNames = size % 2 == 1;
        pipescope::importNsys(input, writer, options);
        writer.finish();
    } catch (const pipescope::Error& e) {
        // A clear refusal is a correct outcome, but not one caused by the
        // importer's own SQL: it only selects columns it has checked exist.
        // SQLite's failures start with the database's path; the rest of a
        // message may quote the file's own text (a schema version), which can
        // say anything.
        std::string_view msg = e.what();
        auto sqlFailed = [&](const std::string& db) {
            return msg.rfind(db + ": cannot prepare query", 0) == 0 || msg.rfind(db + ": bind: ", 0) == 0;
        };
        if (sqlFailed(input) || sqlFailed(output)) {
            std::fprintf(stderr, "fuzz_nsys: importer SQL failed: %s\n", e.what());
            std::abort();
        }
    }
    std::filesystem::remove(output);
    return 0;
}
