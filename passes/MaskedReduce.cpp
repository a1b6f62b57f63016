//===- MaskedReduce.cpp - reduce(x[mask]) -> reduce(where(mask, x, id)) ---===//

#include "passes/MaskedReduce.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <algorithm>

#include <cmath>
#include <limits>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "masked-reduce";

enum class Fill { Zero, One, NegInf, FirstRow, Mean, Variance };

/// What var/std divide by, count minus this: `unbiased` (default true) or an
/// int `correction` (None is 1); nullopt when it is computed at run time.
std::optional<int64_t> varianceCorrection(const Node *node) {
  if (Value *unbiased = namedInput(node, "unbiased")) {
    auto u = torch::jit::toIValue(unbiased);
    if (!u || !u->isBool())
      return std::nullopt;
    return u->toBool() ? 1 : 0;
  }
  if (Value *correction = namedInput(node, "correction")) {
    auto c = torch::jit::toIValue(correction);
    if (!c || !(c->isNone() || c->isInt()))
      return std::nullopt;
    return c->isInt() ? c->toInt() : 1;
  }
  return 1;
}

/// The identity of a reduction, or why it cannot be padded.
std::optional<Fill> identityOf(const Node *node, bool compacted,
                               std::string &why) {
  const OpInfo *op = opInfo(node);
  switch (op ? op->identity : Identity::NotApplicable) {
  case Identity::Zero:
    return Fill::Zero;
  case Identity::One:
    return Fill::One;
  case Identity::NegInf:
    return Fill::NegInf;
  case Identity::Mean:
    return Fill::Mean;
  case Identity::Variance:
    if (!varianceCorrection(node)) {
      why = "the correction of var/std is computed at run time";
      return std::nullopt;
    }
    return Fill::Variance;
  case Identity::FirstSelected:
    // The first live row fills the rest: it is the first occurrence of any
    // value it holds, so ties and NaN resolve to a live position. Positions
    // are the selection's only where its rows lead.
    if (!compacted && (op->dtype == DTypeRule::Long ||
                       (node->outputs().size() > 1 &&
                        node->output(1)->hasUses()))) {
      why = "the positions argmax, argmin and max/min's indices return "
            "would count the unselected rows";
      return std::nullopt;
    }
    return Fill::FirstRow;
  case Identity::ZeroForPositiveP: {
    Value *p = namedInput(node, "p");
    if (!p)
      p = namedInput(node, "ord");
    if (!p || p->mustBeNone())
      return Fill::Zero; // the default p = 2
    auto iv = torch::jit::toIValue(p);
    if (iv && (iv->isInt() || iv->isDouble()) && iv->toScalar().toDouble() >= 0)
      return Fill::Zero;
    why = "a norm with a negative or non-constant order is not zero-padded";
    return std::nullopt;
  }
  case Identity::None:
  case Identity::NotApplicable:
    break;
  }
  why = "no identity is known for '" + std::string(node->kind().toQualString()) +
        "'";
  return std::nullopt;
}

/// Why the reduction's dimensions do not provably include dimension 0 of
/// its input, or "" when they do.
std::string uncoveredSelectedDim(const Node *node) {
  Value *dim = namedInput(node, "dim");
  if (!dim)
    return node->inputs().size() == 1 || node->maybeSchema()
               ? ""
               : "its overload is unknown";
  if (dim->mustBeNone())
    return "";
  std::optional<std::vector<int64_t>> dims = constantIntList(dim);
  if (auto d = constantInt(dim))
    dims = std::vector<int64_t>{*d};
  if (!dims)
    return "its dimensions are computed at run time";
  if (dims->empty())
    return "";
  for (int64_t d : *dims)
    if (d == 0)
      return "";
  return "it reduces only dimensions after the selected one: the result "
         "keeps the data-dependent count";
}

Value *emitFill(Graph &graph, Fill fill, const RowView &view,
                const Node *anchor) {
  switch (fill) {
  case Fill::Zero:
  case Fill::Mean:
  case Fill::Variance:
    return emit(graph, "aten::where", {view.keep, view.rows, 0}, anchor);
  case Fill::One:
    return emit(graph, "aten::where", {view.keep, view.rows, 1}, anchor);
  case Fill::NegInf:
    return emit(
        graph, "aten::where",
        {view.keep, view.rows, -std::numeric_limits<double>::infinity()},
        anchor);
  case Fill::FirstRow:
    return insertForm(graph, "first_filled", {view.rows, view.keep},
                      anchor)[0];
  }
  return nullptr;
}

/// mean(sel, dims...) = sum(padded, dims...) / sum(expanded keep, dims...).
/// As PyTorch's mean does, the sum accumulates in at least float32 and the
/// quotient is cast back: a float16/bfloat16 sum would lose precision or
/// overflow where the mean does not.
Value *emitMean(Graph &graph, Node *mean, Value *padded, const RowView &view) {
  Node *sum = graph.insertNode(graph.create(c10::aten::sum, mean->inputs()));
  sum->setSourceRange(mean->sourceRange());
  sum->replaceInput(0, padded);
  sum->output()->setType(c10::TensorType::get());
  Value *dtype = namedInput(mean, "dtype");
  Value *resultType = nullptr;
  if (dtype && dtype->mustBeNone()) {
    resultType = emit(graph, "prim::dtype", {view.rows}, mean);
    Value *accumulate =
        emit(graph, "aten::promote_types",
             {resultType, static_cast<int64_t>(c10::ScalarType::Float)}, mean);
    sum->moveAfter(accumulate->node());
    for (size_t i = 0; i < mean->inputs().size(); ++i)
      if (mean->input(i) == dtype && inputName(mean, i) == std::string("dtype"))
        sum->replaceInput(i, accumulate);
  }
  Value *ones = emit(graph, "aten::expand_as", {view.keep, view.rows}, mean);
  Value *dim = namedInput(mean, "dim");
  Value *count;
  if (dim && !dim->mustBeNone())
    count = emit(graph, "aten::sum", {ones, dim, namedInput(mean, "keepdim")},
                 mean);
  else
    count = emit(graph, "aten::sum", {ones}, mean);
  Value *quotient = emit(graph, "aten::div", {sum->output(), count}, mean);
  return resultType ? emit(graph, "aten::to", {quotient, resultType}, mean)
                    : quotient;
}

/// var/std of a selection: the selected rows' mean over the reduced dims,
/// then the squared deviations of the selected rows only, summed and divided
/// by max(0, count - correction), as PyTorch divides (0/0 is nan for an
/// empty selection, and for one row when unbiased); std is its square root.
/// Two passes, where PyTorch uses Welford's: equal to rounding.
Value *emitVariance(Graph &graph, Node *node, Value *padded,
                    const RowView &view) {
  int64_t correction = *varianceCorrection(node);
  Value *dim = namedInput(node, "dim");
  bool full = !dim || dim->mustBeNone();
  Value *keepdim = namedInput(node, "keepdim");
  if (!keepdim)
    keepdim = graph.insertConstant(false);
  Value *trueValue = graph.insertConstant(true);
  Value *none = graph.insertConstant(c10::IValue());
  Value *ones = emit(graph, "aten::expand_as", {view.keep, view.rows}, node);
  auto sum = [&](Value *t, Value *keep) {
    return full ? emit(graph, "aten::sum", {t, none}, node)
                : emit(graph, "aten::sum", {t, dim, keep}, node);
  };
  Value *count = sum(ones, trueValue);
  Value *mean = emit(graph, "aten::div", {sum(padded, trueValue), count}, node);
  Value *deviation = emit(
      graph, "aten::where",
      {ones, emit(graph, "aten::sub", {view.rows, mean}, node), 0}, node);
  Value *squares = sum(emit(graph, "aten::mul", {deviation, deviation}, node),
                       keepdim);
  Value *divisor = emit(
      graph, "aten::clamp_min",
      {emit(graph, "aten::sub", {sum(ones, keepdim), correction}, node), 0},
      node);
  Value *variance = emit(graph, "aten::div", {squares, divisor}, node);
  if (node->kind() == c10::Symbol::fromQualString("aten::std"))
    return emit(graph, "aten::sqrt", {variance}, node);
  return variance;
}

/// numel / size(_, 0) / len of a selection: the count, as a host int.
bool rewriteSizeRead(Graph &graph, Node *node, const Selection &sel,
                     PassContext &ctx) {
  bool rows = node->kind() != c10::Symbol::fromQualString("aten::numel");
  if (node->kind() == c10::aten::size) {
    if (node->inputs().size() != 2 || constantInt(node->input(1)) != 0)
      return false; // size() as a list, or a trailing (static) size
  }
  torch::jit::WithInsertPoint guard(node);
  RowView view = emitRowView(graph, sel, node);
  Value *selected =
      rows ? view.keep
           : emit(graph, "aten::expand_as", {view.keep, view.rows}, node);
  Value *count = emit(graph, "aten::sum", {selected}, node);
  Value *asInt = emit(graph, "aten::Int", {count}, node);
  node->output()->replaceAllUsesWith(asInt);
  ctx.rewrote(node, kRule);
  node->destroy();
  eraseIfDead(sel.node, ctx, kRule);
  return true;
}

} // namespace

namespace {

bool isMask(DTypeKind k) { return k == DTypeKind::Bool || k == DTypeKind::Byte; }

/// Why aten::index \p producer is no selection masked-reduce takes.
std::string whyNoSelection(const Node *producer,
                           const AnalysisResult &analysis) {
  const Node *list = producer->input(1)->node();
  if (list->kind() == c10::prim::ListConstruct) {
    for (const Value *index : list->inputs())
      if (!index->mustBeNone() && !isMask(analysis.info(index).dtype) &&
          analysis.info(index).dtype != DTypeKind::Unknown)
        return "an integer index, not a mask";
    if (list->inputs().size() > 1)
      return "a mask over a dimension after the first, of a rank not known "
             "before the program runs (leading-selections moves only a "
             "vector's)";
  }
  return "the index's dtype is unknown; if it is a mask, make it explicit "
         "with .to(torch.bool)";
}

} // namespace

std::vector<Value *> emitMaskedReduction(Graph &graph, Node *node,
                                         const RowView &view,
                                         bool compacted, std::string &why) {
  std::optional<Fill> fill = identityOf(node, compacted, why);
  if (fill)
    why = uncoveredSelectedDim(node);
  if (!fill || !why.empty())
    return {};
  Value *padded = emitFill(graph, *fill, view, node);
  if (*fill == Fill::Mean)
    return {emitMean(graph, node, padded, view)};
  if (*fill == Fill::Variance)
    return {emitVariance(graph, node, padded, view)};
  Node *copy =
      graph.insertNode(graph.createClone(node, [](Value *v) { return v; }));
  copy->replaceInput(0, padded);
  return {copy->outputs().begin(), copy->outputs().end()};
}

bool maskedReduce(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  std::vector<Node *> candidates = analysis.nodesWhere([](c10::Symbol op) {
    return anyOpInfo(op, [](const OpInfo &e) {
      return e.role == OpRole::Reduction || e.role == OpRole::ShapeRead;
    });
  });
  bool changed = false;
  for (Node *node : candidates) {
    OpRole role = opRole(node);
    if (role != OpRole::Reduction && role != OpRole::ShapeRead)
      continue;
    if (countTensorInputs(node) != 1 ||
        node->input(0)->type()->kind() != c10::TypeKind::TensorType)
      continue; // max(a, b) and min(a, b) are elementwise, not reductions
    auto sel = matchSelection(node->input(0), analysis);
    if (!sel) {
      const Node *producer = node->input(0)->node();
      if (producer->kind() == c10::aten::index &&
          analysis.info(node->input(0)).isDataDependent())
        ctx.declined(producer, kRule, whyNoSelection(producer, analysis));
      continue;
    }
    if (!isUnwritten(*sel, ctx.facts.aliases(graph))) {
      ctx.declined(sel->node, kRule,
                   "the selection, its tensor or its mask "
                   "is written to in place");
      continue;
    }
    if (role == OpRole::ShapeRead) {
      changed |= rewriteSizeRead(*graph, node, *sel, ctx);
      continue;
    }
    // The row view where the selection ran: its reshape raises only where
    // the selection would have, and so never where a branch holding the
    // reduction was not taken (if-convert may then run both branches).
    Node *atSelection = sel->node->next();
    InsertedBefore viewEmitted(atSelection);
    RowView view;
    {
      torch::jit::WithInsertPoint guard(atSelection);
      view = emitRowView(*graph, *sel, node, &analysis);
    }
    torch::jit::WithInsertPoint guard(node);
    InsertedBefore emitted(node);
    std::string why;
    std::vector<Value *> outs =
        emitMaskedReduction(*graph, node, view, /*compacted=*/false, why);
    if (outs.empty()) {
      emitted.rollback();
      viewEmitted.rollback(); // emitted before the reduction said no
      ctx.declined(sel->node, kRule, why);
      continue;
    }
    for (size_t i = 0; i < outs.size(); ++i)
      node->output(i)->replaceAllUsesWith(outs[i]);
    ctx.rewrote(node, kRule); // a finding while its input was x[m]
    node->destroy();
    eraseIfDead(sel->node, ctx, kRule);
    changed = true;
  }
  return changed;
}

} // namespace staticify
