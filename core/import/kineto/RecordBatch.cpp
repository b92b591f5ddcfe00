#include "import/kineto/RecordBatch.h"

#include "util/Error.h"

#include <algorithm>
#include <filesystem>

namespace pipescope::kineto {

void RecordBatch::clear()
{
    strings.clear();
    streams.clear();
    activities.clear();
    cpuRanges.clear();
    ncclOps.clear();
    memoryEvents.clear();
    bytesRead = 0;
    timeShift = 0;
}

namespace {

uint64_t sizeOnDisk(const std::string& path)
{
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    return ec ? 0 : size;
}

} // namespace

BatchWriter::BatchWriter(StoreWriter& writer, const std::string& path, const ImportOptions& options)
    : writer_(writer), path_(path), work_(options.work),
      progress_("importing " + path, sizeOnDisk(path), options.progress)
{
    SourceRecord source;
    source.path = path;
    source.format = "kineto";
    sourceId_ = writer_.addSource(source);
    // Until its rank is known a file's rows carry a negative rank: outside
    // 0..kMaxRank, and no other source can hold it.
    placeholderRank_ = static_cast<int>(-1 - std::min<int64_t>(sourceId_, 1000000000));
    before_ = writer_.mark();
}

void BatchWriter::write(RecordBatch& b)
{
    for (const std::string& s : b.strings)
        strings_.push_back(writer_.intern(s));
    for (const RecordBatch::Stream& s : b.streams)
        streams_.push_back(writer_.stream(rank(s.rank), s.device, s.stream));
    auto string = [&](StringId local) { return strings_.at(static_cast<size_t>(local)); };
    // File-local numbers become ids by adding what the store held before the
    // file; this holds because this file alone adds rows until it is done.
    auto expect = [&](int64_t id, int64_t wanted) {
        if (id != wanted)
            throw Error(path_ + ": internal error: store row " + std::to_string(id) + " written where row " +
                        std::to_string(wanted) + " was expected");
    };
    // Times are valid (util/Limits.h) and the shift small enough that no sum overflows.
    const TimeNs shift = b.timeShift;
    for (ActivityRecord& a : b.activities) {
        a.rank = rank(a.rank);
        a.start += shift;
        a.end += shift;
        a.streamId = streamId(a.streamId);
        a.name = string(a.name);
        if (a.launchId) { // settled in the file (KinetoImport: settleInMemory)
            a.launchId = cpuRangeId(*a.launchId);
            if (a.launchNs)
                *a.launchNs += shift;
        }
    }
    // One check per batch: the writer numbers rows one after the other.
    activities_ += static_cast<int64_t>(b.activities.size());
    if (!b.activities.empty())
        expect(writer_.addActivities(b.activities), activityId(activities_));
    for (CpuRangeRecord& r : b.cpuRanges) {
        r.rank = rank(r.rank);
        r.start += shift;
        r.end += shift;
        r.name = string(r.name);
        if (r.domain)
            r.domain = string(*r.domain);
        if (r.parentId)
            r.parentId = cpuRangeId(*r.parentId);
    }
    cpuRanges_ += static_cast<int64_t>(b.cpuRanges.size());
    if (!b.cpuRanges.empty())
        expect(writer_.addCpuRanges(b.cpuRanges), cpuRangeId(cpuRanges_));
    for (NcclRecord& n : b.ncclOps) {
        n.rank = rank(n.rank);
        if (n.start)
            *n.start += shift;
        if (n.end)
            *n.end += shift;
        if (n.activityId)
            n.activityId = activityId(*n.activityId);
        if (n.streamId)
            n.streamId = streamId(*n.streamId);
        writer_.addNcclOp(n);
    }
    for (MemoryEvent& m : b.memoryEvents) {
        m.rank = rank(m.rank);
        m.ts += shift;
        writer_.addMemoryEvent(m);
    }
    if (b.bytesRead > 0) {
        progress_.update(b.bytesRead);
        checkpoint(work_, "reading " + path_, -1);
    }
}

} // namespace pipescope::kineto
