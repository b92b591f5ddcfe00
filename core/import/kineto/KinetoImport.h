#pragma once
// One Kineto file imported in two halves, so that the first can run on
// another thread than the one that writes the store (import/kineto/ParseAhead.h):
// parse() reads the JSON and hands its records over in batches; finish(), on
// the writing thread once every batch is written, settles what needs the
// whole file (launch flows, NCCL args from CPU ops, the rank) and describes
// the source. importKineto() runs both halves on one thread.
#include "import/Import.h"
#include "import/kineto/RecordBatch.h"

#include <functional>
#include <memory>
#include <string>

namespace pipescope::kineto {

class KinetoFileImport {
public:
    KinetoFileImport(const std::string& path, const ImportOptions& options);
    ~KinetoFileImport();
    KinetoFileImport(const KinetoFileImport&) = delete;
    KinetoFileImport& operator=(const KinetoFileImport&) = delete;

    // Takes a batch's records; the batch is cleared and refilled after it returns.
    using Deliver = std::function<void(RecordBatch&)>;
    // Throws FormatError for a file that cannot be a trace (as importKineto()),
    // and Cancelled when options.work asks to stop.
    void parse(const Deliver& deliver);
    // After every batch parse() delivered was written to `out`.
    ImportedSource finish(BatchWriter& out);

private:
    struct Importer;
    std::unique_ptr<Importer> importer_;
};

} // namespace pipescope::kineto
