//===- OrderRules.cpp - Scans, order statistics and classes of bounded rows ===//
//
// Ops whose result along the bounded dimension depends on the order of the
// live rows, not only on each row:
//
//   cumsum/cumprod/logcumsumexp/cummax/cummin  -> on the padded rows: a scan's
//   along dim 0                                   live prefix reads only the
//                                                 live rows before it
//   softmax/log_softmax along dim 0           -> softmax_rows: the padding
//                                                 made -inf, so it weighs
//                                                 nothing
//   median(), nanmedian(), quantile(q),        -> order_statistic: the live
//   nanquantile(q) (no dim)                       elements sorted first
//   one_hot(x, K), constant K >= 1             -> on the padded rows, the
//                                                 padding made class 0
//
// (argmax/argmin of a bounded value are masked reductions: RowRules.cpp's
// `reduce`, the padding filled with the first live row.)
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/Selection.h"

#include <optional>

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A scan along dim 0 of a bounded value: row i of the result is computed
/// from rows 0..i, so the live rows' results are the original's whatever
/// the padding holds, and the padding's results come after them. Along a
/// trailing dim a scan works within each row (the per-row rule).
RuleResult scanRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  Value *dimArg = namedInput(node, "dim");
  if (!r || !dimArg || !rc.onlyFirstRepresented(node) ||
      !alongRows(dimArg, node->input(0), *r, rc.analysis))
    return RuleResult::notApplicable(); // trailing, or unknown: per-row's
  Node *copy = rc.graph.insertNode(rc.graph.createClone(
      node, [&](Value *v) { return v == node->input(0) ? r->value : v; }));
  for (size_t i = 0; i < node->outputs().size(); ++i)
    rc.setBounded(node->output(i), copy->output(i), r->count,
                  i == 1 || rc.dtypeOf(node->output(i), 0) == DTypeKind::Long,
                  r->is1D);
  return RuleResult::applied();
}

/// softmax(x, 0) and log_softmax(x, 0) of a bounded value: every live row's
/// result reads every live row (their sum), so the padding is made -inf, the
/// exponential's zero (softmax_rows). Along a trailing dim each row is its
/// own (the per-row rule).
RuleResult softmaxRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  Value *dimArg = namedInput(node, "dim");
  Value *dtype = namedInput(node, "dtype");
  if (!r || !dimArg || !dtype || !rc.onlyFirstRepresented(node) ||
      node->outputs().size() != 1 ||
      !alongRows(dimArg, node->input(0), *r, rc.analysis))
    return RuleResult::notApplicable(); // trailing, or unknown: per-row's
  bool log = is(node, "aten::log_softmax");
  Value *out = insertForm(rc.graph, "softmax_rows",
                          {r->value, r->count, rc.graph.insertConstant(log),
                           dtype},
                          node)[0];
  rc.setBounded(node->output(), out, r->count, /*isIndex=*/false, r->is1D);
  return RuleResult::applied();
}

/// median(), nanmedian(), quantile(x, q) and nanquantile(x, q) over every
/// element of a bounded value (no dim; linear interpolation): the
/// order_statistic form sorts the live elements first and picks the rank
/// PyTorch picks, so NaN, an empty selection (the median's NaN) and ties
/// come out as the original's.
RuleResult orderStatistic(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  if (!r || !rc.onlyFirstRepresented(node) || node->outputs().size() != 1)
    return RuleResult::notApplicable();
  bool median = is(node, "aten::median") || is(node, "aten::nanmedian");
  bool ignoreNan = is(node, "aten::nanmedian") || is(node, "aten::nanquantile");
  Value *q = nullptr;
  if (median) {
    if (node->inputs().size() != 1)
      return RuleResult::notApplicable(); // median(dim): per-row's
  } else {
    // quantile.scalar(self, float q, int? dim, bool keepdim, str interpolation)
    if (node->inputs().size() != 5 ||
        node->input(1)->type()->kind() != c10::TypeKind::FloatType ||
        !node->input(2)->mustBeNone())
      return RuleResult::declined(
          "a quantile along a dimension or at a tensor of q: no bounded form");
    auto keepdim = torch::jit::toIValue(node->input(3));
    auto mode = torch::jit::toIValue(node->input(4));
    if (!keepdim || !keepdim->isBool() || keepdim->toBool() || !mode ||
        !mode->isString() || mode->toStringRef() != "linear")
      return RuleResult::declined(
          "a quantile with keepdim or an interpolation other than linear: "
          "no bounded form");
    q = node->input(1);
  }
  int64_t kind = (median ? 0 : 2) + (ignoreNan ? 1 : 0);
  Value *out = insertForm(rc.graph, "order_statistic",
                          {r->value, r->count, rc.constant(kind),
                           q ? q : rc.graph.insertConstant(0.5)},
                          node)[0];
  rc.replaceStatic(node->output(), out);
  return RuleResult::applied();
}

/// one_hot(x, K) of bounded classes with a constant K >= 1: one row of
/// classes per row of x, the padding's made class 0 so that only live rows
/// can raise (out of range), as in the original. K = -1 (the largest class
/// plus one) depends on the padding: not rewritten.
RuleResult oneHotRows(Node *node, RuleContext &rc) {
  Rep *r = rc.bounded(node->input(0));
  if (!r || node->inputs().size() != 2 || rc.rep(node->input(1)))
    return RuleResult::notApplicable();
  std::optional<int64_t> classes = constantInt(node->input(1));
  if (!classes || *classes < 1)
    return RuleResult::declined(
        "one_hot's class count is not a constant: with -1 it is the largest "
        "class present, which the padding would change");
  Value *classes0 = insertForm(rc.graph, "ignore_padding",
                               {r->value, r->count, rc.constant(0)}, node)[0];
  Value *out = emit(rc.graph, "aten::one_hot", {classes0, node->input(1)}, node);
  rc.setBounded(node->output(), out, r->count, /*isIndex=*/false);
  return RuleResult::applied();
}

} // namespace

void addOrderRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"scan", On::Use,
                   ops({"aten::cumsum", "aten::cumprod", "aten::logcumsumexp",
                        "aten::cummax", "aten::cummin"}),
                   scanRows});
  rules.push_back({"softmax-rows", On::Use,
                   ops({"aten::softmax", "aten::log_softmax"}), softmaxRows});
  rules.push_back({"order-statistic", On::Use,
                   ops({"aten::median", "aten::nanmedian", "aten::quantile",
                        "aten::nanquantile"}),
                   orderStatistic});
  rules.push_back({"one-hot", On::Use, ops({"aten::one_hot"}), oneHotRows});
}

} // namespace staticify::bound
