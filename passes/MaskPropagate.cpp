//===- MaskPropagate.cpp - f(x[m], y[m]) -> f(x, y)[m] --------------------===//

#include "passes/MaskPropagate.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <unordered_map>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Elementwise ops that never raise on values: safe to run on unselected
/// elements too.
bool isTotalElementwise(const Node *node) {
  if (opRole(node) != OpRole::LeadingPreserving || !neverRaisesOnValues(node))
    return false;
  static const char *const excluded[] = {"aten::slice",     "aten::zeros_like",
                                         "aten::ones_like", "aten::empty_like",
                                         "aten::full_like", "aten::rand_like",
                                         "aten::randn_like"};
  const std::string op = node->kind().toQualString();
  for (const char *e : excluded)
    if (op == e)
      return false;
  return node->outputs().size() == 1;
}

Value *emitSelect(Graph &graph, Value *base, Value *mask, const Node *anchor) {
  Value *list =
      graph.insertNode(graph.createList(c10::OptionalType::ofTensor(), {mask}))
          ->output();
  return emit(graph, "aten::index", {base, list}, anchor);
}

constexpr const char *kRule = "mask-propagate";

/// Whether \p node reads a selection and is none of the consumers the
/// other passes handle (reductions, size reads, stores, selections).
bool consumesSelection(Node *node, const AnalysisResult &analysis) {
  OpRole role = opRole(node);
  if (role == OpRole::Reduction || role == OpRole::ShapeRead ||
      role == OpRole::MetadataRead || role == OpRole::Plumbing ||
      role == OpRole::DynamicShapeRoot || node->kind() == c10::prim::Return)
    return false;
  for (Value *in : node->inputs())
    if (matchSelection(in, analysis))
      return true;
  return false;
}

/// f(x[m], y[m], s) -> f(x, y, s)[m]; returns whether it rewrote.
bool propagateThrough(Graph &graph, Node *node, const AnalysisResult &analysis,
                      const torch::jit::AliasDb &aliases, PassContext &ctx) {
  Value *mask = nullptr;
  Value *firstBase = nullptr;
  std::vector<std::pair<size_t, Selection>> selected;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    Value *in = node->input(i);
    if (in->type()->kind() != c10::TypeKind::TensorType)
      continue;
    auto sel = matchSelection(in, analysis);
    if (!sel) {
      if (provablyZeroDim(in))
        continue;
      return false; // an operand that is neither: not this pattern
    }
    if (sel->broadcasts || (mask && sel->mask != mask))
      return false;
    mask = sel->mask;
    if (!firstBase)
      firstBase = sel->base;
    if (!provablySameRank(firstBase, sel->base)) {
      ctx.declined(node, kRule,
                   "the selected tensors are not provably of "
                   "the same rank");
      return false;
    }
    selected.emplace_back(i, *sel);
  }
  if (selected.empty())
    return false;
  for (auto &[index, sel] : selected)
    if (!isUnwritten(sel, aliases)) {
      ctx.declined(node, kRule,
                   "a selected tensor, its mask or the selection "
                   "is written to in place");
      return false;
    }
  torch::jit::WithInsertPoint guard(node);
  Node *full =
      graph.insertNode(graph.createClone(node, [](Value *v) { return v; }));
  for (auto &[index, sel] : selected)
    full->replaceInput(index, sel.base);
  full->output()->setType(c10::TensorType::get());
  Value *result = emitSelect(graph, full->output(), mask, node);
  node->output()->replaceAllUsesWith(result);
  ctx.rewrote(node, kRule);
  node->destroy();
  for (auto &[index, sel] : selected)
    eraseIfDead(sel.node, ctx, kRule);
  return true;
}

/// x[m][g[m]] -> x[m' & g].
bool combineNested(Graph &graph, Node *node, const AnalysisResult &analysis,
                   const torch::jit::AliasDb &aliases, PassContext &ctx) {
  auto outer = matchSelection(node->output(), analysis);
  if (!outer || outer->broadcasts)
    return false;
  auto inner = matchSelection(outer->base, analysis);
  auto maskSel = matchSelection(outer->mask, analysis);
  if (!inner || !maskSel || inner->broadcasts || maskSel->broadcasts ||
      inner->mask != maskSel->mask || maskSel->isByteMask ||
      !isUnwritten(*outer, aliases) || !isUnwritten(*inner, aliases) ||
      !isUnwritten(*maskSel, aliases))
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *widened = emitMaskLike(graph, *inner, maskSel->base, node);
  Value *both = emit(graph, "aten::__and__", {widened, maskSel->base}, node);
  Value *result = emitSelect(graph, inner->base, both, node);
  node->output()->replaceAllUsesWith(result);
  ctx.rewrote(node, kRule);
  node->destroy();
  eraseIfDead(inner->node, ctx, kRule);
  eraseIfDead(maskSel->node, ctx, kRule);
  return true;
}

} // namespace

bool maskPropagate(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  // Each rewrite creates new selections that later nodes may combine with;
  // re-analyse (for mask dtypes) and go again until nothing moves.
  for (bool again = true; again;) {
    again = false;
    AnalysisResult analysis = analyzeGraph(*graph);
    torch::jit::AliasDb aliases(graph);
    for (Node *node : collectNodes(graph->block())) {
      if (node->kind() == c10::aten::index &&
          combineNested(*graph, node, analysis, aliases, ctx)) {
        again = changed = true;
        break;
      }
      if (isTotalElementwise(node)) {
        if (propagateThrough(*graph, node, analysis, aliases, ctx)) {
          again = changed = true;
          break;
        }
      } else if (consumesSelection(node, analysis)) {
        ctx.declined(node, kRule,
                     "'" + std::string(node->kind().toQualString()) +
                         "' is not an elementwise op that is safe on "
                         "unselected elements");
      }
    }
  }
  return changed;
}

//===----------------------------------------------------------------------===//
// index-to-mask
//===----------------------------------------------------------------------===//

namespace {

constexpr const char *kIndexRule = "index-to-mask";

/// `where(m)[0]`: the mask m, if \p v is that.
Value *rowIndicesOf(const Value *v) {
  const Node *get = v->node();
  if (get->kind() != c10::aten::__getitem__ || constantInt(get->input(1)) != 0)
    return nullptr;
  const Node *where = get->input(0)->node();
  if (where->kind() != c10::aten::where || where->inputs().size() != 1)
    return nullptr;
  return where->input(0);
}

struct Compacted {
  Value *isVector; // bool: m.dim() == 1, known on the host
  Value *rows;     // int64 [N]: row indices of the true elements, then 0s
  Value *valid;    // bool [N]: the selected slots
};

/// The selected slots of m: for a 1-D m its own true positions (then
/// x[where(m)[0]] is x aligned to m's length, selected by m: one pass);
/// otherwise the row indices of m's true elements compacted into m.numel()
/// slots. The branch is on m's rank, known on the host: no sync, and both
/// branches are static.
Compacted emitCompaction(Graph &graph, Value *mask, const Node *anchor) {
  // 0-d masks too: where(m)[0] of a 0-d m selects row 0 when m holds.
  Value *isVector = emit(graph, "aten::le",
                         {emit(graph, "aten::dim", {mask}, anchor), 1}, anchor);
  // where(m) selects m's nonzero elements, whatever m's dtype.
  Value *flat = emit(
      graph, "aten::ne",
      {emit(graph, "aten::reshape", {mask, std::vector<int64_t>{-1}}, anchor),
       0},
      anchor);
  Value *n = emit(graph, "aten::numel", {flat}, anchor);
  Value *longType =
      graph.insertConstant(static_cast<int64_t>(c10::ScalarType::Long));
  Value *device = emit(graph, "prim::device", {mask}, anchor);
  Value *positions = emit(graph, "aten::arange", {n}, anchor,
                          {torch::jit::NamedValue("dtype", longType),
                           torch::jit::NamedValue("device", device)});
  Value *rows = emitIf(
      graph, isVector, anchor, [&] { return positions; },
      [&] {
        // Row of flat position p: p // (numel / size(0)), guarded against
        // 0-size.
        Value *size0 = emit(graph, "aten::size", {mask, 0}, anchor);
        Value *stride = emit(
            graph, "prim::max",
            {emit(graph, "aten::floordiv",
                  {n, emit(graph, "prim::max", {size0, 1}, anchor)}, anchor),
             1},
            anchor);
        Value *rowOf = emit(
            graph, "aten::div", {positions, stride}, anchor,
            {torch::jit::NamedValue("rounding_mode", std::string("floor"))});
        Value *rank = emit(graph, "aten::cumsum", {flat, 0}, anchor,
                           {torch::jit::NamedValue("dtype", longType)});
        Value *slot = emit(
            graph, "aten::where",
            {flat, emit(graph, "aten::sub", {rank, 1}, anchor), n}, anchor);
        Value *np1 = emit(graph, "aten::add", {n, 1}, anchor);
        Value *sizes =
            graph.insertNode(graph.createList(c10::IntType::get(), {np1}))
                ->output();
        Value *zeros = emit(graph, "aten::zeros", {sizes}, anchor,
                            {torch::jit::NamedValue("dtype", longType),
                             torch::jit::NamedValue("device", device)});
        Value *scattered =
            emit(graph, "aten::scatter", {zeros, 0, slot, rowOf}, anchor);
        return emit(graph, "aten::slice", {scattered, 0, 0, n}, anchor);
      });
  Value *valid = emitIf(
      graph, isVector, anchor, [&] { return flat; },
      [&] {
        Value *count = emit(graph, "aten::sum", {flat}, anchor);
        return emit(graph, "aten::lt", {positions, count}, anchor);
      });
  return {isVector, rows, valid};
}

/// x's first rows aligned to \p n slots: x[:n], padded with zero rows when
/// x is shorter (those rows are never validly selected: the original would
/// raise).
Value *emitAligned(Graph &graph, Value *x, Value *n, const Node *anchor) {
  Value *size0 = emit(graph, "aten::size", {x, 0}, anchor);
  Value *longEnough = emit(graph, "aten::ge", {size0, n}, anchor);
  return emitIf(
      graph, longEnough, anchor,
      [&] {
        return emit(graph, "aten::slice", {x, 0, 0, n}, anchor);
      },
      [&] {
        Value *rest = emit(graph, "aten::slice",
                           {emit(graph, "aten::size", {x}, anchor), 1}, anchor);
        Value *missing =
            graph
                .insertNode(graph.createList(
                    c10::IntType::get(),
                    {emit(graph, "aten::sub", {n, size0}, anchor)}))
                ->output();
        Value *pad = emit(
            graph, "aten::new_zeros",
            {x, emit(graph, "aten::add", {missing, rest}, anchor)}, anchor);
        Value *both =
            graph
                .insertNode(graph.createList(c10::TensorType::get(), {x, pad}))
                ->output();
        return emit(graph, "aten::cat", {both, 0}, anchor);
      });
}

/// x itself, or a one-row stand-in when x has no rows, so that the padding
/// slots (index 0) can always be gathered. The branch is on a host-static
/// size: no sync.
Value *emitGatherable(Graph &graph, Value *x, const Node *anchor) {
  Value *size0 = emit(graph, "aten::size", {x, 0}, anchor);
  Value *hasRows = emit(graph, "aten::gt", {size0, 0}, anchor);
  return emitIf(
      graph, hasRows, anchor, [&] { return x; },
      [&] {
        Value *rest = emit(graph, "aten::slice",
                           {emit(graph, "aten::size", {x}, anchor), 1}, anchor);
        Value *one = graph
                         .insertNode(graph.createList(
                             c10::IntType::get(), {graph.insertConstant(1)}))
                         ->output();
        Value *shape = emit(graph, "aten::add", {one, rest}, anchor);
        return emit(graph, "aten::new_zeros", {x, shape}, anchor);
      });
}

} // namespace

bool indexToMask(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  torch::jit::AliasDb aliases(graph);
  std::unordered_map<Value *, Compacted> compacted; // by the mask
  for (Node *node : collectNodes(graph->block())) {
    Value *index = nullptr;
    const std::string op = node->kind().toQualString();
    if ((op == "aten::gather" || op == "aten::index_select") &&
        constantInt(node->input(1)) == 0)
      index = node->input(2);
    else if (op == "aten::index" &&
             node->input(1)->node()->kind() == c10::prim::ListConstruct &&
             node->input(1)->node()->inputs().size() == 1)
      index = node->input(1)->node()->input(0);
    if (!index)
      continue;
    Value *mask = rowIndicesOf(index);
    if (!mask)
      continue;
    if (aliases.hasWriters(mask)) {
      // The compaction is computed where the mask is defined.
      ctx.declined(node, kIndexRule, "the mask is written to in place");
      continue;
    }
    auto it = compacted.find(mask);
    if (it == compacted.end()) {
      // Emitted once per mask, right where the mask is defined, so that it
      // dominates every user (several `where(m)[0]` reads share it).
      Node *def = mask->node();
      Node *at = def->kind() == c10::prim::Param
                     ? def->owningBlock()->nodes().front() // a block input
                     : def->next();
      torch::jit::WithInsertPoint guard(at);
      it = compacted.emplace(mask, emitCompaction(*graph, mask, node)).first;
    }
    torch::jit::WithInsertPoint guard(node);
    const Compacted &c = it->second;
    Value *rows = emitIf(
        *graph, c.isVector, node,
        [&] {
          Value *n = emit(*graph, "aten::numel", {mask}, node);
          Value *aligned = emitAligned(*graph, node->input(0), n, node);
          if (op != "aten::gather")
            return aligned;
          // gather(x, 0, i) needs x.dim() == i.dim() == 1: say so, for the
          // rank proofs of mask-propagate (a no-op view where it succeeds).
          return emit(*graph, "aten::reshape",
                      {aligned, std::vector<int64_t>{-1}}, node);
        },
        [&] {
          Value *source = emitGatherable(*graph, node->input(0), node);
          // Every input first, then the node that reads them.
          Value *list = op == "aten::index"
                            ? graph
                                  ->insertNode(graph->createList(
                                      c10::OptionalType::ofTensor(), {c.rows}))
                                  ->output()
                            : nullptr;
          Node *padded = graph->insertNode(
              graph->createClone(node, [](Value *v) { return v; }));
          padded->replaceInput(0, source);
          if (list)
            padded->replaceInput(1, list);
          else
            padded->replaceInput(2, c.rows);
          padded->output()->setType(c10::TensorType::get());
          return padded->output();
        });
    Value *result = emitSelect(*graph, rows, c.valid, node);
    node->output()->replaceAllUsesWith(result);
    ctx.rewrote(node, kIndexRule);
    node->destroy();
    changed = true;
  }
  return changed;
}

} // namespace staticify
