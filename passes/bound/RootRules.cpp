//===- RootRules.cpp - Data-dependent shapes from static inputs -----------===//
//
//   nonzero/argwhere                 -> bounded (cumsum + scatter)
//   where(c), nonzero_numpy(c)       -> a list whose elements are bounded
//   (of a bounded c too: its padding rows count as false)
//   x[mask], masked_select           -> bounded gather
//   _unique2, unique_consecutive     -> sort + adjacent diff
//   unique_consecutive(x, dim=0)     -> adjacent diff of rows
//   (of a bounded value too: its live elements' groups)
//   unique(dim=0)                    -> sorted rows + adjacent diff
//   int(m.sum()), int(count_nonzero(x)),
//   int(t) with --bound              -> lifted, with a range
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/LiftScalars.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

#include <algorithm>

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// What \p t counts the elements of, when it is a count in [0, x.numel()]:
/// `m.sum()` over all of a bool m, or `count_nonzero(x)` over all of any x
/// (the masked form of a count over selected rows counts the padded rows
/// with the padding zeroed: `count_nonzero(where(keep, rows, 0))`).
Value *countedTensor(Value *t, RuleContext &rc) {
  Node *def = t->node();
  // sum in int64 (the default for bool; another dtype could wrap or
  // round), and a count nothing writes to afterwards.
  bool sum = is(def, "aten::sum") && def->inputs().size() == 2 &&
             (def->input(1)->mustBeNone() ||
              constantInt(def->input(1)) ==
                  static_cast<int64_t>(c10::ScalarType::Long));
  bool nonzeros = is(def, "aten::count_nonzero") &&
                  def->inputs().size() == 2 && def->input(1)->mustBeNone();
  if (!(sum || nonzeros) || rc.aliases.hasWriters(t))
    return nullptr;
  if (nonzeros)
    return def->input(0);
  // Through the views masked-reduce puts on a mask (reshape, expand_as):
  // they keep its dtype.
  Value *source = def->input(0);
  while (is(source->node(), "aten::reshape") ||
         is(source->node(), "aten::view") ||
         is(source->node(), "aten::expand_as") ||
         is(source->node(), "aten::expand"))
    source = source->node()->input(0);
  if (rc.analysis.info(source).dtype != DTypeKind::Bool)
    return nullptr;
  return def->input(0);
}

/// What where(c) / nonzero(c) read: c itself, or for a bounded c its padded
/// rows with the padding false. Its live rows are the original's rows, so
/// the coordinates of their elements are the original's; null when c has
/// another representation.
Value *conditionOf(Node *node, RuleContext &rc) {
  Value *c = node->input(0);
  Rep *r = rc.rep(c);
  if (!r)
    return c;
  if (r->kind != Rep::Kind::Bounded)
    return nullptr;
  return insertForm(rc.graph, "live_nonzero", {r->value, r->count}, node)[0];
}

RuleResult whereList(Node *node, RuleContext &rc) {
  if (is(node, "aten::where") && node->inputs().size() != 1)
    return RuleResult::notApplicable(); // where(c, a, b): elementwise
  Value *c = conditionOf(node, rc);
  if (!c)
    return RuleResult::declined();
  Rep r(Rep::Kind::WhereList);
  r.value = c;
  if (Rep *bounded = rc.bounded(node->input(0)))
    r.indexesBelow = bounded->count;
  rc.setRep(node->output(), r);
  return RuleResult::applied();
}

RuleResult nonzero(Node *node, RuleContext &rc) {
  if (node->inputs().size() != 1)
    return RuleResult::notApplicable();
  Value *c = conditionOf(node, rc);
  if (!c)
    return RuleResult::declined();
  auto outs = insertForm(rc.graph, "nonzero", {c}, node);
  rc.setBounded(node->output(), outs[0], outs[1], true);
  return RuleResult::applied();
}

RuleResult selection(Node *node, RuleContext &rc) {
  auto sel = matchSelection(node->output(), rc.analysis);
  if (!sel)
    return RuleResult::notApplicable();
  auto outs =
      sel->broadcasts
          ? insertForm(rc.graph, "masked_select", {sel->base, sel->mask}, node)
          : insertForm(rc.graph,
                       masksLeadingDims(sel->mask, sel->base)
                           ? "select_rows"
                           : "select_checked_rows",
                       {sel->base, sel->mask}, node);
  // Both forms compact the mask's true positions in the same order: a
  // second selection by the same unwritten mask where the first's count is
  // visible (its block, or one nested in it: a version specialize-shapes
  // made) has its valid rows aligned with the first's, and takes the
  // first's count. Only for bases of one rank: x[m] of (n, 3) and y[m] of
  // (n,) broadcast by their trailing dimensions, so their padded rows would
  // not line up (and the original's result would depend on the count). Of
  // bases of other ranks (lprobs[m] of (n, V), target[m] of (n,)) the counts
  // are recorded equal: rules that check ranks themselves may combine them.
  Value *count = outs[1];
  // masked_select counts the broadcast mask's true elements: the mask's
  // own count only where the base has the mask's shape (`x.masked_select(
  // x > 0)`); masked_select(x of (2, n), m of (n,)) selects each twice.
  bool masksCount = !sel->broadcasts || masksEveryElement(sel->mask, sel->base);
  if (masksCount && !rc.aliases.hasWriters(sel->mask)) {
    // The same mask, or one computed the same way (`x[valid > 0]` and
    // `y[valid > 0]`: two equal comparisons of one unwritten tensor).
    const Value *mask = sel->mask;
    for (const auto &entry : rc.selectionCounts)
      if (computesSameValue(entry.first, mask, rc.aliases)) {
        mask = entry.first;
        break;
      }
    auto [first, fresh] =
        rc.selectionCounts.emplace(mask, std::make_pair(sel->base, count));
    Value *firstCount = first->second.second;
    if (!fresh && visibleAt(firstCount, node)) {
      if (provablySameRank(first->second.first, sel->base))
        count = firstCount;
      else
        rc.equalCounts[count] = firstCount;
    }
  }
  // masked_select is always a vector; so is x[m] for a mask of x's own
  // shape (x > 0, x == v, ...). Selected int64 values are indices like any
  // others (`labels[keep]`, `ids[valid]`): the gather, put and add forms
  // send their padding rows to a row they drop.
  Rep &r = rc.setBounded(node->output(), outs[0], count,
                         rc.dtypeOf(node->output(), 0) == DTypeKind::Long,
                         is(node, "aten::masked_select") ||
                             masksEveryElement(sel->mask, sel->base));
  if (!sel->broadcasts && !rc.aliases.hasWriters(sel->base) &&
      !rc.aliases.hasWriters(sel->mask)) {
    r.selectedFrom = sel->base;
    r.selectedBy = sel->mask;
    // Its rows, the mask's elements, without reading the compaction (which
    // a top-k of the selection does not run).
    r.bound = emit(rc.graph, "aten::numel", {sel->mask}, node);
  }
  return RuleResult::applied();
}

/// A unique form's counts (result 2): bounded by the groups' count (form
/// result 3) where asked for, else the form's empty tensor.
void setGroupCounts(Node *node, const std::vector<Value *> &outs, bool asked,
                    RuleContext &rc) {
  if (asked)
    rc.setBounded(node->output(2), outs[2], outs[3], false, /*is1D=*/true);
  else
    rc.replaceStatic(node->output(2), outs[2]);
}

/// unique_consecutive(x, dim=0) of a static x: the first row of each run
/// of equal rows (unique_consecutive_rows: an adjacent difference of the
/// rows, cumsum, one index_copy); values and counts bounded by the runs'
/// count, the inverse static. Another dim is not rewritten.
RuleResult consecutiveRows(Node *node, RuleContext &rc) {
  if (constantInt(node->input(3)) != 0)
    return RuleResult::declined("unique_consecutive along a dimension other "
                                "than 0: no bounded form");
  auto inverse = torch::jit::toIValue(node->input(1));
  auto counts = torch::jit::toIValue(node->input(2));
  if (!inverse || !inverse->isBool() || !counts || !counts->isBool())
    return RuleResult::declined();
  auto outs = insertForm(rc.graph, "unique_consecutive_rows",
                         {node->input(0), node->input(1), node->input(2)}, node);
  bool vector = knownRank(node->input(0), &rc.analysis) == 1;
  rc.setBounded(node->output(0), outs[0], outs[3], rc.isIndex(node->input(0)),
                vector);
  rc.replaceStatic(node->output(1), outs[1]);
  setGroupCounts(node, outs, counts->toBool(), rc);
  return RuleResult::applied();
}

/// _unique2 and unique_consecutive (no dim): sort (for _unique2), adjacent
/// difference, cumsum, scatter; values and counts are vectors of the
/// groups' count. Of a static input the inverse is static; of a bounded one
/// (CTC greedy decoding: unique_consecutive of selected labels) only its
/// live elements are grouped (unique_live: the padding goes to a dropped
/// slot), and the inverse has the input's padded shape and count.
RuleResult unique(Node *node, RuleContext &rc) {
  bool consecutive = is(node, "aten::unique_consecutive");
  size_t flags = consecutive ? 1 : 2;
  Rep *r = rc.bounded(node->input(0));
  if (rc.rep(node->input(0)) && !r)
    return RuleResult::declined();
  if (consecutive && !node->input(3)->mustBeNone()) {
    if (r)
      return RuleResult::declined("unique_consecutive along a dimension of "
                                  "a bounded value: no bounded form");
    return consecutiveRows(node, rc);
  }
  auto inverse = torch::jit::toIValue(node->input(flags));
  auto counts = torch::jit::toIValue(node->input(flags + 1));
  if (!inverse || !counts || !rc.onlyFirstRepresented(node))
    return r ? RuleResult::declined() : RuleResult::notApplicable();
  // Of values that may hold NaN, PyTorch 1.13's CPU kernel returns its
  // groups in an order of its own, NaN's counted 0 (pytorch#94106,
  // #95583), which a sort-based form does not reproduce: only labels and
  // indices (integers, bools) are grouped on the device.
  DTypeKind dtype = r ? rc.dtypeOf(node->input(0)) : DTypeKind::Unknown;
  if (r && dtype != DTypeKind::Long && dtype != DTypeKind::Bool &&
      dtype != DTypeKind::Byte)
    return RuleResult::declined("unique of values that may be floating point "
                                "(NaN): PyTorch's CPU order is its own");
  auto outs =
      r ? insertForm(rc.graph, "unique_live",
                     {r->value, r->count, rc.graph.insertConstant(!consecutive),
                      node->input(flags), node->input(flags + 1)},
                     node)
        : insertForm(rc.graph, consecutive ? "unique_consecutive" : "unique",
                     {node->input(0), node->input(flags),
                      node->input(flags + 1)},
                     node);
  rc.setBounded(node->output(0), outs[0], outs[3], r && r->isIndex,
                /*is1D=*/true);
  // PyTorch 1.13's _unique2 returns the inverse when either flag is set.
  if (r && (inverse->toBool() || (!consecutive && counts->toBool())))
    rc.setBounded(node->output(1), outs[1], r->count, true, r->is1D);
  else
    rc.replaceStatic(node->output(1), outs[1]);
  setGroupCounts(node, outs, counts->toBool(), rc);
  return RuleResult::applied();
}

RuleResult uniqueRows(Node *node, RuleContext &rc) {
  if (constantInt(node->input(1)) != 0)
    return RuleResult::notApplicable();
  auto outs = insertForm(rc.graph, "unique_rows", {node->input(0)}, node);
  rc.setBounded(node->output(0), outs[0], outs[3], false);
  rc.replaceStatic(node->output(1), outs[1]);
  rc.setBounded(node->output(2), outs[2], outs[3], false, /*is1D=*/true);
  return RuleResult::applied();
}

/// int(t): a count of a mask's true elements (or of any tensor's nonzero
/// ones) lies in [0, numel] and is bounded with no hint; any other int read
/// from data needs --bound.
RuleResult intOfTensor(Node *node, RuleContext &rc) {
  if (!isTensor(node->input(0)))
    return RuleResult::notApplicable();
  Value *counted = countedTensor(node->input(0), rc);
  // item() of a count is an int too (`torch.arange(m.sum().item())`).
  if (!counted && (is(node, "aten::item") || !rc.hintFor(node->output())))
    return RuleResult::notApplicable();
  Rep r(Rep::Kind::Lifted);
  r.value = castTo(rc.graph,
                   emit(rc.graph, "aten::reshape",
                        {node->input(0), std::vector<int64_t>{}}, node),
                   c10::ScalarType::Long, node);
  if (counted) {
    r.range.lo = 0;
    r.range.hi = emit(rc.graph, "aten::numel", {counted}, node);
    // int(m.sum()) of a bool m that nothing writes counts m's true
    // elements: the count of a selection by m (PyG's subgraph,
    // `node_idx[subset] = torch.arange(int(subset.sum()))`: one value per
    // true element of the mask written at it).
    Node *sum = node->input(0)->node();
    if (is(sum, "aten::sum") && sum->input(0) == counted &&
        rc.analysis.info(counted).dtype == DTypeKind::Bool &&
        !rc.aliases.hasWriters(counted))
      rc.selectionCounts.emplace(counted, std::make_pair(counted, r.value));
  }
  rc.setRep(node->output(), r);
  return RuleResult::applied();
}

} // namespace

void addRootRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"where-list", On::Root,
                   ops({"aten::where", "aten::nonzero_numpy"}), whereList});
  rules.push_back(
      {"nonzero", On::Root, ops({"aten::nonzero", "aten::argwhere"}), nonzero});
  // Of a bounded condition (`torch.where(keep)[0]` of a mask computed from
  // selected boxes: remove_small_boxes after a score threshold).
  rules.push_back({"where-list-of-bounded", On::Use,
                   ops({"aten::where", "aten::nonzero_numpy"}), whereList});
  rules.push_back({"nonzero-of-bounded", On::Use,
                   ops({"aten::nonzero", "aten::argwhere"}), nonzero});
  rules.push_back({"selection", On::Root,
                   ops({"aten::masked_select", "aten::index"}), selection});
  rules.push_back({"unique", On::Root,
                   ops({"aten::_unique2", "aten::unique_consecutive"}),
                   unique});
  rules.push_back({"unique-of-bounded", On::Use,
                   ops({"aten::_unique2", "aten::unique_consecutive"}),
                   unique});
  rules.push_back({"unique-rows", On::Root, ops({"aten::unique_dim"}),
                   uniqueRows});
  rules.push_back({"int-of-tensor", On::Root,
                   ops({"aten::Int", "aten::IntImplicit", "aten::item"}),
                   intOfTensor});
}

} // namespace staticify::bound
