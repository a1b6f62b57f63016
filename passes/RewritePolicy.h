//===- RewritePolicy.h - The one rule on what a rewrite may cost ----------===//
//
// A rewrite is kept only if the graph then reaches the host no more often
// than before (countSyncPoints): a bounded form whose uses materialize, or a
// gather rewritten into selections nothing absorbs, would otherwise trade
// one sync for several. The passes whose rewrites can cost syncs
// (index-to-mask, bound) try them on a RewriteTrial and ask allowed(); no
// pass keeps a trial loop of its own.
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

/// The policy: a rewrite leaving \p after sync points where the graph had
/// \p before may stay.
inline bool rewriteAllowed(size_t before, size_t after) {
  return after <= before;
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
  /// The copy's sync points now.
  size_t syncPoints();

  /// Makes \p graph (the original's owner) the copy, and \p ctx what the
  /// trial's context recorded.
  void adopt(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

private:
  std::shared_ptr<torch::jit::Graph> copy;
  PassContext scratch;
  std::unordered_map<const torch::jit::Node *, torch::jit::Node *> toCopy;
};

} // namespace staticify
