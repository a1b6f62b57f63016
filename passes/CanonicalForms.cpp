//===- CanonicalForms.cpp - One spelling per idiom ------------------------===//

#include "passes/CanonicalForms.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/InPlace.h"
#include "passes/OpCatalogue.h"
#include "passes/PassContext.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>


namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Replaces \p node's one output by \p by (typed as it) and destroys it.
bool replace(Node *node, Value *by) {
  by->setType(node->output()->type());
  node->output()->replaceAllUsesWith(by);
  node->destroy();
  return true;
}

bool isFlatShape(const Value *sizes) {
  std::optional<std::vector<int64_t>> s = constantIntList(sizes);
  return s && s->size() == 1 && (*s)[0] == -1;
}

/// `flatten(x)` (start 0, end -1) is `reshape(x, [-1])` in ATen. Both give
/// a 0-d x one element and may return a view. Returns the reshape.
Node *flattenAsReshape(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::flatten || node->inputs().size() != 3 ||
      !isTensor(node->input(0)) || constantInt(node->input(1)) != 0 ||
      constantInt(node->input(2)) != -1)
    return nullptr;
  torch::jit::WithInsertPoint guard(node);
  Value *flat = emit(graph, "aten::reshape",
                     {node->input(0), std::vector<int64_t>{-1}}, node);
  replace(node, flat);
  return flat->node();
}

/// `x[i]`: aten::index of \p x by the one index \p i, before \p anchor.
Value *emitIndex(Graph &graph, Value *x, Value *i, const Node *anchor) {
  Value *indices =
      graph
          .insertNode(graph.createList(
              c10::OptionalType::create(c10::TensorType::get()), {i}))
          ->output();
  return emit(graph, "aten::index", {x, indices}, anchor);
}

/// `dropout(x, p, False)` and its variants are x itself (an eval model's
/// dropout once specialize-training made `self.training` a constant).
bool evalDropoutAsInput(Node *node) {
  static const std::array<c10::Symbol, 4> kinds = {
      c10::Symbol::fromQualString("aten::dropout"),
      c10::Symbol::fromQualString("aten::feature_dropout"),
      c10::Symbol::fromQualString("aten::alpha_dropout"),
      c10::Symbol::fromQualString("aten::feature_alpha_dropout")};
  if (std::find(kinds.begin(), kinds.end(), node->kind()) == kinds.end() ||
      node->inputs().size() != 3 || !isTensor(node->input(0)) ||
      node->outputs().size() != 1)
    return false;
  c10::optional<bool> train = torch::jit::constant_as<bool>(node->input(2));
  if (!train || *train)
    return false;
  return replace(node, node->input(0));
}

/// `embedding(w, j)` with no padding index, unscaled and dense gradients,
/// is `w[j.long()]`: the rows j names, of j's shape, whose gradient
/// scatters into w as embedding's does (int32 indices, which embedding
/// takes and index refuses, made int64; a float j, which embedding refuses,
/// is the contract's "where the original raises").
bool embeddingAsIndex(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::embedding || node->inputs().size() != 5 ||
      constantInt(node->input(2)) != -1 ||
      torch::jit::constant_as<bool>(node->input(3)) != false ||
      torch::jit::constant_as<bool>(node->input(4)) != false)
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *j = emit(graph, "aten::to",
                  {node->input(1), static_cast<int64_t>(c10::ScalarType::Long)},
                  node);
  return replace(node, emitIndex(graph, node->input(0), j, node));
}

/// `y[None, i]` scripts as `index(unsqueeze(y, 0), [None, i])`: the new
/// leading dim kept whole, i indexing y's rows. It is `unsqueeze(y[i], 0)`,
/// of shape [1, *i.shape, *y.shape[1:]] either way (a mask i selects alike),
/// the gather a selection's rules meet (Mixtral's `hidden_states[None,
/// top_x]`).
bool noneLedIndexAsUnsqueeze(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::index || node->inputs().size() != 2)
    return false;
  Node *list = node->input(1)->node();
  Node *unsqueeze = node->input(0)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 2 ||
      !list->input(0)->mustBeNone() || list->input(1)->mustBeNone() ||
      unsqueeze->kind() != c10::aten::unsqueeze ||
      constantInt(unsqueeze->input(1)) != 0)
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *rows = emitIndex(graph, unsqueeze->input(0), list->input(1), node);
  return replace(node, emit(graph, "aten::unsqueeze", {rows, 0}, node));
}

/// `reshape(unsqueeze(y, d), s)` is `reshape(y, s)`: a unit dim changes
/// neither the elements nor their row-major order, and both are views of
/// y where y's strides allow one (Mixtral's `y[None, i].reshape(-1, h)`).
bool reshapeOfUnsqueeze(Node *node) {
  if (node->kind() != c10::aten::reshape || node->inputs().size() != 2)
    return false;
  Node *unsqueeze = node->input(0)->node();
  if (unsqueeze->kind() != c10::aten::unsqueeze || node->input(0)->uses().size() != 1)
    return false;
  node->replaceInput(0, unsqueeze->input(0));
  unsqueeze->destroy();
  return true;
}

/// The tensor \p v is expanded from and the value naming the shape it is
/// expanded to (x of `expand_as(a, x)`, the size list of `expand(a, s)`),
/// when v is such an expansion; {nullptr, nullptr} otherwise.
std::pair<Value *, Value *> expansionOf(const Value *v) {
  const Node *n = v->node();
  if (n->kind() == c10::aten::expand_as && n->inputs().size() == 2)
    return {n->input(0), n->input(1)};
  if (n->kind() == c10::aten::expand && n->inputs().size() == 3 &&
      constantBool(n->input(2)) == false)
    return {n->input(0), n->input(1)};
  return {nullptr, nullptr};
}

/// Whether \p use passes its value to an op that neither writes that
/// argument nor returns a view of it (readOnlyByOps, use by use).
bool readByOp(const torch::jit::Use &use) {
  const c10::FunctionSchema *schema = use.user->maybeSchema();
  return schema && use.offset < schema->arguments().size() &&
         !schema->arguments()[use.offset].alias_info();
}

/// readOnlyByOps, index lists read by aten::index allowed too. An
/// expansion put in v's place shares memory among its elements, which a
/// write would refuse and a view would keep.
bool onlyReadAsValues(const Value *v) {
  for (const torch::jit::Use &use : v->uses()) {
    if (use.user->kind() != c10::prim::ListConstruct) {
      if (!readByOp(use))
        return false;
      continue;
    }
    for (const torch::jit::Use &inner : use.user->output()->uses())
      if (inner.user->kind() != c10::aten::index || inner.offset != 1)
        return false;
  }
  return true;
}

/// Whether \p node is an elementwise op that may be moved or rebuilt on
/// other operands: deterministic, one fresh tensor result, no write.
bool pureElementwise(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && op->has(kElementwise) && node->outputs().size() == 1 &&
         !node->isNondeterministic() && !writesAnything(node) &&
         isTensor(node->output());
}

/// An elementwise op of tensors all expanded to one shape is that op of
/// the unexpanded tensors, expanded: `pos.unsqueeze(2).expand_as(x).long()
/// + neg.unsqueeze(2).expand_as(x).long()` (ssd.pytorch's hard negative
/// mining) is `(pos.unsqueeze(2).long() + neg.unsqueeze(2).long())
/// .expand_as(x)`. Each element depends on the operands' at its position
/// alone, and every operand expands to the shape, so their broadcast does
/// too. The expansion moves outward, where a selection by it is
/// recognised (matchExpandedRows, which specialize-shapes versions on). Only where the result is only
/// read (onlyReadAsValues): an expansion shares memory among its elements.
bool elementwiseOfExpansions(Graph &graph, Node *node) {
  if (!pureElementwise(node) || !onlyReadAsValues(node->output()))
    return false;
  Value *shape = nullptr;
  std::vector<Value *> inputs(node->inputs().begin(), node->inputs().end());
  for (Value *&in : inputs) {
    if (!isTensor(in))
      continue;
    auto [from, to] = expansionOf(in);
    if (!from || (shape && to != shape))
      return false;
    shape = to;
    in = from;
  }
  if (!shape)
    return false;
  torch::jit::WithInsertPoint guard(node);
  Node *inner = graph.insertNode(graph.create(node->kind(), inputs, 1));
  inner->copyAttributes(*node);
  inner->copyMetadata(node);
  inner->output()->setType(node->output()->type());
  bool like = shape->type()->kind() == c10::TypeKind::TensorType;
  Value *out = like ? emit(graph, "aten::expand_as", {inner->output(), shape}, node)
                    : emit(graph, "aten::expand", {inner->output(), shape, false}, node);
  return replace(node, out);
}

/// `masked_select(x, m)` broadcasts x and m, then selects: of an x of m's
/// shape, nothing broadcasts and it is `x[m]`, a selection by the mask's own
/// count (a uint8 m selects in both; another dtype raises in masked_select).
/// Made so by the graph (`preds.masked_select(~isnan(target))` once
/// specialize-shapes read preds as `preds.expand_as(target)`), not by
/// names.
bool sameShapeMaskedSelectAsIndex(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::masked_select || node->inputs().size() != 2 ||
      !isTensor(node->input(0)) || !isTensor(node->input(1)) ||
      !provablySameShape(node->input(0), node->input(1)))
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(node,
                 emitIndex(graph, node->input(0), node->input(1), node));
}

/// argwhere is nonzero under another name.
bool argwhereAsNonzero(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::argwhere || node->inputs().size() != 1)
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(node, emit(graph, "aten::nonzero", {node->input(0)}, node));
}

/// The mask m when \p v is `nonzero(m)`, seen through a full slice of its
/// rows (`nonzero(m)[:, 0]` scripts as select(slice(...), 1, 0)), and
/// used only there: where(m) for a nonzero(m) that stays would be a second
/// device read (`pairs[:, 0]` beside `pairs[:, 1]`).
Value *nonzeroOf(Value *v) {
  Node *node = v->node();
  if (v->uses().size() != 1)
    return nullptr;
  if (node->kind() == c10::aten::slice && node->inputs().size() == 5 &&
      constantInt(node->input(1)) == 0 && node->input(2)->mustBeNone() &&
      node->input(3)->mustBeNone() && constantInt(node->input(4)) == 1) {
    if (node->input(0)->uses().size() != 1)
      return nullptr;
    node = node->input(0)->node();
  }
  if (node->kind() != c10::aten::nonzero || node->inputs().size() != 1)
    return nullptr;
  return node->input(0);
}

/// Whether no use of \p v, a vector of one element or the 0-d tensor of
/// that element (which of the two depends on data), can tell them apart:
/// each use is a full reduction or numel; an elementwise op (against any
/// other operand of rank >= 1 both broadcast alike, against a 0-d one the
/// result is again one of the two), whose result is checked in turn; the
/// one index of `x[v]`, whose rows are again one of the two; the one index
/// of a store `x[v] = w`, which writes the same element either way, or its
/// value w, which broadcasts alike.
/// mmdetection's `pos_inds = nonzero(gt_inds > 0).squeeze()`, read by
/// `pos_inds.numel()`, `gt_inds[pos_inds] - 1` and a store at pos_inds.
bool singletonRankUnobserved(const Value *v, int depth) {
  if (depth > 8)
    return false;
  static const c10::Symbol numel = c10::Symbol::aten("numel");
  for (const torch::jit::Use &use : v->uses()) {
    const Node *user = use.user;
    c10::Symbol kind = user->kind();
    if (kind == numel)
      continue;
    bool fullReduction =
        use.offset == 0 && user->outputs().size() == 1 &&
        ((user->inputs().size() == 1 &&
          (kind == c10::aten::any || kind == c10::aten::all ||
           kind == c10::aten::max || kind == c10::aten::min)) ||
         (user->inputs().size() == 2 && user->input(1)->mustBeNone() &&
          (kind == c10::aten::sum || kind == c10::aten::mean)));
    // The value of a store broadcasts to the rows it writes, with or
    // without a leading dim of one.
    bool storedValue = use.offset == 2 && user->inputs().size() == 4 &&
                       (kind == c10::aten::index_put_ ||
                        kind == c10::aten::index_put) &&
                       v != user->input(0);
    if (fullReduction || storedValue)
      continue;
    if (kind == c10::prim::ListConstruct && use.offset == 0 &&
        user->inputs().size() == 1 && user->output()->uses().size() == 1) {
      const torch::jit::Use &at = user->output()->uses()[0];
      if (at.offset != 1 || v == at.user->input(0))
        return false;
      if (at.user->kind() == c10::aten::index &&
          singletonRankUnobserved(at.user->output(), depth + 1))
        continue;
      if (at.user->kind() == c10::aten::index_put_ &&
          at.user->inputs().size() == 4)
        continue; // its result is its target, of the target's shape
      return false;
    }
    if (opElementwise(user) && user->outputs().size() == 1 &&
        !writesAnything(user) && singletonRankUnobserved(user->output(), depth + 1))
      continue;
    return false;
  }
  return true;
}

/// The row indices of m's true elements, spelled from nonzero(m)'s
/// coordinates: its column 0 for any m, or the whole [K, 1] made a vector
/// for a 1-D m (of another rank, squeeze(1) keeps the columns and
/// view(-1) interleaves them). `squeeze()` makes the one row of a single
/// true element a 0-d tensor, which where(m)[0] keeps a vector: the same
/// only where no use tells the two apart (singletonRankUnobserved).
bool rowIndicesAsWhere(Graph &graph, Node *node) {
  if (node->outputs().size() != 1 || node->inputs().empty())
    return false;
  Value *m = nonzeroOf(node->input(0));
  if (!m)
    return false;
  bool column0 = node->kind() == c10::aten::select &&
                 node->inputs().size() == 3 &&
                 constantInt(node->input(1)) == 1 &&
                 constantInt(node->input(2)) == 0;
  // nonzero's result has two dims: squeeze(-1) is squeeze(1).
  std::optional<int64_t> squeezed =
      node->kind() == c10::aten::squeeze && node->inputs().size() == 2
          ? constantInt(node->input(1))
          : std::nullopt;
  bool squeezedAll = node->kind() == c10::aten::squeeze &&
                     node->inputs().size() == 1 &&
                     singletonRankUnobserved(node->output(), 0);
  bool asVector =
      (squeezed && (*squeezed == 1 || *squeezed == -1)) || squeezedAll ||
      ((node->kind() == c10::aten::reshape || node->kind() == c10::aten::view) &&
       node->inputs().size() == 2 && isFlatShape(node->input(1)));
  if (!column0 && !(asVector && knownRank(m) == 1))
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *where = emit(graph, "aten::where", {m}, node);
  return replace(node, emit(graph, "aten::__getitem__", {where, 0}, node));
}

/// `arange(c, n + c)` (int c, int64 by default) is `arange(n) + c`: the
/// same c, c + 1, ..., n + c - 1, and both raise for n < 0. Its length is n
/// itself, the spelling bound reads as a count: `arange(1, len(hits) + 1)`
/// of a ranking metric then lines up with hits' rows.
bool shiftedArange(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::arange || node->inputs().size() != 6 ||
      !node->input(2)->mustBeNone())
    return false;
  std::optional<int64_t> c = constantInt(node->input(0));
  Node *end = node->input(1)->node();
  if (!c || end->kind() != c10::aten::add || end->inputs().size() != 2 ||
      end->output()->type()->kind() != c10::TypeKind::IntType)
    return false;
  Value *n = constantInt(end->input(1)) == c   ? end->input(0)
             : constantInt(end->input(0)) == c ? end->input(1)
                                               : nullptr;
  if (!n || n->type()->kind() != c10::TypeKind::IntType)
    return false;
  torch::jit::WithInsertPoint guard(node);
  using torch::jit::NamedValue;
  Value *counted = emit(graph, "aten::arange", {n}, node,
                        {NamedValue("dtype", node->input(2)),
                         NamedValue("layout", node->input(3)),
                         NamedValue("device", node->input(4)),
                         NamedValue("pin_memory", node->input(5))});
  return replace(node, emit(graph, "aten::add", {counted, *c}, node));
}

/// `unique_consecutive(x, dim=d)` of a vector (d 0 or -1) is
/// `unique_consecutive(x)`: the runs along its only dim, the same values,
/// inverse and counts; the form without a dim is the one bound bounds
/// (torchaudio's greedy CTC decoder spells `dim=-1`).
bool vectorUniqueConsecutive(Graph &graph, Node *node) {
  static const auto kind =
      c10::Symbol::fromQualString("aten::unique_consecutive");
  if (node->kind() != kind || node->inputs().size() != 4 ||
      knownRank(node->input(0)) != 1)
    return false;
  std::optional<int64_t> dim = constantInt(node->input(3));
  if (dim != 0 && dim != -1)
    return false;
  torch::jit::WithInsertPoint guard(node);
  node->replaceInput(3, graph.insertConstant(c10::IValue()));
  return true;
}

/// Whether \p v, a branch \p block's result, is the TupleConstruct or
/// ListConstruct (\p kind) made in the block and read only there.
bool builtInBranch(const Value *v, const Block *block, c10::Symbol kind) {
  const Node *n = v->node();
  return n->kind() == kind && n->owningBlock() == block && v->uses().size() == 1;
}

/// The tuple constant \p v is (constant propagation's fold of
/// `(torch.tensor(0.0), torch.tensor(0))`), or nullopt.
std::optional<c10::IValue> constantTuple(const Value *v) {
  if (v->node()->kind() != c10::prim::Constant)
    return std::nullopt;
  std::optional<c10::IValue> c = torch::jit::toIValue(v);
  return c && c->isTuple() ? c : std::nullopt;
}

/// The elements of \p v, a branch \p block's result that builtInBranch or
/// constantTuple takes: the construct's inputs, or the tuple's items put in
/// the block as constants of their own.
std::vector<Value *> branchElements(Graph &graph, Block *block, Value *v,
                                    c10::Symbol kind) {
  if (builtInBranch(v, block, kind))
    return {v->node()->inputs().begin(), v->node()->inputs().end()};
  std::vector<Value *> items;
  torch::jit::WithInsertPoint at(block->return_node());
  for (const c10::IValue &item : constantTuple(v)->toTupleRef().elements())
    items.push_back(graph.insertConstant(item));
  return items;
}

/// An if whose branches each build the tuple or list it returns, of one
/// length (`out = (a, b * 2)` / `out = (b, a + 1)`), and reads nowhere
/// else, returns their elements instead and the container is built after
/// it: the same values, a new container either way (a list built in a
/// branch is a new one each time too; a constant tuple's items are the
/// same objects at each call, as its own constants are). The if then
/// returns tensors, which if-convert and lift-scalars take.
bool containerOfIfAsElements(Graph &graph, Node *node) {
  if (node->kind() != c10::prim::If || node->blocks().size() != 2)
    return false;
  Block *then = node->blocks()[0], *otherwise = node->blocks()[1];
  bool changed = false;
  for (size_t i = node->outputs().size(); i-- > 0;) {
    Value *out = node->output(i);
    auto tuple = out->type()->cast<c10::TupleType>();
    auto list = out->type()->cast<c10::ListType>();
    c10::Symbol kind =
        tuple ? c10::prim::TupleConstruct : c10::prim::ListConstruct;
    if ((!tuple && !list) || (tuple && tuple->schema()))
      continue;
    // Matched before anything is added: a constant's items are put in
    // the branch only once both branches match.
    auto length = [&](const Value *v, const Block *b) -> std::optional<size_t> {
      if (builtInBranch(v, b, kind))
        return v->node()->inputs().size();
      if (std::optional<c10::IValue> c = tuple ? constantTuple(v) : std::nullopt)
        return c->toTupleRef().elements().size();
      return std::nullopt;
    };
    std::optional<size_t> na = length(then->outputs()[i], then);
    std::optional<size_t> nb = length(otherwise->outputs()[i], otherwise);
    if (!na || na != nb || (tuple && tuple->elements().size() != *na))
      continue;
    std::vector<Value *> a = branchElements(graph, then, then->outputs()[i], kind);
    std::vector<Value *> b =
        branchElements(graph, otherwise, otherwise->outputs()[i], kind);
    std::vector<Value *> elements;
    for (size_t k = 0; k < a.size(); ++k) {
      c10::TypePtr type =
          tuple ? tuple->elements()[k] : list->getElementType();
      then->registerOutput(a[k]);
      otherwise->registerOutput(b[k]);
      elements.push_back(node->addOutput()->setType(type));
    }
    torch::jit::WithInsertPoint guard(node->next());
    Node *built = tuple ? graph.createTuple(elements)
                        : graph.createList(list->getElementType(), elements);
    graph.insertNode(built);
    built->output()->setType(out->type());
    out->replaceAllUsesWith(built->output());
    then->eraseOutput(i);
    otherwise->eraseOutput(i);
    node->eraseOutput(i);
    changed = true;
  }
  return changed;
}

/// `t.op_(v)` of a t that indexing made (advanced indexing copies) and that
/// nothing else reads is `t.op(v)` in t's dtype (InPlace.h): the write is
/// seen only through op_'s result. TorchScript spells `x[m] *= s` as index,
/// mul_, index_put_; out of place, the stored value is an elementwise op of
/// the selection, which mask-propagate and mask-store take.
bool inPlaceOnFreshSelection(Graph &graph, Node *node) {
  if (node->outputs().size() != 1 || node->inputs().empty() ||
      !isTensor(node->input(0)) || node->input(0)->uses().size() != 1 ||
      node->input(0)->node()->kind() != c10::aten::index ||
      !computableOutOfPlace(node))
    return false;
  return replace(node, outOfPlace(graph, node, node->input(0)));
}

/// The functional twin of the out= variant \p schema, whose argument
/// \p out is its out tensor: the overload of its name that writes nothing
/// and takes the same arguments but out, in order, with the same names.
const c10::FunctionSchema *functionalTwin(const c10::FunctionSchema &schema,
                                          size_t out) {
  const c10::Symbol symbol = c10::Symbol::fromQualString(schema.name());
  for (const std::shared_ptr<torch::jit::Operator> &op :
       torch::jit::getAllOperatorsFor(symbol)) {
    const c10::FunctionSchema &twin = op->schema();
    if (twin.is_mutable() || twin.returns().size() != 1 ||
        twin.arguments().size() + 1 != schema.arguments().size())
      continue;
    bool same = true;
    for (size_t i = 0, j = 0; same && i < schema.arguments().size(); ++i) {
      if (i == out)
        continue;
      const c10::Argument &a = schema.arguments()[i], &b = twin.arguments()[j++];
      same = a.name() == b.name() && a.kwarg_only() == b.kwarg_only() &&
             *a.type() == *b.type();
    }
    if (same)
      return &twin;
  }
  return nullptr;
}

/// `op(args..., out=o)` computes op's result, resizes o to its shape (a
/// no-op where they agree), copies the result in and returns o. The rules
/// see writes where in-place ops make them, in their first input: as
/// `o.resize_as_(r).copy_(r)` of the functional r = op(args...), the write
/// to o is one they model (a write they did not see was a dead op to
/// dead-code elimination: PyG's `index_select(m, 0, row, out=edge_mask)`
/// lost). Only out variants with one written argument, their last, and a
/// functional twin; any other write stays as it is.
bool outVariantAsInPlace(Graph &graph, Node *node) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || !schema->is_mutable() || node->outputs().size() != 1 ||
      schema->arguments().size() != node->inputs().size() ||
      mutatesFirstInput(node))
    return false;
  const size_t out = node->inputs().size() - 1;
  for (size_t i = 0; i < schema->arguments().size(); ++i) {
    const c10::AliasInfo *alias = schema->arguments()[i].alias_info();
    if (alias && alias->isWrite() != (i == out))
      return false;
  }
  const c10::AliasInfo *written = schema->arguments()[out].alias_info();
  if (!written || !written->isWrite() ||
      !schema->arguments()[out].kwarg_only() || !isTensor(node->input(out)) ||
      !functionalTwin(*schema, out))
    return false;
  std::vector<torch::jit::NamedValue> args, kwargs;
  for (size_t i = 0; i < out; ++i) {
    const c10::Argument &arg = schema->arguments()[i];
    if (arg.kwarg_only())
      kwargs.emplace_back(arg.name(), node->input(i));
    else
      args.emplace_back(node->input(i));
  }
  torch::jit::WithInsertPoint guard(node);
  Value *o = node->input(out);
  Value *result = emit(graph, schema->name().c_str(), args, node, kwargs);
  emit(graph, "aten::resize_as_", {o, result}, node);
  emit(graph, "aten::copy_", {o, result}, node);
  return replace(node, o);
}

/// `x[:]` along any dim (slice from None or 0 to None or the largest int,
/// step 1) is x itself, a view of all of it: TorchScript spells `x[:, m]`
/// as a full slice of dim 0 indexed by [None, m]. Reads and writes through
/// either are the same; only a 0-d x, which slice refuses, differs (where
/// the original raises).
bool fullSliceIsSelf(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::slice || node->inputs().size() != 5 ||
      !isTensor(node->input(0)) || constantInt(node->input(4)) != 1)
    return false;
  const Value *start = node->input(2), *end = node->input(3);
  bool fromFirst = start->mustBeNone() || constantInt(start) == 0;
  bool toLast = end->mustBeNone() ||
                constantInt(end) == std::numeric_limits<int64_t>::max();
  if (!fromFirst || !toLast || !constantInt(node->input(1)))
    return false;
  return replace(node, node->input(0));
}

/// `x[:, i][k]` is `x[k][i]`: row k of the columns i names is the columns i
/// of row k (PyG's `edge_index[:, mask]` read as `edge_index[0]`), for any
/// single index i along dim 1 (a mask or integers), and both raise where k
/// is out of x's rows or i does not fit them. The selection left is along
/// dim 0, the one bound bounds.
bool rowOfColumnSelection(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::select || node->inputs().size() != 3 ||
      constantInt(node->input(1)) != 0)
    return false;
  Node *index = node->input(0)->node();
  if (index->kind() != c10::aten::index || index->inputs().size() != 2)
    return false;
  Node *list = index->input(1)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 2 ||
      !list->input(0)->mustBeNone() || list->input(1)->mustBeNone())
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *row =
      emit(graph, "aten::select", {index->input(0), 0, node->input(2)}, node);
  return replace(node, emitIndex(graph, row, list->input(1), node));
}

/// Python's abs() of a tensor scripts as prim::abs, which is aten::abs.
bool builtinAbs(Graph &graph, Node *node) {
  if (node->kind() != c10::prim::abs || node->inputs().size() != 1 ||
      !isTensor(node->input(0)))
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(node, emit(graph, "aten::abs", {node->input(0)}, node));
}

/// `int(t.item())` is `int(t)`, and `float(t.item())` is `float(t)`: one
/// element read and converted; for every value both convert they truncate
/// (round) alike, and both raise for a tensor of another size. The item
/// used nowhere else.
bool hostCastOfItem(Graph &graph, Node *node) {
  if ((node->kind() != c10::aten::Int && node->kind() != c10::aten::Float) ||
      node->inputs().size() != 1)
    return false;
  Node *item = node->input(0)->node();
  if (item->kind() != c10::aten::item || item->inputs().size() != 1 ||
      item->output()->uses().size() != 1 || !isTensor(item->input(0)))
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(node, emit(graph, node->kind().toQualString(),
                            {item->input(0)}, node));
}

/// `l[k]`: a read of a list at a constant index.
bool isConstantItem(const Node *node) {
  return node->kind() == c10::aten::__getitem__ &&
         node->inputs().size() == 2 && constantInt(node->input(1));
}

/// Whether every use of \p list reads it at a constant index (or is \p
/// also, a block's return): no op writes it or sees it whole.
bool readAtConstantIndices(const Value *list, const Node *also = nullptr) {
  return std::all_of(list->uses().begin(), list->uses().end(),
                     [&](const torch::jit::Use &use) {
                       return use.user == also ||
                              (use.offset == 0 && isConstantItem(use.user));
                     });
}

/// `aten::size(x)`, every size of x as a list, that no use writes: each use
/// has a schema that does not write it (a size argument, a read), or
/// unpacks it.
bool isUnwrittenShape(const Node *sizes) {
  if (sizes->kind() != c10::aten::size || sizes->inputs().size() != 1)
    return false;
  for (const torch::jit::Use &use : sizes->output()->uses()) {
    if (use.user->kind() == c10::prim::ListUnpack)
      continue;
    const c10::FunctionSchema *schema = use.user->maybeSchema();
    if (!schema || use.offset >= schema->arguments().size())
      return false;
    const c10::Argument &arg = schema->arguments()[use.offset];
    if (arg.alias_info() && arg.alias_info()->isWrite())
      return false;
  }
  return true;
}

/// `x.shape[i]` scripts as `size(x)[i]`: for a constant i it is `x.size(i)`,
/// the spelling the rules read (both raise where i is out of range). Only
/// while no op writes the list: each use has a schema that does not write
/// it (a size argument, a read), or unpacks it.
bool shapeItemAsSize(Graph &graph, Node *node) {
  if (!isConstantItem(node))
    return false;
  Node *sizes = node->input(0)->node();
  if (!isUnwrittenShape(sizes))
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(node, emit(graph, "aten::size",
                            {sizes->input(0), node->input(1)}, node));
}

/// `x.unbind(d)[k]` of a constant k (detectron2's `nonzero_tuple(m)[0]`,
/// `m.nonzero().unbind(1)` read at 0) is `x.select(d, k)`, the spelling the
/// rules read for `nonzero(m)[:, 0]`: the same view, and a k out of range
/// raises in both. Only while every use of the list reads it at a constant
/// index, so that no op writes it or sees it whole.
bool unbindItemAsSelect(Graph &graph, Node *node) {
  if (!isConstantItem(node))
    return false;
  Node *unbind = node->input(0)->node();
  if (unbind->kind() != c10::aten::unbind || unbind->inputs().size() != 2 ||
      !isTensor(unbind->input(0)) || !constantInt(unbind->input(1)) ||
      !readAtConstantIndices(unbind->output()))
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(node, emit(graph, "aten::select",
                            {unbind->input(0), unbind->input(1),
                             node->input(1)},
                            node));
}

/// `(if c: a.unbind(1) else: b.unbind(1))[k]` (detectron2's nonzero_tuple,
/// which unsqueezes a 0-d mask first) is the item read in each branch: the
/// if returns `a.unbind(1)[k]` and `b.unbind(1)[k]` instead, which
/// unbindItemAsSelect then spells as selects. Only where every use of the
/// if's list reads it at a constant index, and each branch returns a list
/// it made fresh (unbind, split, chunk, a list literal) and reads nowhere
/// else: no alias sees the list, and the item read at the branch's end is
/// the one read after the if.
bool itemOfIfAsItems(Graph &graph, Node *node) {
  if (!isConstantItem(node))
    return false;
  Value *list = node->input(0);
  Node *ifNode = list->node();
  if (ifNode->kind() != c10::prim::If ||
      list->type()->kind() != c10::TypeKind::ListType ||
      !readAtConstantIndices(list))
    return false;
  static const std::array<c10::Symbol, 7> fresh = {
      c10::aten::unbind, c10::aten::split, c10::aten::chunk,
      c10::Symbol::aten("split_with_sizes"), c10::Symbol::aten("unsafe_chunk"),
      c10::Symbol::aten("unsafe_split"), c10::prim::ListConstruct};
  size_t at = list->offset();
  for (Block *b : ifNode->blocks()) {
    Value *made = b->outputs()[at];
    // Returned, and read at constant indices (by the reads made here).
    if (made->node()->owningBlock() != b ||
        std::find(fresh.begin(), fresh.end(), made->node()->kind()) ==
            fresh.end() ||
        !readAtConstantIndices(made, b->return_node()))
      return false;
  }
  // This read alone (the sweep visits the others): the if gets a result.
  Value *item = ifNode->addOutput()->setType(node->output()->type());
  for (Block *b : ifNode->blocks()) {
    torch::jit::WithInsertPoint guard(b->return_node());
    Value *inBranch = emit(graph, "aten::__getitem__",
                           {b->outputs()[at], node->input(1)}, node);
    inBranch->setType(node->output()->type());
    b->registerOutput(inBranch);
  }
  replace(node, item);
  if (!list->uses().empty())
    return true;
  // The last read: the if no longer returns the list, and each branch's
  // reads of its own become selects where they can.
  std::vector<Value *> made;
  for (Block *b : ifNode->blocks()) {
    made.push_back(b->outputs()[at]);
    b->eraseOutput(at);
  }
  ifNode->eraseOutput(at);
  for (Value *m : made) {
    std::vector<Node *> reads;
    for (const torch::jit::Use &use : m->uses())
      reads.push_back(use.user);
    for (Node *read : reads)
      unbindItemAsSelect(graph, read);
  }
  return true;
}

/// `x.new_zeros(x.shape)` (and new_ones, new_empty, new_full) is
/// `zeros_like(x)`, contiguous as new_zeros makes it: the op reads x's
/// shape, metadata a rule keeps for any tensor, where the list of sizes of
/// a bounded x would hold its count. Only while no op writes the list.
bool newOfOwnShapeAsLike(Graph &graph, Node *node) {
  static const std::map<c10::Symbol, const char *> likes = {
      {c10::Symbol::aten("new_zeros"), "aten::zeros_like"},
      {c10::Symbol::aten("new_ones"), "aten::ones_like"},
      {c10::Symbol::aten("new_empty"), "aten::empty_like"},
      {c10::Symbol::aten("new_full"), "aten::full_like"}};
  auto like = likes.find(node->kind());
  bool full = node->kind() == c10::Symbol::aten("new_full");
  // (self, size, [fill,] dtype, layout, device, pin_memory)
  if (like == likes.end() || node->inputs().size() != (full ? 7u : 6u) ||
      !isUnwrittenShape(node->input(1)->node()) ||
      node->input(1)->node()->input(0) != node->input(0))
    return false;
  size_t options = full ? 3 : 2;
  std::vector<torch::jit::NamedValue> args = {node->input(0)};
  if (full)
    args.emplace_back(node->input(2));
  torch::jit::WithInsertPoint guard(node);
  return replace(
      node,
      emit(graph, like->second, args, node,
           {{"dtype", node->input(options)},
            {"layout", node->input(options + 1)},
            {"device", node->input(options + 2)},
            {"pin_memory", node->input(options + 3)},
            {"memory_format",
             graph.insertConstant(c10::MemoryFormat::Contiguous)}}));
}

/// `len(x.shape)` (kornia's `if len(match_dists.shape) == 1`) is `x.dim()`:
/// the rank, metadata the rules read for any tensor, where the list of
/// sizes of a bounded tensor would hold its count. Only while no op writes
/// the list.
bool lenOfShapeAsDim(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::len || node->inputs().size() != 1 ||
      !isUnwrittenShape(node->input(0)->node()))
    return false;
  torch::jit::WithInsertPoint guard(node);
  return replace(
      node, emit(graph, "aten::dim", {node->input(0)->node()->input(0)}, node));
}

/// A read of the shape of a result of an op that keeps its first operand's
/// shape (OpInfo's kKeepsShape: sort, argsort, cumsum, softmax, flip, roll)
/// reads that operand's: `p, i = x[m].sort(); p.numel()` is `x[m].numel()`,
/// the count of m, which lift-scalars and bound take from the selection.
/// Not where an op reshapes the operand in place (`x.squeeze_()`): its
/// shape would change between the two reads.
bool shapeReadOfShapeKeeper(Node *node) {
  using namespace c10;
  static const Symbol numel = Symbol::aten("numel");
  if (node->kind() != numel && node->kind() != aten::size &&
      node->kind() != aten::dim && node->kind() != aten::len)
    return false;
  if (node->inputs().empty() || !isTensor(node->input(0)))
    return false;
  const Node *def = node->input(0)->node();
  const OpInfo *info = opInfo(def);
  if (!info || !info->has(kKeepsShape) || def->inputs().empty() ||
      !isTensor(def->input(0)))
    return false;
  Value *operand = def->input(0);
  for (const torch::jit::Use &use : operand->uses())
    if (const OpInfo *u = opInfo(use.user); u && u->has(kReshapesInPlace))
      return false;
  node->replaceInput(0, operand);
  return true;
}

/// The matrix \p u transposes (`x.t()`, `x.transpose(0, 1)`,
/// `x.permute([1, 0])` of an x of rank 2), or null.
Value *transposedMatrix(const Value *u) {
  const Node *def = u->node();
  if (def->inputs().empty() || !isTensor(def->input(0)) ||
      knownRank(def->input(0)) != 2)
    return nullptr;
  auto dim = [](const Value *d) {
    std::optional<int64_t> k = constantInt(d);
    return k ? std::optional<int64_t>(*k < 0 ? *k + 2 : *k) : std::nullopt;
  };
  if (def->kind() == c10::aten::t && def->inputs().size() == 1)
    return def->input(0);
  if (def->kind() == c10::aten::transpose && def->inputs().size() == 3) {
    std::optional<int64_t> a = dim(def->input(1)), b = dim(def->input(2));
    if (a && b && *a + *b == 1 && *a * *b == 0)
      return def->input(0);
  }
  if (def->kind() == c10::aten::permute && def->inputs().size() == 2)
    if (auto order = constantIntList(def->input(1));
        order && order->size() == 2 && ((*order)[0] == 1 || (*order)[0] == -1))
      return def->input(0);
  return nullptr;
}

/// `x.t()[k]`, `x.t().unbind(0)`: a row of a transposed matrix is a column
/// of the matrix, `x[:, k]` (yolov5's `i, j = (conf > t).nonzero().t()`,
/// the rows of nonzero's coordinates as where(m)'s). Both spellings view
/// the same elements of x, so writes through either are the same.
bool rowOfTransposed(Graph &graph, Node *node) {
  bool select = node->kind() == c10::aten::select && node->inputs().size() == 3;
  bool unbind = node->kind() == c10::aten::unbind && node->inputs().size() == 2;
  if (!select && !unbind)
    return false;
  Value *x = transposedMatrix(node->input(0));
  std::optional<int64_t> d = constantInt(node->input(1));
  if (!x || !d || *d < -2 || *d > 1)
    return false;
  int64_t other = 1 - (*d < 0 ? *d + 2 : *d);
  torch::jit::WithInsertPoint guard(node);
  Value *dim = graph.insertConstant(other);
  return replace(node, select ? emit(graph, "aten::select",
                                     {x, dim, node->input(2)}, node)
                              : emit(graph, "aten::unbind", {x, dim}, node));
}

/// Whether \p node's only use views its result as exactly \p n elements
/// (`.view(4, 4)` of 16 bins; every size a constant, none -1): a result of
/// any other size makes that view raise.
bool viewedAsExactly(const Node *node, int64_t n) {
  const auto &uses = node->output()->uses();
  if (uses.size() != 1 || uses[0].offset != 0)
    return false;
  const Node *user = uses[0].user;
  if (user->kind() != c10::aten::view && user->kind() != c10::aten::reshape)
    return false;
  std::optional<std::vector<int64_t>> sizes = constantIntList(user->input(1));
  if (!sizes)
    return false;
  int64_t product = 1;
  for (int64_t size : *sizes) {
    if (size < 0)
      return false;
    product *= size;
  }
  return product == n;
}

/// Whether \p node's only use views its result as sizes whose product is
/// \p n itself, a host int computed as their product (`minlength=C * C`
/// beside `.view(C, C)`, C a module's attribute): exactly n elements, for
/// every C.
bool viewedAsProductOf(const Node *node, const Value *n) {
  const auto &uses = node->output()->uses();
  if (uses.size() != 1 || uses[0].offset != 0)
    return false;
  const Node *user = uses[0].user;
  const Node *list = user->input(1)->node();
  if ((user->kind() != c10::aten::view && user->kind() != c10::aten::reshape) ||
      list->kind() != c10::prim::ListConstruct)
    return false;
  std::vector<const Value *> factors;
  std::vector<const Value *> work = {n};
  while (!work.empty() && factors.size() <= list->inputs().size()) {
    const Value *v = work.back();
    work.pop_back();
    const Node *mul = v->node();
    if (mul->kind() == c10::aten::mul && mul->inputs().size() == 2 &&
        v->type()->kind() == c10::TypeKind::IntType) {
      work.push_back(mul->input(0));
      work.push_back(mul->input(1));
    } else {
      factors.push_back(v);
    }
  }
  std::vector<const Value *> sizes(list->inputs().begin(), list->inputs().end());
  if (!work.empty() || factors.size() != sizes.size() || sizes.size() < 2)
    return false;
  std::sort(factors.begin(), factors.end());
  std::sort(sizes.begin(), sizes.end());
  return factors == sizes;
}

/// `torch.bincount(x, minlength=L)` has exactly L bins when every value of
/// x is below L: always for a uint8 x and L >= 256 (torchvision's
/// equalize), and wherever the program does not raise when its only use
/// views it as L elements (torchmetrics' confusion matrix,
/// `bincount(C * target + preds, minlength=C * C).view(C, C)`, of int64
/// values; L a constant, or a host int that is the product of the view's
/// sizes, `minlength=n * n` beside `.view(n, n)`). Then it is
/// `zeros(L).index_add(0, x.long(), ones)`, which never
/// reads the host (CUDA's bincount reads x.max() back to size its result)
/// and raises where bincount's values would not fit, as the view would (a
/// negative value raises in both). x's dtype and rank decide on the host
/// (metadata: no sync); other dtypes and ranks keep bincount, in the
/// guard's fallback.
bool exactHistogram(Graph &graph, Node *node) {
  constexpr int64_t kByteValues = 256;
  if (node->kind() != c10::aten::bincount || node->inputs().size() != 3 ||
      !isTensor(node->input(0)) || !node->input(1)->mustBeNone() ||
      inGuardFallback(node))
    return false;
  std::optional<int64_t> bins = constantInt(node->input(2));
  c10::ScalarType fits;
  if (bins && *bins >= kByteValues)
    fits = c10::ScalarType::Byte;
  else if (bins ? *bins >= 1 && viewedAsExactly(node, *bins)
                : viewedAsProductOf(node, node->input(2)))
    fits = c10::ScalarType::Long;
  else
    return false;
  torch::jit::WithInsertPoint guard(node);
  Value *x = node->input(0);
  // bincount raises for any other rank; index_add would not for a 0-d x.
  Value *holds = emit(
      graph, "aten::__and__",
      {emit(graph, "aten::eq",
            {emit(graph, "prim::dtype", {x}, node), static_cast<int64_t>(fits)},
            node),
       emit(graph, "aten::eq", {emit(graph, "aten::dim", {x}, node), 1}, node)},
      node);
  const auto kLong = static_cast<int64_t>(c10::ScalarType::Long);
  Value *counts = emitIf(
      graph, holds, node,
      [&] {
        Value *bin = emit(graph, "aten::to", {x, kLong}, node);
        Value *size = graph
                          .insertNode(graph.createList(c10::IntType::get(),
                                                       {node->input(2)}))
                          ->output();
        Value *zeros = emit(
            graph, "aten::zeros", {size}, node,
            {torch::jit::NamedValue("dtype", kLong),
             torch::jit::NamedValue("device",
                                    emit(graph, "prim::device", {x}, node))});
        Value *ones = emit(graph, "aten::ones_like", {bin}, node);
        return emit(graph, "aten::index_add", {zeros, 0, bin, ones}, node);
      },
      [&] {
        return emit(graph, "aten::bincount",
                    {x, node->input(1), node->input(2)}, node);
      });
  counts->node()->i_(guardAttr(), 1);
  return replace(node, counts);
}

} // namespace

namespace {

/// Whether \p v is a host number, which nothing writes.
bool isHostNumber(const Value *v) {
  c10::TypeKind kind = v->type()->kind();
  return kind == c10::TypeKind::IntType || kind == c10::TypeKind::FloatType ||
         kind == c10::TypeKind::BoolType;
}

/// Whether \p node may stand for an equal node after it: a deterministic
/// op with a schema, no block and no write, whose results are tensors made
/// afresh that nothing writes to, or views that no op uses to write (two
/// equal views of one tensor are one until one of them is changed in
/// place: its data is theirs, but `unsqueeze_` changes one view). With
/// \p reads, also a read or a data-dependent shape \p reads does not name,
/// and results that are host numbers. A list result counts as made afresh
/// when it is in \p readOnlyLists (where(m)'s index lists, only read).
bool mergeable(const Node *node, const MergeReads *reads, bool plumbing,
               const std::unordered_set<const Value *> &readOnlyLists) {
  // After the rewrites, the plumbing their forms repeat at every use: the
  // device of a tensor, and a list of host numbers that only ops read (a
  // size), no rule owns then.
  if (node->kind() == c10::prim::ListConstruct)
    return plumbing && readOnlyLists.count(node->output()) != 0;
  const c10::FunctionSchema *schema = node->maybeSchema();
  // prim::Uninitialized stands for no value (a branch that raises): not
  // a computation.
  if (!schema || node->kind() == c10::prim::Uninitialized ||
      !node->blocks().empty() || node->numAttributes() != 0 ||
      node->outputs().empty() ||
      node->outputs().size() != schema->returns().size() ||
      node->isNondeterministic() || node->hasSideEffects() ||
      Aliases::mayWrite(node))
    return false;
  // The original's host syncs are counted on the normalized graph: one
  // nonzero for two would hide one. Reads a rewrite made merge after it.
  OpRole role = opRole(node);
  if ((role == OpRole::DynamicShapeRoot || role == OpRole::SyncRead) &&
      (!reads || (*reads)(node)))
    return false;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const Value *out = node->output(i);
    const c10::AliasInfo *view = schema->returns()[i].alias_info();
    if (!view) {
      if (reads && isHostNumber(out))
        continue;
      if (plumbing && out->type()->kind() == c10::TypeKind::DeviceObjType)
        continue;
      if (readOnlyLists.count(out))
        continue;
      if (Aliases::writtenAfresh(out, nullptr) != false)
        return false; // not a tensor, or written to
      continue;
    }
    if (!isTensor(out) || view->isWrite() || view->isWildcardAfter() ||
        view->isWildcardBefore() || !view->containedTypes().empty())
      return false;
    for (const torch::jit::Use &use : out->uses())
      if (Aliases::mayWrite(use.user))
        return false;
  }
  return true;
}

/// What makes two mergeable nodes equal: the operator and overload, and
/// each operand, a constant by its value (constants are not pooled here:
/// two `[-1]` lists are one size), anything else by its identity.
std::string mergeKey(const Node *node) {
  std::ostringstream key;
  if (node->kind() == c10::prim::ListConstruct) {
    key << "prim::ListConstruct";
  } else {
    const c10::OperatorName &name = node->schema().operator_name();
    key << name.name << '.' << name.overload_name;
  }
  // Results of a generic schema (`-> t`, `-> Any`) are typed by the graph.
  for (const Value *out : node->outputs())
    key << " :" << out->type()->str();
  for (const Value *in : node->inputs()) {
    std::optional<c10::IValue> constant;
    if (in->node()->kind() == c10::prim::Constant &&
        in->type()->kind() != c10::TypeKind::TensorType)
      constant = torch::jit::toIValue(in);
    if (constant)
      key << " c" << in->type()->str() << '=' << *constant;
    else
      key << " v" << static_cast<const void *>(in);
  }
  return key.str();
}

/// Whether a node of the graph may write to what \p v holds: its memory,
/// or, for a list or tuple built in the graph, an element's. Two equal ops
/// of a value written between them read two different values.
bool operandWritten(const Value *v, const Aliases &aliases, bool plumbing) {
  if (aliases.hasWriters(v))
    return true;
  c10::TypeKind kind = v->type()->kind();
  if (isTensor(v) || isHostNumber(v) || kind == c10::TypeKind::NoneType ||
      (plumbing && kind == c10::TypeKind::DeviceObjType))
    return false;
  const Node *def = v->node();
  if (def->kind() == c10::prim::Constant)
    return false;
  if (def->kind() != c10::prim::ListConstruct &&
      def->kind() != c10::prim::TupleConstruct)
    return true; // a container or object whose contents this does not follow
  return std::any_of(def->inputs().begin(), def->inputs().end(),
                     [&](const Value *e) {
                       return operandWritten(e, aliases, plumbing);
                     });
}

/// Whether \p list, a list of host numbers built in the graph, is only
/// read (readOnlyByOps).
bool onlyReadNumbers(const Value *list) {
  const Node *def = list->node();
  return def->kind() == c10::prim::ListConstruct &&
         std::all_of(def->inputs().begin(), def->inputs().end(),
                     isHostNumber) &&
         readOnlyByOps(list);
}

/// Whether \p list, a list of tensors an op made, is only read (indexed,
/// unpacked, measured) and nothing writes to the tensors read out of it.
bool onlyRead(const Value *list, const Aliases &aliases) {
  if (list->type()->kind() != c10::TypeKind::ListType)
    return false;
  for (const torch::jit::Use &use : list->uses()) {
    const Node *user = use.user;
    if (user->kind() != c10::aten::__getitem__ &&
        user->kind() != c10::prim::ListUnpack && user->kind() != c10::aten::len)
      return false;
    for (const Value *element : user->outputs())
      if (aliases.hasWriters(element))
        return false;
  }
  return true;
}

using Seen = std::unordered_map<std::string, Node *>;
using NodeSet = std::unordered_set<const Node *>;

/// What every merge asks of the graph as it was before the first: the
/// alias database describes that graph only.
struct MergeFacts {
  const MergeReads *reads = nullptr;
  bool plumbing = false;
  NodeSet operandsWritten;
  std::unordered_set<const Value *> readOnlyLists;
  const std::function<void(const Node *)> *merged = nullptr;
};

bool mergeIn(torch::jit::Block *block, std::vector<Seen> &scopes,
             const MergeFacts &facts) {
  bool merged = false;
  scopes.emplace_back();
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node *node = *it++;
    for (torch::jit::Block *inner : node->blocks())
      merged |= mergeIn(inner, scopes, facts);
    if (facts.operandsWritten.count(node) ||
        !mergeable(node, facts.reads, facts.plumbing, facts.readOnlyLists))
      continue;
    std::string key = mergeKey(node);
    Node *earlier = nullptr;
    for (const Seen &scope : scopes) {
      auto found = scope.find(key);
      if (found != scope.end()) {
        earlier = found->second;
        break;
      }
    }
    if (!earlier) {
      scopes.back().emplace(std::move(key), node);
      continue;
    }
    for (size_t i = 0; i < node->outputs().size(); ++i)
      node->output(i)->replaceAllUsesWith(earlier->output(i));
    if (facts.merged)
      (*facts.merged)(node);
    node->destroy();
    merged = true;
  }
  scopes.pop_back();
  return merged;
}

} // namespace

bool mergeEqualTensorOps(const std::shared_ptr<Graph> &graph,
                         const MergeReads *reads,
                         const std::function<void(const Node *)> *merged,
                         bool plumbing) {
  std::vector<Node *> nodes = collectNodes(graph->block());
  Aliases aliases(graph, &nodes);
  MergeFacts facts;
  facts.reads = reads;
  facts.merged = merged;
  facts.plumbing = plumbing;
  for (const Node *node : nodes) {
    if (std::any_of(node->inputs().begin(), node->inputs().end(),
                    [&](const Value *v) {
                      return operandWritten(v, aliases, plumbing);
                    }))
      facts.operandsWritten.insert(node);
    for (const Value *out : node->outputs())
      if (onlyRead(out, aliases) || (plumbing && onlyReadNumbers(out)))
        facts.readOnlyLists.insert(out);
  }
  std::vector<Seen> scopes;
  return mergeIn(graph->block(), scopes, facts);
}

bool readOnlyByOps(const Value *v) {
  return std::all_of(v->uses().begin(), v->uses().end(), readByOp);
}

bool canonicalizeSpelling(Graph &graph, Node *node) {
  if (Node *reshape = flattenAsReshape(graph, node)) {
    // One of the row-index spellings, which the caller's sweep will not
    // visit (it inserted it).
    rowIndicesAsWhere(graph, reshape);
    return true;
  }
  return outVariantAsInPlace(graph, node) || evalDropoutAsInput(node) ||
         embeddingAsIndex(graph, node) ||
         argwhereAsNonzero(graph, node) ||
         sameShapeMaskedSelectAsIndex(graph, node) ||
         rowIndicesAsWhere(graph, node) || noneLedIndexAsUnsqueeze(graph, node) ||
         reshapeOfUnsqueeze(node) ||
         builtinAbs(graph, node) || hostCastOfItem(graph, node) ||
         shiftedArange(graph, node) || vectorUniqueConsecutive(graph, node) ||
         fullSliceIsSelf(graph, node) || rowOfColumnSelection(graph, node) ||
         inPlaceOnFreshSelection(graph, node) ||
         containerOfIfAsElements(graph, node) ||
         exactHistogram(graph, node) ||
         elementwiseOfExpansions(graph, node) ||
         shapeItemAsSize(graph, node) || lenOfShapeAsDim(graph, node) ||
         newOfOwnShapeAsLike(graph, node) ||
         shapeReadOfShapeKeeper(node) || rowOfTransposed(graph, node) ||
         unbindItemAsSelect(graph, node) || itemOfIfAsItems(graph, node);
}

/// The tensor whose rank \p node reads: x of `x.dim()`, or of
/// `len(x.size())` where nothing writes the list of sizes.
static const Value *rankRead(const Node *node) {
  if (node->kind() == c10::aten::dim && node->inputs().size() == 1)
    return node->input(0);
  if (node->kind() == c10::aten::len && node->inputs().size() == 1 &&
      isUnwrittenShape(node->input(0)->node()))
    return node->input(0)->node()->input(0);
  return nullptr;
}

bool foldKnownRanks(std::shared_ptr<Graph> &graph, torch::jit::Block *block) {
  std::vector<std::pair<Node *, const Value *>> reads;
  for (Node *node : collectNodes(block))
    if (const Value *of = rankRead(node))
      reads.emplace_back(node, of);
  // The ranks of selections need the analysis's dtypes (x[m] of a bool m
  // drops m's dims): asked once, of the graph as it is before any fold.
  std::optional<AnalysisResult> analysis;
  std::vector<std::pair<Node *, int64_t>> ranks;
  for (const auto &[node, of] : reads) {
    std::optional<int64_t> rank = knownRank(of);
    if (!rank) {
      if (!analysis)
        analysis = analyzeGraph(*graph, Detail::Facts);
      rank = knownRank(of, &*analysis);
    }
    if (rank)
      ranks.emplace_back(node, *rank);
  }
  bool folded = false;
  for (const auto &[node, rank] : ranks) {
    torch::jit::WithInsertPoint guard(node);
    folded |= replace(node, graph->insertConstant(rank));
  }
  if (folded)
    propagateConstants(graph, nullptr);
  return folded;
}


namespace {

/// The leaves of \p u when it is `unsqueeze(l, d)`, or an elementwise op
/// (pureElementwise) of such trees and host numbers, all at one constant
/// d >= 0 or -1: the tensors l.
bool unsqueezedLeaves(Value *u, std::optional<int64_t> &d,
                      std::vector<Value *> &leaves, int depth = 0) {
  Node *n = u->node();
  if (n->kind() == c10::aten::unsqueeze) {
    std::optional<int64_t> at = constantInt(n->input(1));
    if (!at || (*at < 0 && *at != -1) || (d && *d != *at))
      return false;
    d = at;
    leaves.push_back(n->input(0));
    return true;
  }
  if (depth > 8 || !pureElementwise(n))
    return false;
  for (Value *in : n->inputs())
    if (isTensor(in) && !unsqueezedLeaves(in, d, leaves, depth + 1))
      return false;
  return true;
}

/// \p u (a tree unsqueezedLeaves took) rebuilt on its leaves, the
/// unsqueezes left out.
Value *rebuiltWithout(Graph &graph, Value *u, const Node *anchor) {
  Node *n = u->node();
  if (n->kind() == c10::aten::unsqueeze)
    return n->input(0);
  std::vector<Value *> inputs;
  for (Value *in : n->inputs())
    inputs.push_back(isTensor(in) ? rebuiltWithout(graph, in, anchor) : in);
  Node *copy = graph.insertNode(graph.create(n->kind(), inputs, 1));
  copy->copyAttributes(*n);
  copy->copyMetadata(const_cast<Node *>(anchor));
  copy->output()->setType(u->type());
  return copy->output();
}

} // namespace

bool widthReadAnywhere(const Value *width) {
  const Node *n = width->node();
  return n->kind() == c10::prim::GetAttr &&
         n->input(0)->node()->kind() == c10::prim::Param;
}

std::optional<ExpandedRows> matchExpandedRows(Node *node) {
  if ((node->kind() != c10::aten::view && node->kind() != c10::aten::reshape) ||
      node->inputs().size() != 2)
    return std::nullopt;
  // The sizes: [-1, C], a list of a host int C or a constant.
  Node *list = node->input(1)->node();
  std::optional<std::vector<int64_t>> constant = constantIntList(node->input(1));
  bool listed = list->kind() == c10::prim::ListConstruct &&
                list->inputs().size() == 2 && constantInt(list->input(0)) == -1;
  if (!listed && !(constant && constant->size() == 2 && (*constant)[0] == -1))
    return std::nullopt;
  Node *index = node->input(0)->node();
  if (index->kind() != c10::aten::index || node->input(0)->uses().size() != 1 ||
      index->input(1)->node()->kind() != c10::prim::ListConstruct ||
      index->input(1)->node()->inputs().size() != 1)
    return std::nullopt;
  ExpandedRows rows;
  rows.x = index->input(0);
  if (listed)
    rows.width = list->input(1);
  else
    rows.constantWidth = (*constant)[1];
  auto [u, shape] = expansionOf(index->input(1)->node()->input(0));
  const Node *sizes = shape ? shape->node() : nullptr;
  if (!u || (shape != rows.x &&
             !(sizes->kind() == c10::aten::size && sizes->inputs().size() == 1 &&
               sizes->input(0) == rows.x)))
    return std::nullopt;
  rows.unsqueezed = u;
  std::optional<int64_t> d;
  if (!unsqueezedLeaves(u, d, rows.leaves))
    return std::nullopt;
  rows.dim = *d;
  return rows;
}

Value *expandedRowsTest(Graph &graph, const ExpandedRows &rows,
                        const Node *anchor) {
  auto both = [&](Value *a, Value *b) {
    return emit(graph, "aten::__and__", {a, b}, anchor);
  };
  Value *x = rows.x, *u = rows.unsqueezed;
  Value *rowsShape = emit(
      graph, "aten::add",
      {emit(graph, "aten::slice", {emit(graph, "aten::size", {x}, anchor), 0, -1, 1},
            anchor),
       std::vector<int64_t>{1}},
      anchor);
  Value *holds = emit(graph, "aten::eq",
                      {emit(graph, "aten::size", {u}, anchor), rowsShape}, anchor);
  Value *width = emit(graph, "aten::size", {x, -1}, anchor);
  Value *c = rows.width;
  if (c && widthReadAnywhere(c)) // read again where the test is
    c = graph.insertNode(graph.createClone(c->node(), [](Value *v) { return v; }))
            ->output();
  holds = both(holds, c ? emit(graph, "aten::eq", {c, width}, anchor)
                          : emit(graph, "aten::eq", {width, rows.constantWidth}, anchor));
  holds = both(holds, emit(graph, "aten::eq",
                           {emit(graph, "prim::dtype", {u}, anchor),
                            static_cast<int64_t>(c10::ScalarType::Bool)},
                           anchor));
  if (rows.dim != -1)
    for (Value *leaf : rows.leaves)
      holds = both(holds, emit(graph, "aten::eq",
                               {emit(graph, "aten::dim", {leaf}, anchor), rows.dim},
                               anchor));
  return holds;
}

Value *rowsOfExpanded(Graph &graph, Value *x, Value *unsqueezed,
                      const Node *anchor) {
  return emitIndex(graph, x, rebuiltWithout(graph, unsqueezed, anchor), anchor);
}

} // namespace staticify
