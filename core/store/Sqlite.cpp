#include "store/Sqlite.h"

#include "util/AtomicOutput.h"
#include "util/Error.h"

#include <cctype>
#include <filesystem>
#include <new>
#include <sqlite3.h>
#include <sys/stat.h>
#include <utility>

namespace pipescope::sql {

namespace {
[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& what)
{
    int code = db ? sqlite3_errcode(db) : SQLITE_NOMEM;
    if (code == SQLITE_NOMEM)
        throw std::bad_alloc(); // reported once, as "out of memory", by the caller
    std::string msg = path + ": " + what + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
        throw FormatError(path + ": not a valid SQLite database (" + (db ? sqlite3_errmsg(db) : "") + ")");
    if (code == SQLITE_FULL)
        throw Error(path + ": disk full while writing; free space on its disk or choose another -o path");
    throw Error(msg);
}

// A file: URI for path, percent-encoding everything SQLite's URI parser could misread.
std::string fileUri(const std::string& path, const char* query)
{
    std::error_code ec;
    std::string abs = std::filesystem::absolute(path, ec).string();
    if (ec)
        abs = path;
    std::string uri = "file:";
    static const char* hex = "0123456789ABCDEF";
    for (unsigned char c : abs) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
            uri += static_cast<char>(c);
        } else {
            uri += '%';
            uri += hex[c >> 4];
            uri += hex[c & 15];
        }
    }
    return uri + "?" + query;
}

bool nonEmptyFile(const std::string& path)
{
    struct stat st{};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

} // namespace

Database::Database(const std::string& path, Mode mode) : path_(path)
{
    int flags = SQLITE_OPEN_NOMUTEX;
    std::string name = path;
    switch (mode) {
    case Mode::ReadOnly:
        // Inputs are opened immutable: nothing is created or changed beside
        // them (no -shm, no locks), so read-only folders and mounts work.
        // SQLite then ignores a write-ahead log and cannot roll back an
        // unfinished transaction; both are reported instead of read silently.
        flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
        name = fileUri(path, "mode=ro&immutable=1");
        if (nonEmptyFile(path + "-journal"))
            throw FormatError(path + ": has an unfinished transaction (" + path +
                              "-journal beside it); open it once with sqlite3 to roll it back, then retry");
        if (nonEmptyFile(path + "-wal"))
            walIgnored_ = true;
        input_ = AtomicOutput::InputGuard(path);
        break;
    case Mode::ReadWrite:
        flags |= SQLITE_OPEN_READWRITE;
        input_ = AtomicOutput::InputGuard(path);
        break;
    case Mode::Create: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    }
    int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        db_ = nullptr;
        throw Error(path + ": cannot open database: " + msg);
    }
    sqlite3_extended_result_codes(db_, 0);
    sqlite3_busy_timeout(db_, 5000);
}

Database::~Database() { close(); }

void Database::close()
{
    if (db_) {
        sqlite3_close_v2(db_);
        db_ = nullptr;
    }
    input_ = {};
}

Database::Database(Database&& o) noexcept
    : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)), walIgnored_(o.walIgnored_),
      input_(std::move(o.input_))
{
}

Database& Database::operator=(Database&& o) noexcept
{
    if (this != &o) {
        close();
        db_ = std::exchange(o.db_, nullptr);
        path_ = std::move(o.path_);
        walIgnored_ = o.walIgnored_;
        input_ = std::move(o.input_);
    }
    return *this;
}

std::string Database::walWarning() const
{
    if (!walIgnored_)
        return {};
    return path_ + ": changes in its write-ahead log (" + path_ +
           "-wal) were not read; to include them, run `sqlite3 " + path_ +
           " 'PRAGMA wal_checkpoint(TRUNCATE)'` where the file is writable, then import again";
}

void Database::exec(const std::string& sql)
{
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
        std::string msg = err ? err : "error";
        sqlite3_free(err);
        fail(db_, path_, msg);
    }
}

Statement Database::prepare(std::string_view sqlText)
{
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v3(db_, sqlText.data(), static_cast<int>(sqlText.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                           nullptr) != SQLITE_OK)
        fail(db_, path_, "cannot prepare query");
    return Statement(db_, stmt, path_);
}

int64_t Database::lastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
int Database::changes() const { return sqlite3_changes(db_); }

int Database::userVersion()
{
    auto st = prepare("PRAGMA user_version");
    st.step();
    return static_cast<int>(st.int64(0));
}

bool Database::tableExists(std::string_view name)
{
    auto st = prepare("SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = ?1");
    st.bind(1, name);
    return st.step();
}

Statement::~Statement()
{
    if (stmt_)
        sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& o) noexcept
    : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)), path_(std::move(o.path_))
{
}

Statement& Statement::operator=(Statement&& o) noexcept
{
    if (this != &o) {
        if (stmt_)
            sqlite3_finalize(stmt_);
        db_ = o.db_;
        stmt_ = std::exchange(o.stmt_, nullptr);
        path_ = std::move(o.path_);
    }
    return *this;
}

Statement& Statement::bind(int i, int64_t v)
{
    if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK)
        fail(db_, path_, "bind");
    return *this;
}

Statement& Statement::bind(int i, double v)
{
    if (sqlite3_bind_double(stmt_, i, v) != SQLITE_OK)
        fail(db_, path_, "bind");
    return *this;
}

Statement& Statement::bind(int i, std::string_view v)
{
    // A null data pointer would bind SQL NULL; an empty string stays a string.
    const char* data = v.data() ? v.data() : "";
    if (sqlite3_bind_text64(stmt_, i, data, v.size(), SQLITE_TRANSIENT, SQLITE_UTF8) != SQLITE_OK)
        fail(db_, path_, "bind");
    return *this;
}

Statement& Statement::bindNull(int i)
{
    if (sqlite3_bind_null(stmt_, i) != SQLITE_OK)
        fail(db_, path_, "bind");
    return *this;
}

bool Statement::step()
{
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW)
        return true;
    if (rc == SQLITE_DONE)
        return false;
    sqlite3_reset(stmt_);
    fail(db_, path_, "query failed");
}

void Statement::run()
{
    step();
    reset();
}

void Statement::reset()
{
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
}

bool Statement::isNull(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
bool Statement::isInteger(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_INTEGER; }
int64_t Statement::int64(int c) const { return sqlite3_column_int64(stmt_, c); }
double Statement::real(int c) const { return sqlite3_column_double(stmt_, c); }

std::string_view Statement::text(int c) const
{
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
    if (!p)
        return {};
    return {p, static_cast<size_t>(sqlite3_column_bytes(stmt_, c))};
}

std::optional<int64_t> Statement::optInt64(int c) const
{
    if (isNull(c))
        return std::nullopt;
    return int64(c);
}

} // namespace pipescope::sql
