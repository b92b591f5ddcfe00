// pipescope analyze FILE: where the pipeline loses time, and why.
#include "Command.h"
#include "ScenarioOptions.h"
#include "analysis/CommRules.h"
#include "NumberChecks.h"
#include "RankSelection.h"
#include "util/Format.h"
#include "util/JsonText.h"
#include "analysis/Analysis.h"
#include "analysis/AnalysisJson.h"
#include "analysis/Verdict.h"
#include "report/AnalysisText.h"
#include "report/JobPartText.h"
#include "whatif/Levers.h"
#include "store/Sqlite.h"
#include "store/Store.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "whatif/Microbatches.h"

#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace pipescope::cli {

static RegisterCommand reg{{"analyze", "Find where the pipeline loses time: steps, bubbles by cause, imbalance, critical path", 30,
                            [](CLI::App& app) -> RunFn {
                                struct Opts {
                                    std::string file, output, stageMap, iterationRange, commRules, ranks;
                                    std::optional<int> iteration, pp;
                                    bool json = false, hta = false, all = false, cache = false;
                                };
                                auto o = std::make_shared<Opts>();
                                app.add_option("FILE", o->file, "pipescope store (from pipescope import or capture)")->required();
                                app.add_option("--iteration", o->iteration, "iteration to analyse (index; default: a representative one)")
                                    ->check(wholeNumber(0));
                                app.add_option("--pp", o->pp, "pipeline degree: rank r is stage r / (world / N)")->check(wholeNumber(1));
                                app.add_option("--stage-map", o->stageMap, "explicit rank:stage list, e.g. 0:0,1:0,2:1,3:1");
                                app.add_option("--ranks", o->ranks,
                                               "analyse only these ranks, e.g. 0-3 or 0,256,512,768 (one pipeline of a large job), or all of them (all; by default a "
                                               "sharded job beyond 2 GiB is read one pipeline: its busiest replica's)");
                                app.add_option("--iteration-range", o->iterationRange, "name of the annotation or NVTX range that marks iterations");
                                app.add_flag("--json", o->json, "print the analysis as JSON (schema pipescope.analysis/2)");
                                app.add_flag("--hta-compatible", o->hta, "HTA views in HTA's own arithmetic (whole us, last profiler step dropped)");
                                app.add_flag("--all-iterations", o->all, "steps and bubbles of every iteration, not only the selected one");
                                app.add_option("-o,--output", o->output, "write to this file instead of standard output");
                                app.add_flag("--cache", o->cache, "with --json: reuse or store the result in the store's cache table");
                                addCommRulesOption(app, o->commRules);
                                return [o]() -> int {
                                    AnalyzeOptions ao;
                                    ao.iteration = o->iteration;
                                    ao.pipelineDegree = o->pp;
                                    if (!o->stageMap.empty())
                                        ao.stageMap = parseStageMap(o->stageMap);
                                    ao.iterationRange = o->iterationRange;
                                    ao.htaCompatible = o->hta;
                                    ao.allIterations = o->all;
                                    if (!o->ranks.empty() && o->ranks != "all")
                                        parseRankList(o->ranks); // refused before any work
                                    if (!o->commRules.empty())
                                        ao.commRules = std::make_shared<const CommRules>(CommRules::fromFile(o->commRules));

                                    // Refuse an output that is the store before any work.
                                    AtomicOutput::protectInput(o->file);
                                    if (!o->output.empty())
                                        AtomicOutput::refuseInput(o->output);
                                    std::string text;
                                    std::string cacheKey;
                                    {
                                        Store store(o->file);
                                        // Checked for memory only when there is something to read (a cached result is not).
                                        const CommandRead read = planCommandRead(store, o->ranks, o->file, false);
                                        const auto ranks = read.ranks();
                                        if (o->cache && o->json) {
                                            nlohmann::json k = toJson(AnalysisResult{}, ao)["options"];
                                            k["stage_map"] = o->stageMap;
                                            if (ranks)
                                                k["ranks"] = *ranks;
                                            // v3: schema pipescope.analysis/2 (leave-one-out stragglers, rank_speed);
                                            // v2 added "verdict". Results cached before either are not reused.
                                            // v4: "fillable_bubbles" added (same schema); v5: "all_to_all";
                                            // v6: "microbatches"; v7: "memory" (measured memory).
                                            // v8: schedules told apart by autograd's sequence numbers.
                                            // v9: pipelines only with proof (no stages from timing), all-to-all
                                            // behind SendRecv kernels, communication kernels beyond NCCL.
                                            // v10: "levers".
                                            if (ao.commRules)
                                                k["comm_rules"] = ao.commRules->userText();
                                            cacheKey = std::string("analysis/v10/") + jsonText(k);
                                            if (auto hit = store.cached(cacheKey))
                                                text = *hit;
                                        }
                                        if (text.empty()) {
                                            checkCommandRead(store, read, o->file);
                                            LoadOptions lo;
                                            lo.ranks = ranks;
                                            Trace trace = store.load(lo);
                                            ao.autogradSequences = [&store](const std::vector<int64_t>& ids) {
                                                return store.autogradSequences(ids);
                                            };
                                            // Ranks that are not whole pipelines take their stages from the index.
                                            if (ao.stageMap.empty() && !ao.pipelineDegree)
                                                ao.stageMap = read.part.stageMapFromIndex;
                                            AnalysisResult r;
                                            try {
                                                r = analyze(trace, ao);
                                            } catch (const Error& e) {
                                                throw Error(o->file + ": " + e.what());
                                            }
                                            // The what-if engine prices the levers (and, for uneven
                                            // microbatches, what their spread costs).
                                            std::optional<whatif::MicrobatchStudy> study;
                                            whatif::Levers levers;
                                            if (r.pipeline.found) {
                                                try {
                                                    // Some ranks of a sharded job: each stage at its slowest replica's pace.
                                                    whatif::CalibrateOptions co;
                                                    co.replicaPace = read.part.replicaPace;
                                                    const whatif::CostModel model = whatif::calibrate(trace, r, co);
                                                    if (r.microbatchSpread.uneven)
                                                        study = whatif::studyMicrobatches(model, whatif::measuredScenario(model));
                                                    levers = whatif::rankLevers(model, r);
                                                } catch (const Error&) {
                                                    // No replay of this pipeline: the analysis alone is shown.
                                                }
                                            }
                                            if (o->json) {
                                                nlohmann::json doc = toJson(r, ao);
                                                if (read.part.partial())
                                                    doc["job"] = report::jobPartJson(read.part);
                                                doc["microbatches"]["cost"] =
                                                    study && study->applies ? whatif::microbatchStudyToJson(*study) : nlohmann::json(nullptr);
                                                doc["levers"] = whatif::leversToJson(levers);
                                                text = jsonText(doc, 1) + "\n";
                                            } else {
                                                std::ostringstream os;
                                                report::printAnalysisText(os, o->file, r, levers, &read.part);
                                                if (study && study->applies)
                                                    os << "\n" << whatif::microbatchStudyText(*study);
                                                text = os.str();
                                            }
                                        } else {
                                            cacheKey.clear(); // already cached
                                        }
                                    }
                                    if (!cacheKey.empty()) {
                                        // Only with --cache does analysis write to the store. The
                                        // result stands whether or not it could be cached.
                                        try {
                                            sql::Database db(o->file, sql::Database::Mode::ReadWrite);
                                            auto st = db.prepare("INSERT OR REPLACE INTO cache(key, value) VALUES (?1, ?2)");
                                            st.bind(1, cacheKey).bind(2, text);
                                            st.step();
                                        } catch (const Error& e) {
                                            std::cerr << "pipescope analyze: warning: the result was not cached in " << o->file
                                                      << " (" << printable(e.what(), 300) << ")\n";
                                        }
                                    }
                                    if (o->output.empty())
                                        std::cout << text;
                                    else
                                        AtomicOutput::writeFile(o->output, text);
                                    return kExitOk;
                                };
                            }}};

} // namespace pipescope::cli
