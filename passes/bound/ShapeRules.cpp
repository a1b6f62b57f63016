//===- ShapeRules.cpp - Bounded rows reshaped and expanded -----------------===//
//
// Reshapes that keep the valid rows a prefix of the padded ones, as
// torchvision's BoxCoder.decode and RoIHeads.postprocess_detections do to
// per-image detections:
//
//   y.reshape(n, s...)    n y's count: the padded rows, as many of them,
//                         each shaped as the original shapes it
//   y.reshape(-1, s...)   each row becomes r = row size / prod(s) rows: the
//                         padded rows' r times as many, count * r valid
//   v.reshape(-1, s...)   of a vector, s host ints: every prod(s) elements
//                         a row, count / prod(s) valid
//   x.expand_as(y)        of bounded y, where x's rows broadcast: y's
//                         padded shape, y's count
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The product of \p sizes' constants, none of which may be negative but
/// one -1 (whose place \p free gets); nullopt where they are not so.
std::optional<int64_t> knownProduct(const std::vector<Value *> &sizes,
                                    std::optional<size_t> &free) {
  int64_t product = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::optional<int64_t> s = constantInt(sizes[i]);
    if (!s || *s < -1 || (*s == -1 && free))
      return std::nullopt;
    if (*s == -1)
      free = i;
    else
      product *= *s;
  }
  return product;
}

} // namespace

int64_t rowSizeFactor(const Value *v, int depth) {
  const Node *node = v->node();
  if (depth > 16 || !isTensor(v))
    return 1;
  if (is(node, "aten::flatten")) {
    // Dims [start, last] merged, start >= 1: the row size is kept (a
    // start past the last dimension raises).
    std::optional<int64_t> start = constantInt(node->input(1));
    std::optional<int64_t> rank = knownRank(node->input(0));
    std::optional<int64_t> end = constantInt(node->input(2));
    if (start && *start >= 1 && end &&
        (*end == -1 || (rank && *end == *rank - 1)))
      return rowSizeFactor(node->input(0), depth + 1);
    return 1;
  }
  if (is(node, "aten::stack")) {
    // L tensors of one shape stacked along a dimension past the rows.
    const Node *list = node->input(0)->node();
    std::optional<int64_t> dim = constantInt(node->input(1));
    if (list->kind() != c10::prim::ListConstruct || list->inputs().empty() ||
        !dim)
      return 1;
    std::optional<int64_t> rank = knownRank(list->input(0));
    if (*dim >= 0 ? *dim == 0 : (!rank || *dim + *rank + 1 <= 0))
      return 1;
    return static_cast<int64_t>(list->inputs().size()) *
           rowSizeFactor(list->input(0), depth + 1);
  }
  if (is(node, "aten::reshape") || is(node, "aten::view")) {
    // [n, s...]: the product of the sizes after the first that are
    // positive constants (a -1 stands for the rest of the row).
    const Node *list = node->input(1)->node();
    std::optional<std::vector<int64_t>> sizes = constantIntList(node->input(1));
    if (!sizes && list->kind() == c10::prim::ListConstruct) {
      sizes.emplace();
      for (const Value *size : list->inputs())
        sizes->push_back(constantInt(size).value_or(-1));
    }
    int64_t factor = 1;
    for (size_t i = 1; sizes && i < sizes->size(); ++i)
      if ((*sizes)[i] > 0)
        factor *= (*sizes)[i];
    return factor;
  }
  // An elementwise op of it and numbers or 0-d tensors has its shape.
  const OpInfo *info = opInfo(node);
  if (info && info->has(kElementwise) && !node->inputs().empty() &&
      isTensor(node->input(0))) {
    for (size_t i = 1; i < node->inputs().size(); ++i)
      if (isTensor(node->input(i)) && !provablyZeroDim(node->input(i)))
        return 1;
    return rowSizeFactor(node->input(0), depth + 1);
  }
  return 1;
}

namespace {

/// reshape/view(y, [n, s...]) of bounded y, n its count, lifted
/// (`rel_codes.reshape(box_sum, -1)`): the padded rows reshaped to as many
/// rows. A -1 takes the padded row's size over the other sizes, a host
/// number, so that no padded size makes it ambiguous; the original raises
/// for a -1 where n is 0, so a -1 is taken only where n was positive
/// wherever the original ran (hoisted out of `if n > 0`), and only where
/// the ops that made y show its row size a multiple of the other sizes
/// (rowSizeFactor): hoisted, it runs where n is 0 too. Without a -1, the
/// padded rows fit [rows, s...] only where the row size is prod(s), which
/// the original asks only where it has rows: a host guard, whose fallback
/// reads n (the original on the valid rows where there are some, which
/// raises; rows of no count otherwise).
RuleResult reshapeByCount(Node *node, RuleContext &rc) {
  Rep *y = rc.bounded(node->input(0));
  Node *list = node->input(1)->node();
  if (!y || list->kind() != c10::prim::ListConstruct ||
      list->inputs().size() < 2)
    return RuleResult::notApplicable();
  Rep *n = rc.lifted(list->input(0));
  if (!n || !rc.sameCount(n->value, y->count))
    return RuleResult::notApplicable();
  std::vector<Value *> rest(list->inputs().begin() + 1, list->inputs().end());
  std::optional<size_t> free;
  std::optional<int64_t> known = knownProduct(rest, free);
  if (!known || *known == 0)
    return RuleResult::declined();
  if (free) {
    auto it = rc.hoistedWherePositive.find(node);
    if (it == rc.hoistedWherePositive.end() || it->second != list->input(0))
      return RuleResult::declined(
          "reshape to a count of rows and a -1, which raises where the count "
          "is 0");
    // Hoisted, it runs where the count is 0 too, where the original did
    // not: a row size no multiple of the other sizes would raise there.
    if (rowSizeFactor(node->input(0)) % *known != 0)
      return RuleResult::declined(
          "reshape to a count of rows and a -1 over a row size not provably "
          "a multiple of the other sizes");
  }
  torch::jit::Graph &graph = rc.graph;
  std::vector<Value *> sizes = {
      emit(graph, "aten::size", {y->value, 0}, node)};
  for (size_t i = 0; i < rest.size(); ++i) {
    if (free != i) {
      sizes.push_back(rest[i]);
      continue;
    }
    Value *rowSize = insertForm(graph, "row_size", {y->value}, node)[0];
    sizes.push_back(rc.hostOp("aten::floordiv", rowSize,
                              rc.constant(*known), node));
  }
  auto intList = [&](const std::vector<Value *> &values) {
    return graph.insertNode(graph.createList(c10::IntType::get(), values))
        ->output();
  };
  auto reshapeTo = [&](Value *rows, const std::vector<Value *> &to) {
    return emit(graph, node->kind().toQualString(), {rows, intList(to)}, node);
  };
  Value *out;
  if (free) {
    out = reshapeTo(y->value, sizes);
  } else {
    // [rows, s...] of the padded rows raises where a row's size is not
    // prod(s), which the original does only where it has rows. Behind a
    // host guard that it is; the fallback reads the count: with rows, the
    // original on them raises as it did; with none, rows of the shape asked
    // stand for them, none valid.
    Value *rowSize = insertForm(graph, "row_size", {y->value}, node)[0];
    Value *fits = emit(graph, "aten::eq", {rowSize, rc.constant(*known)}, node);
    auto fallback = [&] {
      Value *n = emit(graph, "aten::Int", {y->count}, node);
      Value *some = emit(graph, "aten::gt", {n, rc.constant(0)}, node);
      auto original = [&] {
        std::vector<Value *> asked = sizes;
        asked[0] = n;
        Value *valid = emit(graph, "aten::slice",
                            {y->value, rc.constant(0), rc.constant(0), n,
                             rc.constant(1)},
                            node);
        return reshapeTo(valid, asked);
      };
      auto noRows = [&] {
        return emit(graph, "aten::new_zeros", {y->value, intList(sizes)}, node);
      };
      return emitIf(graph, some, node, original, noRows);
    };
    out = emitIf(graph, fits, node, [&] { return reshapeTo(y->value, sizes); },
                 fallback);
    out->setType(node->output()->type());
    out->node()->i_(guardAttr(), 1);
  }
  rc.setBounded(node->output(), out, y->count, y->isIndex, false);
  rc.absorb(list);
  return RuleResult::applied();
}

/// reshape/view(y, [-1, s...]) of bounded y, the sizes s host ints
/// (`boxes.reshape(-1, 4)` of [n, classes, 4] boxes, Mixtral's
/// `hidden[top_x].reshape(-1, hidden_dim)`): each row becomes r = row size /
/// prod(s) rows, the valid ones first. Where prod(s) is not positive or the
/// row size is no multiple of it (host facts) the fallback runs the
/// original on the valid rows (a host read, counted apart).
RuleResult reshapeMergingRows(Node *node, RuleContext &rc) {
  Rep *y = rc.bounded(node->input(0));
  if (!y)
    return RuleResult::notApplicable();
  std::vector<Value *> target = rc.intListElements(node->input(1));
  if (target.empty() || constantInt(target[0]) != -1)
    return RuleResult::notApplicable();
  for (size_t i = 1; i < target.size(); ++i)
    if (rc.rep(target[i]) || (constantInt(target[i]) && *constantInt(target[i]) < 1))
      return RuleResult::notApplicable();
  // A vector's rows are elements: several, or one, make a row
  // (reshapeVectorToRows, which keeps the vector's count for one); viewed
  // as [-1] it is itself (`target[idx].view(-1)`, torchmetrics).
  if (y->is1D || knownRank(node->input(0), &rc.analysis) == 1) {
    if (target.size() != 1)
      return RuleResult::notApplicable();
    rc.setBounded(node->output(), y->value, y->count, y->isIndex, true);
    return RuleResult::applied();
  }
  // Sizes that are y's own after its rows (`hidden[top_x].reshape(-1, h)`
  // of `hidden = x.view(-1, h)`): the rows stay, and so does their count.
  std::optional<int64_t> rank = knownRank(node->input(0), &rc.analysis);
  bool same = rank && *rank == static_cast<int64_t>(target.size());
  for (size_t i = 1; same && i < target.size(); ++i) {
    SizeSource own = sizeSource(node->input(0), static_cast<int64_t>(i));
    same = own.constant ? constantInt(target[i]) == own.constant
                        : own.value && sameHostInt(own.value, target[i]);
  }
  if (same) {
    rc.setBounded(node->output(), y->value, y->count, y->isIndex, false);
    return RuleResult::applied();
  }
  torch::jit::Graph &graph = rc.graph;
  Value *known = rc.constant(1);
  for (size_t i = 1; i < target.size(); ++i)
    known = rc.hostOp("aten::mul", known, target[i], node);
  Value *rowSize = insertForm(graph, "row_size", {y->value}, node)[0];
  std::optional<int64_t> constantKnown = constantInt(known);
  auto multiple = [&] {
    return emit(graph, "aten::eq",
                {emit(graph, "aten::remainder", {rowSize, known}, node),
                 rc.constant(0)},
                node);
  };
  Value *whole =
      constantKnown ? multiple()
                    : emitIf(graph, emit(graph, "aten::gt", {known, rc.constant(0)}, node),
                             node, multiple, [&] { return graph.insertConstant(false); });
  Value *out = rc.guardOriginal(whole, node, [&] {
    return emit(graph, node->kind().toQualString(), {y->value, node->input(1)},
                node);
  });
  Value *perRow = rc.hostOp("aten::floordiv", rowSize, known, node);
  Value *count = emit(graph, "aten::mul", {y->count, perRow}, node);
  rc.setBounded(node->output(), out, count, y->isIndex, target.size() == 1);
  return RuleResult::applied();
}

/// reshape/view(v, [-1, s...]) of a bounded vector v, the sizes s host
/// ints (SSD's `loc_data[pos_idx].view(-1, 4)`, the elements of the rows a
/// mask expanded over them selects, in order): every prod(s) elements make
/// a row, so the padded elements make as many rows as they fill and
/// count / prod(s) of them are valid (the original raises where the count
/// is no multiple). Where the padded length is no multiple of prod(s), or
/// the value is no vector where the program does not fix its rank (host
/// facts), the fallback runs the original on the valid elements.
RuleResult reshapeVectorToRows(Node *node, RuleContext &rc) {
  Rep *y = rc.bounded(node->input(0));
  if (!y)
    return RuleResult::notApplicable();
  // Of a rank the program does not fix (`loc_t[pos_idx]` of a mask made
  // the shape of another input), a vector only behind the guard.
  std::optional<int64_t> rank = y->is1D ? 1 : knownRank(node->input(0), &rc.analysis);
  if (rank && *rank != 1)
    return RuleResult::notApplicable();
  // The sizes, -1 first.
  torch::jit::Graph &graph = rc.graph;
  Node *list = node->input(1)->node();
  std::vector<Value *> sizes = rc.intListElements(node->input(1));
  if (sizes.size() < 2 || constantInt(sizes.front()) != -1)
    return RuleResult::notApplicable();
  Value *known = rc.constant(1);
  for (size_t i = 1; i < sizes.size(); ++i) {
    if (rc.rep(sizes[i]) || (constantInt(sizes[i]) && *constantInt(sizes[i]) < 0))
      return RuleResult::declined("a size after the -1 is read from data");
    known = rc.hostOp("aten::mul", known, sizes[i], node);
  }
  Value *length = emit(graph, "aten::size", {y->value, rc.constant(0)}, node);
  Value *positive = emit(graph, "aten::gt", {known, rc.constant(0)}, node);
  if (!rank)
    positive = emit(graph, "aten::__and__",
                    {positive, emit(graph, "aten::eq",
                                    {emit(graph, "aten::dim", {y->value}, node),
                                     rc.constant(1)},
                                    node)},
                    node);
  Value *whole = emitIf(
      graph, positive, node,
      [&] {
        return emit(graph, "aten::eq",
                    {emit(graph, "aten::remainder", {length, known}, node),
                     rc.constant(0)},
                    node);
      },
      [&] { return graph.insertConstant(false); });
  Value *out = rc.guardOriginal(whole, node, [&] {
    return emit(graph, node->kind().toQualString(), {y->value, node->input(1)},
                node);
  });
  // One count for the rows of vectors with one count viewed alike (SSD's
  // `loc_data[pos_idx].view(-1, 4)` and `loc_t[pos_idx].view(-1, 4)`): their
  // valid rows line up, so that elementwise ops and size checks combine
  // them.
  // Rows of one element (`w.view(-1, 1)`, a weight per row): the
  // vector's own count.
  std::optional<int64_t> divisor = constantInt(known);
  Value *count = divisor == 1 ? y->count : nullptr;
  if (divisor && !count)
    for (const auto &[v, r] : rc.reps) {
      const Node *made = r.kind == Rep::Kind::Bounded && r.count
                             ? r.count->node()
                             : nullptr;
      if (made && is(made, "aten::div") && made->inputs().size() == 3 &&
          constantInt(made->input(1)) == divisor &&
          rc.sameCount(made->input(0), y->count) && visibleAt(r.count, node)) {
        count = r.count;
        break;
      }
    }
  if (!count)
    count = emit(graph, "aten::div", {y->count, known}, node,
                 {torch::jit::NamedValue("rounding_mode", std::string("floor"))});
  rc.setBounded(node->output(), out, count, y->isIndex, false);
  if (list->kind() == c10::prim::ListConstruct)
    rc.absorb(list);
  return RuleResult::applied();
}

/// x.expand_as(y) of bounded y and static x (torchvision's
/// `labels.view(1, -1).expand_as(scores)`): y's padded shape, y's count,
/// where x's rows broadcast (a lower rank, or one row), a host fact; the
/// fallback expands to the valid rows (a host read, counted apart).
RuleResult expandAsRows(Node *node, RuleContext &rc) {
  Rep *y = rc.bounded(node->input(1));
  Value *x = node->input(0);
  if (!y || rc.rep(x))
    return RuleResult::notApplicable();
  torch::jit::Graph &graph = rc.graph;
  Value *broadcasts =
      insertForm(graph, "broadcasts_rows", {x, y->value}, node)[0];
  Value *out = rc.guardOriginal(broadcasts, node, [&] {
    return emit(graph, "aten::expand_as", {x, y->value}, node);
  });
  rc.setBounded(node->output(), out, y->count,
                rc.analysis.info(node->output()).dtype == DTypeKind::Long,
                y->is1D);
  return RuleResult::applied();
}

/// F.pad(x, p, "constant", v) of bounded x (`F.pad(counts.cumsum(0),
/// (1, 0))`: offsets with a leading 0). p's pairs run from the last dim
/// back, so where it has one per dim of x (a rank the program fixes) its
/// last pair pads dim 0: that many rows of v go before and after the live
/// rows (pad_live), count + before + after of them live. Fewer pairs pad
/// within rows: the padded rows padded, one count. Left alone: a rank the
/// program does not fix, a negative pad of dim 0 (a crop of the live
/// rows), another mode, a pad or value read from data.
RuleResult padRows(Node *node, RuleContext &rc) {
  Rep *x = rc.bounded(node->input(0));
  if (!x || node->inputs().size() != 4)
    return RuleResult::notApplicable();
  std::optional<std::vector<int64_t>> pad = constantIntList(node->input(1));
  if (!pad || pad->size() % 2 != 0 ||
      constantString(node->input(2)) != std::string("constant") ||
      rc.rep(node->input(3)))
    return RuleResult::declined("a pad that is not constant, of sizes the "
                                "graph does not fix");
  std::optional<int64_t> rank =
      x->is1D ? 1 : knownRank(node->input(0), &rc.analysis);
  const int64_t pairs = static_cast<int64_t>(pad->size() / 2);
  if (!rank || pairs > *rank)
    return RuleResult::declined(
        "a pad whose pairs may reach dim 0: the rank is not known");
  torch::jit::Graph &graph = rc.graph;
  if (pairs < *rank) {
    Value *out = emit(graph, "aten::pad",
                      {x->value, node->input(1), node->input(2), node->input(3)},
                      node);
    rc.setBounded(node->output(), out, x->count, x->isIndex, x->is1D);
    return RuleResult::applied();
  }
  if ((*pad)[pad->size() - 2] < 0 || (*pad)[pad->size() - 1] < 0)
    return RuleResult::declined("a negative pad of dim 0 crops the live rows");
  auto outs = insertForm(graph, "pad_live",
                         {x->value, x->count, node->input(1), node->input(3)},
                         node);
  rc.setBounded(node->output(), outs[0], outs[1], x->isIndex, x->is1D);
  return RuleResult::applied();
}

} // namespace

void addShapeRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"reshape-by-count", On::Use,
                   ops({"aten::reshape", "aten::view"}), reshapeByCount});
  rules.push_back({"reshape-merging-rows", On::Use,
                   ops({"aten::reshape", "aten::view"}), reshapeMergingRows});
  rules.push_back({"reshape-vector-to-rows", On::Use,
                   ops({"aten::reshape", "aten::view"}), reshapeVectorToRows});
  rules.push_back(
      {"expand-as-rows", On::Use, ops({"aten::expand_as"}), expandAsRows});
  rules.push_back({"pad-rows", On::Use, ops({"aten::pad"}), padRows});
}

} // namespace staticify::bound
