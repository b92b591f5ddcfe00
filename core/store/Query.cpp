#include "store/Query.h"

#include "store/JobIndex.h"
#include "store/Sqlite.h"
#include "store/Store.h"
#include "util/Format.h"
#include "util/JsonText.h"

#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string_view>

namespace pipescope {

namespace {

namespace fs = std::filesystem;

// What the authorizer refused last, in words, for the message.
struct Guard {
    std::string denied;
};

bool oneOf(const char* name, std::initializer_list<const char*> names)
{
    for (const char* n : names)
        if (sqlite3_stricmp(name, n) == 0)
            return true;
    return false;
}

bool schemaTable(const char* name)
{
    return name && oneOf(name, {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"});
}

std::string actionText(int action, const char* a3)
{
    const std::string on = a3 ? std::string(" ") + printable(a3, 80) : std::string();
    // CREATE and DROP are first asked as writes to the schema table.
    if ((action == SQLITE_INSERT || action == SQLITE_UPDATE || action == SQLITE_DELETE) && schemaTable(a3))
        return "changing the schema (CREATE, DROP, ALTER)";
    switch (action) {
    case SQLITE_INSERT: return "INSERT into" + on;
    case SQLITE_UPDATE: return "UPDATE of" + on;
    case SQLITE_DELETE: return "DELETE from" + on;
    case SQLITE_ATTACH: return "ATTACH";
    case SQLITE_DETACH: return "DETACH";
    case SQLITE_TRANSACTION: return "a transaction (BEGIN, COMMIT, ROLLBACK)";
    case SQLITE_SAVEPOINT: return "a savepoint";
    case SQLITE_ALTER_TABLE: return "ALTER TABLE";
    case SQLITE_REINDEX: return "REINDEX";
    case SQLITE_ANALYZE: return "ANALYZE";
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_CREATE_TEMP_TABLE:
    case SQLITE_CREATE_TEMP_TRIGGER:
    case SQLITE_CREATE_TEMP_VIEW:
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_VIEW:
    case SQLITE_CREATE_VTABLE: return "CREATE" + on;
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_TEMP_INDEX:
    case SQLITE_DROP_TEMP_TABLE:
    case SQLITE_DROP_TEMP_TRIGGER:
    case SQLITE_DROP_TEMP_VIEW:
    case SQLITE_DROP_TRIGGER:
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_VTABLE: return "DROP" + on;
    default: return "this statement";
    }
}

// Reading only: SELECT, reading tables, functions (not load_extension),
// recursive CTEs, and the pragmas that report without changing anything.
int authorize(void* user, int action, const char* a3, const char* a4, const char*, const char*)
{
    auto* guard = static_cast<Guard*>(user);
    // SQLite goes on asking after a refusal (DROP TABLE, then DELETE from
    // sqlite_master): the first refusal is what the user wrote.
    const auto deny = [guard](std::string what) {
        if (guard->denied.empty())
            guard->denied = std::move(what);
        return SQLITE_DENY;
    };
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE: return SQLITE_OK;
    case SQLITE_UPDATE:
        // A table-valued pragma (pragma_table_info(...)) is set up as an
        // update of the schema table in memory; a real one is not read-only
        // and is refused after preparing (sqlite3_stmt_readonly).
        if (a3 && oneOf(a3, {"sqlite_master"}))
            return SQLITE_OK;
        return deny(actionText(action, a3));
    case SQLITE_FUNCTION:
        // arg 4 is the function's name
        if (a4 && oneOf(a4, {"load_extension", "fts3_tokenizer"}))
            return deny(std::string("the function ") + a4 + "()");
        return SQLITE_OK;
    case SQLITE_PRAGMA:
        // arg 3 is the pragma, arg 4 its argument: a table or index to
        // describe, or a value to set (refused).
        if (a3 && oneOf(a3, {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
                             "table_list"}))
            return SQLITE_OK;
        if (a3 && !a4 &&
            oneOf(a3, {"user_version", "application_id", "schema_version", "page_count", "page_size", "encoding",
                       "freelist_count", "database_list", "collation_list", "function_list", "pragma_list",
                       "compile_options", "query_only"}))
            return SQLITE_OK;
        return deny("PRAGMA " + printable(a3 ? a3 : "", 60) + (a4 ? "=" + printable(a4, 60) : std::string()));
    default: return deny(actionText(action, a3));
    }
}

struct StatementDeleter {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using StatementPtr = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

// A store opened for queries: read-only twice over, and the authorizer.
struct Connection {
    sql::Database db;
    std::unique_ptr<Guard> guard = std::make_unique<Guard>();

    explicit Connection(const std::string& path) : db(path, sql::Database::Mode::ReadOnly)
    {
        sqlite3* h = db.handle();
        db.exec("PRAGMA query_only = 1");
        sqlite3_db_config(h, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
        sqlite3_db_config(h, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
        sqlite3_db_config(h, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
#endif
        sqlite3_limit(h, SQLITE_LIMIT_ATTACHED, 0);
        sqlite3_set_authorizer(h, authorize, guard.get());
    }
};

std::string sqlHint(const std::string& message)
{
    if (message.rfind("no such table", 0) == 0 || message.rfind("no such column", 0) == 0)
        return "; the store's tables and columns are in docs/trace-format.md (or SELECT name, sql FROM sqlite_master)";
    return "";
}

[[noreturn]] void sqlFailed(Connection& c, const std::string& where)
{
    if (!c.guard->denied.empty())
        throw QueryError("SQL: only reading is allowed; " + c.guard->denied + " is refused" + where +
                         " (pipescope query opens the store read-only)");
    const std::string message = sqlite3_errmsg(c.db.handle());
    if (sqlite3_errcode(c.db.handle()) == SQLITE_NOMEM)
        throw std::bad_alloc();
    throw QueryError("SQL: " + printable(message, 400) + where + sqlHint(message));
}

StatementPtr prepareOne(Connection& c, const std::string& sqlText, const std::string& where)
{
    c.guard->denied.clear();
    sqlite3_stmt* raw = nullptr;
    const char* tail = nullptr;
    if (sqlite3_prepare_v3(c.db.handle(), sqlText.data(), static_cast<int>(sqlText.size()), 0, &raw, &tail) != SQLITE_OK)
        sqlFailed(c, where);
    StatementPtr stmt(raw);
    if (!stmt)
        throw QueryError("SQL: no statement (the text is empty or only comments); give one, e.g. "
                         "SELECT COUNT(*) FROM activities");
    // What follows the statement must be nothing (spaces, comments, a ';').
    const std::string_view rest(tail, static_cast<size_t>(sqlText.data() + sqlText.size() - tail));
    if (!rest.empty()) {
        sqlite3_stmt* next = nullptr;
        const int rc = sqlite3_prepare_v3(c.db.handle(), rest.data(), static_cast<int>(rest.size()), 0, &next, nullptr);
        sqlite3_finalize(next);
        if (rc != SQLITE_OK || next)
            throw QueryError("SQL: give one statement; found more after the first (" + printable(rest, 60) + ")");
    }
    c.guard->denied.clear();
    if (!sqlite3_stmt_readonly(stmt.get()))
        throw QueryError("SQL: only reading is allowed; this statement would change the store" + where +
                         " (pipescope query opens the store read-only)");
    return stmt;
}

std::vector<std::string> columnNames(sqlite3_stmt* stmt)
{
    std::vector<std::string> names;
    const int n = sqlite3_column_count(stmt);
    for (int i = 0; i < n; ++i) {
        const char* name = sqlite3_column_name(stmt, i);
        names.push_back(name ? name : "");
    }
    return names;
}

// Runs one prepared statement; each row goes to the sink, after `prefix`.
int64_t runStatement(Connection& c, sqlite3_stmt* stmt, const std::string& where, const std::vector<QueryCell>& prefix,
                     QuerySink& sink)
{
    const int n = sqlite3_column_count(stmt);
    std::vector<QueryCell> cells(prefix.size() + static_cast<size_t>(n));
    int64_t rows = 0;
    while (true) {
        const int rc = sqlite3_step(stmt);
        if (rc == SQLITE_DONE)
            return rows;
        if (rc != SQLITE_ROW)
            sqlFailed(c, where);
        std::copy(prefix.begin(), prefix.end(), cells.begin());
        for (int i = 0; i < n; ++i) {
            QueryCell& cell = cells[prefix.size() + static_cast<size_t>(i)];
            cell.bytes.clear();
            switch (sqlite3_column_type(stmt, i)) {
            case SQLITE_INTEGER:
                cell.type = QueryCell::Type::Integer;
                cell.integer = sqlite3_column_int64(stmt, i);
                break;
            case SQLITE_FLOAT:
                cell.type = QueryCell::Type::Real;
                cell.real = sqlite3_column_double(stmt, i);
                break;
            case SQLITE_TEXT: {
                cell.type = QueryCell::Type::Text;
                const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
                cell.bytes.assign(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
                break;
            }
            case SQLITE_BLOB: {
                cell.type = QueryCell::Type::Blob;
                const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt, i));
                cell.bytes.assign(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(stmt, i)));
                break;
            }
            default: cell.type = QueryCell::Type::Null; break;
            }
        }
        sink.row(cells);
        ++rows;
    }
}

std::string realText(double v)
{
    if (std::isnan(v))
        return "NaN";
    if (std::isinf(v))
        return v > 0 ? "Inf" : "-Inf";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    std::string s(buf, r.ptr);
    // A whole real stays a real when read back: 2.0, not 2.
    if (s.find_first_of(".eE") == std::string::npos)
        s += ".0";
    return s;
}

bool numeric(const QueryCell& c) { return c.type == QueryCell::Type::Integer || c.type == QueryCell::Type::Real; }

class TextWriter : public QuerySink {
public:
    explicit TextWriter(std::ostream& out) : out_(out) {}
    void columns(const std::vector<std::string>& names) override
    {
        names_ = names;
        right_.assign(names.size(), true);
        any_.assign(names.size(), false);
    }
    void row(const std::vector<QueryCell>& cells) override
    {
        std::vector<std::string> r;
        for (size_t i = 0; i < cells.size(); ++i) {
            if (cells[i].type != QueryCell::Type::Null) {
                any_[i] = true;
                right_[i] = right_[i] && numeric(cells[i]);
            }
            r.push_back(cells[i].type == QueryCell::Type::Null ? "NULL" : queryCellText(cells[i]));
        }
        rows_.push_back(std::move(r));
    }
    void finish() override
    {
        std::vector<std::string> header;
        for (size_t i = 0; i < names_.size(); ++i)
            header.push_back((right_[i] && any_[i] ? ">" : "") + names_[i]);
        TextTable table(header);
        for (auto& r : rows_)
            table.add(std::move(r));
        out_ << table.render("") << "(" << formatCount(static_cast<int64_t>(rows_.size()))
             << (rows_.size() == 1 ? " row)\n" : " rows)\n");
    }

private:
    std::ostream& out_;
    std::vector<std::string> names_;
    std::vector<bool> right_, any_;
    std::vector<std::vector<std::string>> rows_;
};

void csvField(std::ostream& out, const std::string& s)
{
    if (s.find_first_of(",\"\r\n") == std::string::npos) {
        out << s;
        return;
    }
    out << '"';
    for (char c : s) {
        if (c == '"')
            out << '"';
        out << c;
    }
    out << '"';
}

class CsvWriter : public QuerySink {
public:
    explicit CsvWriter(std::ostream& out) : out_(out) {}
    void columns(const std::vector<std::string>& names) override
    {
        for (size_t i = 0; i < names.size(); ++i) {
            if (i)
                out_ << ',';
            csvField(out_, names[i]);
        }
        out_ << '\n';
    }
    void row(const std::vector<QueryCell>& cells) override
    {
        for (size_t i = 0; i < cells.size(); ++i) {
            if (i)
                out_ << ',';
            csvField(out_, queryCellText(cells[i]));
        }
        out_ << '\n';
    }

private:
    std::ostream& out_;
};

class JsonWriter : public QuerySink {
public:
    explicit JsonWriter(std::ostream& out) : out_(out) {}
    void columns(const std::vector<std::string>& names) override
    {
        std::set<std::string> used;
        for (const std::string& name : names) {
            std::string key = name;
            for (int k = 2; used.count(key); ++k)
                key = name + "_" + std::to_string(k);
            used.insert(key);
            keys_.push_back(jsonText(nlohmann::json(key)));
        }
        out_ << '[';
        opened_ = true;
    }
    void row(const std::vector<QueryCell>& cells) override
    {
        out_ << (rows_++ ? ",\n" : "\n") << '{';
        for (size_t i = 0; i < cells.size() && i < keys_.size(); ++i) {
            out_ << (i ? ", " : "") << keys_[i] << ": ";
            const QueryCell& c = cells[i];
            switch (c.type) {
            case QueryCell::Type::Null: out_ << "null"; break;
            case QueryCell::Type::Integer: out_ << c.integer; break;
            case QueryCell::Type::Real: out_ << (std::isfinite(c.real) ? realText(c.real) : "null"); break;
            case QueryCell::Type::Text:
            case QueryCell::Type::Blob: out_ << jsonText(nlohmann::json(queryCellText(c))); break;
            }
        }
        out_ << '}';
    }
    void finish() override
    {
        if (!opened_)
            out_ << '[';
        out_ << (rows_ ? "\n]\n" : "]\n");
    }

private:
    std::ostream& out_;
    std::vector<std::string> keys_;
    int64_t rows_ = 0;
    bool opened_ = false;
};

} // namespace

std::string queryCellText(const QueryCell& c)
{
    switch (c.type) {
    case QueryCell::Type::Null: return "";
    case QueryCell::Type::Integer: return std::to_string(c.integer);
    case QueryCell::Type::Real: return realText(c.real);
    case QueryCell::Type::Text: return c.bytes;
    case QueryCell::Type::Blob: {
        static const char* hex = "0123456789ABCDEF";
        std::string s = "X'";
        for (unsigned char b : c.bytes) {
            s += hex[b >> 4];
            s += hex[b & 15];
        }
        return s + "'";
    }
    }
    return "";
}

std::unique_ptr<QuerySink> makeQueryWriter(QueryFormat format, std::ostream& out)
{
    switch (format) {
    case QueryFormat::Csv: return std::make_unique<CsvWriter>(out);
    case QueryFormat::Json: return std::make_unique<JsonWriter>(out);
    case QueryFormat::Text: break;
    }
    return std::make_unique<TextWriter>(out);
}

void QueryCollector::row(const std::vector<QueryCell>& cells)
{
    if (static_cast<int64_t>(result.rows.size()) >= maxRows_)
        throw QueryError("the query gives more than " + formatCount(maxRows_) +
                         " rows; add a LIMIT, a WHERE or an aggregate");
    result.rows.push_back(cells);
}

QuerySummary runQuery(const std::string& path, const std::string& sqlText, QuerySink& sink)
{
    QuerySummary summary;
    // Refused as every command refuses it: not a store, newer, an incomplete
    // job, a shard that is not the one its record names. Closed again before
    // the query opens its own connections (one shard at a time).
    std::optional<JobIndex> index;
    {
        Store store(path);
        if (const JobIndex* ji = store.jobIndex())
            index = *ji;
    }
    if (!index) {
        Connection c(path);
        if (std::string w = c.db.walWarning(); !w.empty())
            summary.warnings.push_back(w);
        StatementPtr stmt = prepareOne(c, sqlText, "");
        sink.columns(columnNames(stmt.get()));
        summary.rows = runStatement(c, stmt.get(), "", {}, sink);
        sink.finish();
        return summary;
    }
    // A sharded job: each shard's store in shard order, its index first in each row.
    std::optional<std::vector<std::string>> names;
    for (const ShardRecord& r : index->records) {
        if (r.file.empty())
            continue; // a task that had no traces to import
        const std::string file = (fs::path(path) / r.file).string();
        const std::string where = " (shard " + std::to_string(r.index) + ", " + r.file + ")";
        Connection c(file);
        if (std::string w = c.db.walWarning(); !w.empty())
            summary.warnings.push_back(w);
        StatementPtr stmt = prepareOne(c, sqlText, where);
        std::vector<std::string> these{"shard"};
        for (std::string& n : columnNames(stmt.get()))
            these.push_back(std::move(n));
        if (!names) {
            names = these;
            sink.columns(these);
        } else if (these != *names) {
            throw QueryError("SQL: the shards give different columns" + where +
                             "; name the columns the query returns rather than SELECT *");
        }
        QueryCell shard;
        shard.type = QueryCell::Type::Integer;
        shard.integer = r.index;
        summary.rows += runStatement(c, stmt.get(), where, {shard}, sink);
        ++summary.shards;
    }
    if (!names)
        sink.columns({"shard"});
    sink.finish();
    return summary;
}

} // namespace pipescope
