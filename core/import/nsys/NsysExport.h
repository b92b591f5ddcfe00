#pragma once
// An Nsight Systems SQLite export opened for reading. The file is opened
// read-only and immutable, so reading never writes, locks or journals it, and
// the connection is hardened for untrusted files (no views or triggers,
// untrusted schema, bounded value sizes). The export schema is identified on
// opening: 2.x (metadata in EXPORT_META_DATA) and 3.x (META_DATA_EXPORT).
#include "store/Sqlite.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace pipescope::nsys {

struct ExportSchema {
    int major = 0;
    int minor = 0;
    std::string version;        // as the export writes it, e.g. "3.13.2"; empty when absent
    std::string metaTable;      // META_DATA_EXPORT or EXPORT_META_DATA
    std::string productVersion; // Nsight Systems release that exported it, when recorded
};

class Export {
public:
    // Throws FormatError naming the path when the file is missing its SQLite
    // header, is not an Nsight Systems export, or has an unsupported schema.
    explicit Export(const std::string& path);

    const std::string& path() const { return path_; }
    const ExportSchema& schema() const { return schema_; }

    // Real tables only: views and virtual tables never occur in exports.
    bool hasTable(std::string_view table) const;
    bool hasColumn(const std::string& table, std::string_view column);

    // A SELECT expression for an integer column: the value when the cell holds
    // an integer, NULL when it holds anything else or the column is absent.
    std::string intColumn(const std::string& table, std::string_view column);
    // Same for a text column (text cells only).
    std::string textColumn(const std::string& table, std::string_view column);

    sql::Statement prepare(std::string_view sqlText) { return db_.prepare(sqlText); }
    std::optional<std::string> meta(std::string_view key) const;
    const std::map<std::string, std::string>& metaRows() const { return meta_; }

    // True when an Error came from reading this file (its message names the
    // connection's path), as opposed to from writing the store.
    bool raisedBy(const std::exception& e) const;
    // The same problem as a FormatError that names the file as the user wrote it.
    [[noreturn]] void rethrowAsFormatError(const std::exception& e) const;

    // The product versions this reader is tested with, for error messages.
    static const char* supportedSchemas();

private:
    void identifySchema();

    std::string path_;
    std::string openedAs_; // the path or URI the connection was opened with
    sql::Database db_;
    std::set<std::string, std::less<>> tables_;
    std::map<std::string, std::set<std::string, std::less<>>, std::less<>> columns_;
    std::map<std::string, std::string> meta_;
    ExportSchema schema_;
};

} // namespace pipescope::nsys
