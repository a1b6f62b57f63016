//===- RewritePolicy.h - The one rule on what a rewrite may cost ----------===//
//
// A rewrite is kept only if the graph then reaches the host less often than
// before (countSyncPoints), or as often with its own syncs all at the
// outputs: a bounded form whose uses materialize, or a gather rewritten into
// selections nothing absorbs, would otherwise trade one sync for several, or
// for as many mid-computation. The passes whose rewrites can cost syncs
// try them and ask rewriteAllowed(): index-to-mask on a RewriteTrial (a
// copy, on which the passes that absorb its selections run too), bound in
// place under a GraphCheckpoint (passes/GraphCheckpoint.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace staticify {

/// What a graph costs at run time, as the policy weighs it: the points where
/// it reaches the host (countSyncPoints), and how many of them a rewrite put
/// in the middle of the computation rather than at its outputs (a bounded
/// value materialized for a use with no bounded form).
struct RewriteCost {
  size_t syncPoints = 0;
  size_t midSyncPoints = 0;
};

/// The cost of the graph \p analysis describes (no rewrite's sync points
/// known: midSyncPoints 0).
RewriteCost rewriteCost(const AnalysisResult &analysis);

/// The policy: a rewrite taking the graph from \p before to \p after may
/// stay if it reaches the host at fewer points, or at as many points none of
/// which it put mid-computation (its syncs then sit at the outputs, behind a
/// static computation). One that trades the original's syncs for as many of
/// its own in the middle gains nothing and is not kept.
inline bool rewriteAllowed(const RewriteCost &before, const RewriteCost &after) {
  if (after.syncPoints != before.syncPoints)
    return after.syncPoints < before.syncPoints;
  return after.midSyncPoints == 0;
}

/// A copy of a graph and of the pass context (re-keyed to the copy's nodes)
/// for a rewrite to be tried on. The trial counts the sync points the copy
/// reaches, optionally after the passes that absorb what the rewrite left
/// (selections that a later masked reduction or store removes); adopt()
/// makes the trial the real graph and context, so a rewrite that is kept is
/// not run twice.
class RewriteTrial {
public:
  RewriteTrial(torch::jit::Graph &graph, const PassContext &ctx);

  std::shared_ptr<torch::jit::Graph> &graph() { return copy; }
  PassContext &ctx() { return scratch; }
  /// The copy's counterpart of \p node, a node of the original graph.
  torch::jit::Node *counterpart(const torch::jit::Node *node) const;
  /// The copy's counterpart of \p value, a value of the original graph (a
  /// node's result or a block's input).
  torch::jit::Value *counterpart(const torch::jit::Value *value) const;

  /// Runs the registered passes \p passes on the copy as the pipeline would
  /// (dead nodes erased after a change).
  void runPasses(const std::vector<std::string> &passes);
  /// The copy's cost now; \p midSyncPoints counts the sync points the
  /// rewrite put mid-computation (the pass that made them knows).
  RewriteCost cost(size_t midSyncPoints = 0);

  /// Makes \p graph (the original's owner) the copy, and \p ctx what the
  /// trial's context recorded.
  void adopt(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

private:
  std::shared_ptr<torch::jit::Graph> copy;
  PassContext scratch;
  std::unordered_map<const torch::jit::Node *, torch::jit::Node *> toCopy;
};

} // namespace staticify
