//===- AnalysisShapes.cpp - Shapes and list lengths that owe to data ------===//
//
// The transfer functions of the dynamism analysis for shapes: given the
// facts of a node's inputs, whether a result's shape depends on data only
// in its leading dimension, everywhere, or not at all, and whether a list
// result's length does.
//
//===----------------------------------------------------------------------===//

#include "passes/AnalysisShapes.h"

#include "passes/Containers.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <algorithm>

namespace staticify {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A `dim` argument that is absent, None or an empty list: a full reduction.
/// Without a matching schema only the one-input form (`x.sum()`) is known.
bool reducesAllDims(const Node *node) {
  if (!node->maybeSchema())
    return node->inputs().size() == 1;
  const Value *dim = namedInput(node, "dim");
  if (!dim || dim->mustBeNone())
    return true;
  auto dims = constantIntList(dim);
  return dims && dims->empty();
}

/// A constant `dim` argument that includes dimension 0.
bool reducesDim0(const Node *node) {
  const Value *dim = namedInput(node, "dim");
  if (!dim)
    return false;
  auto dims = constantDims(dim);
  return dims && std::find(dims->begin(), dims->end(), 0) != dims->end();
}

/// `self[i0, i1, ...]` with integer indices: the broadcast index shape
/// followed by the unindexed trailing dimensions of self.
ShapeDep gatherShape(const AnalysisResult &facts, const Node *node) {
  auto info = [&](const Value *v) -> const ValueInfo & {
    return facts.info(v);
  };
  const Node *list = node->input(1)->node();
  ShapeDep self = info(node->input(0)).shape;
  if (list->kind() != c10::prim::ListConstruct || list->inputs().empty() ||
      list->input(0)->mustBeNone() || self == ShapeDep::Dynamic)
    return ShapeDep::Dynamic;
  size_t numIndices = list->inputs().size();
  if (numIndices == 1)
    return info(list->input(0)).shape;
  for (const Value *idx : list->inputs())
    if (idx->mustBeNone() || info(idx).isDataDependent())
      return ShapeDep::Dynamic;
  return ShapeDep::Static;
}

} // namespace

/// Whether \p out, a list of \p node's (or a tuple, optional or union
/// that may hold one), has a length that depends on data. A list
/// literal's is its number of elements; plumbing (tuples, casts) passes
/// its inputs' on. An op on lists and host scalars only (list(), +,
/// slicing, *, append, extend) makes one from their lengths and values:
/// the lists' lengths and the scalars decide. Any other (split, unbind,
/// chunk of a tensor) may take it from any input.
bool listLengthFromData(const AnalysisResult &facts, const Node *node,
                        const Value *out) {
  auto info = [&](const Value *v) -> const ValueInfo & {
    return facts.info(v);
  };
  auto isDataDependent = [&](const Value *v) {
    return info(v).isDataDependent();
  };
  if (node->kind() == c10::prim::ListConstruct)
    return false;
  // A split into given sizes has as many parts as sizes, whatever they
  // are (Faster R-CNN's `pred_boxes.split(boxes_per_image)`: one part per
  // image, of a data-dependent number of rows each).
  if (splitsInput(node) && node->inputs().size() > 1 &&
      node->input(1)->type()->kind() == c10::TypeKind::ListType)
    return info(node->input(1)).dataLength;
  if (opRole(node) == OpRole::Plumbing)
    return std::any_of(node->inputs().begin(), node->inputs().end(),
                       [&](const Value *in) { return info(in).dataLength; });
  if (out->type()->kind() != c10::TypeKind::ListType)
    return false;
  bool onLists = true, fromData = false;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    const Value *in = node->input(i);
    bool isList = in->type()->kind() == c10::TypeKind::ListType;
    if (carriesTensor(in->type()) && !isList)
      onLists = false;
    if (isList) {
      fromData |= info(in).dataLength;
      // A list's lists have lengths of their own, not tracked.
      if (in->type()->expectRef<c10::ListType>().getElementType()->kind() ==
          c10::TypeKind::ListType)
        fromData |= isDataDependent(in);
    } else if (!(mutatesFirstInput(node) && i > 0))
      fromData |= isDataDependent(in);
  }
  if (!onLists)
    for (const Value *in : node->inputs())
      fromData |= isDataDependent(in);
  return fromData;
}

/// The shape dependence of a tensor result of an op with data-dependent
/// inputs, from the op's shape rule when the catalogue knows it.
ShapeDep resultShape(const AnalysisResult &facts, const Node *node, OpRole role,
                     bool dataShapeArg) {
  auto info = [&](const Value *v) -> const ValueInfo & {
    return facts.info(v);
  };
  auto isDataDependent = [&](const Value *v) {
    return info(v).isDataDependent();
  };
  auto shapeOf = [&](const Value *v) { return info(v).shape; };
  if (role == OpRole::Plumbing) {
    // Lists, tuples and their elements carry their contents' shapes.
    ShapeDep joined = ShapeDep::Static;
    for (const Value *in : node->inputs())
      if (isDataDependent(in))
        joined = std::max(joined, shapeOf(in));
    return joined;
  }
  if (!dataShapeArg && role == OpRole::Reduction &&
      countTensorInputs(node) == 1 &&
      (reducesAllDims(node) ||
       (shapeOf(node->input(0)) == ShapeDep::Leading && reducesDim0(node))))
    return ShapeDep::Static; // the data-dependent dimension is reduced
  if (!dataShapeArg && node->kind() == c10::aten::index)
    return gatherShape(facts, node);
  // reshape/view of rows whose only data-dependent size is the first to
  // [-1, host sizes...] (`nonzero(t).view(-1)`, `boxes.reshape(-1, 4)`):
  // the rows of the result are as many as data says, the rest are the
  // host's sizes.
  if (!dataShapeArg &&
      (node->kind() == c10::aten::reshape || node->kind() == c10::aten::view) &&
      node->inputs().size() == 2 && shapeOf(node->input(0)) == ShapeDep::Leading) {
    // Each size a constant (a folded list's, or a constructed list's item)
    // or a host value not read from data.
    std::vector<std::optional<int64_t>> sizes;
    const Node *list = node->input(1)->node();
    if (auto folded = constantIntList(node->input(1)))
      sizes.assign(folded->begin(), folded->end());
    else if (list->kind() == c10::prim::ListConstruct &&
             std::none_of(list->inputs().begin(), list->inputs().end(),
                          isDataDependent))
      for (const Value *d : list->inputs())
        sizes.push_back(constantInt(d));
    if (!sizes.empty() && sizes.front() == -1 &&
        std::all_of(sizes.begin() + 1, sizes.end(),
                    [](std::optional<int64_t> d) { return !d || *d >= 0; }))
      return ShapeDep::Leading;
  }
  // The op's own shape rule (OpInfo): a copy of its first operand written
  // at indices, or a shape its host arguments give.
  if (const OpInfo *op = opInfo(node); op && !dataShapeArg) {
    if (op->has(kShapeFromHostArgs))
      return ShapeDep::Static;
    // kKeepsShape: whatever its dims (sort along the rows of a selection
    // still has the selection's rows, and only they depend on data).
    if ((op->has(kShapeOfFirst) || op->has(kKeepsShape)) &&
        isTensor(node->input(0)))
      return shapeOf(node->input(0));
  }
  if (!dataShapeArg && (node->kind() == c10::aten::index_select ||
                        node->kind() == c10::aten::select)) {
    // Along dimension 0 the data-dependent dimension is replaced.
    auto dim = constantInt(node->input(1));
    if (dim == 0 && shapeOf(node->input(0)) != ShapeDep::Dynamic)
      return node->kind() == c10::aten::select ? ShapeDep::Static
                                               : shapeOf(node->input(2));
    return ShapeDep::Dynamic;
  }
  if (!dataShapeArg && node->kind() == c10::aten::gather)
    return shapeOf(node->input(2)); // the result has the index's shape
  if (role != OpRole::LeadingPreserving)
    return ShapeDep::Dynamic;
  // slice/narrow/cat along dimension 0 make (or keep) only it dynamic.
  bool alongDim0 = node->kind() == c10::aten::slice ||
                   node->kind() == c10::aten::narrow ||
                   node->kind() == c10::aten::cat;
  if (alongDim0 && constantInt(node->input(1)) != 0)
    return ShapeDep::Dynamic;
  for (const Value *in : node->inputs()) {
    if (!carriesTensor(in->type()))
      continue;
    if (in->node()->kind() == c10::prim::ListConstruct) {
      for (const Value *el : in->node()->inputs())
        if (shapeOf(el) == ShapeDep::Dynamic)
          return ShapeDep::Dynamic;
      continue;
    }
    ShapeDep s = shapeOf(in);
    // Elementwise, a static operand could broadcast the dynamic dimension
    // inward: only operands that share the leading dimension keep it.
    if (s == ShapeDep::Dynamic || (s == ShapeDep::Static && !alongDim0))
      return ShapeDep::Dynamic;
  }
  return ShapeDep::Leading;
}

} // namespace staticify
