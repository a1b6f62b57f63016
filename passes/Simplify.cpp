//===- Simplify.cpp - What the rewrites leave, said with fewer ops --------===//

#include "passes/Simplify.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

bool isZero(const Value *v) {
  auto c = torch::jit::toIValue(v);
  if (!c)
    return false;
  if (c->isInt())
    return c->toInt() == 0;
  if (c->isBool())
    return !c->toBool();
  if (c->isDouble())
    return c->toDouble() == 0.0;
  return false;
}

/// Whether every use of \p v reads it as an argument its op neither writes
/// nor returns a view of (no return, no container, no alias): \p v may then
/// be another tensor of equal contents that nothing writes.
bool onlyRead(const Value *v) {
  for (const torch::jit::Use &use : v->uses()) {
    const c10::FunctionSchema *schema = use.user->maybeSchema();
    if (!schema || use.offset >= schema->arguments().size() ||
        schema->arguments()[use.offset].alias_info() || schema->is_mutable())
      return false;
  }
  return true;
}

/// `x != 0` of a bool tensor x that nothing writes: x.
bool foldBoolNonzero(Node *node, const AnalysisResult &facts,
                     const Aliases &aliases) {
  if (node->kind() != c10::aten::ne || node->inputs().size() != 2 ||
      !isTensor(node->input(0)) || isTensor(node->input(1)) ||
      !isZero(node->input(1)))
    return false;
  Value *x = node->input(0), *out = node->output();
  if (facts.info(x).dtype != DTypeKind::Bool || !onlyRead(out) ||
      aliases.hasWriters(x) || aliases.hasWriters(out))
    return false;
  out->replaceAllUsesWith(x);
  node->destroy();
  return true;
}

/// prim::dtype of a tensor the analysis knows to be bool: the constant.
bool foldBoolDType(Graph &graph, Node *node, const AnalysisResult &facts) {
  if (node->kind() != c10::prim::dtype ||
      facts.info(node->input(0)).dtype != DTypeKind::Bool)
    return false;
  torch::jit::WithInsertPoint guard(node);
  node->output()->replaceAllUsesWith(graph.insertConstant(
      static_cast<int64_t>(c10::ScalarType::Bool)));
  node->destroy();
  return true;
}

} // namespace

bool simplify(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  {
    const AnalysisResult &facts = ctx.facts.analysis(graph);
    const Aliases &aliases = ctx.facts.aliases(graph);
    // Each fold destroys only the node it visits.
    for (Node *node : collectNodes(graph->block()))
      changed |= foldBoolDType(*graph, node, facts) ||
                 foldBoolNonzero(node, facts, aliases);
  }
  if (!changed)
    return false;
  ctx.facts.invalidate();
  propagateConstants(graph, nullptr);
  eliminateDeadCode(graph, nullptr);
  return true;
}

} // namespace staticify
