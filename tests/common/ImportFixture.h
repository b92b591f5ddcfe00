#pragma once
// Imports files or folders as `pipescope import` does (importJob) into a store
// in a test's temporary folder, and loads it.
#include "TestSupport.h"
#include "import/Import.h"
#include "store/Store.h"

#include <string>
#include <vector>

namespace pipescope::test {

inline Trace importAndLoad(const std::vector<std::string>& inputs, const QTemporaryDir& dir, const char* name = "job.pipescope")
{
    ImportJobOptions o;
    o.inputs = inputs;
    o.output = path(dir, name);
    o.progress = false;
    importJob(o);
    Store s(o.output);
    return s.load();
}

} // namespace pipescope::test
