#pragma once
// Read-only SQL over a job's store (docs/query.md; the tables are those of
// docs/trace-format.md): `pipescope query JOB "SQL"`, and later the app's
// query panel. The store is opened read-only, with `PRAGMA query_only`, and
// an authorizer that lets a statement read and nothing else: writes, ATTACH,
// transactions, setting pragmas and load_extension() are refused, and so is
// any statement SQLite does not call read-only. A sharded job is queried
// shard by shard: each shard's rows in shard order, after a first column
// `shard` (aggregates are per shard; times on each shard's own clock).
#include "util/Error.h"

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace pipescope {

// One value of a result: SQLite's five storage classes.
struct QueryCell {
    enum class Type : uint8_t { Null, Integer, Real, Text, Blob };
    Type type = Type::Null;
    int64_t integer = 0;
    double real = 0;
    std::string bytes; // Text (as stored, normally UTF-8) or Blob
};

// Receives a result: its column names once, then row after row, then finish().
class QuerySink {
public:
    virtual ~QuerySink() = default;
    virtual void columns(const std::vector<std::string>& names) = 0;
    virtual void row(const std::vector<QueryCell>& cells) = 0;
    virtual void finish() {}
};

// A statement SQLite refused or that failed: its message, for one line.
class QueryError : public Error {
public:
    using Error::Error;
};

struct QuerySummary {
    int64_t rows = 0;
    int shards = 0;                    // shards queried; 0 for a store file
    std::vector<std::string> warnings; // e.g. a write-ahead log beside a store that was not read
};

// Runs one SQL statement on the store at `path` (a .pipescope file) or on
// each shard of the sharded job folder at `path`. Throws Error or
// FormatError when the path is not a store or a complete job, QueryError
// naming the SQL's problem (SQLite's message; a statement that would write;
// more than one statement; none).
QuerySummary runQuery(const std::string& path, const std::string& sql, QuerySink& sink);

// A cell as text: integers in decimal, reals in the shortest form that reads
// back exactly, text as it is, a blob as X'0A1B' (SQLite's literal); "" for NULL.
std::string queryCellText(const QueryCell& cell);

// Sinks that write a result as the CLI prints it.
enum class QueryFormat : uint8_t { Text, Csv, Json };
// Text: an aligned table (numbers right-aligned, NULL shown as NULL) and a
// last line "(N rows)"; it keeps the rows until finish(). CSV: RFC 4180
// (a header row; fields with a comma, quote, CR or LF quoted, quotes
// doubled; lines end with LF; NULL is an empty field). JSON: an array of
// objects, one per row, keys in column order (a repeated name gets _2, _3),
// integers and reals as numbers (a non-finite real as null), NULL as null,
// blobs as "X'..'" strings; CSV and JSON rows are written as they come.
std::unique_ptr<QuerySink> makeQueryWriter(QueryFormat format, std::ostream& out);

// Collects a whole result (for tests and the app), refusing more than maxRows.
struct QueryResult {
    std::vector<std::string> columns;
    std::vector<std::vector<QueryCell>> rows;
};
class QueryCollector : public QuerySink {
public:
    explicit QueryCollector(int64_t maxRows = INT64_MAX) : maxRows_(maxRows) {}
    void columns(const std::vector<std::string>& names) override { result.columns = names; }
    void row(const std::vector<QueryCell>& cells) override;
    QueryResult result;

private:
    int64_t maxRows_;
};

} // namespace pipescope
