#pragma once
// Importers turn traces users already have into store records. Each format
// lives in its own folder (kineto/, nsys/, capture/) and exposes one function
// with this shape; importJob() drives them for `pipescope import`.
#include "model/Types.h"
#include "store/StoreWriter.h"
#include "util/Error.h"
#include "util/Work.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

struct ImportOptions {
    std::optional<int> rank;  // force the rank of a single-rank file
    bool progress = true;     // progress line on stderr for long imports
    bool shortKernelNames = false; // Nsight exports: name kernels by shortName, not demangledName
    const WorkControl* work = nullptr; // progress and cancel (optional)
    // Store times with the file's time base already added (as time-base
    // alignment wants them), where the importer knows the time base before it
    // writes them; ImportedSource::timeBaseApplied says what was added.
    bool applyTimeBase = false;
    // Kineto files of up to this many records are held in memory until
    // parsed, to settle their launch links and range nesting before they are
    // stored (on the parser's thread, see import/kineto/ParseAhead.h), which
    // spares StoreWriter::finish() those passes. Larger files are stored as
    // they are parsed and settled by finish(). 0: never hold. The store is
    // the same either way.
    int64_t settleInMemoryRecords = kSettleInMemoryRecords;
    static constexpr int64_t kSettleInMemoryRecords = 2'000'000; // a few hundred MB of memory per file at most
};

// What one importer call added to the store.
struct ImportedSource {
    int64_t sourceId = 0;
    std::vector<int> ranks;   // global ranks found in the file
    TimeNs timeBase = 0;        // added to the file's times to reach its absolute clock (0: already there)
    TimeNs timeBaseApplied = 0; // of it, what the stored times already include (ImportOptions::applyTimeBase)
    bool absoluteClock = false; // true when times plus timeBase are Unix-epoch ns (comparable across files)
    int64_t records = 0;      // records stored
    std::string jobId;        // the job the file says it belongs to (pipescope simulate writes one), or empty
    std::optional<int> worldSize; // the world size the file states, when it states one
};

// Kineto / PyTorch profiler JSON (.json or .json.gz). Throws FormatError when
// the file as a whole is unusable; counts bad records in diagnostics.
ImportedSource importKineto(const std::string& path, StoreWriter& writer, const ImportOptions& options);

// Nsight Systems SQLite export (schema 2.x or 3.x).
ImportedSource importNsys(const std::string& path, StoreWriter& writer, const ImportOptions& options);

enum class Alignment { None, TimeBase, Collectives };

struct ImportJobOptions {
    std::vector<std::string> inputs; // files or directories
    std::string output;
    Alignment alignment = Alignment::TimeBase;
    std::optional<int> rank; // only with a single input file
    bool progress = true;
    bool shortKernelNames = false;
    // Threads that parse Kineto files ahead of the one that writes the store
    // (import/kineto/ParseAhead.h); 0: one per core (at most 8); 1: no
    // thread, each file is parsed as it is written. The store is the same either way.
    int jobs = 0;
    // ImportOptions::settleInMemoryRecords.
    int64_t settleInMemoryRecords = ImportOptions::kSettleInMemoryRecords;
    const WorkControl* work = nullptr; // progress per file and cancel (optional)
    // Told each warning as it arises (also kept in ImportJobReport::warnings).
    std::function<void(const std::string&)> warn;
    // The inputs were found in folders (a shard's share of them): a file
    // that is not a trace is skipped with a warning, as in a folder.
    bool inputsFoundInFolders = false;
};

struct ImportJobReport {
    std::vector<ImportedSource> sources;
    std::vector<std::string> files;
    std::vector<std::pair<int, TimeNs>> offsets; // per rank: offset applied
    Alignment alignmentUsed = Alignment::None;
    std::vector<std::string> warnings; // one sentence each, for the user (e.g. an unread write-ahead log)
};

// Throws FormatError naming what is wrong; NoTraceFound when the files found
// in folders were all skipped as not traces (notes.json, an empty file).
ImportJobReport importJob(const ImportJobOptions& options);

class NoTraceFound : public FormatError {
public:
    using FormatError::FormatError;
};

// The trace files the inputs name, folders expanded (sorted by name within
// each folder); warnings for what a folder holds that cannot be read.
std::vector<std::string> expandTraceInputs(const std::vector<std::string>& inputs, std::vector<std::string>& warnings);

// alignByOperations (one clock for the ranks of a job): import/common/ClockAlignment.h.

// The format of a file, from its first bytes ("kineto", "nsys", "capture", or "" when unknown).
std::string detectFormat(const std::string& path);

} // namespace pipescope
