//===- Simplify.cpp - What the rewrites leave, said with fewer ops --------===//

#include "passes/Simplify.h"

#include "passes/Analysis.h"
#include "passes/CanonicalForms.h"
#include "passes/GraphUtils.h"
#include "passes/InPlace.h"
#include "passes/OpCatalogue.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

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
/// only tensor operand is t: t's shape and device are the result's (not
/// of a move: `t.to(device)`, `t.cuda()`), and
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
  if (node->kind() == prim::device) {
    const Value *device = namedInput(def, "device");
    if ((device && !device->mustBeNone()) ||
        (def->kind() == aten::to && namedInput(def, "other")) ||
        def->kind() == Symbol::aten("cuda") || def->kind() == Symbol::aten("cpu") ||
        def->kind() == Symbol::aten("type_as"))
      return false; // a move to another device
  }
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

/// `cat([op(a, s...), op(b, s...)], d)` of one elementwise op with the
/// same host numbers beside each part, each used only there:
/// `op(cat([a, b], d), s...)`, one op for all the parts (the row index of a
/// sampler's picks, each class's positions divided by one stride).
bool foldCatOfSameOp(Graph &graph, Node *node, const Aliases &aliases) {
  if (node->kind() != c10::aten::cat || node->inputs().size() != 2)
    return false;
  Node *list = node->input(0)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() < 2 ||
      node->input(0)->uses().size() != 1)
    return false;
  Node *first = list->input(0)->node();
  if (!opElementwise(first) || first->outputs().size() != 1 ||
      first->inputs().empty() || !isTensor(first->input(0)) ||
      first->isNondeterministic() || writesAnything(first))
    return false;
  for (size_t i = 1; i < first->inputs().size(); ++i)
    if (isTensor(first->input(i)) ||
        first->input(i)->type()->kind() == c10::TypeKind::ListType ||
        first->input(i)->type()->kind() == c10::TypeKind::OptionalType)
      return false; // host numbers, strings and None only
  for (const Value *part : list->inputs()) {
    const Node *def = part->node();
    if (def->kind() != first->kind() || part->uses().size() != 1 ||
        def->inputs().size() != first->inputs().size() ||
        def->maybeSchema() != first->maybeSchema())
      return false;
    for (size_t i = 1; i < def->inputs().size(); ++i)
      if (!computesSameValue(def->input(i), first->input(i), aliases, 0))
        return false; // the same value, or equal constants
  }
  torch::jit::WithInsertPoint guard(node);
  std::vector<Value *> parts;
  for (const Value *part : list->inputs())
    parts.push_back(part->node()->input(0));
  Value *joined =
      graph.insertNode(graph.createList(c10::TensorType::get(), parts))->output();
  Node *cat = graph.insertNode(graph.createClone(node, [&](Value *v) {
    return v == node->input(0) ? joined : v;
  }));
  Node *op = graph.insertNode(graph.createClone(first, [&](Value *v) {
    return v == first->input(0) ? cat->output() : v;
  }));
  op->output()->setType(node->output()->type());
  node->output()->replaceAllUsesWith(op->output());
  node->destroy();
  return true;
}

/// `size(v, d)` where the op that made v fixes it: a row of `t.unbind(0)`
/// has t's dims from 1 on, `narrow(x, d, start, length)` has length rows
/// along d (where it does not raise), and a size sizeSource() knows as a
/// constant is that constant (a cat of two padded prefixes of constant
/// lengths: the shape arithmetic of the forms folds).
bool foldSizeOfView(Node *node) {
  if (node->kind() != c10::aten::size || node->inputs().size() != 2)
    return false;
  std::optional<int64_t> d = constantInt(node->input(1));
  if (!d || *d < 0)
    return false;
  if (std::optional<int64_t> c = sizeSource(node->input(0), *d).constant) {
    torch::jit::WithInsertPoint guard(node);
    node->output()->replaceAllUsesWith(node->owningGraph()->insertConstant(*c));
    node->destroy();
    return true;
  }
  Node *def = node->input(0)->node();
  if (def->kind() == c10::prim::ListUnpack &&
      def->input(0)->node()->kind() == c10::aten::unbind &&
      constantInt(def->input(0)->node()->input(1)) == 0) {
    torch::jit::WithInsertPoint guard(node);
    node->replaceInput(0, def->input(0)->node()->input(0));
    node->replaceInput(1, node->owningGraph()->insertConstant(*d + 1));
    return true;
  }
  if (def->kind() == c10::aten::narrow && constantInt(def->input(1)) == *d &&
      def->input(3)->type()->kind() == c10::TypeKind::IntType) {
    node->output()->replaceAllUsesWith(def->input(3));
    node->destroy();
    return true;
  }
  return false;
}

/// Whether \p x is a function of positions: `arange(n)` (from 0, step 1,
/// int64), or an elementwise op of such functions and 0-d values whose one
/// use is the expression it is in. \p depth bounds the search.
bool ofPositions(const Value *x, int depth) {
  const Node *def = x->node();
  if (def->kind() == c10::aten::arange) // arange(n) of an int n: int64
    return def->inputs().size() == 5 && def->input(1)->mustBeNone() &&
           def->input(0)->type()->kind() == c10::TypeKind::IntType;
  if (depth == 0 || !opElementwise(def) || def->outputs().size() != 1 ||
      x->uses().size() != 1 || def->isNondeterministic() || writesAnything(def))
    return false;
  bool any = false;
  for (const Value *in : def->inputs()) {
    if (!isTensor(in))
      continue;
    if (ofPositions(in, depth - 1))
      any = true;
    else if (!provablyZeroDim(in))
      return false;
  }
  return any;
}

/// x[p] of a function of positions x (ofPositions): the function of p,
/// the positions gathered (arange(n)[p] is p, where p < n; past n the
/// original raises).
Value *atPositions(Graph &graph, Value *x, Value *p, Node *anchor) {
  Node *def = x->node();
  if (def->kind() == c10::aten::arange)
    return p;
  Node *copy = graph.insertNode(graph.createClone(def, [&](Value *in) {
    return isTensor(in) && !provablyZeroDim(in) ? atPositions(graph, in, p, anchor)
                                                : in;
  }));
  copy->output()->setType(def->output()->type());
  return copy->output();
}

/// `index_select(index_select(b, 0, i), 0, p)`, the inner used only here:
/// `index_select(b, 0, i[p])`, the index gathered instead of b's rows; and
/// `index_select(f(arange(n)), 0, p)`: f(p) (ofPositions). A two-part cat
/// of bounded rows gathers by `where(r < count, r, ...)` of r = arange(n),
/// then the program permutes it: one gather by f(perm) for both.
bool foldGatherOfGather(Graph &graph, Node *node, const DTypeOfValue &dtypeOf) {
  // A vector p (a 0-d one gathers one row, where f(p) would be 0-d).
  if (node->kind() != c10::aten::index_select || constantInt(node->input(1)) != 0 ||
      dtypeOf(node->input(2)) != DTypeKind::Long ||
      knownRank(node->input(2)) != std::optional<int64_t>(1))
    return false;
  Value *src = node->input(0), *p = node->input(2);
  Node *inner = src->node();
  torch::jit::WithInsertPoint guard(node);
  constexpr int kDepth = 8;
  Value *out = nullptr;
  if (ofPositions(src, kDepth)) {
    out = atPositions(graph, src, p, node);
  } else if (inner->kind() == c10::aten::index_select &&
             constantInt(inner->input(1)) == 0 && src->uses().size() == 1) {
    Value *i = inner->input(2);
    Value *picked = ofPositions(i, kDepth)
                        ? atPositions(graph, i, p, node)
                        : emit(graph, "aten::index_select",
                               {i, int64_t{0}, p}, node);
    out = emit(graph, "aten::index_select", {inner->input(0), int64_t{0}, picked},
               node);
  }
  if (!out)
    return false;
  out->setType(node->output()->type());
  node->output()->replaceAllUsesWith(out);
  node->destroy();
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
               foldShapeOfElementwise(node) ||
               foldCatOfSameOp(*graph, node, aliases) ||
               foldSizeOfView(node) ||
               foldGatherOfGather(*graph, node, dtypeOf);
  return changed;
}

} // namespace

bool simplify(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // A fold's result feeds the next (clamp_max(count, 500) < 500): sweeps
  // until none folds, a few at most.
  constexpr int kMaxSweeps = 8;
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
