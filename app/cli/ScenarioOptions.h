#pragma once
// Options and output shared by `pipescope whatif` and `pipescope simulate`:
// both describe a scenario (schedule, pipeline degree, chunks, microbatches,
// partition) and print or write the same pipescope.whatif/1 document.
#include "whatif/ModelDescription.h"
#include "whatif/WhatIf.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pipescope::cli {

struct ScenarioArgs {
    std::string schedule, scheduleCsv, output;
    int pp = 0, v = 0, microbatches = 0;
    std::vector<int> boundaries;
    bool autoBalance = false, search = false, json = false, summary = false;
    double gpuMemoryGiB = 0;
    std::string microbatchOrder;  // --microbatch-order
    std::string microbatchTokens; // --microbatch-tokens FILE
    std::string recompute;        // --recompute none|selective|full|LIST|auto
    std::vector<std::string> searchRecompute; // --search-recompute none,selective,full,per-stage
    std::string exchanges;        // --exchanges trace|blocking|overlapped|megatron (whatif, simulate)
    std::string links;            // --links shared|separate (with Megatron's exchanges)

    // Overrides the fields of `changes` that were given on the command line.
    void applyTo(whatif::ScenarioChanges& changes) const;
    // Reads --microbatch-tokens into the model (and, without --microbatches,
    // makes the file's count the scenario's). Throws Error naming the file.
    void applyMicrobatchTokens(whatif::CostModel& model, whatif::ScenarioChanges& changes) const;
    // --exchanges: blocking (batches that hold the compute stream, as
    // Megatron-LM runs them), overlapped (sends overlap compute) or trace (as
    // the analysis found; the default). Throws ValueError for another word.
    void applyExchanges(whatif::CostModel& model) const;
    void checkExchanges() const; // the word alone, before any work
    bool changesScenario() const;
    // --recompute auto: auto-balance chooses each stage's recomputation.
    void applyTo(whatif::BalanceOptions& options) const;
    // --search's space: the recomputation settings of --search-recompute
    // (and the per-stage choice with --recompute auto).
    whatif::SearchSpace searchSpace() const;
    std::optional<int64_t> gpuMemoryBytes() const;
};

// Options that calibrate the cost model on a trace (whatif, report).
struct CalibrationArgs {
    std::string model;
    int layers = 0;
    std::vector<int> measuredBoundaries;
    std::vector<double> weights;
    std::optional<whatif::ModelDescription> description; // --model, once load() has read it
    std::string commRulesFile;                            // --comm-rules
    std::shared_ptr<const CommRules> commRules;           // once load() has read it (null: built-in table)

    void load();
    // The options for calibrate(); valid while this object lives (they point at `description`).
    whatif::CalibrateOptions options(std::optional<int64_t> gpuMemoryBytes) const;
};

void addCalibrationOptions(CLI::App& app, CalibrationArgs& a);
// --comm-rules FILE: which kernels are communication beyond NCCL's and the built-in table.
void addCommRulesOption(CLI::App& app, std::string& file);
// --exchanges, for the commands that replay (whatif, simulate).
void addExchangesOption(CLI::App& app, ScenarioArgs& a, const char* help);

struct ScenarioHelp {
    const char* pp;
    const char* microbatches;
    const char* boundaries;
};

void addScenarioOptions(CLI::App& app, ScenarioArgs& a, const ScenarioHelp& help);
// Output flags (--json, --summary, -o) go last in --help.
void addOutputOptions(CLI::App& app, ScenarioArgs& a);

// Writes the document to -o when asked; prints it and returns true for --json.
bool writeDocument(const ScenarioArgs& a, const nlohmann::json& doc);
// The readable form: one block per prediction, then the ranked search.
void printPredictions(const std::vector<whatif::Prediction>& predictions, const std::vector<whatif::SearchRow>* rows);

} // namespace pipescope::cli
