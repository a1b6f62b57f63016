//===- Simplify.cpp - What the rewrites leave, said with fewer ops --------===//

#include "passes/Simplify.h"

#include "passes/Analysis.h"
#include "passes/CanonicalForms.h"
#include "passes/GraphUtils.h"
#include "passes/InPlace.h"
#include "passes/OpInfo.h"


#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_set>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A value's dtype as the analysis knows it.
using DTypeOfValue = std::function<DTypeKind(const Value *)>;

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

/// `x != 0` of a bool tensor x that nothing writes: x.
bool foldBoolNonzero(Node *node, const DTypeOfValue &dtypeOf,
                     const Aliases &aliases) {
  if (node->kind() != c10::aten::ne || node->inputs().size() != 2 ||
      !isTensor(node->input(0)) || isTensor(node->input(1)) ||
      !isZero(node->input(1)))
    return false;
  Value *x = node->input(0), *out = node->output();
  if (dtypeOf(x) != DTypeKind::Bool || !readOnlyByOps(out) ||
      aliases.hasWriters(x) || aliases.hasWriters(out))
    return false;
  out->replaceAllUsesWith(x);
  node->destroy();
  return true;
}

/// prim::dtype of a tensor the analysis knows to be bool: the constant.
bool foldBoolDType(Graph &graph, Node *node, const DTypeOfValue &dtypeOf,
                   std::unordered_set<const Value *> &made) {
  if (node->kind() != c10::prim::dtype ||
      dtypeOf(node->input(0)) != DTypeKind::Bool)
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *bool_ = graph.insertConstant(static_cast<int64_t>(c10::ScalarType::Bool));
  made.insert(bool_);
  node->output()->replaceAllUsesWith(bool_);
  node->destroy();
  return true;
}

/// c of `scalar_tensor(c, dtype=int64)` with c an int constant: how
/// lift-scalars carries a host constant into arithmetic on lifted ints.
std::optional<int64_t> int64Constant(const Value *v) {
  const Node *n = v->node();
  if (n->kind() != c10::aten::scalar_tensor || n->inputs().size() != 5 ||
      constantInt(n->input(1)) != static_cast<int64_t>(c10::ScalarType::Long))
    return std::nullopt;
  return constantInt(n->input(0));
}

/// `op(t, scalar_tensor(c, int64))` of an int64 tensor t (either order) as
/// the op with the number c: one op, not two, and the same int64 (or bool)
/// result, since an int64 tensor and an int compute in int64 as two int64
/// tensors do.
bool foldInt64Operand(Graph &graph, Node *node, const DTypeOfValue &dtypeOf,
                      std::unordered_set<const Value *> &made) {
  using namespace c10;
  static const std::pair<Symbol, Symbol> flipped[] = {
      {aten::eq, aten::eq}, {aten::ne, aten::ne}, {aten::lt, aten::gt},
      {aten::le, aten::ge}, {aten::gt, aten::lt}, {aten::ge, aten::le},
      {aten::mul, aten::mul}, {aten::add, aten::add}, {aten::sub, aten::rsub},
      {aten::minimum, aten::clamp_max}, {aten::maximum, aten::clamp_min}};
  const auto *entry = std::find_if(
      std::begin(flipped), std::end(flipped),
      [&](const auto &e) { return e.first == node->kind(); });
  if (entry == std::end(flipped) || node->outputs().size() != 1)
    return false;
  bool alpha = node->kind() == aten::add || node->kind() == aten::sub;
  if (node->inputs().size() != (alpha ? 3u : 2u) ||
      (alpha && constantInt(node->input(2)) != 1) ||
      !isTensor(node->input(0)) || !isTensor(node->input(1)))
    return false;
  std::optional<int64_t> c = int64Constant(node->input(1));
  bool first = !c;
  if (first)
    c = int64Constant(node->input(0));
  Value *t = node->input(first ? 1 : 0);
  if (!c || dtypeOf(t) != DTypeKind::Long)
    return false;
  // With the number second: minimum/maximum become clamps; a number first
  // flips comparisons and makes sub an rsub.
  Symbol op = node->kind();
  if (op == aten::minimum || op == aten::maximum || first)
    op = entry->second;
  std::vector<torch::jit::NamedValue> args = {t, *c};
  if (alpha)
    args.emplace_back(int64_t{1});
  torch::jit::WithInsertPoint guard(node);
  Value *out = emit(graph, op.toQualString(), args, node);
  made.insert(out);
  out->setType(node->output()->type());
  node->output()->replaceAllUsesWith(out);
  node->destroy();
  return true;
}

/// numel/size/dim/device of `op(t, numbers...)`, an elementwise op whose
/// only tensor operand is t: t's shape and device are the result's, and
/// reads of one shape then merge (`(labels == 1).numel()` and
/// `(labels == 0).numel()`).
bool foldShapeOfElementwise(Node *node) {
  using namespace c10;
  static const Symbol numel = Symbol::aten("numel");
  if (node->kind() != numel && node->kind() != aten::size &&
      node->kind() != aten::dim && node->kind() != prim::device)
    return false;
  Node *def = node->input(0)->node();
  const OpInfo *info = opInfo(def);
  // Not of copies (`updated = matches.clone()`): the copy's own reads keep
  // a lowered region's inputs its own.
  if (!info || !info->has(kElementwise) || info->has(kCopiesInput) ||
      def->outputs().size() != 1)
    return false;
  Value *only = nullptr;
  for (Value *in : def->inputs())
    if (isTensor(in)) {
      if (only)
        return false;
      only = in;
    } else if (in->type()->kind() == TypeKind::ListType ||
               in->type()->kind() == TypeKind::OptionalType) {
      return false; // a list or an Optional may hold a tensor
    }
  if (!only)
    return false;
  node->replaceInput(0, only);
  return true;
}

/// One sweep of the folds over the graph the cached facts describe.
bool sweep(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &facts = ctx.facts.analysis(graph);
  const Aliases &aliases = ctx.facts.aliases(graph);
  // The facts describe the graph before the first fold: a value a fold
  // made (which may reuse the address of one a fold destroyed) is not
  // known to them, and waits for the next sweep.
  std::unordered_set<const Value *> made;
  DTypeOfValue dtypeOf = [&](const Value *v) {
    return made.count(v) ? DTypeKind::Unknown : facts.info(v).dtype;
  };
  bool changed = false;
  // Each fold destroys only the node it visits.
  for (Node *node : collectNodes(graph->block()))
    changed |= foldBoolDType(*graph, node, dtypeOf, made) ||
               foldBoolNonzero(node, dtypeOf, aliases) ||
               foldInt64Operand(*graph, node, dtypeOf, made) ||
               foldShapeOfElementwise(node);
  return changed;
}

} // namespace

bool simplify(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // A fold's result feeds the next (clamp_max(count, 500) < 500): sweeps
  // until none folds, a few at most.
  constexpr int kMaxSweeps = 4;
  bool changed = false;
  for (int i = 0; i < kMaxSweeps; ++i) {
    if (!sweep(graph, ctx))
      break;
    changed = true;
    ctx.facts.invalidate();
    propagateConstants(graph, nullptr);
    eliminateDeadCode(graph, nullptr);
  }

  // normalize made the program's in-place activations functional: in
  // place again, they allocate no more than the program did.
  if (restoreInPlaceActivations(graph)) {
    ctx.facts.invalidate();
    changed = true;
  }
  return changed;
}

} // namespace staticify
