// pipescope query JOB "SQL" [--format text|csv|json] [-o FILE]
// Read-only SQL over a job's store, or over each shard of a sharded job
// (docs/query.md; the tables: docs/trace-format.md).
#include "Command.h"
#include "store/Query.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"

#include <fstream>
#include <iostream>
#include <memory>

namespace pipescope::cli {
namespace {

struct QueryArgs {
    std::string job, sql, output, format = "text";
};

QueryFormat formatOf(const std::string& name)
{
    return name == "csv" ? QueryFormat::Csv : name == "json" ? QueryFormat::Json : QueryFormat::Text;
}

void warn(const QuerySummary& s)
{
    for (const std::string& w : s.warnings)
        std::cerr << "pipescope query: warning: " << printable(w, 4096) << "\n";
}

int runQueryCommand(const QueryArgs& a)
{
    AtomicOutput::protectInput(a.job);
    if (a.output.empty()) {
        auto sink = makeQueryWriter(formatOf(a.format), std::cout);
        const QuerySummary s = runQuery(a.job, a.sql, *sink);
        std::cout.flush();
        warn(s);
        return kExitOk;
    }
    AtomicOutput out(a.output, AtomicOutput::Target::FileOrStream);
    QuerySummary s;
    {
        std::ofstream os(out.tempPath(), std::ios::binary | std::ios::trunc);
        if (!os)
            throw Error(a.output + ": cannot write; choose another -o path");
        auto sink = makeQueryWriter(formatOf(a.format), os);
        s = runQuery(a.job, a.sql, *sink);
        os.close();
        if (!os)
            throw Error(a.output + ": cannot write the result (disk full?); free space or choose another -o path");
    }
    out.commit();
    warn(s);
    // On stderr when the result itself went to a pipe or terminal.
    std::ostream& say = out.direct() ? std::cerr : std::cout;
    say << "Wrote " << a.output << ": " << formatCount(s.rows) << (s.rows == 1 ? " row" : " rows")
        << (s.shards ? " from " + std::to_string(s.shards) + (s.shards == 1 ? " shard" : " shards") : std::string())
        << "\n";
    return kExitOk;
}

RegisterCommand reg{{"query", "Run a read-only SQL query over a job's store (text, CSV or JSON)", 25,
                     [](CLI::App& app) -> RunFn {
                         auto a = std::make_shared<QueryArgs>();
                         app.add_option("JOB", a->job, "A store, or a sharded job folder (each shard queried in turn)")
                             ->required();
                         app.add_option("SQL", a->sql,
                                        "One SELECT statement; the tables are in docs/trace-format.md (read only)")
                             ->required();
                         app.add_option("--format", a->format, "text (an aligned table), csv (RFC 4180) or json")
                             ->check(CLI::IsMember({"text", "csv", "json"}))
                             ->capture_default_str();
                         app.add_option("-o,--output", a->output, "Write the result to this file instead");
                         return [a]() { return runQueryCommand(*a); };
                     }}};

} // namespace
} // namespace pipescope::cli
