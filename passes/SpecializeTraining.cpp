//===- SpecializeTraining.cpp - The saved training flags as constants -----===//

#include "passes/SpecializeTraining.h"

#include "passes/GraphUtils.h"

#include <algorithm>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The attribute path from the graph's `self` to the module \p v is, or
/// nullopt when \p v is not reached from `self` by attribute reads alone.
std::optional<std::vector<std::string>> modulePath(const Graph &graph,
                                                   const Value *v) {
  std::vector<std::string> path;
  while (v != graph.inputs()[0]) {
    const Node *def = v->node();
    if (def->kind() != c10::prim::GetAttr)
      return std::nullopt;
    path.push_back(def->s(c10::attr::name));
    v = def->input(0);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

} // namespace

bool specializeTraining(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const auto &savedTraining = ctx.options.savedTraining;
  if (!savedTraining || graph->inputs().empty())
    return false;
  bool changed = false;
  for (Node *node : collectNodes(graph->block())) {
    if (node->kind() != c10::prim::GetAttr ||
        node->s(c10::attr::name) != "training")
      continue;
    auto path = modulePath(*graph, node->input(0));
    if (!path)
      continue;
    std::optional<bool> training = savedTraining(*path);
    if (!training)
      continue;
    torch::jit::WithInsertPoint guard(node);
    node->output()->replaceAllUsesWith(graph->insertConstant(*training));
    node->destroy();
    changed = true;
  }
  return changed;
}

} // namespace staticify
