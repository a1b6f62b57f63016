//===- RewritePolicy.cpp - The one rule on what a rewrite may cost --------===//

#include "passes/RewritePolicy.h"

#include "passes/GraphUtils.h"
#include "passes/Pipeline.h"

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;

RewriteTrial::RewriteTrial(Graph &graph, const PassContext &ctx)
    : copy(graph.copy()), scratch(ctx) {
  toCopy = correspondingNodes(graph, *copy);
  scratch.remapNodes(toCopy);
}

Node *RewriteTrial::counterpart(const Node *node) const {
  return toCopy.at(node);
}

void RewriteTrial::runPasses(const std::vector<std::string> &passes) {
  for (const std::string &name : passes)
    if (runPass(*findPass(name), copy, scratch))
      scratch.facts.invalidate();
}

size_t RewriteTrial::syncPoints() {
  return countSyncPoints(scratch.facts.analysis(copy));
}

void RewriteTrial::adopt(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  graph = std::move(copy);
  ctx = std::move(scratch);
}

} // namespace staticify
