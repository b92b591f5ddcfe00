// libFuzzer target for a sharded job's index and shard records
// (store/JobIndex.h, docs/scale.md): the input is written as a job folder's
// job.json, read with readJobIndex (clock offsets, shard numbers and records
// checked), and as a shard record read with readShardRecord. Each must finish
// or throw pipescope::Error; a record read must name a file inside the folder.
// Seeds: tests/fuzz/seeds/jobindex (a small job's index and one record).
#include "store/JobIndex.h"
#include "util/Error.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

std::string folder()
{
    static const std::string dir = [] {
        char templ[] = "/tmp/fuzz-jobindex-XXXXXX";
        const char* made = ::mkdtemp(templ);
        if (!made)
            std::abort();
        return std::string(made);
    }();
    return dir;
}

void write(const std::string& path, const uint8_t* data, size_t size)
{
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace pipescope;
    const std::string dir = folder();
    write(dir + "/job.json", data, size);
    try {
        const JobIndex index = readJobIndex(dir);
        for (const ShardRecord& r : index.records)
            if (r.file.find('/') != std::string::npos || r.file.find("..") != std::string::npos)
                std::abort(); // a record may only name a file of the folder
        (void)incompleteJobMessage(dir, index);
    } catch (const Error&) {
    }
    const std::string record = dir + "/" + shardRecordName(0, 2);
    write(record, data, size);
    try {
        if (auto r = readShardRecord(record, "0123456789abcdef", 2))
            if (r->file.find('/') != std::string::npos)
                std::abort();
    } catch (const Error&) {
    }
    return 0;
}
