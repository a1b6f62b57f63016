//===- Pipeline.h - The pass registry and the pipeline driver
//--------------===//
//
// Every pass is registered here under its flag name (`--passes inline,...`,
// `staticify-opt --pass=inline`). A pass either normalizes (canonical forms
// that later passes rely on) or rewrites (turns a data-dependent computation
// into a static one). The driver analyses before the first rewrite and after
// the last, so the report can say what the rewrites achieved.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/Partition.h"
#include "passes/PassContext.h"
#include "passes/Report.h"

#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace staticify {

struct PassInfo {
  std::string name;
  std::string summary;
  /// A rewriting pass changes what the graph computes into a static form;
  /// a normalizing one only tidies it.
  bool rewrites = false;
  /// Returns whether the graph changed.
  std::function<bool(std::shared_ptr<torch::jit::Graph> &, PassContext &)> run;
};

const std::vector<PassInfo> &registeredPasses();
const PassInfo *findPass(std::string_view name);

/// Runs one pass as the pipeline does: after a rewriting pass that changed
/// the graph, what it left without uses is erased and logged as its work;
/// after any change, the context's cached facts are dropped.
bool runPass(const PassInfo &pass, std::shared_ptr<torch::jit::Graph> &graph,
             PassContext &ctx);

/// --verify-each, after \p pass ran on \p graph: the graph lints, and if the
/// pass said it changed nothing, it still prints as \p before. Throws
/// std::runtime_error naming the pass otherwise.
void verifyAfter(const PassInfo &pass, torch::jit::Graph &graph, bool changed,
                 const std::string &before);

/// What the rewrites emitted once per use and TorchScript's executor merges
/// when it runs (three cuts of selections by one mask read their counts
/// once), merged as the pipeline does after its last pass, so that a count
/// of sync points counts what runs; the original's own reads (tracked by
/// \p ctx's findings) stay. Drops \p ctx's cached facts when it merged.
bool mergeRewrittenReads(std::shared_ptr<torch::jit::Graph> &graph,
                         PassContext &ctx);

/// The default pipeline: `inline` (unless \p inlineCalls is false), then
/// normalization, then every rewrite.
std::vector<std::string> defaultPipeline(bool inlineCalls);

/// Splits "a,b,c" and checks each name; throws std::invalid_argument naming
/// the unknown pass and listing the known ones.
std::vector<std::string> parsePassList(std::string_view list);

struct PipelineResult {
  MethodReport report;
  /// Whether a rewriting pass changed the graph: only then does the output
  /// need the new graph (normalization alone never replaces a method).
  bool rewritten = false;
  /// Whether normalization erased data-dependent ops nothing used: the
  /// report describes the graph without them, so the output needs it too.
  bool droppedDeadDynamicOps = false;
  /// The `--bound` keys that name a value of the graph.
  std::vector<std::string> boundsMatched;
  /// The final graph's partition (its nodes: the graph the pipeline ran on).
  PartitionResult partition;
  /// The final graph as Graphviz DOT, when PassOptions::renderDot is set.
  std::string dot;
  /// Wall time of each step, in order: every pass, the analyses before and
  /// after, the partition (staticify-opt --time-passes, the benchmarks).
  std::vector<std::pair<std::string, double>> seconds;
};

/// Runs \p passes on \p graph and reports on method \p name. The passes
/// work in place, except that one that tried its rewrite on a copy may make
/// \p graph point to that copy (RewriteTrial::adopt) instead of running the
/// rewrite twice: the result is \p graph after the call.
///
/// A method the rewrites would leave reaching the host more often is left
/// as the passes before the first rewriting one made it. With \p original
/// (the graph \p graph was copied from, which the pipeline only reads),
/// that graph is derived
/// again from it in that rare case, and the pipeline keeps no copy of its
/// own (at 120k nodes a copy and its destruction cost more than half a
/// second); without it, the pipeline copies the graph before rewriting.
PipelineResult runPipeline(std::shared_ptr<torch::jit::Graph> &graph,
                           const std::string &name,
                           const std::vector<std::string> &passes,
                           const PassOptions &options = {},
                           torch::jit::Graph *original = nullptr);

/// --time-passes: one line per step, "<prefix>   12.345 ms  step", then
/// the total.
std::string renderSeconds(
    const std::vector<std::pair<std::string, double>> &steps,
    std::string_view prefix);

/// The summary of one analysis: node count, findings per category, whether
/// the outputs are static.
GraphSummary summarize(const AnalysisResult &analysis);

} // namespace staticify
