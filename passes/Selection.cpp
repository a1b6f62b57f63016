//===- Selection.cpp - `x[mask]` and its static row view ------------------===//

#include "passes/Selection.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static bool isMaskDType(DTypeKind k) {
  return k == DTypeKind::Bool || k == DTypeKind::Byte;
}

std::optional<Selection> matchSelection(Value *v,
                                        const AnalysisResult &analysis) {
  Node *node = v->node();
  Selection sel;
  sel.node = node;
  if (node->kind() == c10::aten::masked_select) {
    sel.base = node->input(0);
    sel.mask = node->input(1);
    sel.broadcasts = true;
  } else if (node->kind() == c10::aten::index) {
    Node *list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1)
      return std::nullopt;
    sel.base = node->input(0);
    sel.mask = list->input(0);
  } else {
    return std::nullopt;
  }
  DTypeKind dtype = analysis.info(sel.mask).dtype;
  if (!isMaskDType(dtype))
    return std::nullopt;
  sel.isByteMask = dtype == DTypeKind::Byte;
  return sel;
}

static Value *boolMask(Graph &graph, const Selection &sel, const Node *anchor) {
  if (!sel.isByteMask)
    return sel.mask;
  return emit(graph, "aten::ne", {sel.mask, 0}, anchor); // uint8 masks: != 0
}

RowView emitRowView(Graph &graph, const Selection &sel, const Node *anchor) {
  Value *base = sel.base;
  Value *mask = boolMask(graph, sel, anchor);
  if (sel.broadcasts) {
    // masked_select(x, m) == broadcast(x)[broadcast(m)], a 1-D result.
    Value *list =
        graph
            .insertNode(graph.createList(c10::TensorType::get(), {base, mask}))
            ->output();
    Value *both = emit(graph, "aten::broadcast_tensors", {list}, anchor);
    Node *unpack = graph.insertNode(graph.createListUnpack(both, 2));
    base = unpack->output(0);
    mask = unpack->output(1);
  }
  Value *n = emit(graph, "aten::numel", {mask}, anchor);
  Value *head =
      graph.insertNode(graph.createList(c10::IntType::get(), {n}))->output();
  Value *maskRank = emit(graph, "aten::dim", {mask}, anchor);
  Value *baseSizes = emit(graph, "aten::size", {base}, anchor);
  Value *rest = emit(graph, "aten::slice", {baseSizes, maskRank}, anchor);
  Value *rowsShape = emit(graph, "aten::add", {head, rest}, anchor);
  Value *rows = emit(graph, "aten::reshape", {base, rowsShape}, anchor);
  // x[m] also accepts a mask on another device (a CPU mask for CUDA data).
  mask = emit(graph, "aten::to",
              {mask, emit(graph, "prim::device", {base}, anchor)}, anchor);
  Value *restRank = emit(graph, "aten::len", {rest}, anchor);
  Value *one = graph
                   .insertNode(graph.createList(c10::IntType::get(),
                                                {graph.insertConstant(1)}))
                   ->output();
  Value *ones = emit(graph, "aten::mul", {one, restRank}, anchor);
  Value *keepShape = emit(graph, "aten::add", {head, ones}, anchor);
  Value *keep = emit(graph, "aten::reshape", {mask, keepShape}, anchor);
  return {rows, keep};
}

Value *emitSelect(Graph &graph, Value *base, Value *mask, const Node *anchor) {
  Value *list =
      graph.insertNode(graph.createList(c10::OptionalType::ofTensor(), {mask}))
          ->output();
  return emit(graph, "aten::index", {base, list}, anchor);
}

Value *emitFirstSelectedRow(Graph &graph, const RowView &view,
                            const Node *anchor) {
  // PyTorch's argmax rejects bool; on uint8 it keeps the first maximum.
  Value *flat = emit(graph, "aten::reshape",
                     {view.keep, std::vector<int64_t>{-1}}, anchor);
  Value *asByte =
      emit(graph, "aten::to",
           {flat, static_cast<int64_t>(c10::ScalarType::Byte)}, anchor);
  Value *first = emit(graph, "aten::argmax", {asByte}, anchor);
  Value *index =
      emit(graph, "aten::reshape", {first, std::vector<int64_t>{1}}, anchor);
  return emit(graph, "aten::index_select", {view.rows, 0, index}, anchor);
}

Value *emitMaskLike(Graph &graph, const Selection &sel, Value *like,
                    const Node *anchor) {
  Value *mask = emit(graph, "aten::to",
                     {boolMask(graph, sel, anchor),
                      emit(graph, "prim::device", {like}, anchor)},
                     anchor);
  Value *extra = emit(graph, "aten::sub",
                      {emit(graph, "aten::dim", {like}, anchor),
                       emit(graph, "aten::dim", {mask}, anchor)},
                      anchor);
  Value *one = graph
                   .insertNode(graph.createList(c10::IntType::get(),
                                                {graph.insertConstant(1)}))
                   ->output();
  Value *ones = emit(graph, "aten::mul", {one, extra}, anchor);
  Value *shape =
      emit(graph, "aten::add",
           {emit(graph, "aten::size", {mask}, anchor), ones}, anchor);
  return emit(graph, "aten::reshape", {mask, shape}, anchor);
}

//===----------------------------------------------------------------------===//
// Rank facts
//===----------------------------------------------------------------------===//

static bool isNumber(const Value *v) {
  c10::TypeKind k = v->type()->kind();
  return k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType ||
         k == c10::TypeKind::BoolType || k == c10::TypeKind::NumberType;
}

bool provablyZeroDim(const Value *v) {
  const Node *node = v->node();
  const std::string op = node->kind().toQualString();
  if (op == "prim::NumToTensor" || op == "aten::scalar_tensor")
    return true;
  if (op == "aten::tensor")
    return isNumber(node->input(0));
  if (opRole(node) != OpRole::Reduction || !node->maybeSchema())
    return false;
  // One tensor input (max(a, b) is elementwise) and no kept dimensions.
  if (countTensorInputs(node) != 1)
    return false;
  if (Value *keepdim = namedInput(node, "keepdim")) {
    auto iv = torch::jit::toIValue(keepdim);
    if (!iv || !iv->isBool() || iv->toBool())
      return false;
  }
  Value *dim = namedInput(node, "dim");
  if (!dim || dim->mustBeNone())
    return true;
  auto dims = constantIntList(dim);
  return dims && dims->empty();
}

/// Ops whose result has the rank of their first input when every other
/// tensor operand is 0-d or has that same rank.
static bool isRankPreserving(const Node *node) {
  if (opRole(node) != OpRole::LeadingPreserving)
    return false;
  // Elementwise ops and `_like` ops; not those that change rank or take
  // sizes (cat, slice, arange...), nor where, whose first operand is its
  // condition.
  const OpInfo *op = opInfo(node);
  return (op->has(kElementwise) || op->has(kLikeInput)) &&
         !op->has(kConditionFirst);
}

static const Value *rankRoot(const Value *v) {
  for (int depth = 0; depth < 64; ++depth) {
    const Node *node = v->node();
    if (node->kind() == c10::aten::gather) {
      v = node->input(2); // gather's result has its index's shape
      continue;
    }
    if (!isRankPreserving(node) || node->inputs().empty())
      return v;
    const Value *first = node->input(0);
    if (first->type()->kind() != c10::TypeKind::TensorType)
      return v;
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      const Value *in = node->input(i);
      if (in->type()->kind() != c10::TypeKind::TensorType)
        continue;
      if (!provablyZeroDim(in) && rankRoot(in) != rankRoot(first))
        return v;
    }
    v = first;
  }
  return v;
}

/// The rank of \p v when op semantics fix it: `where(m)[i]` and `arange` are
/// 1-D, `gather` has its index's rank, rank-preserving ops (slice and cat
/// included) their first input's, an if its branches' common rank.
static std::optional<int64_t> knownRank(const Value *v, int depth = 0) {
  if (depth > 32)
    return std::nullopt;
  const Node *node = v->node();
  const std::string op = node->kind().toQualString();
  if (op == "aten::__getitem__" &&
      node->input(0)->node()->kind() == c10::aten::where)
    return 1;
  if (op == "aten::arange" || op == "aten::randperm")
    return 1;
  if (op == "aten::gather")
    return knownRank(node->input(2), depth + 1);
  if (op == "aten::scatter")
    return knownRank(node->input(0), depth + 1);
  // Sizes given as a list of constant length fix the rank.
  if (op == "aten::reshape" || op == "aten::view" || op == "aten::zeros" ||
      op == "aten::new_zeros") {
    const Value *sizes = node->input(op == "aten::zeros" ? 0 : 1);
    if (auto list = constantIntList(sizes))
      return static_cast<int64_t>(list->size());
    if (sizes->node()->kind() == c10::prim::ListConstruct)
      return static_cast<int64_t>(sizes->node()->inputs().size());
    return std::nullopt;
  }
  if (op == "prim::If") {
    auto a = knownRank(node->blocks()[0]->outputs()[v->offset()], depth + 1);
    auto b = knownRank(node->blocks()[1]->outputs()[v->offset()], depth + 1);
    return a && a == b ? a : std::nullopt;
  }
  if (op == "aten::cat" &&
      node->input(0)->node()->kind() == c10::prim::ListConstruct &&
      !node->input(0)->node()->inputs().empty())
    return knownRank(node->input(0)->node()->input(0), depth + 1);
  if ((op == "aten::slice" || isRankPreserving(node)) &&
      !node->inputs().empty() &&
      node->input(0)->type()->kind() == c10::TypeKind::TensorType)
    return knownRank(node->input(0), depth + 1);
  return std::nullopt;
}

bool isUnwritten(const Selection &sel, const torch::jit::AliasDb &aliases) {
  return !aliases.hasWriters(sel.base) && !aliases.hasWriters(sel.mask) &&
         !aliases.hasWriters(sel.node->output());
}

/// Follows shape-preserving ops back to the value whose shape they keep.
static const Value *shapeRoot(const Value *v) {
  for (int depth = 0; depth < 64; ++depth) {
    const Node *node = v->node();
    if (!isRankPreserving(node) || node->inputs().empty() ||
        node->input(0)->type()->kind() != c10::TypeKind::TensorType)
      return v;
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      const Value *in = node->input(i);
      if (in->type()->kind() == c10::TypeKind::TensorType &&
          !provablyZeroDim(in))
        return v; // another tensor could broadcast the shape wider
    }
    v = node->input(0);
  }
  return v;
}

bool provablySameShape(const Value *a, const Value *b) {
  return a == b || shapeRoot(a) == shapeRoot(b);
}

bool provablySameRank(const Value *a, const Value *b) {
  if (a == b || rankRoot(a) == rankRoot(b))
    return true;
  auto ra = knownRank(a), rb = knownRank(b);
  return ra && ra == rb;
}

} // namespace staticify
