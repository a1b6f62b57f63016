//===- AssumeNone.cpp - Optional arguments the caller never passes --------===//

#include "passes/AssumeNone.h"

#include <algorithm>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

std::string assumeNoneMessage(const std::string &name) {
  return "this module was staticified for calls without '" + name +
         "' (staticify --assume-none " + name +
         "); call the original module to pass it";
}

bool assumeNone(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  for (const std::string &name : ctx.options.assumeNone) {
    auto at = std::find_if(
        graph->inputs().begin(), graph->inputs().end(), [&](const Value *v) {
          return v->debugNameBase() == name &&
                 v->type()->kind() == c10::TypeKind::OptionalType;
        });
    if (at == graph->inputs().end() || (*at)->uses().empty())
      continue;
    Value *arg = *at;
    torch::jit::WithInsertPoint insert(graph->block()->param_node()->next());
    Value *none = graph->insertConstant(c10::IValue());
    // The check first, so that the uses below do not include its own.
    Node *check = graph->create(c10::prim::If, {}, 0);
    arg->replaceAllUsesWith(none);
    Value *given = graph->insert(c10::aten::__isnot__, {arg, none});
    check->addInput(given);
    graph->insertNode(check);
    torch::jit::Block *raise = check->addBlock();
    check->addBlock();
    {
      torch::jit::WithInsertPoint inRaise(raise);
      Value *message = graph->insertConstant(assumeNoneMessage(name));
      Value *cls = graph->insertConstant(std::string("builtins.ValueError"));
      graph->insertNode(
          graph->create(c10::prim::RaiseException, {message, cls}, 0));
    }
    changed = true;
  }
  return changed;
}

} // namespace staticify
