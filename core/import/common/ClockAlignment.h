#pragma once
// What every importer shares once its files are stored: one clock for the
// job's ranks. Each rank's trace has its own clock; the same collective (and
// the two sides of the same point-to-point transfer) end together on all
// ranks that took part, so the ends line the clocks up. Used by the import of
// trace files (ImportJob.cpp) and the merge of captures (capture/).
#include "store/StoreWriter.h"

#include <map>
#include <vector>

namespace pipescope {

// Shifts ranks so that the same collectives (and the two sides of the same
// point-to-point transfers) end together; returns the shift applied per rank,
// empty when no two ranks share an operation (a warning is recorded then).
std::map<int, TimeNs> alignByOperations(StoreWriter& writer, const std::vector<int>& ranks);

namespace detail {
// The offsets alone, from the first of `ranks` (0) outwards over ranks that
// share operations; ranks reached by none are absent.
std::map<int, TimeNs> collectiveOffsets(StoreWriter& writer, const std::vector<int>& ranks);
// The same from operation ends read elsewhere (the shards of a sharded job).
std::map<int, TimeNs> offsetsFromEnds(const std::vector<StoreWriter::CollectiveEnd>& collectives,
                                      const std::vector<StoreWriter::TransferEnd>& transfers, const std::vector<int>& ranks);
} // namespace detail

} // namespace pipescope
