#pragma once
// A thin RAII layer over the SQLite C API: a connection and prepared
// statements with bound parameters. Every value that comes from a trace is
// bound, never spliced into SQL text.
#include "util/AtomicOutput.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace pipescope::sql {

class Statement;

class Database {
public:
    enum class Mode { ReadOnly, ReadWrite, Create };
    Database() = default;
    Database(const std::string& path, Mode mode); // throws Error naming the path
    ~Database();
    Database(Database&& other) noexcept;
    Database& operator=(Database&& other) noexcept;
    Database(const Database&) = delete;
    Database& operator=(const Database&) = delete;

    void exec(const std::string& sql);
    Statement prepare(std::string_view sql);
    int64_t lastInsertRowid() const;
    int changes() const;
    int userVersion();
    sqlite3* handle() const { return db_; }
    const std::string& path() const { return path_; }
    // The name messages use (a store being built names its destination, not its temporary file).
    void setDisplayName(std::string name) { path_ = std::move(name); }
    bool tableExists(std::string_view name);
    void close();
    // Read-only inputs: a sentence saying that a write-ahead log beside the
    // file was not read, or empty when there is none.
    std::string walWarning() const;

private:
    sqlite3* db_ = nullptr;
    std::string path_;
    bool walIgnored_ = false;
    AtomicOutput::InputGuard input_; // a file opened to read is not written over while open
};

class Statement {
public:
    Statement() = default;
    Statement(sqlite3* db, sqlite3_stmt* stmt, std::string path) : db_(db), stmt_(stmt), path_(std::move(path)) {}
    ~Statement();
    Statement(Statement&& other) noexcept;
    Statement& operator=(Statement&& other) noexcept;
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    // Parameters are 1-based, as in SQLite.
    Statement& bind(int index, int64_t value);
    Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view value); // copied (SQLITE_TRANSIENT)
    Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
    Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
    Statement& bindNull(int index);
    template <typename T>
    Statement& bind(int index, const std::optional<T>& value)
    {
        return value ? bind(index, *value) : bindNull(index);
    }

    // Runs one step: true while a row is available.
    bool step();
    // Runs a statement that returns no rows, then resets it for reuse.
    void run();
    void reset();

    bool isNull(int column) const;
    // True when the column holds an integer (not a real, text or blob).
    bool isInteger(int column) const;
    int64_t int64(int column) const;
    double real(int column) const;
    std::string_view text(int column) const; // valid until the next step()
    std::optional<int64_t> optInt64(int column) const;
    std::string string(int column) const { return std::string(text(column)); }

private:
    sqlite3* db_ = nullptr;
    sqlite3_stmt* stmt_ = nullptr;
    std::string path_;
};

} // namespace pipescope::sql
