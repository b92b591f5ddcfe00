#pragma once
// A Kineto file's records travel from its parser to the store in batches, so
// that the file can be parsed on another thread than the one that writes the
// store (import/kineto/ParseAhead.h). Strings, streams, GPU activities and
// CPU ranges are numbered within the file, in the order the parser made them;
// BatchWriter turns those numbers into the store's ids as it writes. A batch
// thus depends on nothing that other files wrote before it, and the store
// comes out the same whichever thread parsed the file.
#include "import/Import.h"
#include "store/StoreWriter.h"
#include "util/Progress.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace pipescope::kineto {

// The rank of records made before the file's rank is known. BatchWriter puts
// the source's own placeholder in its place (see KinetoImporter::rank()).
inline constexpr int kRankNotYetKnown = std::numeric_limits<int>::min();

// Records per batch at most; the parser also hands a batch over at each chunk
// it reads (InputFile: 1 MiB), which carries the progress.
inline constexpr size_t kBatchRecords = 4096;

struct RecordBatch {
    struct Stream {
        int rank;
        int device;
        int64_t stream;
    };
    std::vector<std::string> strings;       // first used in this batch, numbered on from the previous batch
    std::vector<Stream> streams;            // likewise
    std::vector<ActivityRecord> activities; // name, streamId, launchId: file-local; numbered 1, 2, ... in the file
    std::vector<CpuRangeRecord> cpuRanges;  // name, parentId: file-local; numbered 1, 2, ... in the file
    std::vector<NcclRecord> ncclOps;        // activityId, streamId: file-local
    std::vector<MemoryEvent> memoryEvents;
    uint64_t bytesRead = 0; // of the file on disk when the batch was handed over, for progress
    // Added to every time as it is written (ImportOptions::applyTimeBase);
    // the same in every batch of a file from its first record on.
    TimeNs timeShift = 0;

    size_t records() const { return activities.size() + cpuRanges.size() + ncclOps.size() + memoryEvents.size(); }
    void clear();
};

// The writing side of one Kineto file: adds its source, then writes its
// batches in the order the parser handed them over. Runs on the thread that
// owns the StoreWriter; reports progress and honours cancellation there.
class BatchWriter {
public:
    BatchWriter(StoreWriter& writer, const std::string& path, const ImportOptions& options);

    void write(RecordBatch& batch);

    StoreWriter& store() { return writer_; }
    int64_t sourceId() const { return sourceId_; }
    // Store ids of file-local numbers.
    int64_t activityId(int64_t local) const { return before_.activities + local; }
    int64_t cpuRangeId(int64_t local) const { return before_.cpuRanges + local; }
    int64_t streamId(int64_t local) const { return streams_.at(static_cast<size_t>(local)); }
    // The largest ids in the store before this file: its rows come after them.
    const StoreWriter::Mark& before() const { return before_; }
    // A record's rank in the store: kRankNotYetKnown becomes this source's placeholder.
    int rank(int r) const { return r == kRankNotYetKnown ? placeholderRank_ : r; }
    void done() { progress_.done(); }

private:
    StoreWriter& writer_;
    std::string path_;
    const WorkControl* work_;
    Progress progress_;
    int64_t sourceId_ = 0;
    int placeholderRank_ = 0;
    StoreWriter::Mark before_;
    int64_t activities_ = 0, cpuRanges_ = 0; // written so far
    std::vector<StringId> strings_;
    std::vector<int64_t> streams_;
};

} // namespace pipescope::kineto
