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
//
// MegatronApp's aggregate.py also writes every rank's steps into one file
// (`...-aggregated.json`: Chrome trace events, `ts` in microseconds, the
// iteration, microbatch, model_chunk and pp_rank under `args`). It is read
// when it is imported alone; beside the per-rank files it is skipped.
#include "import/Import.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope {

// True when the first (decompressed) bytes of a file are such a list: its
// first record has a name, a phase and a Megatron field (an iteration, rel_ts,
// pp_rank, ...), whatever order the records come in.
bool looksLikeMegatronTiming(std::string_view head);

// The pipeline rank a per-rank file records (its `pp_rank`, at the top of its
// end records or under `args`). Throws FormatError naming the file when it
// holds no step or several ranks (an aggregated file: see planMegatronJob).
int megatronTimingRank(const std::string& path);

// The Megatron timing files of one import, checked together before any is
// read into the store.
struct MegatronJobPlan {
    int pipelineDegree = 0; // p: pipeline ranks 0 .. p-1 (0: no Megatron file)
    // Files not to import, each with the note to tell: aggregated files when
    // per-rank files are imported with them.
    std::map<std::string, std::string> skipped;
};

// `inputs`: the files and folders as given to `import`; `files` and
// `formats`: the files found (after format detection) and their formats;
// `explicitRank`: --rank, the rank of a single input file. Throws FormatError
// naming the file(s) when:
//  - a file in a folder of Megatron timing files is empty, is a JSON list
//    that holds no Megatron steps, or (named benchmark-*.json, as
//    MegatronApp names rank files) could not be recognised: the pipeline
//    would be wrong without it;
//  - two files hold the same pipeline rank, or the ranks are not 0 .. p-1
//    (the message names the file of the highest rank and the ranks missing);
//  - a file is not Megatron timings after all (nested too deep, over 64 MiB,
//    out-of-range values: see importMegatronTiming).
// The pipeline degree is the number of ranks; --rank sets the rank of its file.
MegatronJobPlan planMegatronJob(const std::vector<std::string>& inputs, const std::vector<std::string>& files,
                                const std::vector<std::string>& formats, std::optional<int> explicitRank);

// Imports one file of a job with `pipelineDegree` pipeline ranks (from
// planMegatronJob): one rank's file, or an aggregated file with every rank.
// Records out of time order within an iteration are sorted by rel_ts (a file
// of one iteration may be in any order). Throws FormatError naming the file
// (and the record) for a value that is not a whole number in range (rel_ts
// 0 .. 10 s, an iteration 1 ns .. 10 s that holds its steps, pp_rank within
// the supported ranks), steps that do not pair, steps outside an iteration
// when the file has several, or a step recorded twice in one iteration.
ImportedSource importMegatronTiming(const std::string& path, StoreWriter& writer, const ImportOptions& options,
                                    int pipelineDegree);

} // namespace pipescope
