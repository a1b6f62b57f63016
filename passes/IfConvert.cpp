//===- IfConvert.cpp - if on device data -> both branches + where ---------===//

#include "passes/IfConvert.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <sstream>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static constexpr const char *kRule = "if-convert";

static std::string impureBlockReason(const Block *block) {
  for (const Node *node : block->nodes()) {
    const std::string op = node->kind().toQualString();
    if (op == "prim::RaiseException")
      return "a branch raises";
    if (node->kind() == c10::prim::Loop)
      return "a branch contains a loop";
    if (node->hasSideEffects())
      return "a branch has a side effect ('" + op + "')";
    if (writesAnything(node))
      return "a branch writes to a value ('" + op + "')";
    if (node->kind() == c10::prim::If) {
      std::string nested = impureBranchReason(node);
      if (!nested.empty())
        return nested;
    } else if (!node->blocks().empty()) {
      return "a branch contains '" + op + "'";
    } else if (!neverRaisesOnValues(node)) {
      // Both branches now run: an op that may raise on values (an index, a
      // division) could raise in the branch the original never took.
      return "a branch computes '" + op +
             "', which may raise when its branch would not have run";
    }
  }
  return "";
}

std::string impureBranchReason(const Node *ifNode) {
  for (const Block *b : ifNode->blocks()) {
    std::string why = impureBlockReason(b);
    if (!why.empty())
      return why;
  }
  return "";
}

bool isDataAssert(const Node *ifNode) {
  if (!ifNode->outputs().empty())
    return false;
  const Block *a = ifNode->blocks()[0], *b = ifNode->blocks()[1];
  return (onlyRaises(a) && b->nodes().begin() == b->nodes().end()) ||
         (onlyRaises(b) && a->nodes().begin() == a->nodes().end());
}

/// Ops whose result has their first input's shape and dtype.
static bool isTransparent(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op)
    return false;
  if (op->has(kCopiesInput))
    return true;
  // masked_fill broadcasts self and mask: only a mask of self's shape keeps
  // it (a mask computed elementwise from self, say).
  return op->has(kFillValueTakesTensor) &&
         provablySameShape(node->input(1), node->input(0)) &&
         (node->input(2)->type()->kind() != c10::TypeKind::TensorType ||
          provablyZeroDim(node->input(2)));
}

/// Ops whose result dtype and shape follow from their operands in the same
/// way: add/sub/mul share promotion rules, comparisons all give bool.
static std::string familyOf(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (op && op->has(kArithmetic))
    return "arithmetic";
  if (op && op->has(kComparison))
    return "comparison";
  return node->kind().toQualString();
}

static bool sameConstant(const Value *x, const Value *y) {
  auto cx = torch::jit::toIValue(x), cy = torch::jit::toIValue(y);
  if (!cx || !cy)
    return false;
  std::ostringstream sx, sy;
  sx << *cx;
  sy << *cy;
  return sx.str() == sy.str();
}

Value *selectBranch(Graph &graph, Value *c, Value *a, Value *b,
                    const Node *anchor) {
  if (congruent(a, b))
    return emit(graph, "aten::where", {c, a, b}, anchor);
  auto same = [&](const char *op, const char *cmp) {
    return emit(graph, cmp,
                {emit(graph, op, {a}, anchor), emit(graph, op, {b}, anchor)},
                anchor);
  };
  // What is not proven is checked: shapes (unless one shape-preserving
  // chain leads from one value to both), dtypes and devices.
  Value *shapes =
      provablySameShape(a, b) ? nullptr : same("aten::size", "aten::eq");
  Value *agree = same("prim::dtype", "aten::eq");
  if (shapes)
    agree = emit(graph, "aten::__and__", {shapes, agree}, anchor);
  agree = emit(graph, "aten::__and__",
               {agree, same("prim::device", "aten::eq")}, anchor);
  Value *picked = emitIf(
      graph, agree, anchor,
      [&] { return emit(graph, "aten::where", {c, a, b}, anchor); },
      [&] {
        return emitIf(graph, emit(graph, "aten::Bool", {c}, anchor), anchor,
                      [&] { return a; }, [&] { return b; });
      });
  picked->node()->i_(guardAttr(), 1);
  return picked;
}

/// A unary elementwise op whose result keeps its operand's dtype (relu,
/// neg): the result has the operand's shape, dtype and device.
static bool keepsOperandType(const Node *node) {
  const OpInfo *info = opInfo(node);
  return info && info->has(kElementwise) && node->inputs().size() == 1 &&
         node->outputs().size() == 1 &&
         (info->dtype == DTypeRule::KeepsInput ||
          info->dtype == DTypeRule::Promotes) &&
         node->input(0)->type()->kind() == c10::TypeKind::TensorType;
}

bool congruent(const Value *a, const Value *b) {
  if (a == b)
    return true;
  const Node *na = a->node(), *nb = b->node();
  if (keepsOperandType(na) && keepsOperandType(nb) &&
      congruent(na->input(0), nb->input(0)))
    return true;
  if (isTransparent(na) && congruent(na->input(0), b))
    return true;
  if (isTransparent(nb) && congruent(a, nb->input(0)))
    return true;
  // An if's result is one of its branches' results.
  for (auto [x, y] : {std::make_pair(a, b), std::make_pair(b, a)}) {
    const Node *n = x->node();
    if (n->kind() != c10::prim::If)
      continue;
    size_t i = x->offset();
    return congruent(n->blocks()[0]->outputs()[i], y) &&
           congruent(n->blocks()[1]->outputs()[i], y);
  }
  // Only ops whose result shape and dtype follow from their operands and
  // constant arguments: never one whose shape depends on data.
  OpRole role = opRole(na);
  if (role != OpRole::LeadingPreserving && role != OpRole::Reduction)
    return false;
  if (familyOf(na) != familyOf(nb) || na->outputs().size() != 1 ||
      nb->outputs().size() != 1 || !na->blocks().empty() ||
      na->isNondeterministic())
    return false;
  bool arithmetic = familyOf(na) == "arithmetic";
  size_t n = arithmetic ? 2 : na->inputs().size();
  if (na->inputs().size() < n || nb->inputs().size() < n ||
      (!arithmetic && na->inputs().size() != nb->inputs().size()))
    return false;
  for (size_t i = 0; i < n; ++i) {
    const Value *x = na->input(i), *y = nb->input(i);
    bool tensor = x->type()->kind() == c10::TypeKind::TensorType;
    if (tensor ? !congruent(x, y) : *x->type() != *y->type())
      return false;
    // Arguments that decide sizes or dtypes must agree exactly.
    if (!tensor && x != y && inputAffectsShape(na, i) && !sameConstant(x, y))
      return false;
  }
  return true;
}

std::vector<std::pair<Value *, Value *>> hoistBranches(Node *ifNode) {
  for (Block *b : ifNode->blocks()) {
    std::vector<Node *> nodes(b->nodes().begin(), b->nodes().end());
    for (Node *n : nodes)
      n->moveBefore(ifNode);
  }
  std::vector<std::pair<Value *, Value *>> outs;
  for (size_t i = 0; i < ifNode->outputs().size(); ++i)
    outs.emplace_back(ifNode->blocks()[0]->outputs()[i],
                      ifNode->blocks()[1]->outputs()[i]);
  return outs;
}

std::string unconvertibleReason(const Node *ifNode,
                                const Aliases &aliases) {
  std::string why = impureBranchReason(ifNode);
  if (!why.empty())
    return why;
  for (const Value *out : ifNode->outputs())
    if (out->type()->kind() == c10::TypeKind::TensorType &&
        aliases.hasWriters(out))
      // where() makes a new tensor: a write to the result would no longer
      // reach the branch value it aliased.
      return "a result of the if is written to in place";
  return "";
}

/// Whether \p node is inside a guard's branches (guardAttr()), either of
/// them: its fallback does what the original if did on purpose and runs
/// only when the guard fails.
static bool inGuard(const Node *node) {
  for (const Node *owner = node->owningBlock()->owningNode(); owner;
       owner = owner->owningBlock()->owningNode())
    if (owner->hasAttribute(guardAttr()))
      return true;
  return false;
}

bool ifConvert(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  // Innermost first: a nested If is converted before the one around it.
  // Only Ifs are kept: conversions destroy conditions, never Ifs.
  std::vector<Node *> ifs = ctx.facts.analysis(graph).nodesWhere(
      [](c10::Symbol op) { return op == c10::prim::If; });
  if (ifs.empty())
    return false;
  const Aliases &aliases = ctx.facts.aliases(graph);
  for (auto it = ifs.rbegin(); it != ifs.rend(); ++it) {
    Node *node = *it;
    Node *cond = node->input(0)->node();
    if (cond->kind() != c10::aten::Bool ||
        cond->input(0)->type()->kind() != c10::TypeKind::TensorType ||
        inGuard(node))
      continue;
    if (isDataAssert(node)) {
      if (!ctx.options.dropDataAsserts) {
        ctx.declined(node, kRule,
                     "a data assert; --drop-data-asserts drops it");
        continue;
      }
      ctx.rewrote(node, kRule);
      node->destroy();
      eraseIfDead(cond, ctx, kRule);
      changed = true;
      continue;
    }
    std::string why = unconvertibleReason(node, aliases);
    for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i)
      if (node->output(i)->type()->kind() != c10::TypeKind::TensorType)
        why = "an output is a host value (lift-scalars converts those)";
    if (!why.empty()) {
      ctx.declined(node, kRule, why);
      continue;
    }
    torch::jit::WithInsertPoint guard(node);
    Value *t = emit(*graph, "aten::reshape",
                    {cond->input(0), std::vector<int64_t>{}}, node);
    Value *c = emit(*graph, "aten::ne", {t, 0}, node);
    auto outs = hoistBranches(node);
    for (size_t i = 0; i < outs.size(); ++i)
      node->output(i)->replaceAllUsesWith(
          selectBranch(*graph, c, outs[i].first, outs[i].second, node));
    ctx.rewrote(node, kRule);
    node->destroy();
    eraseIfDead(cond, ctx, kRule);
    changed = true;
  }
  return changed;
}

} // namespace staticify
