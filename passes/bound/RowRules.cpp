//===- RowRules.cpp - Ops that work row by row, sorts and reductions ------===//
//
//   elementwise ops on bounded values        -> on the padded rows
//   per-row ops on dims >= 1 (softmax, ...)   -> on the padded rows
//   sort/argsort (any dim), topk (dim 0)     -> live rows first (sort_dim)
//   gather along dims >= 1, one count         -> row by row (gather_within_rows)
//   gather along dim 0 of a bounded index,
//   take of a bounded index                  -> the index's rows
//   reductions of a bounded value            -> masked (keep_rows)
//   histc over a constant range              -> padding made -inf (ignored)
//   bincount, minlength >= 1                 -> padding to bin 0, taken out
//   cross_entropy/nll_loss of bounded rows   -> padding targets ignored
//   linear, convolutions, pooling, interpolation, roi_align of bounded
//   rows                                     -> on the padded rows
//   broadcast_tensors of one selection's rows -> on the padded rows
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/LiftScalars.h"
#include "passes/Selection.h"
#include "passes/MaskedReduce.h"
#include "passes/OpCatalogue.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Ops computed elementwise on a bounded value's padded rows, padding
/// included (and the `_like` ops, which read only its shape): the result
/// keeps the leading dimension.
bool isElementwise(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op || !(opElementwise(node) || op->has(kLikeInput)) ||
      opRole(node) != OpRole::LeadingPreserving || node->outputs().size() != 1)
    return false;
  return neverRaisesOnValues(node); // padding rows are computed too
}

/// Whether every dimension argument of \p node named in \p names that it
/// has is a constant that is >= 1 once made non-negative (at least one is
/// there): the op then works within each row of dimension 0. A negative
/// dimension counts from the end of a rank the program may fix
/// (knownRank). Returns the rank the input must have at least for that
/// (0: none), or nullopt when a dimension is or may be 0 whatever the rank.
/// With a rank unknown, -1 is a trailing dimension only of an input of rank
/// 2 or more: passRows guards on it.
std::optional<int64_t> trailingDimsRank(const Node *node,
                                        const std::vector<const char *> &names,
                                        const RuleContext &rc) {
  // An op that adds a dimension (unsqueeze) takes dims over one more than
  // its input's rank.
  const OpInfo *op = opInfo(node);
  int64_t extra = op && op->has(kAddsDim) ? 1 : 0;
  // cat and stack count dims by their parts' rank (stack's over one more).
  const Value *of = node->input(0);
  const Node *list = of->node();
  if (of->type()->kind() == c10::TypeKind::ListType &&
      list->kind() == c10::prim::ListConstruct && !list->inputs().empty()) {
    of = list->input(0);
    extra += is(node, "aten::stack") ? 1 : 0;
  }
  bool any = false;
  int64_t minRank = 0;
  for (const char *name : names) {
    Value *dim = namedInput(node, name);
    if (!dim)
      continue;
    std::optional<std::vector<int64_t>> dims = constantIntList(dim);
    if (auto d = constantInt(dim))
      dims = std::vector<int64_t>{*d};
    if (!dims || dims->empty())
      return std::nullopt;
    for (int64_t d : *dims) {
      std::optional<int64_t> resolved =
          resolveDim(d, of, extra, &rc.analysis);
      if (resolved && *resolved < 1)
        return std::nullopt;
      if (resolved)
        continue;
      // Negative, and out of range of a known rank: the op raises.
      if (knownRank(of, &rc.analysis))
        return std::nullopt;
      minRank = std::max(minRank, 1 - d - extra);
    }
    any = true;
  }
  if (!any)
    return std::nullopt;
  return minRank;
}

/// The names of \p node's dimension arguments, if it is a row-wise op
/// (OpInfo::rowDims). None raises on the values in the padding rows (gather
/// by a padded index would). Reductions are handled with the masked
/// reductions (`reduce`).
const std::vector<const char *> *perRowDims(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && !op->rowDims.empty() ? &op->rowDims : nullptr;
}

/// The padded rows of \p node's bounded operands go through it as they
/// are, and its results keep their count: for ops that compute each row of
/// dimension 0 from the same rows of their operands (elementwise ops,
/// perRowDims() on trailing dims, reductions over trailing dims). Every
/// tensor operand is bounded with the one count (a list's elements too:
/// cat and stack on dim >= 1) or 0-d: a larger static operand could
/// broadcast against the padding. A result holds indices when the
/// analysis says int64, or, its dtype unknown, when every bounded operand
/// holds indices and the op keeps the dtype of its first (\p keepsDtype).
///
/// Operands with counts known equal (selections by one mask) whose ranks
/// the graph does not fix (two inputs: TorchScript records no ranks) go
/// through behind a rank guard (emitRankGuarded).
bool passRows(Node *node, RuleContext &rc, bool keepsDtype,
              int64_t minRank = 0) {
  for (Value *out : node->outputs())
    if (!isTensor(out))
      return false;
  Value *count = nullptr;
  Value *first = nullptr; // the first bounded operand
  bool allIndex = true, all1D = true;
  // Padded operands whose rank must equal the first's at run time.
  std::vector<Value *> guarded;
  // The padded stand-in of one operand, or null if it cannot go through.
  // Bounded operands share one count; counts only known equal (selections
  // of bases of other ranks) also need equal ranks, since of two ranks they
  // would broadcast by their trailing dimensions: known, or guarded.
  // Static tensors of more than 0 dims, which must broadcast against the
  // bounded operands' trailing dims only (a lower rank than theirs).
  std::vector<Value *> statics;
  auto padded = [&](Value *v) -> Value * {
    Rep *r = rc.rep(v);
    if (!r) {
      if (isTensor(v) && !provablyZeroDim(v))
        statics.push_back(v);
      return v;
    }
    if (r->kind != Rep::Kind::Bounded)
      return nullptr;
    if (count && r->count != count) {
      if (!rc.sameCount(count, r->count))
        return nullptr;
      std::optional<int64_t> a = knownRank(first, &rc.analysis);
      std::optional<int64_t> b = knownRank(v, &rc.analysis);
      if (a && b && *a != *b)
        return nullptr;
      if (!a || !b)
        guarded.push_back(r->value);
    }
    first = first ? first : v;
    count = count ? count : r->count;
    allIndex &= r->isIndex;
    all1D &= r->is1D;
    return r->value;
  };
  std::unordered_map<Value *, Value *> replaced;
  Node *list = nullptr;
  std::vector<Value *> parts;
  for (Value *in : node->inputs()) {
    Node *def = in->node();
    if (in->type()->kind() == c10::TypeKind::ListType &&
        def->kind() == c10::prim::ListConstruct && def->inputs().size() &&
        isTensor(def->input(0))) {
      if (list || in->uses().size() != 1)
        return false;
      for (Value *e : def->inputs()) {
        Value *p = padded(e);
        if (!p || !rc.rep(e))
          return false; // every element bounded, with the one count
        parts.push_back(p);
      }
      list = def;
      continue;
    }
    Value *p = padded(in);
    if (!p)
      return false;
    replaced[in] = p;
  }
  if (!count)
    return false;
  torch::jit::Graph &graph = rc.graph;
  Value *firstPadded = rc.rep(first)->value;
  Value *cond = nullptr;
  auto require = [&](Value *c) {
    cond = cond ? emit(graph, "aten::__and__", {cond, c}, node) : c;
  };
  Value *rank = nullptr;
  // A static operand of a rank below the bounded's broadcasts along their
  // trailing dims (`t[:, None] * steps`, `rows * self.weight`): the rows
  // stay theirs. Known from the ops that made them, or guarded.
  std::vector<Value *> lower;
  int64_t rowsRank = std::max<int64_t>(1, minimumRank(first, &rc.analysis));
  std::optional<int64_t> firstRank = knownRank(first, &rc.analysis);
  for (Value *s : statics) {
    std::optional<int64_t> r = knownRank(s, &rc.analysis);
    if (r && firstRank && *r >= *firstRank)
      return false; // it broadcasts against the padding rows: no guard holds
    if (!r || *r >= rowsRank)
      lower.push_back(s);
  }
  if (minRank > 0 || !guarded.empty() || !lower.empty())
    rank = emit(graph, "aten::dim", {firstPadded}, node);
  if (minRank > 0)
    require(emit(graph, "aten::ge", {rank, rc.constant(minRank)}, node));
  for (Value *p : guarded)
    require(emit(graph, "aten::eq",
                 {rank, emit(graph, "aten::dim", {p}, node)}, node));
  for (Value *s : lower)
    require(emit(graph, "aten::lt",
                 {emit(graph, "aten::dim", {s}, node), rank}, node));
  std::vector<Value *> results =
      cond ? emitRankGuarded(rc, node, replaced, list, parts, firstPadded,
                             cond, count)
           : cloneOnRows(graph, node, replaced, list, parts);
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    DTypeKind known = rc.analysis.info(node->output(i)).dtype;
    bool index =
        known == DTypeKind::Long ||
        (known == DTypeKind::Unknown && allIndex && keepsDtype && i == 0);
    // Vectors and numbers make a vector where the op keeps the shape.
    const OpInfo *op = opInfo(node);
    bool vector = all1D && !list &&
                  (opElementwise(node) || (op && op->has(kKeepsShape)));
    rc.setBounded(node->output(i), results[i], count, index, vector);
  }
  if (list)
    rc.absorb(list);
  return true;
}

/// An op of kPerRowOps on trailing dimensions.
RuleResult perRow(Node *node, RuleContext &rc) {
  const std::vector<const char *> *dims = perRowDims(node);
  std::optional<int64_t> rank =
      dims ? trailingDimsRank(node, *dims, rc) : std::nullopt;
  if (!rank)
    return RuleResult::notApplicable();
  int64_t minRank = *rank;
  // A rank the ops that made the operand bound from below needs no guard:
  // 1 of a bounded operand (stack(..., dim=-1) of vectors whose rank the
  // program does not fix: it has rows), 3 of `pts[..., 0]` of pts =
  // `o[:, None, :] + d[:, None, :] * t[..., None]` (minimumRank).
  const Node *list = node->input(0)->node();
  Value *ranked = list->kind() == c10::prim::ListConstruct &&
                          !list->inputs().empty()
                      ? list->input(0)
                      : node->input(0);
  int64_t atLeast = std::max<int64_t>(rc.bounded(ranked) ? 1 : 0,
                                      minimumRank(ranked, &rc.analysis));
  if (minRank <= atLeast)
    minRank = 0;
  // Behind a rank guard, the fallback's result must have the input's rows.
  if (minRank > 0 && !opInfo(node)->has(kKeepsShape))
    return RuleResult::notApplicable();
  Value *dtype = namedInput(node, "dtype");
  return RuleResult::appliedIf(
      passRows(node, rc,
               (!dtype || dtype->mustBeNone()) && !is(node, "aten::argsort"),
               minRank));
}

/// cat and stack along a dim >= 1 of bounded parts whose counts are not
/// known equal (`torch.stack([x[x > 0], y[y < 0]], 1)`): neither broadcasts,
/// so both raise unless every part has the first's rows; the other parts'
/// padded rows are fitted to the first's (fit_rows: cut, or extended with
/// zeros) and the result has its count.
RuleResult joinOtherCounts(Node *node, RuleContext &rc) {
  if (!is(node, "aten::cat") && !is(node, "aten::stack"))
    return RuleResult::notApplicable();
  Node *list = node->input(0)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() < 2 ||
      node->input(0)->uses().size() != 1)
    return RuleResult::notApplicable();
  std::vector<Rep *> parts;
  bool oneCount = true;
  for (Value *e : list->inputs()) {
    Rep *r = rc.bounded(e);
    if (!r)
      return RuleResult::notApplicable();
    oneCount &= rc.sameCount(parts.empty() ? r->count : parts[0]->count,
                             r->count);
    parts.push_back(r);
  }
  // One count is per-row's; a dim that may be 0 (negative, of a rank the
  // program does not fix beyond the parts' rows) is not taken.
  std::optional<int64_t> minRank = trailingDimsRank(node, *perRowDims(node), rc);
  if (oneCount || !minRank ||
      *minRank > std::max<int64_t>(1, minimumRank(list->input(0), &rc.analysis)))
    return RuleResult::notApplicable();
  Value *rows = emit(rc.graph, "aten::size",
                     {parts[0]->value, rc.constant(0)}, node);
  std::vector<Value *> fitted{parts[0]->value};
  for (size_t i = 1; i < parts.size(); ++i)
    fitted.push_back(
        insertForm(rc.graph, "fit_rows", {parts[i]->value, rows}, node)[0]);
  Value *out = cloneOnRows(rc.graph, node, {}, list, fitted)[0];
  rc.setBounded(node->output(), out, parts[0]->count,
                rc.analysis.info(node->output()).dtype == DTypeKind::Long,
                false);
  return RuleResult::applied();
}

/// x.expand(-1, s1, ...) of bounded rows x, one size per dim of x and -1
/// first: each row is expanded alone (`dst[keep][:, None].expand(-1, c)`
/// before a scatter_add, PyG). A size list longer than x's rank adds
/// leading dims and moves the rows: of a rank the program does not fix,
/// the host checks it (a guard whose fallback is the original, counted
/// apart).
RuleResult expandRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  if (!r || node->inputs().size() != 3)
    return RuleResult::notApplicable();
  std::vector<Value *> sizes = rc.intListElements(node->input(1));
  std::optional<int64_t> rank = knownRank(node->input(0), &rc.analysis);
  if (sizes.empty() || constantInt(sizes.front()) != -1 ||
      (rank && static_cast<size_t>(*rank) != sizes.size()))
    return RuleResult::declined(
        "expand's sizes do not keep the rows: -1 first, one per dim");
  torch::jit::Graph &graph = rc.graph;
  auto expanded = [&] {
    return emit(graph, "aten::expand", {r->value, node->input(1)}, node,
                {torch::jit::NamedValue("implicit", node->input(2))});
  };
  Value *out =
      rank ? expanded()
           : rc.guardOriginal(
                 emit(graph, "aten::eq",
                      {emit(graph, "aten::dim", {r->value}, node),
                       rc.constant(static_cast<int64_t>(sizes.size()))},
                      node),
                 node, expanded);
  rc.setBounded(node->output(), out, r->count, r->isIndex);
  return RuleResult::applied();
}

/// x.repeat(sizes) of bounded rows x with one size per dim (a rank the
/// program fixes): the trailing sizes repeat each row alone; the first, k,
/// repeats the valid rows k times over, in order (repeat_rows: k times the
/// padded rows, k times the count). A longer size list adds leading dims
/// and moves the rows: not rewritten.
RuleResult repeatRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  if (!r || node->inputs().size() != 2)
    return RuleResult::notApplicable();
  std::vector<Value *> sizes = rc.intListElements(node->input(1));
  std::optional<int64_t> rank = knownRank(node->input(0), &rc.analysis);
  if (sizes.empty() || !rank || static_cast<size_t>(*rank) != sizes.size())
    return RuleResult::declined(
        "repeat's sizes are not one per dim of rows of a known rank");
  torch::jit::Graph &graph = rc.graph;
  Value *rows = r->value;
  if (sizes.size() > 1) {
    std::vector<Value *> each = sizes;
    each.front() = rc.constant(1);
    Value *list =
        graph.insertNode(graph.createList(c10::IntType::get(), each))->output();
    rows = emit(graph, "aten::repeat", {rows, list}, node);
  }
  Value *count = r->count;
  if (constantInt(sizes.front()) != 1) {
    auto outs = insertForm(graph, "repeat_rows", {rows, count, sizes.front()},
                           node);
    rows = outs[0];
    count = outs[1];
  }
  rc.setBounded(node->output(), rows, count, r->isIndex, r->is1D);
  return RuleResult::applied();
}

/// x.expand_as(y) of bounded x and y with one count (F.normalize's
/// `x / norm.clamp_min(eps).expand_as(x)` of selected rows): the padded
/// rows expanded alike, the count kept (passRows: ranks the program does
/// not fix are checked on the host).
RuleResult expandAsOwnRows(Node *node, RuleContext &rc) {
  Rep *x = rc.bounded(node->input(0)), *y = rc.bounded(node->input(1));
  if (!x || !y)
    return RuleResult::notApplicable();
  return RuleResult::appliedIf(passRows(node, rc, /*keepsDtype=*/true));
}

/// unbind(x, d) of a bounded x along a dim d >= 1, unpacked (torchvision's
/// resize_boxes: `xmin, ymin, xmax, ymax = boxes.unbind(1)`): each part
/// has x's rows. A dim the rank does not resolve to >= 1 (of a vector,
/// unbind(-1) gives its elements) is not rewritten.
RuleResult unbindRows(Node *node, RuleContext &rc) {
  Rep *x = rc.bounded(node->input(0));
  std::optional<int64_t> dim = constantInt(node->input(1));
  const auto &uses = node->output()->uses();
  if (!x || !dim || uses.size() != 1 ||
      uses[0].user->kind() != c10::prim::ListUnpack)
    return RuleResult::notApplicable();
  if (*dim < 0) {
    std::optional<int64_t> rank = knownRank(node->input(0), &rc.analysis);
    if (!rank)
      return RuleResult::notApplicable();
    *dim += *rank;
  }
  if (*dim < 1)
    return RuleResult::notApplicable();
  torch::jit::Graph &graph = rc.graph;
  Node *unpack = uses[0].user;
  Value *parts =
      emit(graph, "aten::unbind", {x->value, rc.constant(*dim)}, node);
  Node *copy = graph.insertNode(graph.create(
      c10::prim::ListUnpack, {parts}, unpack->outputs().size()));
  for (size_t i = 0; i < unpack->outputs().size(); ++i) {
    copy->output(i)->setType(unpack->output(i)->type());
    rc.setBounded(unpack->output(i), copy->output(i), x->count, x->isIndex);
  }
  return RuleResult::applied();
}

/// broadcast_tensors of bounded rows of one count, unpacked: the
/// functional losses broadcast their input and target first
/// (F.smooth_l1_loss, l1_loss, mse_loss on `pred[fg], target[fg]`). Of one
/// rank and one count, every operand has as many rows, padded or not, so
/// dimension 0 never broadcasts and the padded rows go through; the
/// trailing dimensions broadcast (or raise) as they did. One count does not
/// fix one rank (`a` and `a.sum(1)` share it), so ranks the program does
/// not fix are a host fact: `if` they agree, the padded rows go through;
/// otherwise (a tensor of rank 1 against the last dimension of another)
/// the fallback broadcasts the valid rows and pads the results back
/// (emitRankGuarded). Counts known equal (selections by one mask of
/// bases of ranks the graph does not record) take the same test. A static
/// or unselected operand could broadcast against the padding and is not
/// rewritten.
RuleResult broadcastRows(Node *node, RuleContext &rc) {
  Node *list = node->input(0)->node();
  const auto &uses = node->output()->uses();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().empty() ||
      node->input(0)->uses().size() != 1 || uses.size() != 1 ||
      uses[0].user->kind() != c10::prim::ListUnpack)
    return RuleResult::notApplicable();
  Node *unpack = uses[0].user;
  Rep *first = rc.bounded(list->input(0));
  std::optional<int64_t> rank = knownRank(list->input(0), &rc.analysis);
  bool ranksKnown = rank.has_value();
  std::vector<Value *> padded;
  for (Value *e : list->inputs()) {
    Rep *r = rc.bounded(e);
    if (!r || !first)
      return RuleResult::declined(
          "it broadcasts selected rows with a tensor that is not rows of "
          "the same selection");
    std::optional<int64_t> k = knownRank(e, &rc.analysis);
    if (rank && k && *k != *rank)
      return RuleResult::declined(
          "it broadcasts rows of different ranks against each other");
    ranksKnown &= k.has_value();
    if (!rc.sameCount(r->count, first->count))
      return RuleResult::declined(
          "it broadcasts rows of selections of different counts");
    padded.push_back(r->value);
  }
  torch::jit::Graph &graph = rc.graph;
  size_t parts = unpack->outputs().size();
  auto broadcast = [&](const std::unordered_map<Value *, Value *> &,
                       const std::vector<Value *> &operands) {
    Node *l = graph.insertNode(graph.createList(c10::TensorType::get(), operands));
    Value *b = emit(graph, "aten::broadcast_tensors", {l->output()}, node);
    Node *u = graph.insertNode(graph.create(c10::prim::ListUnpack, {b}, parts));
    std::vector<Value *> outs;
    for (size_t i = 0; i < parts; ++i)
      outs.push_back(u->output(i)->setType(unpack->output(i)->type()));
    return outs;
  };
  std::vector<Value *> results;
  if (ranksKnown || padded.size() == 1) {
    results = broadcast({}, padded);
  } else {
    Value *dim0 = emit(graph, "aten::dim", {padded[0]}, node);
    Value *cond = nullptr;
    for (size_t i = 1; i < padded.size(); ++i) {
      Value *same = emit(
          graph, "aten::eq",
          {dim0, emit(graph, "aten::dim", {padded[i]}, node)}, node);
      cond = cond ? emit(graph, "aten::__and__", {cond, same}, node) : same;
    }
    results = emitRankGuarded(rc, node, {}, padded, padded[0], cond,
                              first->count, parts, broadcast);
  }
  for (size_t i = 0; i < parts; ++i) {
    Rep *r = rc.bounded(list->input(i));
    rc.setBounded(unpack->output(i), results[i], first->count, r->isIndex,
                  r->is1D);
  }
  rc.absorb(list);
  return RuleResult::applied();
}

/// An op batched on its first operand (OpInfo::sampleRank) of bounded rows
/// x, its other operands not bounded: the padded rows go through and the
/// result keeps their count. A mixture-of-experts expert on the tokens
/// routed to it (`expert(x.reshape(-1, d)[idx])`: linear), Mask R-CNN's and
/// Keypoint R-CNN's heads on the RoIs of the positive proposals (conv2d,
/// conv_transpose2d, interpolate). Row by row only from that rank on: an
/// unbatched convolution takes dimension 0 as channels, linear contracts a
/// vector, and their results then have other rows than the count, so
/// where the program does not fix x's rank (knownRank) nothing is
/// rewritten: no fallback could keep the count. linear's bias is added to
/// the result: of rank 1 to every row; of rank 2 it must have the valid
/// rows' count, which the padded rows do not have, so `b.dim() <= 1` is
/// checked on the host behind a guard, whose fallback runs the original on
/// the valid rows (its result has their rows, or it raises as the original
/// does); so is `w.dim() == 2` where the weight is not known to be a
/// matrix, since the rank knownRank gives the result assumes one.
/// batch_norm is per row only with its running statistics: in eval mode,
/// with both given. With --runtime-ops the op computes the valid rows only
/// on the CPU (cloneOnValidRows).
RuleResult sampleRows(Node *node, RuleContext &rc) {
  const OpInfo *op = opInfo(node);
  Rep *x = rc.bounded(node->input(0));
  if (!op || op->sampleRank == 0 || !x || node->outputs().size() != 1 ||
      namedInput(node, "out") || !rc.onlyFirstRepresented(node))
    return RuleResult::declined();
  std::string name = node->kind().toQualString();
  if (is(node, "aten::batch_norm")) {
    Value *mean = namedInput(node, "running_mean");
    Value *var = namedInput(node, "running_var");
    Value *training = namedInput(node, "training");
    if (!training || constantBool(training) != false || !mean || !var ||
        !isTensor(mean) || !isTensor(var))
      return RuleResult::declined(
          "batch_norm that may use the batch's statistics mixes the rows");
  }
  std::optional<int64_t> rank = knownRank(node->input(0), &rc.analysis);
  if (!rank)
    return RuleResult::declined(
        "the program does not fix the rank of the rows '" + name +
        "' takes (below rank " + std::to_string(op->sampleRank) +
        " it does not work row by row)");
  if (*rank < op->sampleRank)
    return RuleResult::declined("'" + name + "' of rank " +
                                std::to_string(*rank) +
                                " does not work row by row (it does from rank " +
                                std::to_string(op->sampleRank) + ")");
  std::unordered_map<Value *, Value *> replaced = {
      {node->input(0), x->value}};
  Value *cond = nullptr;
  auto require = [&](Value *c) {
    cond = cond ? emit(rc.graph, "aten::__and__", {cond, c}, node) : c;
  };
  if (is(node, "aten::linear")) {
    Value *bias = node->input(2);
    if (!bias->mustBeNone() && !isTensor(bias))
      return RuleResult::declined(); // an Optional the run time resolves
    if (!bias->mustBeNone())
      require(emit(rc.graph, "aten::le",
                   {emit(rc.graph, "aten::dim", {bias}, node),
                    rc.constant(1)},
                   node));
    // The result has x's rank where the weight is a matrix (knownRank).
    if (knownRank(node->input(1), &rc.analysis) != 2)
      require(emit(rc.graph, "aten::eq",
                   {emit(rc.graph, "aten::dim", {node->input(1)}, node),
                    rc.constant(2)},
                   node));
  }
  if (is(node, "aten::matmul") || is(node, "aten::mm") ||
      is(node, "aten::cdist")) {
    // x @ w row by row only for a matrix w (or a vector, matmul's): a batch
    // of matrices would broadcast over x's rows (cdist's, a batch of sets),
    // and no guard's fallback could give rows then. The rank must be the
    // program's.
    std::optional<int64_t> other = knownRank(node->input(1), &rc.analysis);
    if (!other || *other > 2)
      return RuleResult::declined(
          "the program does not fix the second operand of '" + name +
          "' as a matrix or a vector: a batch of them would broadcast over "
          "the rows");
  }
  auto onRows = [&](const std::unordered_map<Value *, Value *> &r,
                    const std::vector<Value *> &) {
    return cloneOnValidRows(rc, node, r, node->input(0), x->count);
  };
  std::vector<Value *> out =
      cond ? emitRankGuarded(rc, node, replaced, nullptr, {}, x->value, cond,
                             x->count, onRows)
           : onRows(replaced, {});
  rc.setBounded(node->output(), out[0], x->count, /*isIndex=*/false);
  return RuleResult::applied();
}

/// torchvision::roi_align(input, rois, ...) of bounded rois
/// (MultiScaleRoIAlign's `rois[idx_in_level]` per level): each output row
/// is pooled from its own roi, so the padded rois go through and the result
/// keeps their count. What a padding row holds could name an image the input
/// lacks, which roi_align reads without a check: padding rows become zero
/// boxes of image 0 first. Image 0 exists when the input has one, a host
/// fact (`input.size(0) > 0`) that guards the padded form; the fallback
/// pools the valid rows only, after a host read (counted apart). With
/// --runtime-ops the padded form pools the valid rows only on the CPU
/// (cloneOnValidRows).
RuleResult roiAlignRows(Node *node, RuleContext &rc) {
  Rep *rois = rc.bounded(node->input(1));
  if (!rois || rc.rep(node->input(0)) || !isTensor(node->input(0)))
    return RuleResult::declined();
  for (size_t i = 2; i < node->inputs().size(); ++i)
    if (rc.rep(node->input(i)))
      return RuleResult::declined();
  torch::jit::Graph &graph = rc.graph;
  Value *live = insertForm(graph, "keep_rows", {rois->value, rois->count},
                           node)[0];
  Value *safe = emit(graph, "aten::where",
                     {live, rois->value, graph.insertConstant(0.0)}, node);
  Value *images = emit(graph, "aten::size", {node->input(0), 0}, node);
  Value *cond = emit(graph, "aten::gt", {images, rc.constant(0)}, node);
  std::vector<Value *> out = emitRankGuarded(
      rc, node, {{node->input(1), safe}}, nullptr, {}, safe, cond, rois->count,
      [&](const std::unordered_map<Value *, Value *> &r,
          const std::vector<Value *> &) {
        return cloneOnValidRows(rc, node, r, node->input(1), rois->count);
      });
  rc.setBounded(node->output(), out[0], rois->count, /*isIndex=*/false);
  return RuleResult::applied();
}

/// Whether \p a and \p b hold the same elements in the same order: one
/// value, or one a reshape, view or flatten of the other.
bool sameElements(const Value *a, const Value *b) {
  auto root = [](const Value *v) {
    const Node *n = v->node();
    if (is(n, "aten::reshape") || is(n, "aten::view") || is(n, "aten::flatten"))
      return static_cast<const Value *>(n->input(0));
    return v;
  };
  return a == b || root(a) == b || a == root(b) || root(a) == root(b);
}

/// Whether every element of \p x that \p mask selects is above -inf
/// (below inf, for !\p largest) and not NaN: the mask is `x > y` (`y < x`),
/// or a conjunction with such a test.
bool selectsOrdered(const Value *mask, const Value *x, bool largest) {
  const Node *n = mask->node();
  if (is(n, "aten::__and__") || is(n, "aten::bitwise_and") ||
      is(n, "aten::logical_and"))
    return selectsOrdered(n->input(0), x, largest) ||
           selectsOrdered(n->input(1), x, largest);
  if (n->inputs().size() != 2)
    return false;
  if (is(n, largest ? "aten::gt" : "aten::lt"))
    return sameElements(n->input(0), x);
  if (is(n, largest ? "aten::lt" : "aten::gt"))
    return sameElements(n->input(1), x);
  return false;
}

/// topk(x[m], k) along its one dim: one topk over x where m holds (the
/// masked_topk form), where the selection would compact m first (cumsum
/// and scatter over every element: RetinaNet's per-level scores). The
/// values, the indices (rows of x[m]) and those rows' positions among m's
/// elements, where rows of another selection by m are taken
/// (IndexRules.cpp, gather).
std::vector<Value *> topOfSelection(Node *node, const Rep &r, Value *hi,
                                    bool largest, RuleContext &rc) {
  Value *x = r.selectedFrom, *mask = r.selectedBy;
  torch::jit::Graph &graph = rc.graph;
  auto outs = insertForm(graph, "masked_topk",
                         {x, mask, hi, graph.insertConstant(largest),
                          graph.insertConstant(selectsOrdered(mask, x, largest))},
                         node);
  Value *ranks = insertForm(graph, "ranks_at", {mask, outs[1]}, node)[0];
  return {outs[0], ranks, outs[1]};
}

/// sort and argsort of a bounded value along any constant dim, and topk
/// along dim 0: along dim 0 the live rows sorted first (the sort_rows form:
/// stable, so ties keep their order, and NaN and infinities sort as
/// PyTorch sorts them); topk takes the first k rows of that order (sorted,
/// which topk(sorted=False) allows), chosen by one topk over a key when k
/// has a bound on the host (the topk_rows form: equal values in an
/// unspecified order, as torch.topk leaves them), else by the sort. A
/// negative dim of a sort is resolved on the host by the form (the rank is
/// not known here); a topk's must be dim 0 of a vector, since along other
/// dims the result is not bounded. A topk along dim -1 of a selection whose
/// rank the graph does not show (`loss[target != 255]`, a vector where the
/// mask has the loss's rank) runs behind a guard on that rank: a vector's
/// top k rows where it is one; elsewhere dim -1 is not the rows' dim, and
/// the fallback runs the original topk on the valid rows (its host reads
/// counted apart), which keeps the count.
RuleResult sortRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  bool topk = is(node, "aten::topk");
  // topk(x, k) of a static x with a lifted k (`scores.topk(int(m.sum()))`):
  // x's rows, every one valid, whose first k are the result. Of a rank >= 1
  // the program fixes: a 0-d x has no rows to count.
  Rep whole(Rep::Kind::Bounded);
  Value *x = node->input(0);
  if (!r && topk && !rc.rep(x) && rc.lifted(node->input(1))) {
    std::optional<int64_t> rank = knownRank(x, &rc.analysis);
    if (!rank || *rank < 1)
      return RuleResult::declined("the rank of its input is not known");
    whole.value = x;
    whole.count = rc.rowsOf(x, node);
    whole.is1D = *rank == 1;
    whole.isIndex = rc.isIndex(x);
    r = &whole;
  }
  if (!r)
    return RuleResult::declined();
  for (size_t i = 1; i < node->inputs().size(); ++i)
    if (rc.rep(node->input(i)) && !(topk && i == 1))
      return RuleResult::declined();
  Value *dimArg = namedInput(node, "dim");
  std::optional<int64_t> dim = dimArg ? constantInt(dimArg) : std::nullopt;
  if (!dim || (topk && *dim != 0 && *dim != -1))
    return RuleResult::declined();
  // Along dim -1 of a value not known to be a vector: guarded on its rank.
  bool rankGuarded = topk && *dim == -1 && !r->is1D;
  Value *descArg = namedInput(node, topk ? "largest" : "descending");
  std::optional<c10::IValue> desc;
  if (descArg)
    if (auto v = torch::jit::toIValue(descArg))
      desc = *v;
  if (!desc || !desc->isBool())
    return RuleResult::declined();
  torch::jit::Graph &graph = rc.graph;
  auto sorted = [&] {
    return insertForm(graph, "sort_dim",
                      {r->value, r->count, rc.constant(topk ? 0 : *dim),
                       graph.insertConstant(desc->toBool())},
                      node);
  };
  if (!topk) {
    auto outs = sorted();
    if (is(node, "aten::argsort")) {
      rc.setBounded(node->output(), outs[1], r->count, true, r->is1D);
      return RuleResult::applied();
    }
    rc.setBounded(node->output(0), outs[0], r->count, r->isIndex, r->is1D);
    rc.setBounded(node->output(1), outs[1], r->count, true, r->is1D);
    return RuleResult::applied();
  }
  Value *k = node->input(1);
  if (!rc.rep(k) && rc.analysis.info(k).isDataDependent())
    return RuleResult::declined(); // k read from data: rows cut to it there
  auto topRows = [&](Value *bound) {
    return insertForm(graph, "topk_rows",
                      {r->value, r->count, bound,
                       graph.insertConstant(desc->toBool())},
                      node);
  };
  if (!rc.rep(k)) { // k rows, known on the host: static again
    auto outs = topRows(k);
    for (size_t i = 0; i < 2; ++i)
      rc.replaceStatic(node->output(i), outs[i]);
    return RuleResult::applied();
  }
  std::optional<Range> range = rc.length(k);
  // k = min(K, n) of a host K of unknown sign: behind a guard on K >= 0.
  // Else the original raises (a negative k), and so does the fallback: the
  // same topk, given K (which then is k), on the padded rows.
  std::optional<RuleContext::SignGuard> sign;
  if (!range && (sign = rc.signGuard(k, node)))
    range = rc.rangeOf(k);
  if (!range)
    return RuleResult::declined();
  Value *hi = rc.upper(*range);
  Value *count = rc.minCount(r->count, k, node);
  // With an upper bound on k, its rows by one topk over a key (topk_rows),
  // of a selection over its base where the mask holds (topOfSelection);
  // without one, every row sorted.
  bool ofSelection = hi && r->selectedFrom && r->is1D && !rankGuarded;
  auto firstRows = [&] {
    if (ofSelection)
      return topOfSelection(node, *r, hi, desc->toBool(), rc);
    return hi ? topRows(hi) : sorted();
  };
  std::vector<Value *> padded;
  if (rankGuarded) {
    if (sign)
      return RuleResult::declined();
    Value *isVector = emit(graph, "aten::eq",
                           {emit(graph, "aten::dim", {r->value}, node),
                            rc.constant(1)},
                           node);
    padded = emitRankGuarded(
        rc, node, {{node->input(0), r->value}}, {}, r->value, isVector,
        r->count, 2,
        [&](const std::unordered_map<Value *, Value *> &valid,
            const std::vector<Value *> &) {
          // The original topk on the valid rows, given k as a host int.
          std::unordered_map<Value *, Value *> operands = valid;
          operands[k] = emit(graph, "aten::Int", {rc.rep(k)->value}, node);
          return cloneOnRows(graph, node, operands, nullptr, {});
        },
        [&](const std::unordered_map<Value *, Value *> &,
            const std::vector<Value *> &) { return firstRows(); });
    // Not a vector, the topk keeps every row.
    Value *vectorCount = count;
    count = emitIf(
        graph, isVector, node, [&] { return vectorCount; },
        [&] { return r->count; });
    for (size_t i = 0; i < 2; ++i)
      rc.setBounded(node->output(i), padded[i], count, i == 1 || r->isIndex,
                    /*is1D=*/false);
    return RuleResult::applied();
  }
  if (!sign) {
    padded = firstRows();
  } else {
    padded = emitIf(graph, sign->nonNegative, node, ofSelection ? 3 : 2,
                    firstRows, [&] {
      // Of a selection, on its base: the same error, with no compaction.
      Value *rows = ofSelection ? r->selectedFrom : r->value;
      Node *raising = graph.insertNode(graph.createClone(node, [&](Value *v) {
        return v == node->input(0) ? rows
               : v == k            ? sign->whenNegative
                                   : v;
      }));
      std::vector<Value *> outs(raising->outputs().begin(),
                                raising->outputs().end());
      if (ofSelection) // it raises: any positions
        outs.push_back(outs[1]);
      return outs;
    });
    padded[0]->node()->i_(guardAttr(), 1);
  }
  Value *mask = r->selectedBy;
  for (size_t i = 0; i < 2; ++i) {
    Rep &out = rc.setBounded(node->output(i), padded[i], count,
                             i == 1 || r->isIndex, r->is1D);
    if (ofSelection && i == 1) {
      out.selectedBy = mask;
      out.atPositions = padded[2];
    }
  }
  return RuleResult::applied();
}

/// A reduction of a bounded value: over its live rows, or row by row when
/// it reduces trailing dims only.
RuleResult reduce(Node *node, RuleContext &rc) {
  if (opRole(node) != OpRole::Reduction)
    return RuleResult::notApplicable();
  Rep *r = rc.bounded(node->input(0));
  if (!r || countTensorInputs(node) != 1 || !rc.onlyFirstRepresented(node))
    return RuleResult::declined();
  RowView view{r->value, insertForm(rc.graph, "keep_rows",
                                    {r->value, r->count}, node)[0]};
  std::string why;
  std::vector<Value *> outs = emitMaskedReduction(rc.graph, node, view, /*compacted=*/true, why);
  if (outs.empty() && trailingDimsRank(node, {"dim"}, rc) == 0)
    return RuleResult::appliedIf(passRows(node, rc, /*keepsDtype=*/false));
  if (outs.empty())
    return RuleResult::declined(why);
  for (size_t i = 0; i < outs.size(); ++i)
    rc.replaceStatic(node->output(i), outs[i]);
  return RuleResult::applied();
}

/// histc(x, bins, min, max) of bounded rows x with finite min < max
/// (constants, or host numbers behind a guard on min < max): histc ignores the elements outside [min, max] (-inf among
/// them), so the padding elements, made -inf, count nowhere and the bins
/// are the live elements' (mmdet/torchmetrics-style calibration and
/// histogram metrics over `x[valid]`). Where min == max the range is the
/// data's own, which the padding would widen: not rewritten.
RuleResult histogramRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  if (!r || node->inputs().size() != 4)
    return RuleResult::notApplicable();
  auto bound = [](const Value *v) -> std::optional<double> {
    auto iv = torch::jit::toIValue(v);
    if (iv && (iv->isDouble() || iv->isInt()))
      return iv->toScalar().toDouble();
    return std::nullopt;
  };
  std::optional<double> lo = bound(node->input(2)), hi = bound(node->input(3));
  const bool constant = lo && hi;
  if (rc.rep(node->input(1)) || rc.rep(node->input(2)) || rc.rep(node->input(3)) ||
      (constant && (!std::isfinite(*lo) || !std::isfinite(*hi) || *lo >= *hi)))
    return RuleResult::declined(
        "a histogram over the data's own range (min == max) or a range "
        "read from data: the padding would widen it");
  auto live = [&] {
    Value *keep =
        insertForm(rc.graph, "keep_rows", {r->value, r->count}, node)[0];
    Value *padded = emit(
        rc.graph, "aten::where",
        {keep, r->value, -std::numeric_limits<double>::infinity()}, node);
    return rc.graph
        .insertNode(rc.graph.createClone(
            node, [&](Value *v) { return v == node->input(0) ? padded : v; }))
        ->output();
  };
  // A range the host computes (mmseg's `max=self.num_classes - 1`): behind
  // a guard on min < max (where it fails, the original on the valid rows:
  // the data's own range, or PyTorch's error).
  Value *out = constant ? live()
                        : rc.guardOriginal(emit(rc.graph, "aten::lt",
                                                {node->input(2), node->input(3)},
                                                node),
                                           node, live);
  rc.replaceStatic(node->output(), out);
  return RuleResult::applied();
}

/// bincount(x, None, minlength) of a bounded vector x, minlength >= 1 (a
/// constant, or a host int behind a guard) (torchmetrics' `bincount(target[valid], minlength=C)`): the padding
/// goes to bin 0 and is taken out again (bincount_live). The result's length
/// still depends on the largest live value, as the original's: bincount
/// stays a sync point of its own, the selection does not. Weighted counts
/// are left alone: PyTorch returns int64 zeros for an empty input and the
/// weights' dtype otherwise, a dtype the count would decide.
RuleResult bincountRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  if (!r || node->inputs().size() != 3)
    return RuleResult::notApplicable();
  std::optional<int64_t> minlength = constantInt(node->input(2));
  // x of another rank raises in both (where's broadcast, or bincount).
  if (!node->input(1)->mustBeNone() || rc.rep(node->input(2)) ||
      (minlength && *minlength < 1))
    return RuleResult::declined(
        "bincount of a bounded value needs no weights (an empty input's "
        "counts are int64 whatever the weights) and a minlength of at least "
        "1 (an empty selection has no bin), known on the host");
  auto live = [&] {
    return insertForm(rc.graph, "bincount_live",
                      {r->value, r->count, node->input(2)}, node)[0];
  };
  // A minlength the host computes (`minlength=num_classes ** 2`): behind a
  // guard on it being at least 1; the fallback is the original on the
  // valid rows.
  Value *counts =
      minlength ? live()
                : rc.guardOriginal(emit(rc.graph, "aten::ge",
                                        {node->input(2), rc.constant(1)}, node),
                                   node, live);
  rc.replaceStatic(node->output(), counts);
  return RuleResult::applied();
}

/// trapz(y, x) and trapezoid(y, x) of y and x bounded by one count, along
/// dim 0 (torchmetrics' `auc`: `torch.trapz(tpr, fpr)` of a curve cut at
/// its thresholds): the live pairs' trapezoids summed (trapz_live), behind
/// a guard (metadata: no sync) on both being vectors and the result's dtype
/// not depending on the count (trapz_fits); the fallback is the original
/// on the valid rows. Spacing by a number (`dx=`) is left alone.
RuleResult trapzRows(Node *node, RuleContext &rc) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || schema->overload_name() != "x" || node->inputs().size() != 3)
    return RuleResult::notApplicable();
  Rep *y = rc.bounded(node->input(0)), *x = rc.bounded(node->input(1));
  std::optional<int64_t> dim = constantInt(node->input(2));
  if (!y || !x || !rc.sameCount(y->count, x->count) || !(dim == 0 || dim == -1))
    return RuleResult::declined(
        "trapz of bounded values needs y and x selected with one count, "
        "integrated along their first dim");
  Value *fits = insertForm(rc.graph, "trapz_fits", {y->value, x->value}, node)[0];
  Value *area = rc.guardOriginal(fits, node, [&] {
    return insertForm(rc.graph, "trapz_live", {y->value, x->value, y->count},
                      node)[0];
  });
  rc.replaceStatic(node->output(), area);
  return RuleResult::applied();
}

/// gather(src, dim, index) along a dim >= 1 of bounded src and index with
/// one count (x[m] gathered by y[m]): row by row (gather_within_rows), the
/// padding rows' indices made valid so that only live rows can raise, as in
/// the original.
///
/// Along dim 0, of a src that is not bounded and a bounded index (Open3D's
/// `gather(labels, 0, valid_idx)`, `gather(scores, 0, idx.unsqueeze(-1)
/// .expand(-1, c))`): row r of the result reads src at index row r alone,
/// so the result has the index's rows, and the same form applies (no other
/// dim of the index outgrows src's: the padding is along dim 0).
RuleResult gatherRows(Node *node, RuleContext &rc) {
  Rep *src = rc.bounded(node->input(0));
  Rep *index = rc.bounded(node->input(2));
  if (!index || rc.rep(node->input(1)) || rc.rep(node->input(3)) ||
      (src && !rc.sameCount(src->count, index->count)) ||
      (!src && rc.rep(node->input(0))))
    return RuleResult::declined();
  std::optional<int64_t> dim = constantInt(node->input(1));
  if (dim)
    dim = resolveDim(*dim, src ? node->input(0) : node->input(2), 0,
                     &rc.analysis);
  if (!src && dim == 0) {
    Value *rows = insertForm(rc.graph, "gather_within_rows",
                             {node->input(0), rc.constant(0), index->value,
                              index->count},
                             node)[0];
    rc.setBounded(node->output(), rows, index->count,
                  rc.analysis.info(node->input(0)).dtype == DTypeKind::Long,
                  index->is1D);
    return RuleResult::applied();
  }
  if (!src || !dim || *dim < 1)
    return RuleResult::declined();
  Value *rows = insertForm(rc.graph, "gather_within_rows",
                           {src->value, rc.constant(*dim), index->value,
                            index->count},
                           node)[0];
  rc.setBounded(node->output(), rows, index->count, src->isIndex);
  return RuleResult::applied();
}

/// torch.take(src, index) of a bounded index into an src that is not
/// bounded (`torch.take(col_mean, where(isnan(x))[1])`): the result has the
/// index's shape, row r from index row r alone (take_rows).
RuleResult takeRows(Node *node, RuleContext &rc) {
  Rep *index = rc.bounded(node->input(1));
  if (!index || node->inputs().size() != 2 || rc.rep(node->input(0)))
    return RuleResult::declined();
  Value *rows = insertForm(rc.graph, "take_rows",
                           {node->input(0), index->value, index->count},
                           node)[0];
  rc.setBounded(node->output(), rows, index->count,
                rc.analysis.info(node->input(0)).dtype == DTypeKind::Long,
                index->is1D);
  return RuleResult::applied();
}

/// An elementwise op: a clone keeps indices; add(i, 0.5) would not.
/// div(x, d, rounding_mode), x % d, fmod(x, d) of a bounded x by a host
/// number d: elementwise, but an integer division raises where d is 0,
/// which the padding rows would do where the original had no rows. Behind a guard on
/// d != 0; the fallback divides the valid rows only (emitRankGuarded's
/// fallback: a host read, counted apart). torchvision's RetinaNet and FCOS:
/// `torch.div(topk_idxs, num_classes, rounding_mode="floor")` and
/// `topk_idxs % num_classes`.
RuleResult divideByHostScalar(Node *node, RuleContext &rc) {
  const OpInfo *op = opInfo(node);
  if (!op || !op->has(kRaisesOnZeroDivisor) || !opElementwise(node) ||
      opRole(node) != OpRole::LeadingPreserving ||
      node->outputs().size() != 1 || node->inputs().size() < 2 ||
      neverRaisesOnValues(node)) // true division: the elementwise rule's
    return RuleResult::notApplicable();
  Rep *x = rc.bounded(node->input(0));
  Value *d = node->input(1);
  c10::TypeKind kind = d->type()->kind();
  if (!x || rc.rep(d) || rc.analysis.info(d).isDataDependent() ||
      (kind != c10::TypeKind::IntType && kind != c10::TypeKind::FloatType))
    return RuleResult::notApplicable();
  for (size_t i = 2; i < node->inputs().size(); ++i)
    if (rc.rep(node->input(i)))
      return RuleResult::notApplicable();
  Value *nonZero = emit(rc.graph, "aten::ne", {d, rc.constant(0)}, node);
  std::unordered_map<Value *, Value *> replaced{{node->input(0), x->value}};
  std::vector<Value *> out = emitRankGuarded(rc, node, replaced, nullptr, {},
                                             x->value, nonZero, x->count);
  rc.setBounded(node->output(), out[0], x->count,
                rc.analysis.info(node->output()).dtype == DTypeKind::Long,
                x->is1D);
  return RuleResult::applied();
}

/// x * s, x / s, x + s, x - s (or in place: x.mul_(s)) of a static tensor x and a number s the
/// rules lifted to a 0-d tensor (`loss.sum() / max(pos.numel(), 1)` of a
/// count only the device knows): s moved to x's device and dtype, as the
/// op casts a number to a floating x's dtype. Only for a floating x, which
/// the host checks (metadata); an integral or bool x promotes a number
/// otherwise than a tensor, and runs the op as it was in the guard's
/// fallback (which reads s there).
RuleResult scaleByLiftedNumber(Node *node, RuleContext &rc) {
  // In place too (`res.append(correct_k.mul_(100.0 / total))`, mmseg's
  // accuracy): the Tensor overload writes in place as well.
  static const std::array<const char *, 9> ops = {
      "aten::mul",  "aten::div",  "aten::true_divide", "aten::add", "aten::sub",
      "aten::mul_", "aten::div_", "aten::add_",        "aten::sub_"};
  if (std::none_of(ops.begin(), ops.end(),
                   [&](const char *op) { return is(node, op); }) ||
      node->inputs().size() < 2 || !isTensor(node->input(0)) ||
      rc.rep(node->input(0)) ||
      rc.analysis.info(node->input(0)).isDataDependent())
    return RuleResult::notApplicable();
  Rep *s = rc.lifted(node->input(1));
  c10::TypeKind kind = node->input(1)->type()->kind();
  if (!s || (kind != c10::TypeKind::IntType && kind != c10::TypeKind::FloatType))
    return RuleResult::notApplicable();
  // alpha 1 (add, sub) and no rounding mode (div): a plain op on a tensor.
  for (size_t i = 2; i < node->inputs().size(); ++i) {
    Value *extra = node->input(i);
    if (rc.rep(extra) ||
        !(extra->mustBeNone() || constantInt(extra) == 1))
      return RuleResult::notApplicable();
  }
  torch::jit::Graph &graph = rc.graph;
  Value *x = node->input(0);
  Value *floating = emit(graph, "aten::is_floating_point", {x}, node);
  Value *out = rc.guardOriginal(floating, node, [&] {
    Value *number = emit(graph, "aten::to", {s->value, x}, node);
    return emit(graph, node->kind().toQualString(), {x, number}, node);
  });
  rc.replaceStatic(node->output(), out);
  // In place, both of the guard's branches write x: the original, kept as
  // a writer, would write it a second time.
  if (writesAnything(node))
    rc.replaceWriter(node);
  return RuleResult::applied();
}

/// x.to(other) and x.type_as(other) of a bounded other: other gives its
/// dtype and device only, which its padded tensor has (torchvision's
/// batched_nms: `torch.tensor(1).to(boxes)`, `idxs.to(boxes)`). x keeps
/// its rows: static, or bounded with its own count.
RuleResult convertLikeOther(Node *node, RuleContext &rc) {
  const OpInfo *op = opInfo(node);
  if (!op || !op->has(kTypeOfSecond) || node->inputs().size() < 2 ||
      !isTensor(node->input(1)))
    return RuleResult::notApplicable();
  Rep *other = rc.bounded(node->input(1));
  Rep *x = rc.rep(node->input(0));
  if (!other || (x && x->kind != Rep::Kind::Bounded))
    return RuleResult::notApplicable();
  Node *copy = rc.graph.insertNode(rc.graph.createClone(node, [&](Value *v) {
    if (v == node->input(1))
      return other->value;
    return v == node->input(0) && x ? x->value : v;
  }));
  if (!x) {
    rc.replaceStatic(node->output(), copy->output());
    return RuleResult::applied();
  }
  rc.setBounded(node->output(), copy->output(), x->count,
                rc.analysis.info(node->output()).dtype == DTypeKind::Long,
                x->is1D);
  return RuleResult::applied();
}

/// An elementwise op of two bounded values of one rank whose counts are not
/// known equal (`offsets - onsets` of selections by two masks), and of 0-d
/// values: broadcasting lines their rows up one by one where their counts
/// are equal and repeats the one row of a count of 1 over the other's rows;
/// of any other pair the original raises. broadcast_rows lines the padded
/// rows up so, at the longer padding, and gives the broadcast count.
bool broadcastVectors(Node *node, RuleContext &rc) {
  if (!opElementwise(node))
    return false;
  Value *a = nullptr, *b = nullptr;
  for (Value *in : node->inputs()) {
    Rep *r = rc.rep(in);
    if (!r) {
      if (isTensor(in) && !provablyZeroDim(in))
        return false; // a static tensor broadcasts against the padding
      continue;
    }
    if (r->kind != Rep::Kind::Bounded || (a && b))
      return false;
    (a ? b : a) = in;
  }
  // Of two ranks the vector would broadcast along the other's trailing dims.
  if (!a || !b || a == b || !provablySameRank(a, b))
    return false;
  const Rep &ra = *rc.rep(a), &rb = *rc.rep(b);
  if (rc.sameCount(ra.count, rb.count))
    return false;
  auto lined = insertForm(rc.graph, "broadcast_rows",
                          {ra.value, ra.count, rb.value, rb.count}, node);
  std::vector<Value *> out =
      cloneOnRows(rc.graph, node, {{a, lined[0]}, {b, lined[1]}}, nullptr, {});
  rc.setBounded(node->output(), out[0], lined[2],
                rc.analysis.info(node->output()).dtype == DTypeKind::Long,
                ra.is1D && rb.is1D);
  return true;
}

RuleResult elementwise(Node *node, RuleContext &rc) {
  if (!isElementwise(node))
    return RuleResult::notApplicable();
  return RuleResult::appliedIf(
      passRows(node, rc, /*keepsDtype=*/is(node, "aten::clone")) ||
      broadcastVectors(node, rc));
}

} // namespace

namespace {

/// cross_entropy and nll_loss of bounded rows by targets selected with them
/// (`F.cross_entropy(logits[valid], labels[valid])`): one loss per row of
/// dimension 0, so the padded rows go through, with the padding's class
/// targets set to ignore_index. Those rows then add nothing to the loss and
/// nothing to a mean's denominator (which PyTorch takes over the rows not
/// ignored, weighted), and their values, which could be any class, cannot
/// raise. With reduction none the losses are bounded (padding rows 0).
/// Class probabilities (a floating target; cross_entropy only) ignore no
/// index: their losses are taken per row and the padding masked out of the
/// sum, a mean divided by the live elements (reduce_live). Of a target
/// whose dtype the analysis does not know, the host decides by its dtype.
RuleResult classLoss(Node *node, RuleContext &rc) {
  Rep *in = rc.bounded(node->input(0));
  Rep *tg = rc.bounded(node->input(1));
  Value *reductionArg = namedInput(node, "reduction");
  Value *ignore = namedInput(node, "ignore_index");
  if (!in || !tg || !reductionArg || !ignore ||
      !rc.sameCount(in->count, tg->count))
    return RuleResult::notApplicable();
  for (size_t i = 2; i < node->inputs().size(); ++i)
    if (rc.rep(node->input(i)))
      return RuleResult::notApplicable();
  std::optional<int64_t> reduction = constantInt(reductionArg);
  if (!reduction || *reduction < 0 || *reduction > 2)
    return RuleResult::notApplicable();
  torch::jit::Graph &graph = rc.graph;
  auto loss = [&](Value *target, Value *reduce) {
    Node *copy = graph.insertNode(graph.createClone(node, [&](Value *v) {
      if (v == node->input(0))
        return in->value;
      if (v == node->input(1))
        return target;
      return v == reductionArg ? reduce : v;
    }));
    return copy->output();
  };
  auto byIndex = [&] {
    Value *safe = insertForm(graph, "ignore_padding",
                             {tg->value, tg->count, ignore}, node)[0];
    return loss(safe, reductionArg);
  };
  if (*reduction == 0) { // padding rows ignored: 0, and never out of range
    rc.setBounded(node->output(), byIndex(), in->count, false);
    return RuleResult::applied();
  }
  auto byProbabilities = [&] {
    Value *rows = loss(tg->value, rc.constant(0));
    return insertForm(graph, "reduce_live",
                      {rows, tg->count,
                       graph.insertConstant(*reduction == 1)},
                      node)[0];
  };
  bool indices = !is(node, "aten::cross_entropy_loss") ||
                 rc.analysis.info(node->input(1)).dtype == DTypeKind::Long;
  Value *result;
  if (indices)
    result = byIndex();
  else
    result = emitIf(graph,
                    emit(graph, "aten::is_floating_point", {tg->value}, node),
                    node, byProbabilities, byIndex);
  rc.replaceStatic(node->output(), result);
  return RuleResult::applied();
}

} // namespace

void addRowRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  std::vector<c10::Symbol> perRowOps;
  for (const OpInfo &op : allOpInfos())
    if (!op.rowDims.empty())
      perRowOps.push_back(c10::Symbol::fromQualString(op.op));
  // sort and argsort along any dim, of any rank (sort_dim: which dim is a
  // host fact), before per-row, whose rank guard would send a vector to its
  // fallback, a read of the count.
  rules.push_back(
      {"sort", On::Use, ops({"aten::sort", "aten::argsort"}), sortRows});
  rules.push_back({"per-row", On::Use, perRowOps, perRow});
  rules.push_back({"join-other-counts", On::Use,
                   ops({"aten::cat", "aten::stack"}), joinOtherCounts});
  rules.push_back({"topk", On::Use, ops({"aten::topk"}), sortRows});
  rules.push_back(
      {"gather-within-rows", On::Use, ops({"aten::gather"}), gatherRows});
  rules.push_back({"take-rows", On::Use, ops({"aten::take"}), takeRows});
  std::vector<c10::Symbol> batchedOps;
  for (const OpInfo &op : allOpInfos())
    if (op.sampleRank > 0)
      batchedOps.push_back(c10::Symbol::fromQualString(op.op));
  rules.push_back({"per-sample", On::Use, batchedOps, sampleRows});
  rules.push_back(
      {"roi-align", On::Use, ops({"torchvision::roi_align"}), roiAlignRows});
  rules.push_back({"unbind", On::Use, ops({"aten::unbind"}), unbindRows});
  rules.push_back({"expand", On::Use, ops({"aten::expand"}), expandRows});
  rules.push_back({"repeat", On::Use, ops({"aten::repeat"}), repeatRows});
  rules.push_back({"expand-as-own-rows", On::Use, ops({"aten::expand_as"}),
                   expandAsOwnRows});
  rules.push_back({"broadcast", On::Use, ops({"aten::broadcast_tensors"}),
                   broadcastRows});
  rules.push_back({"class-loss", On::Use,
                   ops({"aten::cross_entropy_loss", "aten::nll_loss",
                        "aten::nll_loss_nd", "aten::nll_loss2d"}),
                   classLoss});
  rules.push_back({"histogram", On::Use, ops({"aten::histc"}), histogramRows});
  rules.push_back({"bincount", On::Use, ops({"aten::bincount"}), bincountRows});
  rules.push_back({"trapz", On::Use, ops({"aten::trapz", "aten::trapezoid"}),
                   trapzRows});
  rules.push_back({"reduce", On::Use, {}, reduce});
  rules.push_back({"convert-like-other", On::Use, {}, convertLikeOther});
  rules.push_back({"divide-by-host-scalar", On::Use, {}, divideByHostScalar});
  rules.push_back({"scale-by-lifted-number", On::Use, {}, scaleByLiftedNumber});
  rules.push_back({"elementwise", On::Use, {}, elementwise});
}

} // namespace staticify::bound
