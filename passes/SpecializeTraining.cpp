//===- SpecializeTraining.cpp - The saved training flags as constants -----===//

#include "passes/SpecializeTraining.h"

#include "passes/GraphUtils.h"

#include <algorithm>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

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
