#pragma once
// Per-operation timing tables: one row per operation of every rank, with
// Megatron-LM's timer names as operation types, as ByteDance's
// StragglerAnalysis publishes its traces (columns dp_rank, stage, rank, step,
// optype, start_ts, duration, seq_id, mc, mb_id, gmc; times in seconds from
// the start of each step). CSV or TSV, plain or gzip-compressed, recognised
// by its header line, columns in any order.
//
// Not a profiler trace, so pipescope writes what the table says, the way the
// Megatron importer writes MegatronApp's step timings: each forward-compute
// and backward-compute becomes an annotated range
// (`pipescope/forward mb=M stage=S chunk=C`) around one kernel of its length;
// each send and receive one point-to-point kernel with its peer on the
// neighbouring stage of the same replica (a receive lasts while the rank
// waited, as the table records it); the data-parallel and embedding
// collectives and the gradient-norm all-reduce collectives over their real
// groups; the optimizer compute; gc host time only. Sampled steps are laid
// one after another on one clock shared by every rank, each a ProfilerStep#N
// range named after its step number (docs/import-optable.md).
#include "import/Import.h"

#include <optional>
#include <string>
#include <string_view>

namespace pipescope {

// True when the first (decompressed) bytes are such a table: a header line,
// comma- or tab-separated, naming optype, start_ts and duration and at least
// two of rank, stage, step, dp_rank.
bool looksLikeOpTable(std::string_view head);

// True when the first bytes are a Parquet file's magic (`PAR1`).
bool looksLikeParquet(std::string_view head);

// detectFormat's question for the first bytes of `path`: "optable" for such
// a table, nullopt for anything else. A Parquet file is a FormatError naming
// it and saying how to convert it to CSV (no Parquet reader is packaged for
// Debian 12, so pipescope reads the CSV form only).
std::optional<std::string> opTableFormat(const std::string& path, std::string_view head);

// Imports a whole table (every rank of the job) as one source. Throws
// FormatError naming the file, the line and the column for a missing column,
// a value that is not a number or not in range (times and durations up to a
// day, durations not negative, ranks, stages and replicas up to 1,048,575,
// microbatches up to 1,000,000, chunks up to 4,095, steps up to 999,999,999),
// a rank recorded on two stages or replicas, a compute operation recorded
// twice, a transfer whose neighbour is not in the table, stages or replicas
// missing from the table, and for --rank (the table holds every rank).
// Operation types it does not know are skipped and counted in the store's
// diagnostics.
ImportedSource importOpTable(const std::string& path, StoreWriter& writer, const ImportOptions& options);

} // namespace pipescope
