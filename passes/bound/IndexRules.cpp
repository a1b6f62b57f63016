//===- IndexRules.cpp - Elements, prefixes, gathers and stores of rows ----===//
//
//   where(c)[k], a, b = where(c)            -> bounded coordinates of c
//   x[:k], narrow(x, 0, 0, k), k lifted     -> bounded, count min(k, count)
//   or x bounded
//   x[i], index_select(x, 0, i)              -> bounded, or static again when
//                                              i is static
//   x[i, j], i and j bounded with one count  -> bounded, that count
//   x[m], x and m bounded with one count     -> the live rows' selection
//   cat of bounded values (dim 0)            -> compaction
//   x[i] = v, i bounded and 1-D, v 0-d       -> copy_(where) of hit rows
//   x.index_add(0, i, src), x.scatter_add(0,  -> the live rows added, the
//   i, src) of a vector x, one count           padding to a dropped row
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/LiftScalars.h"
#include "passes/OpCatalogue.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

bool isRowPrefix(const Node *node) {
  bool isSlice = is(node, "aten::slice") && node->inputs().size() == 5 &&
                 constantInt(node->input(4)) == 1;
  bool isNarrow = is(node, "aten::narrow") && node->inputs().size() == 4;
  return (isSlice || isNarrow) && constantInt(node->input(1)) == 0 &&
         (node->input(2)->mustBeNone() || constantInt(node->input(2)) == 0);
}

namespace {

/// A mask `x op c` of a tensor x and a number c.
struct Comparison {
  const Value *x = nullptr;
  c10::Symbol op;
  c10::IValue c;
};

std::optional<Comparison> comparisonWithNumber(const Value *mask) {
  const Node *n = mask->node();
  static const c10::Symbol ops[] = {c10::aten::eq, c10::aten::ne,
                                    c10::aten::lt, c10::aten::le,
                                    c10::aten::gt, c10::aten::ge};
  if (std::find(std::begin(ops), std::end(ops), n->kind()) == std::end(ops) ||
      n->inputs().size() != 2 || !isTensor(n->input(0)) ||
      isTensor(n->input(1)))
    return std::nullopt;
  std::optional<c10::IValue> c = torch::jit::toIValue(n->input(1));
  if (!c || !(c->isInt() || c->isDouble()))
    return std::nullopt;
  return Comparison{n->input(0), n->kind(), *c};
}

/// Whether no element is ever true in both masks \p a and \p b, whatever
/// the data: one is the other's logical_not, or both compare one tensor
/// with numbers whose sets of values are disjoint. PyTorch compares in the
/// promoted dtype, where a number may round (16777217 in float32) or, an
/// int beside a narrower integer tensor, wrap (-1 is 255 in uint8). One
/// number stays one number either way: its two sides are disjoint. Of two,
/// a float rounds monotonically, and so does an int beside an int64 or
/// bool x (compared in int64) or one in [0, 127] (exact in every dtype):
/// then bounds with a strict end stay disjoint, and two closed ones (x <= 1,
/// x >= 2; x == 0, x == 1) where both numbers are such ints.
bool provablyDisjoint(const Value *a, const Value *b, RuleContext &rc) {
  auto negates = [](const Value *u, const Value *v) {
    return u->node()->kind() == c10::aten::logical_not &&
           u->node()->input(0) == v;
  };
  if (negates(a, b) || negates(b, a))
    return true;
  std::optional<Comparison> p = comparisonWithNumber(a),
                            q = comparisonWithNumber(b);
  if (!p || !q || p->x != q->x)
    return false;
  using namespace c10;
  if (p->c.isInt() == q->c.isInt() &&
      (p->c.isInt() ? p->c.toInt() == q->c.toInt()
                    : p->c.toDouble() == q->c.toDouble())) {
    // One number: the two sides of it, or a side and the point itself.
    auto pair = [&](Symbol u, Symbol v) {
      return (p->op == u && q->op == v) || (p->op == v && q->op == u);
    };
    return pair(aten::eq, aten::ne) || pair(aten::lt, aten::ge) ||
           pair(aten::gt, aten::le) || pair(aten::lt, aten::gt) ||
           pair(aten::lt, aten::eq) || pair(aten::gt, aten::eq);
  }
  // Two numbers: the one below bounds from above, the other from below.
  auto value = [](const IValue &c) {
    return c.isInt() ? static_cast<double>(c.toInt()) : c.toDouble();
  };
  bool pBelow = value(p->c) < value(q->c);
  const Comparison &below = pBelow ? *p : *q, &above = pBelow ? *q : *p;
  bool upper = below.op == aten::lt || below.op == aten::le ||
               below.op == aten::eq;
  bool lower = above.op == aten::gt || above.op == aten::ge ||
               above.op == aten::eq;
  if (!upper || !lower)
    return false;
  DTypeKind xDType = rc.dtypeOf(below.x);
  auto exactInt = [&](const IValue &c) {
    return c.isInt() &&
           ((c.toInt() >= 0 && c.toInt() <= 127) ||
            xDType == DTypeKind::Long || xDType == DTypeKind::Bool);
  };
  auto monotone = [&](const IValue &c) { return c.isDouble() || exactInt(c); };
  if (!monotone(below.c) || !monotone(above.c))
    return false;
  if (below.op == aten::lt || above.op == aten::gt)
    return true;
  return exactInt(below.c) && exactInt(above.c);
}

/// Whether \p v, defined before \p at, is in scope there: its block is
/// \p at's or encloses it.
bool inScopeAt(const Value *v, const Node *at) {
  const torch::jit::Block *home = v->node()->owningBlock();
  if (!v->node()->isBefore(at))
    return false;
  for (const torch::jit::Block *b = at->owningBlock(); b;
       b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
    if (b == home)
      return true;
  return false;
}

/// A random order of \p mask's positions for the rewrite at \p node: one
/// drawn for masks disjoint from it where one is in scope, else a new one.
RuleContext::RandomOrder &randomOrderFor(Value *mask, Node *node,
                                         RuleContext &rc) {
  for (RuleContext::RandomOrder &drawn : rc.randomOrders)
    if (inScopeAt(drawn.order, node) &&
        std::all_of(drawn.masks.begin(), drawn.masks.end(),
                    [&](const Value *other) {
                      return provablyDisjoint(other, mask, rc);
                    })) {
      drawn.masks.push_back(mask);
      return drawn;
    }
  Value *order = insertForm(rc.graph, "random_order", {mask}, node)[0];
  rc.randomOrders.push_back({order, {mask}, nullptr, {}});
  return rc.randomOrders.back();
}

/// The sizes of the masks drawing \p drawn (disjoint masks are of one
/// shape: comparisons of one tensor, a mask and its negation) and their
/// row stride for coordinate \p dim, made once where \p node sees them.
std::pair<Value *, Value *> sharedStride(RuleContext::RandomOrder &drawn,
                                         int64_t dim, Node *node,
                                         RuleContext &rc) {
  if (!drawn.sizes || !inScopeAt(drawn.sizes, node)) {
    drawn.sizes = emit(rc.graph, "aten::size", {drawn.masks.front()}, node);
    drawn.strides.clear();
  }
  Value *&stride = drawn.strides[dim];
  if (!stride || !inScopeAt(stride, node))
    stride = insertForm(rc.graph, "row_stride",
                        {drawn.sizes,
                         emit(rc.graph, "aten::numel", {drawn.masks.front()},
                              node),
                         rc.constant(dim)},
                        node)[0];
  return {drawn.sizes, stride};
}

RuleResult whereElement(Node *node, RuleContext &rc) {
  Rep *list = rc.rep(node->input(0));
  if (!list || list->kind != Rep::Kind::WhereList)
    return RuleResult::notApplicable();
  std::vector<std::pair<Value *, int64_t>> elements;
  if (is(node, "prim::ListUnpack")) {
    for (size_t i = 0; i < node->outputs().size(); ++i)
      elements.emplace_back(node->output(i), static_cast<int64_t>(i));
  } else {
    auto k = constantInt(node->input(1));
    if (!k)
      return RuleResult::declined();
    elements.emplace_back(node->output(), *k);
  }
  // At the where: its condition may be written to after it.
  torch::jit::WithInsertPoint guard(node->input(0)->node());
  Value *&count = rc.whereCounts[node->input(0)];
  Value *bound = emit(rc.graph, "aten::numel", {list->value}, node);
  for (auto [out, k] : elements) {
    auto outs = insertForm(rc.graph, "where_index",
                           {list->value, rc.constant(k)}, node);
    if (!count) // every element has the same count: one is read
      count = outs[1];
    Rep &r = rc.setBounded(out, outs[0], count, true, /*is1D=*/true);
    r.bound = bound;
    r.whereCond = list->value;
    r.whereDim = k;
    if (k == 0) // rows of c: the padding is false
      r.indexesBelow = list->indexesBelow;
  }
  return RuleResult::applied();
}

/// A prefix of dim 0: x[:k] (`slice(x, 0, 0|None, k, 1)`), or
/// `narrow(x, 0, 0, k)`, the same rows (narrow raises where k is past the
/// rows; the prefix has the rows there are).
/// x[:k] of a bounded x and a host k of unknown sign (a module's
/// attribute: torchvision's `keep[:self.detections_per_img]`): the same
/// padded rows, and as many valid as Python's slice keeps, chosen on the
/// host: min(count, k) for k >= 0, max(count + k, 0) for k < 0. Of a
/// lifted k whose sign is data (`x[:min(n, K - m)]`), the same two chosen
/// on the device.
RuleResult signedPrefix(Node *node, Rep &x, RuleContext &rc) {
  Value *end = node->input(3);
  if (x.kind != Rep::Kind::Bounded)
    return RuleResult::declined();
  std::optional<RuleContext::SignGuard> sign = rc.signGuard(end, node);
  // A lifted end whose sign is data keeps every padded row.
  if (!sign && !(rc.lifted(end) && is(node, "aten::slice")))
    return RuleResult::declined();
  Value *count = rc.prefixCount(x.count, end, sign, node);
  // Of k >= 0 the rows past k are padding: the padded rows are cut to k
  // (`keep[:self.detections_per_img]`: the detections come back with
  // min(k, bound) rows, whatever the count), or to the host's K of a
  // min(n, K).
  Value *padded = !sign ? x.value
                        : emitIf(
                              rc.graph, sign->nonNegative, node,
                              [&] {
                                return emit(rc.graph, "aten::slice",
                                            {x.value, 0, rc.constant(0),
                                             sign->whenNegative, 1},
                                            node);
                              },
                              [&] { return x.value; });
  rc.setBounded(node->output(), padded, count, x.isIndex, x.is1D);
  return RuleResult::applied();
}

RuleResult prefix(Node *node, RuleContext &rc) {
  if (!isRowPrefix(node))
    return RuleResult::notApplicable(); // slice-rows
  Value *end = node->input(3);
  Rep *x = rc.rep(node->input(0));
  if (x && x->kind == Rep::Kind::WhereList)
    return RuleResult::declined();
  if (end->mustBeNone()) {
    if (!x || x->kind != Rep::Kind::Bounded)
      return RuleResult::declined();
    rc.setRep(node->output(), *x);
    return RuleResult::applied();
  }
  std::optional<Range> k = rc.length(end);
  if (!k && x)
    return signedPrefix(node, *x, rc);
  if (!k)
    return RuleResult::declined();
  Value *hi = rc.upper(*k);
  if (x) { // a bounded tensor: its first min(k, count) rows
    Value *padded = x->value;
    if (hi)
      padded = emit(rc.graph, "aten::slice",
                    {padded, 0, rc.constant(0), hi, 1}, node);
    rc.setBounded(node->output(), padded, rc.minCount(x->count, end, node),
                  x->isIndex, x->is1D);
    return RuleResult::applied();
  }
  if (!rc.rep(end))
    return RuleResult::declined(); // a static tensor cut by a host int
  // A static tensor's first k rows, k lifted.
  Value *x0 = node->input(0);
  Value *size0 = emit(rc.graph, "aten::size", {x0, 0}, node);
  Value *padded =
      hi ? emit(rc.graph, "aten::slice", {x0, 0, rc.constant(0), hi, 1}, node)
         : x0;
  Value *count = emit(rc.graph, "aten::clamp", {rc.rep(end)->value}, node,
                      {torch::jit::NamedValue("max", size0)});
  rc.setBounded(node->output(), padded, count,
                rc.analysis.info(x0).dtype == DTypeKind::Long);
  return RuleResult::applied();
}

/// x[s:e:t] of bounded rows along dim 0 past a row prefix's reach: a
/// constant start s >= 0, step t >= 1 and end e (None, or a constant;
/// `ptr[1:]`, `x[::2]`). The padded rows sliced alike (from s, to e where
/// e >= 0) hold the live ones first; ceil((min(count, e) - s) / t) of them,
/// at least 0, e < 0 counting back from the count (slice_live). A step the
/// host computes is taken too: one below 1 raises in the form's slice as in
/// the original's. Left alone: a negative start (the rows it takes move with
/// the count), a start, end or step read from data.
RuleResult sliceRows(Node *node, RuleContext &rc) {
  Rep *x = rc.bounded(node->input(0));
  if (!x || node->inputs().size() != 5 ||
      !alongRows(node->input(1), node->input(0), *x, rc.analysis))
    return RuleResult::notApplicable(); // trailing, or unknown: per-row's
  Value *start = node->input(2)->mustBeNone() ? rc.constant(0) : node->input(2);
  std::optional<int64_t> from = constantInt(start), step = constantInt(node->input(4));
  // A step the host computes (rl_games' `[::self.num_agents]`) is taken as
  // it is: below 1 the form's slice raises as the original's does.
  bool hostStep = !step && !rc.rep(node->input(4)) &&
                  node->input(4)->type()->kind() == c10::TypeKind::IntType;
  Value *end = node->input(3);
  if (!from || *from < 0 || !(hostStep || (step && *step >= 1)) ||
      (!end->mustBeNone() && !constantInt(end)))
    return RuleResult::declined(
        "a slice of bounded rows from a negative or computed start, or by a "
        "computed end or step");
  auto outs = insertForm(rc.graph, "slice_live",
                         {x->value, x->count, start, end, node->input(4)}, node);
  rc.setBounded(node->output(), outs[0], outs[1], x->isIndex, x->is1D);
  return RuleResult::applied();
}

/// x[s:e] along dim 0 of a tensor of static rows by a start or end the
/// rules lifted (librosa's trim: `y[start:end]` between the first and the
/// last row of a selection, `int(nonzero[0])` and `int(nonzero[-1])`):
/// the rows from s on, gathered, max(e - s, 0) of them live, s and e
/// clamped into the rows as Python's slice does (slice_lifted). Step 1
/// only; a bound left out is 0, or the rows. (Bounds that lift-scalars
/// lifts are a selection of the rows between them before bound runs.)
RuleResult liftedBounds(Node *node, RuleContext &rc) {
  if (node->inputs().size() != 5 || rc.rep(node->input(0)) ||
      !isTensor(node->input(0)))
    return RuleResult::notApplicable();
  Value *x = node->input(0), *start = node->input(2), *end = node->input(3);
  if (!rc.lifted(start) && !rc.lifted(end))
    return RuleResult::notApplicable();
  std::optional<int64_t> dim = constantInt(node->input(1));
  std::optional<int64_t> rank = knownRank(x, &rc.analysis);
  if (!(dim == 0 || (dim == -1 && rank == 1)) ||
      constantInt(node->input(4)) != 1)
    return RuleResult::declined(
        "a slice by bounds read from data along a dim after the first, or "
        "by a step other than 1");
  Value *device = rc.deviceOf(x, node);
  auto bound = [&](Value *v, Value *absent) {
    return rc.tensorOf(v->mustBeNone() ? absent : v, device, node);
  };
  auto outs = insertForm(
      rc.graph, "slice_lifted",
      {x, bound(start, rc.constant(0)),
       bound(end, emit(rc.graph, "aten::size", {x, 0}, node))},
      node);
  rc.setBounded(node->output(), outs[0], outs[1],
                rc.analysis.info(x).dtype == DTypeKind::Long, rank == 1);
  return RuleResult::applied();
}

/// x[k] of bounded rows at a constant k, a select along dim 0: the first
/// true position (`torch.nonzero(m)[0]`), the last selected row
/// (`x[m][-1]`). A negative k counts back from the count (row_at), as it
/// counted from the original's length; past the live rows the original
/// raises and the form reads zeros. Along a trailing dim: the per-row rule.
RuleResult rowAt(Node *node, RuleContext &rc) {
  Rep *x = rc.bounded(node->input(0));
  if (!x || node->inputs().size() != 3 ||
      !alongRows(node->input(1), node->input(0), *x, rc.analysis))
    return RuleResult::notApplicable(); // trailing, or unknown: per-row's
  if (!constantInt(node->input(2)))
    return RuleResult::declined("the row is computed at run time");
  Value *out = insertForm(rc.graph, "row_at",
                          {x->value, x->count, node->input(2)}, node)[0];
  // A row of indices is one still, for the gathers it feeds (`x[nonzero(m)
  // [0]]`): the type says so, as the form's ops do not.
  if (x->isIndex)
    out->setType(c10::TensorType::get()->withScalarType(c10::kLong));
  rc.replaceStatic(node->output(), out);
  // A number read from a row of a vector (`int(nonzero[0])`): lifted, the
  // row converted as the read converts it (int truncates, as .long() does),
  // so the host arithmetic after it runs on the device.
  if (!x->is1D)
    return RuleResult::applied();
  std::vector<Node *> reads; // the select's uses, which read `out` now
  for (const torch::jit::Use &use : out->uses())
    reads.push_back(use.user);
  for (Node *read : reads) {
    std::optional<c10::ScalarType> dtype =
        read->outputs().size() == 1 ? liftedDType(read->output()->type())
                                    : std::nullopt;
    if (!dtype || read->inputs().size() != 1 ||
        !(read->kind() == c10::aten::Int || read->kind() == c10::aten::Float ||
          read->kind() == c10::aten::Bool))
      continue;
    torch::jit::WithInsertPoint at(read);
    Rep lifted(Rep::Kind::Lifted);
    lifted.value = emit(rc.graph, "aten::to",
                        {out, static_cast<int64_t>(*dtype)}, read);
    rc.setRep(read->output(), lifted);
  }
  return RuleResult::applied();
}

/// x[i0, i1] and x[i0, i1, i2] of integer vectors bounded with one count,
/// into x's leading dims: row r of the result is x[i0[r], i1[r], ...], so
/// it is bounded with that count (gather_rows_at). One mask per RoI, of its
/// class: `mask_logits[torch.arange(n), labels]` in torchvision's
/// maskrcnn_inference and maskrcnn_loss and detectron2's mask_rcnn_loss.
/// Indices whose counts are not provably equal would broadcast, or raise,
/// by their lengths: not rewritten. Where the program does not fix an
/// index's rank the host checks it is 1 behind a guard, whose fallback
/// indexes with the valid rows (indices of higher ranks broadcast by their
/// trailing dims: the result has the rows of the one of highest rank, the
/// count, or the original raises).
RuleResult gatherAt(Node *node, Node *list, RuleContext &rc) {
  Value *src = node->input(0);
  Rep *s = rc.rep(src);
  if (s && s->kind != Rep::Kind::Bounded)
    return RuleResult::declined();
  std::unordered_map<Value *, Value *> replaced;
  if (s)
    replaced[src] = s->value;
  std::vector<Value *> padded;
  Value *count = nullptr;
  std::vector<Value *> ranked; // of a rank only the run time knows
  for (Value *index : list->inputs()) {
    Rep *i = rc.bounded(index);
    if (!i || !rc.isIndex(index))
      return RuleResult::declined();
    if (count && !rc.sameCount(count, i->count))
      return RuleResult::declined(
          "its indices' rows are not provably as many");
    count = count ? count : i->count;
    padded.push_back(i->value);
    std::optional<int64_t> rank =
        i->is1D ? 1 : knownRank(index, &rc.analysis);
    if (rank && *rank != 1)
      return RuleResult::declined();
    if (!rank)
      ranked.push_back(i->value);
  }
  auto fast = [&](const std::unordered_map<Value *, Value *> &,
                  const std::vector<Value *> &parts) {
    Value *indices = rc.graph
                         .insertNode(rc.graph.createList(
                             c10::TensorType::get(), parts))
                         ->output();
    return insertForm(rc.graph, "gather_rows_at",
                      {s ? s->value : src, s ? s->count : rc.none(), indices,
                       count},
                      node);
  };
  Value *cond = nullptr;
  for (Value *v : ranked) {
    Value *vector = emit(rc.graph, "aten::eq",
                         {emit(rc.graph, "aten::dim", {v}, node),
                          rc.constant(1)},
                         node);
    cond = cond ? emit(rc.graph, "aten::__and__", {cond, vector}, node)
                : vector;
  }
  Value *out = cond ? emitRankGuarded(rc, node, replaced, list, padded,
                                      padded[0], cond, count, fast)[0]
                    : fast(replaced, padded)[0];
  rc.setBounded(node->output(), out, count,
                s ? s->isIndex : rc.isIndex(src));
  rc.absorb(list);
  return RuleResult::applied();
}

/// x[m] and masked_select(x, m) of a bounded x by a bounded mask with its
/// count (`labels[labels != blank]` after unique_consecutive, `j[ok]` with
/// ok computed from j's rows): a selection of the padded rows by the mask
/// with its padding false, whose true elements are the original's, in the
/// original's order. masked_select broadcasts first: only where the mask
/// provably has x's shape. x[m] raises unless m's rows are x's, so a mask
/// whose count is not known to be x's (`onsets[keep]`, keep computed from
/// onsets and a selection by another mask) selects the same rows wherever
/// the original runs; its padded rows are then fitted to x's (fit_rows).
RuleResult selectionOfBounded(Node *node, RuleContext &rc) {
  auto sel = matchSelection(node->output(), rc.analysis);
  if (!sel)
    return RuleResult::notApplicable();
  Rep *base = rc.bounded(sel->base), *mask = rc.bounded(sel->mask);
  if (!base || !mask)
    return RuleResult::notApplicable();
  bool ofItsShape = masksEveryElement(sel->mask, sel->base);
  bool sameCount = rc.sameCount(base->count, mask->count);
  if ((!sameCount && sel->broadcasts) || (sel->broadcasts && !ofItsShape))
    return RuleResult::declined(
        "a selection of bounded rows by a mask whose rows are not provably "
        "theirs");
  Value *live = insertForm(rc.graph, "live_nonzero",
                           {mask->value, mask->count}, node)[0];
  if (!sameCount)
    live = insertForm(rc.graph, "fit_rows",
                      {live, emit(rc.graph, "aten::size",
                                  {base->value, rc.constant(0)}, node)},
                      node)[0];
  auto outs = insertForm(rc.graph,
                         masksLeadingDims(sel->mask, sel->base)
                             ? "select_rows"
                             : "select_checked_rows",
                         {base->value, live}, node);
  rc.setBounded(node->output(), outs[0], outs[1],
                rc.dtypeOf(node->output(), 0) == DTypeKind::Long,
                is(node, "aten::masked_select") || ofItsShape);
  if (is(node, "aten::index"))
    rc.absorb(node->input(1)->node());
  return RuleResult::applied();
}

/// x[i] and index_select(x, 0, i) with one integer index.
RuleResult gather(Node *node, RuleContext &rc) {
  Value *src = node->input(0), *index;
  Node *list = nullptr;
  if (is(node, "aten::index")) {
    list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct ||
        node->input(1)->uses().size() != 1)
      return RuleResult::declined();
    if (list->inputs().size() == 2 || list->inputs().size() == 3)
      return gatherAt(node, list, rc);
    if (list->inputs().size() != 1)
      return RuleResult::declined();
    index = list->input(0);
  } else {
    if (constantInt(node->input(1)) != 0)
      return RuleResult::declined();
    index = node->input(2);
  }
  // index_select raises for an index that is not an integer vector, so a
  // selected index whose dtype the graph does not show is one (`ids[ok]`
  // of an input `ids`); x[i] would select by a bool i.
  bool selects = is(node, "aten::index_select");
  if (!selects && !rc.isIndex(index))
    return RuleResult::declined();
  Rep *s = rc.rep(src), *i = rc.rep(index);
  if ((s && s->kind != Rep::Kind::Bounded) ||
      (i && i->kind != Rep::Kind::Bounded) || (!s && !i))
    return RuleResult::declined();
  if (s && i && i->atPositions) {
    // y[m][i] and where(m)[k][i] for rows i of a selection by m given at
    // their positions among m's elements (a top-k's): y's rows there, and
    // their coordinates (no compaction of m).
    Value *m = s->selectedFrom ? s->selectedBy : s->whereCond;
    if (m && !rc.aliases.hasWriters(m) &&
        (m == i->selectedBy || computesSameValue(m, i->selectedBy, rc.aliases))) {
      Value *out =
          s->selectedFrom
              ? insertForm(rc.graph,
                           masksLeadingDims(m, s->selectedFrom)
                               ? "rows_at"
                               : "checked_rows_at",
                           {s->selectedFrom, m, i->atPositions}, node)[0]
              : insertForm(rc.graph, "where_index_at",
                           {m, rc.constant(s->whereDim), i->atPositions},
                           node)[0];
      rc.setBounded(node->output(), out, i->count, s->isIndex,
                    i->is1D && s->is1D);
      if (list)
        rc.absorb(list);
      return RuleResult::applied();
    }
  }
  if (s && i && s->whereCond && i->drawOf == s->count) {
    // where(c)[k][randperm(count)[:top]]: `top` random true positions of
    // c, the first in one random order of its positions (no compaction).
    RuleContext::RandomOrder &drawn = randomOrderFor(s->whereCond, node, rc);
    auto [sizes, stride] = sharedStride(drawn, s->whereDim, node, rc);
    Value *out = insertForm(rc.graph, "random_true_positions",
                            {s->whereCond, drawn.order, sizes,
                             rc.constant(s->whereDim), stride, i->drawTop},
                            node)[0];
    rc.setBounded(node->output(), out, i->count, true, /*is1D=*/true);
    if (list)
      rc.absorb(list);
    return RuleResult::applied();
  }
  Value *srcCount = s ? s->count : rc.rowsOf(src, node);
  Value *padded = s ? s->value : src;
  // A vector index takes one index_select; one that holds no negative
  // value (a randperm, positions) needs no wrap from the end.
  bool vector = selects || (i ? i->is1D : knownRank(index, &rc.analysis) == 1);
  const OpInfo *made = opInfo(index->node());
  // index_select raises for a negative index, as the form then does.
  bool wrap = !selects && (i || !made || !made->has(kNonNegativeValues));
  bool srcVector = s ? s->is1D : knownRank(src, &rc.analysis) == 1;
  bool guardEmpty = i || !(selects || srcVector);
  Value *out =
      vector ? insertForm(rc.graph, "gather_vector_rows",
                          {padded, srcCount, i ? i->value : index,
                           i ? i->count : rc.none(),
                           rc.graph.insertConstant(wrap),
                           rc.graph.insertConstant(selects),
                           rc.graph.insertConstant(guardEmpty)},
                          node)[0]
             : insertForm(rc.graph, "gather_rows",
                          {padded, srcCount, i ? i->value : index,
                           i ? i->count : rc.none()},
                          node)[0];
  if (i)
    rc.setBounded(node->output(), out, i->count,
                  s ? s->isIndex : rc.isIndex(src), i->is1D && s && s->is1D);
  else
    rc.replaceStatic(node->output(), out); // static again
  if (list)
    rc.absorb(list);
  return RuleResult::applied();
}

/// cat along dim 0 of bounded and static parts: their live rows, in order.
RuleResult cat(Node *node, RuleContext &rc) {
  Node *list = node->input(0)->node();
  if (list->kind() != c10::prim::ListConstruct ||
      node->input(0)->uses().size() != 1 || constantInt(node->input(1)) != 0)
    return RuleResult::declined();
  std::vector<Value *> parts, counts;
  bool allIndex = true, all1D = true;
  for (Value *part : list->inputs()) {
    Rep *r = rc.rep(part);
    if (r && r->kind != Rep::Kind::Bounded)
      return RuleResult::declined();
    parts.push_back(r ? r->value : part);
    counts.push_back(r ? r->count : rc.rowsOf(part, node));
    allIndex &= rc.isIndex(part);
    all1D &= r && r->is1D;
  }
  Value *partList =
      rc.graph.insertNode(rc.graph.createList(c10::TensorType::get(), parts))
          ->output();
  Value *countList =
      rc.graph.insertNode(rc.graph.createList(c10::TensorType::get(), counts))
          ->output();
  // Two parts (`cat([pos, neg])`): one gather, no compaction.
  auto outs =
      parts.size() == 2
          ? insertForm(rc.graph, "cat_two_rows",
                       {parts[0], counts[0], parts[1], counts[1]}, node)
          : insertForm(rc.graph, "cat_rows", {partList, countList}, node);
  rc.setBounded(node->output(), outs[0], outs[1], allIndex, all1D);
  rc.absorb(list);
  return RuleResult::applied();
}

/// Cuts a padded value to its valid rows (a slice by a count read once).
using CutRows = std::function<Value *(Value *)>;

/// A copy of \p node, the original, reading in place of each input that
/// \p valid answers for (given a cut to the first \p count rows, read on
/// the host) what it answers: the original on the valid rows, the fallback
/// of a write's guard.
Value *originalOnValidRows(Node *node, RuleContext &rc, Value *count,
                           const std::function<Value *(Value *, const CutRows &)> &valid) {
  torch::jit::Graph &graph = rc.graph;
  Value *n = emit(graph, "aten::Int", {count}, node);
  CutRows cut = [&](Value *padded) {
    return emit(graph, "aten::slice", {padded, 0, rc.constant(0), n, 1}, node);
  };
  std::unordered_map<Value *, Value *> replaced;
  for (Value *in : node->inputs())
    if (!replaced.count(in))
      if (Value *with = valid(in, cut))
        replaced[in] = with;
  return graph
      .insertNode(graph.createClone(node,
                                    [&](Value *in) {
                                      auto it = replaced.find(in);
                                      return it == replaced.end() ? in
                                                                  : it->second;
                                    }))
      ->output();
}

/// A write of \p node at the rows of x that bounded index \p i names, of
/// the 0-d value \p v or of \p v's bounded rows (\p rows, i's count): the
/// form \p form on (x, i's padded rows, its count, the values). What the
/// forms assume and only the run time knows is checked on the host behind a
/// guard: i a vector, and row values of x's rank (a lower rank would
/// broadcast along x's trailing dims instead of its rows) and dtype (the
/// ops raise otherwise). Where that fails, the fallback runs the original
/// on the valid rows, after a host read. \p indexUse: the input of \p node
/// that holds i (a list of it, or i itself). \p checkIndexDType: i's dtype is
/// not known before the program runs, and the guard checks it is int64.
RuleResult writeRows(Node *node, RuleContext &rc, const Rep &i,
                     Value *indexUse, Value *v, const Rep *rows,
                     const char *form, bool checkIndexDType = false,
                     std::optional<bool> putAccumulate = std::nullopt) {
  Rep *bx = rc.bounded(node->input(0));
  Value *x = bx ? bx->value : node->input(0);
  torch::jit::Graph &graph = rc.graph;
  bool kernel = putAccumulate && rc.ctx.options.runtimeOps &&
                opRegistered(kPutValidRowsKernel);
  auto emitForm = [&] {
    if (kernel) {
      Value *target = mutatesFirstInput(node)
                          ? x
                          : emit(graph, "aten::clone", {x}, node,
                                 {torch::jit::NamedValue("memory_format",
                                                         rc.none())});
      return emit(graph, kPutValidRowsKernel,
                  {target, i.value, i.count, rows ? rows->value : v,
                   graph.insertConstant(rows != nullptr),
                   graph.insertConstant(*putAccumulate)},
                  node);
    }
    return insertForm(graph, form,
                      {x, i.value, i.count, rows ? rows->value : v}, node)[0];
  };
  std::vector<Value *> facts;
  if (checkIndexDType)
    facts.push_back(emit(graph, "aten::eq",
                         {emit(graph, "prim::dtype", {i.value}, node),
                          rc.constant(static_cast<int64_t>(c10::kLong))},
                         node));
  if (!i.is1D)
    facts.push_back(emit(graph, "aten::eq",
                         {emit(graph, "aten::dim", {i.value}, node),
                          rc.constant(1)},
                         node));
  if (rows) {
    facts.push_back(emit(graph, "aten::eq",
                         {emit(graph, "aten::dim", {rows->value}, node),
                          emit(graph, "aten::dim", {x}, node)},
                         node));
    facts.push_back(emit(graph, "aten::eq",
                         {emit(graph, "prim::dtype", {rows->value}, node),
                          emit(graph, "prim::dtype", {x}, node)},
                         node));
  }
  Value *out;
  if (facts.empty()) {
    out = emitForm();
  } else {
    Value *cond = facts[0];
    for (size_t k = 1; k < facts.size(); ++k)
      cond = emit(graph, "aten::__and__", {cond, facts[k]}, node);
    out = emitIf(graph, cond, node, emitForm, [&] {
      return originalOnValidRows(
          node, rc, i.count, [&](Value *in, const CutRows &cut) -> Value * {
            if (in == v)
              return rows ? cut(rows->value) : nullptr;
            if (in != indexUse)
              return nullptr;
            Value *index = cut(i.value);
            return indexUse->type()->kind() == c10::TypeKind::ListType
                       ? graph.insertNode(graph.createList(
                                  c10::TensorType::get(), {index}))
                             ->output()
                       : index;
          });
    });
    out->node()->i_(guardAttr(), 1);
  }
  if (bx) // written in place: the padded rows, as many valid
    rc.setBounded(node->output(), out, bx->count, bx->isIndex, bx->is1D);
  else
    rc.replaceStatic(node->output(), out);
  if (mutatesFirstInput(node))
    rc.replaceWriter(node); // it writes: never erased as dead
  return RuleResult::applied();
}

/// x[i] = v (index_put_) and x.index_put((i,), v) for a bounded index i:
/// v 0-d, every valid row of i marks a row of x (put_rows); or v bounded
/// with i's count, one row per index row (put_row_values: the Matcher's
/// low-quality write `matches[j] = all_matches[j]`). With accumulate=True
/// the rows add instead (put_add_rows: `out.index_put_((idx[m],), w[m],
/// accumulate=True)`, a count or a weighted histogram). With --runtime-ops
/// the runtime's put_valid_rows writes instead: index_put_ itself on the
/// valid rows on the CPU. An index whose
/// dtype the graph does not show is checked to be int64 on the host, behind
/// the guard (a bool one would be a mask).
/// The form writing rows of \p node: put_rows (a 0-d value), put_row_values
/// (rows), put_add_rows (accumulate); `_out` where not in place.
const char *putForm(const Node *node, bool accumulate, bool rows) {
  bool inPlace = is(node, "aten::index_put_");
  return accumulate ? (inPlace ? "put_add_rows_" : "put_add_rows")
         : rows     ? (inPlace ? "put_row_values" : "put_row_values_out")
                    : (inPlace ? "put_rows" : "put_rows_out");
}

/// x[m] = v of a static vector mask m and rows v with the count of the
/// selections by m (NeRF's `out[hit] = (w * z).sum(-1) / w.sum(-1)` of
/// `w = weights[hit]`, `z = zs[hit]`): the r-th true element of m takes v's
/// row r (put_at_mask: a cumsum of m and one gather, no compaction). m
/// unwritten, so the count of its selections is its count at the store.
/// What the form assumes and only the run time knows is checked on the
/// host: m as long as x's rows (a mask of one element would broadcast),
/// and v of x's rank, trailing sizes and dtype (index_put_ broadcasts or
/// raises otherwise); where that fails, the store as it was, on v's valid
/// rows.
RuleResult putAtMask(Node *node, RuleContext &rc, bool accumulate) {
  Value *x = node->input(0), *m = node->input(1)->node()->input(0);
  Rep *rows = rc.bounded(node->input(2));
  if (!rows || rc.rep(x) || rc.rep(m) || rc.dtypeOf(m) != DTypeKind::Bool ||
      knownRank(m, &rc.analysis) != 1 || rc.aliases.hasWriters(m))
    return RuleResult::declined();
  if (accumulate)
    return RuleResult::declined("accumulate=True at a mask is not rewritten");
  auto selected = rc.selectionCounts.find(m);
  if (selected == rc.selectionCounts.end() ||
      !rc.sameCount(selected->second.second, rows->count))
    return RuleResult::declined(
        "the values written are not one row per true element of the mask");
  torch::jit::Graph &graph = rc.graph;
  Value *v = rows->value;
  auto same = [&](const char *read, Value *a, Value *b) {
    return emit(graph, "aten::eq", {emit(graph, read, {a}, node),
                                    emit(graph, read, {b}, node)},
                node);
  };
  auto trailing = [&](Value *t) {
    return emit(graph, "aten::slice",
                {emit(graph, "aten::size", {t}, node), 1, c10::IValue(), 1},
                node);
  };
  Value *cond = emit(graph, "aten::eq",
                     {emit(graph, "aten::size", {m, 0}, node),
                      emit(graph, "aten::size", {x, 0}, node)},
                     node);
  for (Value *fact :
       {same("aten::dim", v, x), same("prim::dtype", v, x),
        emit(graph, "aten::eq", {trailing(v), trailing(x)}, node)})
    cond = emit(graph, "aten::__and__", {cond, fact}, node);
  bool inPlace = mutatesFirstInput(node);
  Value *out = emitIf(
      graph, cond, node,
      [&] {
        return insertForm(graph, inPlace ? "put_at_mask" : "put_at_mask_out",
                          {x, m, v}, node)[0];
      },
      [&] {
        Value *n = emit(graph, "aten::Int", {rows->count}, node);
        Value *valid =
            emit(graph, "aten::slice", {v, 0, rc.constant(0), n, 1}, node);
        return graph
            .insertNode(graph.createClone(
                node, [&](Value *in) { return in == node->input(2) ? valid : in; }))
            ->output();
      });
  out->node()->i_(guardAttr(), 1);
  rc.replaceStatic(node->output(), out);
  if (inPlace)
    rc.replaceWriter(node); // it writes: never erased as dead
  return RuleResult::applied();
}

/// x[c0, c1, ...] = v (index_put_, index_put) by two or more bounded
/// coordinate vectors of one count into x's leading dims (voxel and
/// heatmap grids: `grid[coords[:, 0], coords[:, 1], coords[:, 2]] = 1`):
/// the write at the row-major positions of x's leading dims flattened into
/// one (flat_position, which sends a coordinate out of its dim's range past
/// the last position, so the write raises as the original's does), then
/// the one-index forms. Behind a host guard that the coordinates are
/// vectors of one length, whose fallback is the original on the valid
/// rows.
RuleResult putAtCoordinates(Node *node, RuleContext &rc, bool accumulate) {
  Node *list = node->input(1)->node();
  Value *x = node->input(0), *v = node->input(2);
  std::vector<Rep *> coords;
  for (Value *c : list->inputs()) {
    Rep *r = rc.bounded(c);
    if (!r || !rc.isIndex(c) ||
        (!coords.empty() && !rc.sameCount(r->count, coords.front()->count)))
      return RuleResult::declined(
          "the indices are not integer vectors bounded with one count");
    coords.push_back(r);
  }
  Rep *rows = rc.rep(v);
  if (rows && (rows->kind != Rep::Kind::Bounded ||
               !rc.sameCount(rows->count, coords.front()->count)))
    return RuleResult::declined(
        "the values written are not one row per row of the indices");
  if (!rows && !provablyZeroDim(v))
    return RuleResult::declined();
  torch::jit::Graph &graph = rc.graph;
  Value *first = coords.front()->value;
  Value *cond = emit(graph, "aten::eq",
                     {emit(graph, "aten::dim", {first}, node), rc.constant(1)},
                     node);
  for (size_t k = 1; k < coords.size(); ++k)
    cond = emit(graph, "aten::__and__",
                {cond, emit(graph, "aten::eq",
                            {emit(graph, "aten::size", {first}, node),
                             emit(graph, "aten::size", {coords[k]->value}, node)},
                            node)},
                node);
  Value *count = coords.front()->count;
  auto original = [&] {
    return originalOnValidRows(
        node, rc, count, [&](Value *in, const CutRows &cut) -> Value * {
          if (in == v)
            return rows ? cut(rows->value) : nullptr;
          if (in != list->output())
            return nullptr;
          std::vector<Value *> valid;
          for (Rep *r : coords)
            valid.push_back(cut(r->value));
          return graph
              .insertNode(graph.createList(c10::OptionalType::ofTensor(), valid))
              ->output();
        });
  };
  Value *out = emitIf(graph, cond, node, [&] {
    std::vector<Value *> padded;
    for (Rep *r : coords)
      padded.push_back(r->value);
    Value *coordList =
        graph.insertNode(graph.createList(c10::TensorType::get(), padded))
            ->output();
    Value *sizes = emit(graph, "aten::size", {x}, node);
    Value *flat = insertForm(graph, "flat_position", {coordList, sizes}, node)[0];
    // x with its indexed dims made one: [-1] + x.size()[k:].
    Value *minusOne =
        graph.insertNode(graph.createList(c10::IntType::get(), {rc.constant(-1)}))
            ->output();
    Value *rest = emit(graph, "aten::slice",
                       {sizes, rc.constant(static_cast<int64_t>(coords.size())),
                        rc.none(), rc.constant(1)},
                       node);
    Value *merged = emit(graph, "aten::reshape",
                         {x, emit(graph, "aten::add", {minusOne, rest}, node)},
                         node);
    const char *form = accumulate ? "put_add_rows"
                       : rows     ? "put_row_values_out"
                                  : "put_rows_out";
    Value *written = insertForm(graph, form,
                                {merged, flat, count, rows ? rows->value : v},
                                node)[0];
    Value *shaped = emit(graph, "aten::reshape", {written, sizes}, node);
    return mutatesFirstInput(node)
               ? emit(graph, "aten::copy_", {x, shaped}, node)
               : shaped;
  }, original);
  out->node()->i_(guardAttr(), 1);
  rc.replaceStatic(node->output(), out);
  rc.absorb(list);
  if (mutatesFirstInput(node))
    rc.replaceWriter(node); // it writes: never erased as dead
  return RuleResult::applied();
}

RuleResult put(Node *node, RuleContext &rc) {
  Node *list = node->input(1)->node();
  Value *x = node->input(0), *v = node->input(2);
  Rep *bx = rc.rep(x);
  bool inPlace = is(node, "aten::index_put_");
  if (list->kind() != c10::prim::ListConstruct || list->inputs().empty() ||
      (bx && (bx->kind != Rep::Kind::Bounded || !inPlace)))
    return RuleResult::declined();
  std::optional<bool> accumulate = constantBool(node->input(3));
  if (!accumulate)
    return RuleResult::declined("accumulate is computed at run time");
  if (list->inputs().size() > 1) {
    if (bx)
      return RuleResult::declined();
    return putAtCoordinates(node, rc, *accumulate);
  }
  Rep *i = rc.bounded(list->input(0));
  if (!i)
    return putAtMask(node, rc, *accumulate);
  DTypeKind indexDType = rc.dtypeOf(list->input(0));
  if (!i->isIndex && indexDType != DTypeKind::Unknown)
    return RuleResult::declined("the index is not an integer tensor");
  // Into bounded rows, in place (torchvision's MultiScaleRoIAlign:
  // `result[idx_in_level] = roi_align(...)` of `result = zeros(num_rois,
  // ...)`): the padded rows are written, where every index is provably one
  // of x's valid rows (where(c)[0] of a c with x's count); a negative or
  // out-of-range index would count from, or raise past, x's valid rows.
  if (bx && !(i->indexesBelow && rc.sameCount(i->indexesBelow, bx->count)))
    return RuleResult::declined(
        "the rows written are not provably among the valid rows");
  Rep *rows = rc.rep(v);
  if (rows && (rows->kind != Rep::Kind::Bounded ||
               !rc.sameCount(rows->count, i->count)))
    return RuleResult::declined(
        "the values written are not one row per row of the index");
  if (!rows && !provablyZeroDim(v))
    return RuleResult::declined();
  return writeRows(node, rc, *i, list->output(), v, rows,
                   putForm(node, *accumulate, rows != nullptr),
                   /*checkIndexDType=*/!i->isIndex, *accumulate);
}

/// The vector w of an index made by expanding it over columns
/// (`w[:, None].expand(-1, c)`, `w.unsqueeze(1).expand_as(src)`,
/// `w.view(-1, 1).expand_as(src)`: PyG's broadcast of an index to its
/// source): every element of row r holds w[r]. Null otherwise.
Value *expandedColumn(Value *index) {
  const Node *expand = index->node();
  if (!is(expand, "aten::expand") && !is(expand, "aten::expand_as"))
    return nullptr;
  const Node *column = expand->input(0)->node();
  if (is(column, "aten::unsqueeze") && constantInt(column->input(1)) == 1)
    return column->input(0);
  if ((is(column, "aten::view") || is(column, "aten::reshape")) &&
      constantIntList(column->input(1)) == std::vector<int64_t>{-1, 1})
    return column->input(0);
  return nullptr;
}

/// x.scatter_add(0, w[:, None].expand_as(src), src) of a matrix x, bounded
/// w and src of one count (PyG's scatter sum, message passing on the edges
/// a mask keeps): every column of row r adds to row w[r], which is
/// index_add(0, w, src) (add_rows) where the index has src's shape and x
/// src's columns, host facts checked behind a guard whose fallback runs the
/// original on the valid rows.
RuleResult scatterAddByColumn(Node *node, RuleContext &rc) {
  Value *x = node->input(0), *index = node->input(2), *source = node->input(3);
  Value *column = expandedColumn(index);
  Rep *w = column ? rc.bounded(column) : nullptr;
  Rep *expanded = rc.bounded(index), *rows = rc.bounded(source);
  if (!w || !expanded || !rows || !rc.sameCount(w->count, rows->count) ||
      !(w->is1D || knownRank(column, &rc.analysis) == 1))
    return RuleResult::declined("it scatters into a tensor of unknown or "
                                "higher rank by an index that is not one "
                                "vector expanded over its source's columns");
  torch::jit::Graph &graph = rc.graph;
  auto sizeAt = [&](Value *t, int64_t d) {
    return emit(graph, "aten::size", {t, rc.constant(d)}, node);
  };
  auto both = [&](Value *a, Value *b) {
    return emit(graph, "aten::__and__", {a, b}, node);
  };
  auto equal = [&](Value *a, Value *b) {
    return emit(graph, "aten::eq", {a, b}, node);
  };
  // Ranks first: size(_, 1) of a vector would raise.
  Value *two = rc.constant(2);
  Value *ranks = both(
      both(equal(emit(graph, "aten::dim", {x}, node), two),
           equal(emit(graph, "aten::dim", {rows->value}, node), two)),
      equal(emit(graph, "aten::dim", {expanded->value}, node), two));
  Value *fits = emitIf(
      graph, ranks, node,
      [&] {
        Value *columns = sizeAt(rows->value, 1);
        return both(both(equal(sizeAt(x, 1), columns),
                         equal(sizeAt(expanded->value, 1), columns)),
                    equal(emit(graph, "prim::dtype", {rows->value}, node),
                          emit(graph, "prim::dtype", {x}, node)));
      },
      [&] { return graph.insertConstant(false); });
  Value *out = emitIf(
      graph, fits, node,
      [&] {
        return insertForm(graph,
                          mutatesFirstInput(node) ? "add_rows_" : "add_rows",
                          {x, w->value, w->count, rows->value}, node)[0];
      },
      [&] {
        return originalOnValidRows(
            node, rc, rows->count, [&](Value *in, const CutRows &cut) -> Value * {
              return in == index    ? cut(expanded->value)
                     : in == source ? cut(rows->value)
                                    : nullptr;
            });
      });
  out->node()->i_(guardAttr(), 1);
  rc.replaceStatic(node->output(), out);
  if (mutatesFirstInput(node))
    rc.replaceWriter(node); // it writes: never erased as dead
  return RuleResult::applied();
}

/// x.index_add(0, i, source) and index_add_ for a bounded index i and
/// source rows of its count (GShard-style combine of expert outputs:
/// `out.index_add_(0, idx, expert(x[idx]))`), with alpha 1: the live rows
/// add to x's rows in their order (add_rows). Of a vector x,
/// `x.scatter_add(0, i, source)` (and scatter_add_) of vectors i and source
/// is the same sum (PyG-style `zeros(n).scatter_add(0, seg[m], w[m])`).
/// Both raise for an index that is not integer, so a selected index whose
/// dtype the analysis does not know holds indices wherever they run.
RuleResult addRows(Node *node, RuleContext &rc) {
  Value *x = node->input(0), *index = node->input(2), *source = node->input(3);
  if (rc.rep(x))
    return RuleResult::notApplicable(); // write-into-rows
  if (constantInt(node->input(1)) != 0)
    return RuleResult::declined();
  if (is(node, "aten::scatter_add") || is(node, "aten::scatter_add_")) {
    if (knownRank(x, &rc.analysis) != 1)
      return scatterAddByColumn(node, rc);
  } else {
    Value *alpha = namedInput(node, "alpha");
    auto one = alpha ? torch::jit::toIValue(alpha) : c10::nullopt;
    if (!one || !((one->isInt() && one->toInt() == 1) ||
                  (one->isDouble() && one->toDouble() == 1.0)))
      return RuleResult::declined();
  }
  Rep *i = rc.bounded(index);
  Rep *rows = rc.bounded(source);
  if (!i || !rows)
    return RuleResult::declined(
        "the rows added are not one row per row of the index");
  // Counts the rules cannot show equal (made by two cats, a reshape) are
  // the index's on every run that succeeds: index_add raises unless the
  // index has as many elements as the source has rows, scatter_add unless
  // it has at most as many, and adds the first ones (DESIGN.md's contract:
  // where the original raises, the result is not compared).
  return writeRows(node, rc, *i, index, source, rows,
                   mutatesFirstInput(node) ? "add_rows_" : "add_rows");
}

/// index_add/index_copy (in place or not) along dim 0 into bounded rows x,
/// by a static index and source (Pointcept's grid pooling:
/// `zeros(len(unique_key), c).index_add_(0, inverse, feat)`, the inverse of
/// unique's groups): the same op on the padded rows, same count. An index
/// of the original's rows is below its count; one at or past it raises
/// there, and here may write a padding row instead.
RuleResult writeIntoRows(Node *node, RuleContext &rc) {
  Rep *x = rc.bounded(node->input(0));
  if (!x || constantInt(node->input(1)) != 0)
    return RuleResult::notApplicable();
  for (size_t i = 1; i < node->inputs().size(); ++i)
    if (rc.rep(node->input(i)))
      return RuleResult::notApplicable(); // add-rows', or no form
  torch::jit::Graph &graph = rc.graph;
  Node *copy = graph.insertNode(graph.createClone(
      node, [&](Value *v) { return v == node->input(0) ? x->value : v; }));
  if (mutatesFirstInput(node)) {
    // In place: the padded rows are written, and the result is x itself.
    node->output()->replaceAllUsesWith(node->input(0));
    rc.replaceWriter(node); // it writes: never erased as dead
    return RuleResult::applied();
  }
  rc.setBounded(node->output(), copy->output(), x->count, x->isIndex, x->is1D);
  return RuleResult::applied();
}

} // namespace

void addIndexRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"where-element", On::Use,
                   ops({"aten::__getitem__", "prim::ListUnpack"}),
                   whereElement});
  rules.push_back(
      {"prefix", On::Use, ops({"aten::slice", "aten::narrow"}), prefix});
  rules.push_back({"slice-rows", On::Use, ops({"aten::slice"}), sliceRows});
  rules.push_back(
      {"lifted-bounds", On::Use, ops({"aten::slice"}), liftedBounds});
  rules.push_back({"row-at", On::Use, ops({"aten::select"}), rowAt});
  rules.push_back({"selection-of-bounded", On::Use,
                   ops({"aten::index", "aten::masked_select"}),
                   selectionOfBounded});
  rules.push_back(
      {"gather", On::Use, ops({"aten::index", "aten::index_select"}), gather});
  rules.push_back({"cat", On::Use, ops({"aten::cat"}), cat});
  rules.push_back(
      {"put", On::Use, ops({"aten::index_put_", "aten::index_put"}), put});
  rules.push_back(
      {"add-rows", On::Use,
       ops({"aten::index_add", "aten::index_add_", "aten::scatter_add",
            "aten::scatter_add_"}),
       addRows});
  rules.push_back({"write-into-rows", On::Use,
                   ops({"aten::index_add", "aten::index_add_",
                        "aten::index_copy", "aten::index_copy_"}),
                   writeIntoRows});
}

} // namespace staticify::bound
