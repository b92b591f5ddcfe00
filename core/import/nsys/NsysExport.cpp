#include "import/nsys/NsysExport.h"

#include "util/Error.h"
#include "util/Format.h"

#include <sqlite3.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace pipescope::nsys {

namespace {

constexpr const char* kExportHint = "export the report with `nsys export --type sqlite <report>.nsys-rep`";

// Our own verdicts on the file, told apart from SQLite's errors while opening.
class ExportError : public FormatError {
public:
    using FormatError::FormatError;
};

bool endsWith(std::string_view s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Checks the SQLite header ourselves: SQLite opens any file lazily and only
// fails on the first query, with a message that does not say what to do.
void checkHeader(const std::string& path)
{
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
        throw Error(path + ": no such file");
    if (std::filesystem::is_directory(path, ec))
        throw Error(path + ": is a directory, not an Nsight Systems SQLite export");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
        throw Error(path + ": cannot open: " + std::strerror(errno));
    char head[16] = {};
    size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (n == 0)
        throw FormatError(path + ": file is empty; expected an Nsight Systems SQLite export (" + kExportHint + ")");
    if (n < sizeof head || std::memcmp(head, "SQLite format 3", 16) != 0) {
        if (endsWith(path, ".nsys-rep") || endsWith(path, ".qdrep"))
            throw FormatError(path + ": is an Nsight Systems report, not its SQLite export; " + kExportHint);
        throw FormatError(path + ": not an SQLite database, so not an Nsight Systems export; " + kExportHint);
    }
}

std::string sqlName(std::string_view identifier)
{
    std::string q = "\"";
    for (char c : identifier) {
        if (c == '"')
            q.push_back('"');
        q.push_back(c);
    }
    q.push_back('"');
    return q;
}

void harden(sqlite3* db)
{
    // SQLite's advice for files from untrusted sources: nothing stored in the
    // file may run code with side effects or make us allocate without bound.
#ifdef SQLITE_DBCONFIG_DEFENSIVE
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
#endif
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
#endif
#ifdef SQLITE_DBCONFIG_ENABLE_VIEW
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
#endif
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 64 << 20);
    sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
}

std::optional<int> leadingInt(std::string_view s)
{
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p == s.data())
        return std::nullopt;
    return v;
}

} // namespace

const char* Export::supportedSchemas()
{
    return "export schemas 2.x and 3.x (tested with Nsight Systems 2024.5, schema 3.13.2)";
}

Export::Export(const std::string& path) : path_(path)
{
    checkHeader(path);
    // sql::Database opens read-only inputs immutable: no locks, no journal or
    // -shm files, so the folder the export sits in may be read-only.
    openedAs_ = path;
    try {
        db_ = sql::Database(openedAs_, sql::Database::Mode::ReadOnly);
        harden(db_.handle());
        db_.exec("PRAGMA query_only = 1");
        db_.exec("PRAGMA cell_size_check = 1");
        // Virtual tables may need modules this build lacks; exports have none.
        auto st = db_.prepare("SELECT name FROM sqlite_master WHERE type = 'table'"
                              " AND COALESCE(sql, '') NOT LIKE 'CREATE VIRTUAL%'");
        while (st.step())
            tables_.insert(st.string(0));
        identifySchema();
    } catch (const ExportError&) {
        throw;
    } catch (const Error& e) {
        // Here every failure is the file's: its header or schema is unreadable.
        std::string msg = e.what();
        for (std::string_view step : {": cannot prepare query: ", ": query failed: "}) {
            if (auto at = msg.find(step); raisedBy(e) && at == openedAs_.size())
                msg = openedAs_ + ": " + msg.substr(at + step.size());
        }
        rethrowAsFormatError(Error(msg));
    }
}

bool Export::raisedBy(const std::exception& e) const
{
    std::string_view msg = e.what();
    return !openedAs_.empty() && msg.substr(0, openedAs_.size()) == openedAs_;
}

void Export::rethrowAsFormatError(const std::exception& e) const
{
    std::string msg = e.what();
    if (raisedBy(e)) {
        msg = msg.substr(openedAs_.size());
        if (msg.starts_with(": "))
            msg.erase(0, 2);
        // Sqlite.cpp's own wording for NOTADB/CORRUPT repeats the path.
        const std::string_view notDb = "not a valid SQLite database (";
        if (msg.starts_with(notDb) && msg.ends_with(")"))
            throw FormatError(path_ + ": corrupt or truncated SQLite file (" +
                              msg.substr(notDb.size(), msg.size() - notDb.size() - 1) + "); " + kExportHint + " again");
    }
    throw FormatError(path_ + ": cannot read the Nsight Systems export: " + msg);
}

bool Export::hasTable(std::string_view table) const { return tables_.find(table) != tables_.end(); }

bool Export::hasColumn(const std::string& table, std::string_view column)
{
    if (!hasTable(table))
        return false;
    auto it = columns_.find(table);
    if (it == columns_.end()) {
        std::set<std::string, std::less<>> cols;
        auto st = db_.prepare("SELECT name FROM pragma_table_info(?1)");
        st.bind(1, table);
        while (st.step())
            cols.insert(st.string(0));
        it = columns_.emplace(table, std::move(cols)).first;
    }
    return it->second.find(column) != it->second.end();
}

std::string Export::intColumn(const std::string& table, std::string_view column)
{
    if (!hasColumn(table, column))
        return "NULL";
    auto q = sqlName(column);
    return "CASE typeof(" + q + ") WHEN 'integer' THEN " + q + " END";
}

std::string Export::textColumn(const std::string& table, std::string_view column)
{
    if (!hasColumn(table, column))
        return "NULL";
    auto q = sqlName(column);
    return "CASE typeof(" + q + ") WHEN 'text' THEN " + q + " END";
}

std::optional<std::string> Export::meta(std::string_view key) const
{
    auto it = meta_.find(std::string(key));
    if (it == meta_.end())
        return std::nullopt;
    return it->second;
}

void Export::identifySchema()
{
    for (const char* t : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
        if (hasTable(t)) {
            schema_.metaTable = t;
            break;
        }
    }
    if (schema_.metaTable.empty())
        throw ExportError(path_ + ": an SQLite database, but not an Nsight Systems export (it has no META_DATA_EXPORT "
                          "or EXPORT_META_DATA table); " + kExportHint);
    const std::string& mt = schema_.metaTable;
    if (!hasColumn(mt, "name") || !hasColumn(mt, "value"))
        throw ExportError(path_ + ": its " + mt + " table has no name/value columns, so its Nsight Systems export "
                          "schema is unknown; pipescope reads " + supportedSchemas());
    auto st = db_.prepare("SELECT " + textColumn(mt, "name") + ", CAST(\"value\" AS TEXT) FROM " + sqlName(mt));
    while (st.step()) {
        if (!st.isNull(0))
            meta_.emplace(st.string(0), st.string(1));
    }
    schema_.productVersion = meta("EXPORT_PRODUCT_VERSION").value_or("");
    schema_.version = meta("EXPORT_SCHEMA_VERSION").value_or("");
    std::optional<int> major;
    if (!schema_.version.empty())
        major = leadingInt(schema_.version);
    if (!major) {
        if (auto m = meta("EXPORT_SCHEMA_VERSION_MAJOR"))
            major = leadingInt(*m);
    }
    if (!major && schema_.version.empty() && !meta("EXPORT_SCHEMA_VERSION_MAJOR")) {
        // No version recorded: the metadata table's name tells the generation.
        major = mt == "EXPORT_META_DATA" ? 2 : 3;
    }
    std::string shown = !schema_.version.empty() ? schema_.version : meta("EXPORT_SCHEMA_VERSION_MAJOR").value_or("?");
    if (!major || (*major != 2 && *major != 3))
        throw ExportError(path_ + ": Nsight Systems export schema " + printable(shown, 40) + " is not supported; pipescope reads " +
                          supportedSchemas() + "; export the report with such a release or update pipescope");
    schema_.major = *major;
    if (auto m = meta("EXPORT_SCHEMA_VERSION_MINOR"))
        schema_.minor = leadingInt(*m).value_or(0);
    else if (auto dot = schema_.version.find('.'); dot != std::string::npos)
        schema_.minor = leadingInt(std::string_view(schema_.version).substr(dot + 1)).value_or(0);
    if (schema_.version.empty())
        schema_.version = std::to_string(schema_.major) + "." + std::to_string(schema_.minor);
}

} // namespace pipescope::nsys
