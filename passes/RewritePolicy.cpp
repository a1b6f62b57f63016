//===- RewritePolicy.cpp - The one rule on what a rewrite may cost --------===//

#include "passes/RewritePolicy.h"

#include "passes/GraphUtils.h"
#include "passes/Pipeline.h"

#include <stdexcept>

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

torch::jit::Value *RewriteTrial::counterpart(const torch::jit::Value *value) const {
  const Node *def = value->node();
  if (def->kind() != c10::prim::Param)
    return counterpart(def)->output(value->offset());
  const torch::jit::Block *block = def->owningBlock();
  const Node *owner = block->owningNode();
  if (!owner)
    return copy->inputs()[value->offset()];
  Node *twin = counterpart(owner);
  for (size_t b = 0; b < owner->blocks().size(); ++b)
    if (owner->blocks()[b] == block)
      return twin->blocks()[b]->inputs()[value->offset()];
  throw std::logic_error("RewriteTrial: a block its node does not own");
}

void RewriteTrial::runPasses(const std::vector<std::string> &passes) {
  for (const std::string &name : passes)
    runPass(*findPass(name), copy, scratch);
}

RewriteCost rewriteCost(const AnalysisResult &analysis) {
  return {countSyncPoints(analysis), 0};
}

RewriteCost RewriteTrial::cost(size_t midSyncPoints) {
  return {countSyncPoints(scratch.facts.analysis(copy)), midSyncPoints};
}

void RewriteTrial::adopt(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  graph = std::move(copy);
  ctx = std::move(scratch);
}

} // namespace staticify
