#pragma once
// Reading the per-rank capture files that `pipescope capture` leaves behind
// (format in CaptureSchema.h, docs/capture.md) into a store.
#include "import/Import.h"
#include "store/StoreWriter.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipescope {

// True when `path` is a SQLite file with the capture application id.
bool isCaptureFile(const std::string& path);

// One capture file into the store, times kept on the host's epoch clock
// (absoluteClock = true). The rank comes from options.rank, else the file.
// Peers of point-to-point operations are mapped to global ranks when the
// communicator spans the whole job. Throws FormatError when the file is not a
// capture file or is newer than this build.
ImportedSource importCapture(const std::string& path, StoreWriter& writer, const ImportOptions& options);

struct MergeOptions {
    std::string output;   // default: <dir>/job.pipescope
    bool progress = true;
    bool alignCollectives = false; // also align ranks by matched collectives and transfers (several hosts)
};

struct MergeReport {
    std::string output;
    std::vector<std::string> files;
    std::vector<ImportedSource> sources;
    std::map<int, std::string> rankFiles;     // global rank -> file
    std::vector<std::pair<int, TimeNs>> offsets; // per rank: clock offset applied
    std::vector<std::string> warnings;        // one line each, for the CLI to print
    std::vector<std::pair<std::string, std::string>> skipped; // files that could not be read: (file, why)
    int64_t droppedRecords = 0;
    bool alignedByCollectives = false;
};

// All capture files of a directory into one store: ranks assigned (files
// without a rank get the next free ones), communicators' ranks mapped to
// global ranks across files, clocks aligned (one host clock; see docs).
// A file that cannot be read, or fails part-way, is skipped: its rows are
// removed again, a warning and an error diagnostic name it. Throws Error when
// the directory holds no capture files or none of them could be merged.
MergeReport mergeCaptureDir(const std::string& dir, const MergeOptions& options);

// The capture files in a directory, sorted.
std::vector<std::string> captureFilesIn(const std::string& dir);

} // namespace pipescope
