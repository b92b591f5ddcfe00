#include "ScenarioOptions.h"

#include "Command.h"
#include "NumberChecks.h"

#include "analysis/CommRules.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Format.h"
#include "util/JsonText.h"
#include "whatif/WhatIfText.h"

#include <iostream>

namespace pipescope::cli {

void ScenarioArgs::applyTo(whatif::ScenarioChanges& changes) const
{
    if (!schedule.empty())
        changes.schedule = schedule;
    if (!scheduleCsv.empty())
        changes.scheduleCsv = scheduleCsv;
    if (pp > 0)
        changes.pp = pp;
    if (v > 0)
        changes.v = v;
    if (microbatches > 0)
        changes.microbatches = microbatches;
    if (!boundaries.empty())
        changes.boundaries = boundaries;
    if (!microbatchOrder.empty()) {
        const auto order = whatif::microbatchOrderFromString(microbatchOrder);
        if (!order) {
            std::string names;
            for (whatif::MicrobatchOrder o : whatif::allMicrobatchOrders())
                names += (names.empty() ? "" : ", ") + std::string(whatif::toString(o));
            throw FlagError("--microbatch-order", "unknown microbatch order '" + printable(microbatchOrder) +
                                                       "'; choose one of " + names);
        }
        changes.microbatchOrder = *order;
    }
    if (!recompute.empty() && recompute != "auto")
        changes.recompute = whatif::parseRecompute(recompute);
}

void ScenarioArgs::applyTo(whatif::BalanceOptions& options) const
{
    if (recompute != "auto")
        return;
    if (!autoBalance && !search)
        throw FlagError("--recompute", "--recompute auto lets --auto-balance or --search choose each stage's "
                                        "recomputation; give one of them, or none, selective, full or a list per stage");
    options.recomputeChoices = {whatif::Recompute::None, whatif::Recompute::Selective, whatif::Recompute::Full};
}

whatif::SearchSpace ScenarioArgs::searchSpace() const
{
    whatif::SearchSpace space;
    for (const std::string& item : searchRecompute) {
        if (item == "per-stage") {
            space.recomputePerStage = true;
        } else if (item == "all") {
            space.recompute = {whatif::Recompute::None, whatif::Recompute::Selective, whatif::Recompute::Full};
            space.recomputePerStage = true;
        } else {
            const auto r = whatif::recomputeFromString(item);
            if (!r)
                throw FlagError("--search-recompute", "unknown recomputation '" + printable(item, 64) +
                                                           "'; choose none, selective, full, per-stage or all");
            space.recompute.push_back(*r);
        }
    }
    if (recompute == "auto" && searchRecompute.empty())
        space.recomputePerStage = true;
    return space;
}

void ScenarioArgs::applyMicrobatchTokens(whatif::CostModel& model, whatif::ScenarioChanges& changes) const
{
    if (microbatchTokens.empty())
        return;
    const whatif::MicrobatchTokens tokens = whatif::loadMicrobatchTokens(microbatchTokens);
    model.setMicrobatchTokens(tokens);
    if (microbatches <= 0 && !changes.microbatches)
        changes.microbatches = static_cast<int>(tokens.tokens.size());
}

void ScenarioArgs::checkExchanges() const
{
    if (!exchanges.empty() && exchanges != "trace" && exchanges != "blocking" && exchanges != "overlapped" &&
        exchanges != "megatron")
        throw FlagError("--exchanges", "unknown exchange mode '" + printable(exchanges) +
                                            "'; choose trace, blocking, overlapped or megatron");
    if (!links.empty() && links != "shared" && links != "separate")
        throw FlagError("--links", "unknown link model '" + printable(links) + "'; choose shared or separate");
}

void ScenarioArgs::applyExchanges(whatif::CostModel& model) const
{
    checkExchanges();
    if (exchanges == "megatron") {
        model.megatronExchanges = true;
        if (links.empty())
            whatif::chooseExchanges(model, false); // shared or separate, whichever reproduces the measured run
    } else if (exchanges == "blocking" || exchanges == "overlapped") {
        model.megatronExchanges = false;
    }
    if (links == "shared" || links == "separate")
        model.sharedLinks = links == "shared";
    if (exchanges == "blocking") {
        model.blockingExchanges = true;
        if (model.exchangeGapNs <= 0)
            model.exchangeGapNs = whatif::kDefaultExchangeGapNs;
    } else if (exchanges == "overlapped") {
        model.blockingExchanges = false;
    }
}

void addExchangesOption(CLI::App& app, ScenarioArgs& a, const char* help)
{
    app.add_option("--exchanges", a.exchanges, help);
    app.add_option("--links", a.links,
                   "with Megatron's exchanges: shared (transfers in flight share one medium, as through host memory) "
                   "or separate (each direction between two ranks a link of its own); default: whichever reproduces "
                   "the measured run");
}

bool ScenarioArgs::changesScenario() const
{
    return !schedule.empty() || !scheduleCsv.empty() || pp > 0 || v > 0 || microbatches > 0 || !boundaries.empty() ||
           !microbatchOrder.empty() || !microbatchTokens.empty() || (!recompute.empty() && recompute != "auto");
}

std::optional<int64_t> ScenarioArgs::gpuMemoryBytes() const
{
    if (gpuMemoryGiB <= 0)
        return std::nullopt;
    return static_cast<int64_t>(gpuMemoryGiB * 1024.0 * 1024.0 * 1024.0);
}

void CalibrationArgs::load()
{
    if (!commRulesFile.empty())
        commRules = std::make_shared<const CommRules>(CommRules::fromFile(commRulesFile));
    if (!model.empty())
        description = whatif::loadModelDescription(model);
}

void addCommRulesOption(CLI::App& app, std::string& file)
{
    app.add_option("--comm-rules", file,
                   "Rule file: which kernels are communication beyond NCCL's and the built-in table, one "
                   "`CLASS PATTERN` a line (docs/communication-kernels.md)");
}

whatif::CalibrateOptions CalibrationArgs::options(std::optional<int64_t> gpuMemoryBytes) const
{
    whatif::CalibrateOptions co;
    co.model = description ? &*description : nullptr;
    if (layers > 0)
        co.measured.layers = layers;
    co.measured.measuredBoundaries = measuredBoundaries;
    co.measured.layerWeights = weights;
    co.gpuMemoryBytes = gpuMemoryBytes;
    return co;
}

void addCalibrationOptions(CLI::App& app, CalibrationArgs& a)
{
    app.add_option("--model", a.model, "Model description (layers, parameters, activations; docs/model-format.md)");
    app.add_option("--layers", a.layers, "Layer count when the trace does not name layers")->check(wholeNumber(1, 100000));
    app.add_option("--measured-boundaries", a.measuredBoundaries, "The measured run's boundaries (default: an even split)")
        ->delimiter(',')
        ->check(wholeNumber(1, 100000));
    app.add_option("--weights", a.weights, "Relative cost of each layer, comma-separated")
        ->delimiter(',')
        ->check(number());
    addCommRulesOption(app, a.commRulesFile);
}

void addScenarioOptions(CLI::App& app, ScenarioArgs& a, const ScenarioHelp& help)
{
    app.add_option("--boundaries", a.boundaries, help.boundaries)->delimiter(',')->check(wholeNumber(1, 100000));
    app.add_option("--schedule", a.schedule, "gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-v, dualpipev");
    app.add_option("--schedule-csv", a.scheduleCsv, "A schedule order in torch.distributed.pipelining's CSV format");
    app.add_option("--pp", a.pp, help.pp)->check(wholeNumber(1, 4096));
    app.add_option("--v", a.v, "Chunks (virtual stages) per rank")->check(wholeNumber(1, 64));
    app.add_option("--microbatches", a.microbatches, help.microbatches)->check(wholeNumber(1, 100000));
    app.add_flag("--auto-balance", a.autoBalance, "Find the partition with the best predicted time");
    app.add_flag("--search", a.search, "Rank schedule x v x microbatches, each auto-balanced");
    app.add_option("--microbatch-order", a.microbatchOrder,
                   "Uneven microbatches: given (as measured), equal, longest-first, shortest-first, long-short");
    app.add_option("--microbatch-tokens", a.microbatchTokens,
                   "File of token counts per microbatch: each microbatch costs its share of the tokens");
    app.add_option("--recompute", a.recompute,
                   "Activation recomputation: none, selective or full, for every stage or one per virtual stage "
                   "(comma-separated); auto: --auto-balance and --search choose per stage within --gpu-memory");
    app.add_option("--search-recompute", a.searchRecompute,
                   "Recomputation --search tries: none, selective, full, per-stage (auto-balance's choice) or all")
        ->delimiter(',');
    app.add_option("--gpu-memory", a.gpuMemoryGiB, "GPU memory in GiB for the out-of-memory flag")
        ->check(number(1.0 / 1024, 1024.0 * 1024, "GiB")); // bytes must fit in int64
}

void addOutputOptions(CLI::App& app, ScenarioArgs& a)
{
    app.add_flag("--json", a.json, "Print JSON (schema pipescope.whatif/1) instead of tables");
    app.add_flag("--summary", a.summary, "Leave per-step timelines out of the JSON");
    app.add_option("-o,--output", a.output, "Also write the JSON to this file");
}

bool writeDocument(const ScenarioArgs& a, const nlohmann::json& doc)
{
    if (!a.output.empty())
        AtomicOutput::writeFile(a.output, jsonText(doc, 1) + "\n");
    if (a.json)
        std::cout << jsonText(doc, 1) << "\n";
    return a.json;
}

void printPredictions(const std::vector<whatif::Prediction>& predictions, const std::vector<whatif::SearchRow>* rows)
{
    for (const whatif::Prediction& p : predictions)
        std::cout << whatif::predictionText(p) << "\n";
    if (rows)
        std::cout << "ranked configurations (auto-balanced each)\n" << whatif::searchText(*rows) << "\n";
}

} // namespace pipescope::cli
