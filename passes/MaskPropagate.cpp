//===- MaskPropagate.cpp - f(x[m], y[m]) -> f(x, y)[m] --------------------===//

#include "passes/MaskPropagate.h"

#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <algorithm>
#include <unordered_map>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Elementwise ops that never raise on values: safe to run on unselected
/// elements too.
bool isTotalElementwise(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && opElementwise(node) && opRole(node) != OpRole::DynamicShapeRoot &&
         neverRaisesOnValues(node) && node->outputs().size() == 1;
}

constexpr const char *kRule = "mask-propagate";

/// Whether \p use, placed after \p sel, reads the tensor, mask and result
/// of the selection as the selection saw them: nothing writes to them at
/// all, or nothing between the two in their block (`x[m] = f(x[m])` writes
/// x after f read the selection, torchaudio's dcshift and phaser).
bool unwrittenUntil(const Selection &sel, Node *use, const Aliases &aliases) {
  if (isUnwritten(sel, aliases))
    return true;
  if (sel.node->owningBlock() != use->owningBlock() || !sel.node->isBefore(use))
    return false;
  const torch::jit::ValueSet values{sel.base, sel.mask, sel.node->output()};
  for (Node *n = sel.node->next(); n != use; n = n->next())
    if (aliases.writesToAlias(n, values))
      return false;
  return true;
}

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

using Selected = std::vector<std::pair<size_t, Selection>>;

/// Whether every selection \p node reads at an operand of \p selected is
/// read as it was made (unwrittenUntil); otherwise the report says why.
bool readAsSelected(const Selected &selected, Node *node,
                    const Aliases &aliases, PassContext &ctx) {
  for (const auto &[index, sel] : selected)
    if (!unwrittenUntil(sel, node, aliases)) {
      ctx.declined(node, kRule,
                   "a selected tensor, its mask or the selection "
                   "is written to in place before it is read");
      return false;
    }
  return true;
}

/// Replaces \p node by itself on the selected tensors whole, then selected
/// by \p mask: `f(x, y, s)[m]` for `f(x[m], y[m], s)`.
void selectAfter(Graph &graph, Node *node, const Selected &selected,
                 Value *mask, PassContext &ctx) {
  torch::jit::WithInsertPoint guard(node);
  Node *full =
      graph.insertNode(graph.createClone(node, [](Value *v) { return v; }));
  for (const auto &[index, sel] : selected)
    full->replaceInput(index, sel.base);
  full->output()->setType(c10::TensorType::get());
  node->output()->replaceAllUsesWith(
      emitSelect(graph, full->output(), mask, node));
  ctx.rewrote(node, kRule);
  node->destroy();
  // `s * s` selects once for two operands: erase each selection once.
  std::vector<Node *> selections;
  for (const auto &[index, sel] : selected)
    if (std::find(selections.begin(), selections.end(), sel.node) ==
        selections.end())
      selections.push_back(sel.node);
  for (Node *selection : selections)
    eraseIfDead(selection, ctx, kRule);
}

/// f(x[m], y[m], s) -> f(x, y, s)[m]; returns whether it rewrote.
bool propagateThrough(Graph &graph, Node *node, const AnalysisResult &analysis,
                      const Aliases &aliases, PassContext &ctx) {
  Value *mask = nullptr;
  Value *firstBase = nullptr;
  Selected selected;
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
    std::optional<int64_t> rank = knownRank(firstBase, &analysis);
    if (!provablySameRank(firstBase, sel->base) &&
        !(rank && rank == knownRank(sel->base, &analysis))) {
      ctx.declined(node, kRule,
                   "the selected tensors are not provably of "
                   "the same rank");
      return false;
    }
    selected.emplace_back(i, *sel);
  }
  if (selected.empty() || !readAsSelected(selected, node, aliases, ctx))
    return false;
  selectAfter(graph, node, selected, mask, ctx);
  return true;
}

/// Whether op(x[m], ...) is op(x, ...)[m] for \p node, an op that works row
/// by row on the rows of its first operand x[m] (`[n, rest...]` of x of
/// rank \p xRank and a mask of rank \p k) and never raises on values:
/// - batched (OpInfo::sampleRank: linear, convolutions, pools) with the
///   other operands shared by every row; of a 1-D mask (x and x[m] have one
///   rank) at sampleRank or more; of a k-D mask only where every dim before
///   the last is a batch dim (linear) and the last is x's own;
/// - per-row (OpInfo::rowDims: softmax, cumsum, squeeze) of constant dims
///   within rest: counted from the end and at most rank(rest) of them, or,
///   of a 1-D mask, any dim but 0. No other tensor operand (one would be
///   rows too).
bool worksOnRows(const Node *node, int64_t xRank, int64_t k) {
  const OpInfo *op = opInfo(node);
  if (!op || node->outputs().size() != 1 || xRank <= k ||
      !(op->has(kNeverRaises) || op->has(kRaisesOnlyOnDims)))
    return false;
  if (op->sampleRank > 0)
    return k == 1 ? xRank >= op->sampleRank
                  : op->has(kBatchesLeadingDims) && xRank - k + 1 >= op->sampleRank;
  if (op->rowDims.empty())
    return false;
  for (size_t i = 1; i < node->inputs().size(); ++i)
    if (carriesTensor(node->input(i)->type()))
      return false;
  for (const char *name : op->rowDims) {
    const Value *arg = namedInput(node, name);
    std::optional<std::vector<int64_t>> dims =
        arg ? constantDims(arg) : std::nullopt;
    if (!dims || dims->empty())
      return false;
    for (int64_t d : *dims) {
      bool fromEnd = d < 0 && -d <= xRank - k;
      bool sameDim = k == 1 && (d >= 1 ? d < xRank : d < 0 && d + xRank >= 1);
      if (!fromEnd && !sameDim)
        return false;
    }
  }
  return true;
}

/// op(x[m], ...) -> op(x, ...)[m] for an op that works on rows
/// (worksOnRows): TensorF's `sigma[m] = mlp(x[m])`, whose store then takes
/// the selection by the same mask (mask-store). The op then runs on every
/// row, the unselected ones too.
bool propagateThroughRows(Graph &graph, Node *node,
                          const AnalysisResult &analysis,
                          const Aliases &aliases, PassContext &ctx) {
  if (node->inputs().empty() || !isTensor(node->input(0)))
    return false;
  auto sel = matchSelection(node->input(0), analysis);
  if (!sel || sel->broadcasts)
    return false;
  for (size_t i = 1; i < node->inputs().size(); ++i)
    if (isTensor(node->input(i)) && matchSelection(node->input(i), analysis))
      return false;
  std::optional<int64_t> xRank = knownRank(sel->base, &analysis);
  std::optional<int64_t> k = knownRank(sel->mask, &analysis);
  if (!xRank || !k || !worksOnRows(node, *xRank, *k))
    return false;
  Selected selected{{0, *sel}};
  if (!readAsSelected(selected, node, aliases, ctx))
    return false;
  selectAfter(graph, node, selected, sel->mask, ctx);
  return true;
}

/// x[m][g[m]] -> x[m' & g].
bool combineNested(Graph &graph, Node *node, const AnalysisResult &analysis,
                   const Aliases &aliases, PassContext &ctx) {
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

/// x[i[m]] -> x[i']`[m]`, i' = i.masked_fill(~m, 0): gathering by selected
/// int64 indices is gathering by all of them, then selecting, as a gather
/// is elementwise in its index (row r of x[i] is x[i[r]]); the unselected
/// indices, which the original never read, become 0 so that they cannot
/// raise. Of an x with no rows (where index 0 is out of range too) a
/// one-row stand-in of zeros is gathered instead, a choice on the host: the
/// same empty result where nothing is selected, and where something is,
/// the original raises. The selection then meets the other selections by m
/// (`0.5 * tracks[m] + 0.5 * dets[j[m]]`, a tracker's update).
bool gatherBySelected(Graph &graph, Node *node, const AnalysisResult &analysis,
                      const Aliases &aliases, PassContext &ctx) {
  if (node->inputs().size() != 2 ||
      node->input(1)->node()->kind() != c10::prim::ListConstruct ||
      node->input(1)->node()->inputs().size() != 1)
    return false;
  Value *selected = node->input(1)->node()->input(0);
  auto sel = matchSelection(selected, analysis);
  if (!sel || sel->broadcasts || !analysis.knows(sel->base) ||
      analysis.info(sel->base).dtype != DTypeKind::Long ||
      !masksEveryElement(sel->mask, sel->base))
    return false;
  if (!isUnwritten(*sel, aliases) || aliases.hasWriters(node->input(0))) {
    ctx.declined(node, kRule,
                 "the gathered tensor, the indices or their mask is written "
                 "to in place");
    return false;
  }
  Value *x = node->input(0), *i = sel->base;
  torch::jit::WithInsertPoint guard(node);
  Value *mask = emit(graph, "aten::to",
                     {sel->mask, emit(graph, "prim::device", {i}, node)}, node);
  Value *safe = emit(graph, "aten::masked_fill",
                     {i, emit(graph, "aten::logical_not", {mask}, node), 0},
                     node);
  auto gatherBy = [&](Value *from, Value *index) {
    Value *list = graph
                      .insertNode(graph.createList(
                          c10::OptionalType::ofTensor(), {index}))
                      ->output();
    return emit(graph, "aten::index", {from, list}, node);
  };
  Value *hasRows = emit(
      graph, "aten::gt", {emit(graph, "aten::size", {x, 0}, node), 0}, node);
  Value *all = emitIf(
      graph, hasRows, node, [&] { return gatherBy(x, safe); },
      [&] {
        return gatherBy(emitOneAlong(graph, x, 0, node),
                        emit(graph, "aten::zeros_like", {i}, node));
      });
  // Selected by the mask itself (x[m] takes one on another device): the
  // selections by m then meet.
  Value *result = emitSelect(graph, all, sel->mask, node);
  node->output()->replaceAllUsesWith(result);
  ctx.rewrote(node, kRule);
  node->destroy();
  eraseIfDead(sel->node, ctx, kRule);
  return true;
}

} // namespace

bool maskPropagate(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  // Each rewrite creates new selections that later nodes may combine with;
  // re-analyse (for mask dtypes) and go again until nothing moves, for at
  // most kMaxRounds rewrites: each round analyses the whole graph, and a
  // chain of thousands of ops on one selection would cost rounds times
  // nodes. What is left consumes a selection, as before the pass (bound's).
  constexpr int kMaxRounds = 64;
  int rounds = 0;
  for (bool again = true; again && rounds++ < kMaxRounds;) {
    again = false;
    // A rewrite below changed the graph: its facts are recomputed.
    if (changed)
      ctx.facts.invalidate();
    const AnalysisResult &analysis = ctx.facts.analysis(graph);
    // Every rewrite here starts from a selection (x[m], masked_select).
    if (analysis.nodesWhere([](c10::Symbol op) {
          return op == c10::aten::index || op == c10::aten::masked_select;
        }).empty())
      break;
    const Aliases &aliases = ctx.facts.aliases(graph);
    for (Node *node : analysis.nodes) {
      if (node->kind() == c10::aten::index &&
          (combineNested(*graph, node, analysis, aliases, ctx) ||
           gatherBySelected(*graph, node, analysis, aliases, ctx))) {
        again = changed = true;
        break;
      }
      if (isTotalElementwise(node)) {
        if (propagateThrough(*graph, node, analysis, aliases, ctx)) {
          again = changed = true;
          break;
        }
      } else if (propagateThroughRows(*graph, node, analysis, aliases, ctx)) {
        again = changed = true;
        break;
      } else if (consumesSelection(node, analysis)) {
        ctx.declined(node, kRule,
                     "'" + std::string(node->kind().toQualString()) +
                         "' is not an elementwise op that is safe on "
                         "unselected elements, nor one that works row by "
                         "row on the selected rows of a tensor of known rank");
      }
    }
  }
  return changed;
}

} // namespace staticify
