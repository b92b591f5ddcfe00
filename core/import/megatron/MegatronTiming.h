#pragma once
// Megatron-LM step timings as MegatronApp's tracer writes them
// (benchmark-data-*-pipeline-R-tensor-*.json): a JSON list of begin/end
// records, `iteration` around `forward` / `backward` steps whose end records
// carry microbatch, model_chunk and pp_rank, times (`rel_ts`, ns) from the
// start of each iteration on every rank. Not a profiler trace: each step
// becomes one annotated range (`pipescope/forward mb=M chunk=C`) around one
// kernel of the step's length, and the point-to-point transfers Megatron's
// schedule implies between neighbouring virtual stages (1 ns kernels with
// their peers) say who feeds whom. Iterations are placed 10 s apart on one
// clock shared by every rank, each keeping its recorded timing
// (docs/import-megatron.md).
#include "import/Import.h"

#include <string>
#include <string_view>

namespace pipescope {

// True when the first (decompressed) bytes of a file are such a list.
bool looksLikeMegatronTiming(std::string_view head);

// The pipeline rank a file records (its `pp_rank`). Throws FormatError naming
// the file when it holds no step or several ranks.
int megatronTimingRank(const std::string& path);

// Imports one rank's file of a job with `pipelineDegree` pipeline ranks
// (the number of files imported together). Throws FormatError naming the
// file for records out of order, times outside an iteration, or an
// iteration longer than the 10 s it is given.
ImportedSource importMegatronTiming(const std::string& path, StoreWriter& writer, const ImportOptions& options,
                                    int pipelineDegree);

} // namespace pipescope
