//===- IfConvert.cpp - if on device data -> both branches + where ---------===//

#include "passes/IfConvert.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"
#include "passes/SpecializeInputs.h"

#include <sstream>
#include <unordered_map>
#include <utility>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static constexpr const char *kRule = "if-convert";

//===----------------------------------------------------------------------===//
// Shields: an op that may raise on values, run in the branch not taken
//===----------------------------------------------------------------------===//
//
// Converting an if runs both branches. An op that may raise on its operands'
// values (an integer division, an index) would then also run on the values
// of the branch not taken, where the original never ran it: `if step == 0:
// return img` guards the division by `step` below it. A shield replaces the
// operand that decides the raise by a safe value where the branch is not
// taken, and keeps it where it is: in the branch taken the op sees exactly
// the original's values and raises exactly when the original raises.
//
//   divisor d          ->  d.masked_fill(notTaken, 1)
//   index i into x, d  ->  i.masked_fill(notTaken, 0)    (x.size(d) > 0)
//
// Both are decided on the device, with no sync. What the host checks first
// (metadata, no sync): that the operand lives on the condition's device
// (masked_fill takes a 0-d mask of its own device), and for an index that x
// is not empty along d (index 0 is then out of range too). Where that does
// not hold, the guard's fallback asks the condition on the host, as the
// original if did.
//
// `x[k]` by a host int k (select) raises on host facts alone: the host
// checks k against x.size(d), and only where it is out of range does the
// fallback ask the condition (taken: the original's raise; not taken: a
// one-row stand-in and k = 0).

namespace {

/// The index operands of \p node that decide a raise on values: (operand,
/// dim of the indexed tensor) for `x[i]`, `x[:, i]`, `index_select(x, d,
/// i)` and `embedding(x, i)` with int64 indices (by the analysis's dtype facts: a mask selects,
/// it never raises on values), or nothing when some index is not one.
std::optional<std::vector<std::pair<Value *, int64_t>>>
shieldedIndices(const Node *node, const AnalysisResult *facts) {
  auto isLong = [&](const Value *v) {
    return facts && !v->mustBeNone() && facts->knows(v) &&
           facts->info(v).dtype == DTypeKind::Long;
  };
  std::vector<std::pair<Value *, int64_t>> out;
  if (node->kind() == c10::aten::index && node->inputs().size() == 2 &&
      node->input(1)->node()->kind() == c10::prim::ListConstruct) {
    const Node *list = node->input(1)->node();
    for (size_t d = 0; d < list->inputs().size(); ++d) {
      Value *i = list->input(d);
      if (i->mustBeNone())
        continue;
      if (!isLong(i))
        return std::nullopt;
      out.emplace_back(i, static_cast<int64_t>(d));
    }
  } else if (node->kind() == c10::aten::embedding &&
             node->inputs().size() >= 2) {
    // embedding(weight, indices): rows of weight, an index_select on dim 0.
    if (!isLong(node->input(1)))
      return std::nullopt;
    out.emplace_back(node->input(1), 0);
  } else if ((node->kind() == c10::aten::index_select &&
              node->inputs().size() == 3) ||
             (node->kind() == c10::aten::gather &&
              node->inputs().size() == 4)) {
    // index_select(x, d, i), gather(x, d, i, sparse_grad): they raise on
    // values only for an i out of x's range along d (gather also on shapes,
    // which no value changes).
    std::optional<int64_t> d = constantInt(node->input(1));
    if (!d || *d < 0 || !isLong(node->input(2)))
      return std::nullopt;
    out.emplace_back(node->input(2), *d);
  }
  if (out.empty())
    return std::nullopt;
  return out;
}

/// `select(x, d, k)` with a host index k and a constant d >= 0 (`x[k]`,
/// `x[0]`): it raises only where k is out of [-x.size(d), x.size(d)), a
/// host fact.
bool selectsByHostIndex(const Node *node) {
  if (node->kind() != c10::aten::select || node->inputs().size() != 3 ||
      !isTensor(node->input(0)) ||
      node->input(2)->type()->kind() != c10::TypeKind::IntType)
    return false;
  std::optional<int64_t> d = constantInt(node->input(1));
  return d && *d >= 0;
}

/// Whether the raise \p node may make on values is one a shield keeps to
/// the branch taken: a division by a tensor divisor, an index.
/// An index's shield checks it against x's size along \p dim on the host;
/// where that size depends on data (nonzero's rows), the check is itself a
/// sync, and no cheaper than the read the conversion removes. Such an if is
/// left to bound, whose forms of the index (row_at, gathers of padded rows)
/// do not raise, so both branches run with no shield.
static bool sizeDependsOnData(const Value *x, int64_t dim,
                              const AnalysisResult *facts) {
  if (!facts || !facts->knows(x))
    return false;
  ShapeDep dep = facts->info(x).shape;
  return dep == ShapeDep::Dynamic || (dep == ShapeDep::Leading && dim == 0);
}

/// Whether host value \p v is computed from the count of a tensor whose
/// rows data decides (`len(nonzero(m)) > 1`): through host arithmetic and
/// comparisons, to a size, len or numel of such a tensor.
static bool decidedByCount(const Value *v, const AnalysisResult &facts,
                           int depth = 0) {
  if (depth > 12 || isTensor(v))
    return false;
  const Node *n = v->node();
  if (opRole(n) == OpRole::ShapeRead)
    return !n->inputs().empty() && isTensor(n->input(0)) &&
           facts.knows(n->input(0)) &&
           facts.info(n->input(0)).shape != ShapeDep::Static;
  return std::any_of(n->inputs().begin(), n->inputs().end(),
                     [&](const Value *in) {
                       return decidedByCount(in, facts, depth + 1);
                     });
}

/// The most rows a shield appends for `x[k]` (padsSelectedRows).
constexpr int64_t kMostStandInRows = 4;

/// `x[k]` of a constant k (`nonzero(t).view(-1)[0]`, `x[m][-1]`) whose rows
/// are as many as data says, and nothing else: a stand-in row appended for
/// k >= 0 (prepended for k < 0), |k| small, makes x[k] read one where x has
/// too few rows, with no host read. Where the branch is taken the original
/// raises there; elsewhere x[k] is x's own row.
///
/// Not inside an if decided by such a count (`nonzero(m)[1] if len(nonzero(m))
/// > 1 else nonzero(m)[0]`): bound runs both of its branches on the padded
/// rows (row_at cannot raise) with fewer ops than the stand-ins cost.
static bool padsSelectedRows(const Node *node, const AnalysisResult *facts) {
  std::optional<int64_t> k = constantInt(node->input(2));
  if (!k || *k < -kMostStandInRows || *k >= kMostStandInRows ||
      constantInt(node->input(1)) != 0 || !facts ||
      !facts->knows(node->input(0)) ||
      facts->info(node->input(0)).shape != ShapeDep::Leading)
    return false;
  for (const Node *owner = node->owningBlock()->owningNode(); owner;
       owner = owner->owningBlock()->owningNode())
    if (owner->kind() == c10::prim::If && decidedByCount(owner->input(0), *facts))
      return false;
  return true;
}

/// A divisor that is a host number (`s_churn / (len(sigmas) - 1)`,
/// `n % k`): whether it is zero is a host fact.
static bool dividesByHostNumber(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op || !op->has(kRaisesOnZeroDivisor) || node->inputs().size() != 2)
    return false;
  c10::TypeKind k = node->input(1)->type()->kind();
  return k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType;
}

/// `one_hot(i, n)` of int64 indices and a host n: it raises on values only
/// for an i out of [0, n) (n is checked > 0 on the host; -1, which infers
/// the classes from i's values, is not taken).
static bool oneHotOfLongs(const Node *node, const AnalysisResult *facts) {
  return node->kind() == c10::Symbol::aten("one_hot") &&
         node->inputs().size() == 2 && facts && facts->knows(node->input(0)) &&
         facts->info(node->input(0)).dtype == DTypeKind::Long &&
         node->input(1)->type()->kind() == c10::TypeKind::IntType;
}

/// The dim of `argmax(x, d)`, `argmin(x, d)`, `max(x, d)`, `min(x, d)`:
/// they raise where x is empty along d (a host fact), and for a d past x's
/// rank, which the ops that made x show they cannot (minimumRank, or the
/// rank known for a negative d).
static std::optional<int64_t> reducedNonEmptyDim(const Node *node,
                                                 const AnalysisResult *facts) {
  c10::Symbol k = node->kind();
  if (!(k == c10::aten::argmax || k == c10::aten::argmin ||
        k == c10::aten::max || k == c10::aten::min) ||
      node->inputs().size() != 3 || !isTensor(node->input(0)))
    return std::nullopt;
  std::optional<int64_t> d = constantInt(node->input(1));
  if (!d)
    return std::nullopt;
  if (*d < 0) {
    std::optional<int64_t> rank = knownRank(node->input(0));
    if (!rank || *d + *rank < 0)
      return std::nullopt;
    return *d + *rank;
  }
  if (*d >= minimumRank(node->input(0), facts))
    return std::nullopt;
  return d;
}

bool shieldable(const Node *node, const AnalysisResult *facts) {
  const OpInfo *op = opInfo(node);
  if (dividesByHostNumber(node) || oneHotOfLongs(node, facts) ||
      reducedNonEmptyDim(node, facts))
    return true;
  if (op && op->has(kRaisesOnZeroDivisor))
    return node->inputs().size() >= 2 && isTensor(node->input(0)) &&
           isTensor(node->input(1));
  if (selectsByHostIndex(node))
    return !sizeDependsOnData(node->input(0), *constantInt(node->input(1)),
                              facts) ||
           padsSelectedRows(node, facts);
  auto indices = shieldedIndices(node, facts);
  return indices &&
         std::none_of(indices->begin(), indices->end(), [&](const auto &i) {
           return sizeDependsOnData(node->input(0), i.second, facts);
         });
}

/// The condition of a branch, taken and not, as 0-d bool tensors.
struct BranchCondition {
  Value *taken, *notTaken;
};

/// `then` when \p v lives on the condition's device (and \p extra holds,
/// when given), else the fallback: the original if's choice, on the host.
std::vector<Value *> guardedShield(
    Graph &graph, const BranchCondition &c, Value *v, Value *extra,
    const Node *anchor, size_t results,
    const std::function<std::vector<Value *>()> &then,
    const std::function<std::vector<Value *>()> &taken,
    const std::function<std::vector<Value *>()> &notTaken) {
  Value *ok = emit(graph, "aten::eq",
                   {emit(graph, "prim::device", {v}, anchor),
                    emit(graph, "prim::device", {c.taken}, anchor)},
                   anchor);
  if (extra)
    ok = emit(graph, "aten::__and__", {extra, ok}, anchor);
  std::vector<Value *> out = emitIf(graph, ok, anchor, results, then, [&] {
    return emitIf(graph, emit(graph, "aten::Bool", {c.taken}, anchor), anchor,
                  results, taken, notTaken);
  });
  out[0]->node()->i_(guardAttr(), 1);
  return out;
}

Value *shieldDivisor(Graph &graph, const BranchCondition &c, Value *d,
                     const Node *anchor) {
  return guardedShield(
      graph, c, d, nullptr, anchor, 1,
      [&] {
        return std::vector<Value *>{
            emit(graph, "aten::masked_fill", {d, c.notTaken, 1}, anchor)};
      },
      [&] { return std::vector<Value *>{d}; },
      [&] {
        return std::vector<Value *>{emit(graph, "aten::ones_like", {d}, anchor)};
      })[0];
}

/// \p operands themselves where the host fact \p ok holds (the op cannot
/// raise on them), else the original's choice read on the host: the
/// operands where the branch is taken (the op does what the original's
/// did), \p standIn's where it is not. The results keep the operands'
/// types (a host int stays an int).
std::vector<Value *>
hostCheckedShield(Graph &graph, const BranchCondition &c, Value *ok,
                  const std::vector<Value *> &operands, const Node *anchor,
                  const std::function<std::vector<Value *>()> &standIn) {
  auto unchanged = [&] { return operands; };
  auto typed = [&](std::vector<Value *> out) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i]->setType(operands[i]->type());
    return out;
  };
  std::vector<Value *> out =
      typed(emitIf(graph, ok, anchor, operands.size(), unchanged, [&] {
        return typed(
            emitIf(graph, emit(graph, "aten::Bool", {c.taken}, anchor), anchor,
                   operands.size(), unchanged, standIn));
      }));
  out[0]->node()->i_(guardAttr(), 1);
  return out;
}

/// d where the host number d is not zero; where it is, d where the branch
/// is taken (the division raises for a tensor of ints, stops the process
/// for a host int, gives inf for a float, as the original's did), 1 where
/// it is not.
Value *shieldHostDivisor(Graph &graph, const BranchCondition &c, Value *d,
                         const Node *anchor) {
  bool isInt = d->type()->kind() == c10::TypeKind::IntType;
  Value *zero = isInt ? graph.insertConstant(0) : graph.insertConstant(0.0);
  Value *one = isInt ? graph.insertConstant(1) : graph.insertConstant(1.0);
  return hostCheckedShield(graph, c, emit(graph, "aten::ne", {d, zero}, anchor),
                           {d}, anchor,
                           [&] { return std::vector<Value *>{one}; })[0];
}

/// x where it is not empty along \p dim (a reduction along dim cannot
/// raise); where it is, x where the branch is taken, a one-row stand-in
/// where it is not.
Value *shieldEmptyDim(Graph &graph, const BranchCondition &c, Value *x,
                      int64_t dim, const Node *anchor) {
  Value *nonEmpty =
      emit(graph, "aten::gt", {emit(graph, "aten::size", {x, dim}, anchor), 0},
           anchor);
  return hostCheckedShield(graph, c, nonEmpty, {x}, anchor, [&] {
    return std::vector<Value *>{emitOneAlong(graph, x, dim, anchor)};
  })[0];
}

/// (x', i'): x and the index i into its dim \p dim, or values for which
/// indexing x' by i' cannot raise where the branch is not taken. Where x is
/// empty along dim (no index is in range) and the branch is not taken, x'
/// is zeros with one row there and i' zeros.
std::pair<Value *, Value *> shieldIndex(Graph &graph, const BranchCondition &c,
                                        Value *x, int64_t dim, Value *i,
                                        const Node *anchor) {
  Value *rows = emit(graph, "aten::size", {x, dim}, anchor);
  Value *nonEmpty = emit(graph, "aten::gt", {rows, 0}, anchor);
  std::vector<Value *> out = guardedShield(
      graph, c, i, nonEmpty, anchor, 2,
      [&] {
        return std::vector<Value *>{
            x, emit(graph, "aten::masked_fill", {i, c.notTaken, 0}, anchor)};
      },
      [&] { return std::vector<Value *>{x, i}; },
      [&] {
        return std::vector<Value *>{
            emitOneAlong(graph, x, dim, anchor),
            emit(graph, "aten::zeros_like", {i}, anchor)};
      });
  return {out[0], out[1]};
}

/// (x', k') for `select(x, dim, k)`, k a host int: x and k themselves where
/// k is in range (a host check: then select cannot raise), else the
/// original's choice read on the host: x and k where the branch is taken
/// (select raises as the original did), a one-row stand-in and 0 where it
/// is not.
std::pair<Value *, Value *> shieldHostIndex(Graph &graph,
                                            const BranchCondition &c, Value *x,
                                            int64_t dim, Value *k,
                                            const Node *anchor) {
  Value *n = emit(graph, "aten::size", {x, dim}, anchor);
  Value *inRange = emit(
      graph, "aten::__and__",
      {emit(graph, "aten::ge", {k, emit(graph, "aten::neg", {n}, anchor)},
            anchor),
       emit(graph, "aten::lt", {k, n}, anchor)},
      anchor);
  std::vector<Value *> out =
      hostCheckedShield(graph, c, inRange, {x, k}, anchor, [&] {
        return std::vector<Value *>{emitOneAlong(graph, x, dim, anchor),
                                    graph.insertConstant(0)};
      });
  return {out[0], out[1]};
}

/// Shields every op of \p block (nested blocks included) that may raise on
/// values, run now whether or not its branch is taken.
void shieldBlock(Graph &graph, Block *block, const BranchCondition &c,
                 const AnalysisResult *facts) {
  std::vector<Node *> nodes(block->nodes().begin(), block->nodes().end());
  for (Node *node : nodes) {
    for (Block *inner : node->blocks())
      shieldBlock(graph, inner, c, facts);
    if (neverRaisesOnValues(node) || !shieldable(node, facts))
      continue;
    torch::jit::WithInsertPoint guard(node);
    if (dividesByHostNumber(node)) {
      node->replaceInput(1, shieldHostDivisor(graph, c, node->input(1), node));
      continue;
    }
    if (std::optional<int64_t> d = reducedNonEmptyDim(node, facts)) {
      node->replaceInput(0, shieldEmptyDim(graph, c, node->input(0), *d, node));
      continue;
    }
    if (oneHotOfLongs(node, facts)) {
      // As an index into n classes: 0 where the branch is not taken, which
      // is in range where n > 0 (a host check).
      Value *i = node->input(0);
      Value *positive = emit(graph, "aten::gt", {node->input(1), 0}, node);
      node->replaceInput(
          0, guardedShield(
                 graph, c, i, positive, node, 1,
                 [&] {
                   return std::vector<Value *>{emit(
                       graph, "aten::masked_fill", {i, c.notTaken, 0}, node)};
                 },
                 [&] { return std::vector<Value *>{i}; },
                 [&] {
                   return std::vector<Value *>{
                       emit(graph, "aten::zeros_like", {i}, node)};
                 })[0]);
      continue;
    }
    const OpInfo *op = opInfo(node);
    if (op && op->has(kRaisesOnZeroDivisor)) {
      node->replaceInput(1, shieldDivisor(graph, c, node->input(1), node));
      continue;
    }
    if (selectsByHostIndex(node) && padsSelectedRows(node, facts)) {
      // Stand-in rows after x (before it for k < 0): x[k] along its rows.
      int64_t k = *constantInt(node->input(2));
      Value *x = node->input(0);
      std::vector<Value *> parts(k >= 0 ? k + 1 : -k,
                                 emitOneAlong(graph, x, 0, node));
      parts.insert(k >= 0 ? parts.begin() : parts.end(), x);
      Value *list =
          graph.insertNode(graph.createList(c10::TensorType::get(), parts))
              ->output();
      node->replaceInput(0, emit(graph, "aten::cat", {list, 0}, node));
      continue;
    }
    if (selectsByHostIndex(node)) {
      auto [x, k] = shieldHostIndex(graph, c, node->input(0),
                                    *constantInt(node->input(1)),
                                    node->input(2), node);
      node->replaceInput(0, x);
      node->replaceInput(2, k);
      continue;
    }
    Value *x = node->input(0);
    auto indices = *shieldedIndices(node, facts);
    std::unordered_map<Value *, Value *> safe;
    for (auto [i, dim] : indices)
      std::tie(x, safe[i]) = shieldIndex(graph, c, x, dim, i, node);
    node->replaceInput(0, x);
    if (node->kind() == c10::aten::index_select ||
        node->kind() == c10::aten::gather) {
      node->replaceInput(2, safe.at(node->input(2)));
      continue;
    }
    if (node->kind() == c10::aten::embedding) {
      node->replaceInput(1, safe.at(node->input(1)));
      continue;
    }
    std::vector<Value *> items;
    for (Value *i : node->input(1)->node()->inputs())
      items.push_back(safe.count(i) ? safe.at(i) : i);
    node->replaceInput(
        1, graph
               .insertNode(graph.createList(
                   node->input(1)->type()->expectRef<c10::ListType>()
                       .getElementType(),
                   items))
               ->output());
  }
}

} // namespace

Value *emitOneAlong(Graph &graph, Value *x, int64_t dim, const Node *anchor) {
  if (std::optional<int64_t> rank = knownRank(x); rank && dim < *rank) {
    // Sizes listed one by one: the stand-in's rank stays known (knownRank).
    std::vector<Value *> sizes;
    for (int64_t d = 0; d < *rank; ++d)
      sizes.push_back(d == dim ? graph.insertConstant(1)
                               : emit(graph, "aten::size", {x, d}, anchor));
    Value *list =
        graph.insertNode(graph.createList(c10::IntType::get(), sizes))->output();
    return emit(graph, "aten::new_zeros", {x, list}, anchor);
  }
  Value *sizes = emit(graph, "aten::size", {x}, anchor);
  Value *before = emit(graph, "aten::slice", {sizes, 0, dim, 1}, anchor);
  Value *after =
      emit(graph, "aten::slice", {sizes, dim + 1, c10::IValue(), 1}, anchor);
  Value *one = graph
                   .insertNode(graph.createList(c10::IntType::get(),
                                                {graph.insertConstant(1)}))
                   ->output();
  Value *shape = emit(
      graph, "aten::add",
      {emit(graph, "aten::add", {before, one}, anchor), after}, anchor);
  return emit(graph, "aten::new_zeros", {x, shape}, anchor);
}

void shieldBlock(Graph &graph, Block *block, Value *taken, Value *notTaken,
                 const AnalysisResult *facts) {
  shieldBlock(graph, block, BranchCondition{taken, notTaken}, facts);
}

bool dimsWithinRank(const Node *node, const AnalysisResult *facts) {
  // repeat(x, r) raises for fewer repeats than x has dims or a negative one;
  // permute(x, dims) for dims that are not a permutation of x's.
  if ((node->kind() == c10::aten::repeat ||
       node->kind() == c10::aten::permute) &&
      node->inputs().size() == 2 && isTensor(node->input(0))) {
    std::optional<int64_t> rank = knownRank(node->input(0));
    const Value *arg = node->input(1);
    if (!rank)
      return false;
    if (node->kind() == c10::aten::repeat) {
      std::optional<size_t> n;
      if (auto list = constantIntList(arg))
        n = list->size();
      else if (arg->node()->kind() == c10::prim::ListConstruct)
        n = arg->node()->inputs().size();
      return n && static_cast<int64_t>(*n) >= *rank && nonNegativeSizes(arg);
    }
    std::optional<std::vector<int64_t>> dims = constantIntList(arg);
    if (!dims || static_cast<int64_t>(dims->size()) != *rank)
      return false;
    std::vector<bool> seen(dims->size(), false);
    for (int64_t d : *dims) {
      int64_t k = d < 0 ? d + *rank : d;
      if (k < 0 || k >= *rank || seen[k])
        return false;
      seen[k] = true;
    }
    return true;
  }
  // flatten(x, s, e) raises for s or e out of x's dims, or for s past e
  // (each counted from the end where negative).
  if (node->kind() == c10::aten::flatten && node->inputs().size() == 3 &&
      isTensor(node->input(0))) {
    std::optional<int64_t> s = constantInt(node->input(1)),
                           e = constantInt(node->input(2));
    // A 0-d x takes only 0 and -1 (it flattens to a vector).
    int64_t rank = std::max<int64_t>(1, minimumRank(node->input(0), facts));
    if (!s || !e || *s >= rank || *s < -rank || *e >= rank || *e < -rank)
      return false;
    // s <= e at every rank from `rank` up: s - e where both count alike,
    // at the least rank where s counts from the start and e from the end.
    if ((*s < 0) == (*e < 0))
      return *s <= *e;
    return *s >= 0 && *s <= *e + rank;
  }
  const OpInfo *op = opInfo(node);
  if (!op || !op->has(kRaisesOnlyOnDims) || op->rowDims.empty() ||
      node->inputs().empty() || !isTensor(node->input(0)))
    return false;
  // A dim wraps as for a vector even on a 0-d tensor (PyTorch's
  // maybe_wrap_dim: `argsort(x, dim=-1)` of a 0-d x is valid).
  const int64_t extra = node->kind() == c10::aten::unsqueeze ? 1 : 0;
  const int64_t rank =
      std::max<int64_t>(1, minimumRank(node->input(0), facts) + extra);
  for (const char *name : op->rowDims) {
    const Value *arg = namedInput(node, name);
    if (!arg)
      return false;
    std::optional<std::vector<int64_t>> dims = constantDims(arg);
    if (!dims)
      return false;
    for (int64_t d : *dims)
      if (d >= rank || d < -rank)
        return false;
  }
  return true;
}

/// `x[m]`, `x[m1, m2]`: an index by boolean masks alone (dtypes the
/// analysis knows). It raises only where a mask's sizes differ from x's
/// (a host fact, the same on every run whatever the data, as a linear's
/// weight that does not fit), never on values: every element a mask
/// selects is in range.
static bool indexesByMasksOnly(const Node *node, const AnalysisResult *facts) {
  if (node->kind() != c10::aten::index || node->inputs().size() != 2 || !facts ||
      node->input(1)->node()->kind() != c10::prim::ListConstruct)
    return false;
  bool any = false;
  for (const Value *i : node->input(1)->node()->inputs()) {
    if (i->mustBeNone())
      continue;
    if (!facts->knows(i) || facts->info(i).dtype != DTypeKind::Bool)
      return false;
    any = true;
  }
  return any;
}

/// int(t), float(t), bool(t) of a 0-d tensor (`int(mask.sum())`, a count
/// masked-reduce reads): one element, whatever its value, so no raise.
static bool convertsZeroDim(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && op->has(kHostConversion) && node->inputs().size() == 1 &&
         isTensor(node->input(0)) && provablyZeroDim(node->input(0));
}

bool raisesUnshielded(const Node *node, const AnalysisResult *facts) {
  return !neverRaisesOnValues(node) && !convertsZeroDim(node) &&
         !dimsWithinRank(node, facts) &&
         !indexesByMasksOnly(node, facts) && !shieldable(node, facts);
}

void shieldBranches(Graph &graph, Node *ifNode, Value *c,
                    const AnalysisResult *facts) {
  torch::jit::WithInsertPoint guard(ifNode);
  Value *notC = emit(graph, "aten::logical_not", {c}, ifNode);
  shieldBlock(graph, ifNode->blocks()[0], {c, notC}, facts);
  shieldBlock(graph, ifNode->blocks()[1], {notC, c}, facts);
}

std::string unconditionalReason(const Node *node, const std::string &where) {
  const std::string op = node->kind().toQualString();
  if (op == "prim::RaiseException")
    return where + " raises";
  if (node->kind() == c10::prim::Loop)
    return where + " contains a loop";
  if (node->hasSideEffects())
    return where + " has a side effect ('" + op + "')";
  if (writesAnything(node))
    return where + " writes to a value ('" + op + "')";
  return "";
}

static std::string impureBlockReason(const Block *block,
                                     const AnalysisResult *facts,
                                     const RewrittenOp &rewritten) {
  for (const Node *node : block->nodes()) {
    const std::string op = node->kind().toQualString();
    if (std::string why = unconditionalReason(node, "a branch"); !why.empty())
      return why;
    if (node->kind() == c10::prim::If) {
      std::string nested = impureBranchReason(node, facts, rewritten);
      if (!nested.empty())
        return nested;
    } else if (!node->blocks().empty()) {
      return "a branch contains '" + op + "'";
    } else if (raisesUnshielded(node, facts) &&
               !(rewritten && rewritten(node))) {
      // Both branches now run: an op that may raise on values, with no
      // shield (shieldBranches), could raise in the branch the original
      // never took.
      return "a branch computes '" + op +
             "', which may raise when its branch would not have run";
    }
  }
  return "";
}

std::string impureBranchReason(const Node *ifNode,
                               const AnalysisResult *facts,
                               const RewrittenOp &rewritten) {
  for (const Block *b : ifNode->blocks()) {
    std::string why = impureBlockReason(b, facts, rewritten);
    if (!why.empty())
      return why;
  }
  return "";
}

bool isDataAssert(const Node *ifNode) {
  if (!ifNode->outputs().empty())
    return false;
  const Block *a = ifNode->blocks()[0], *b = ifNode->blocks()[1];
  return (onlyRaises(a) && b->nodes().begin() == b->nodes().end()) ||
         (onlyRaises(b) && a->nodes().begin() == a->nodes().end());
}

/// Ops whose result has their first input's shape and dtype.
static bool isTransparent(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op)
    return false;
  if (op->has(kCopiesInput))
    return true;
  // masked_fill broadcasts self and mask: only a mask of self's shape keeps
  // it (a mask computed elementwise from self, say).
  return op->has(kFillValueTakesTensor) &&
         provablySameShape(node->input(1), node->input(0)) &&
         (node->input(2)->type()->kind() != c10::TypeKind::TensorType ||
          provablyZeroDim(node->input(2)));
}

/// Ops whose result dtype and shape follow from their operands in the same
/// way: add/sub/mul share promotion rules, comparisons all give bool.
static std::string familyOf(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (op && op->has(kArithmetic))
    return "arithmetic";
  if (op && op->has(kComparison))
    return "comparison";
  return node->kind().toQualString();
}

static bool sameConstant(const Value *x, const Value *y) {
  auto cx = torch::jit::toIValue(x), cy = torch::jit::toIValue(y);
  if (!cx || !cy)
    return false;
  std::ostringstream sx, sy;
  sx << *cx;
  sy << *cy;
  return sx.str() == sy.str();
}

Value *selectBranch(Graph &graph, Value *c, Value *a, Value *b,
                    const Node *anchor) {
  // A value one branch leaves undefined (an early return's, a break's) is
  // read only where the other branch ran: the other's value serves both.
  if (isUndefined(b))
    return a;
  if (isUndefined(a))
    return b;
  if (congruent(a, b))
    return emit(graph, "aten::where", {c, a, b}, anchor);
  auto same = [&](const char *op, const char *cmp) {
    return emit(graph, cmp,
                {emit(graph, op, {a}, anchor), emit(graph, op, {b}, anchor)},
                anchor);
  };
  // What is not proven is checked: shapes (unless one shape-preserving
  // chain leads from one value to both), dtypes and devices.
  Value *shapes =
      provablySameShape(a, b) ? nullptr : same("aten::size", "aten::eq");
  Value *agree = same("prim::dtype", "aten::eq");
  if (shapes)
    agree = emit(graph, "aten::__and__", {shapes, agree}, anchor);
  agree = emit(graph, "aten::__and__",
               {agree, same("prim::device", "aten::eq")}, anchor);
  Value *picked = emitIf(
      graph, agree, anchor,
      [&] { return emit(graph, "aten::where", {c, a, b}, anchor); },
      [&] {
        return emitIf(graph, emit(graph, "aten::Bool", {c}, anchor), anchor,
                      [&] { return a; }, [&] { return b; });
      });
  picked->node()->i_(guardAttr(), 1);
  return picked;
}

/// A unary elementwise op whose result keeps its operand's dtype (relu,
/// neg): the result has the operand's shape, dtype and device.
static bool keepsOperandType(const Node *node) {
  const OpInfo *info = opInfo(node);
  return info && info->has(kElementwise) && node->inputs().size() == 1 &&
         node->outputs().size() == 1 &&
         (info->dtype == DTypeRule::KeepsInput ||
          info->dtype == DTypeRule::Promotes) &&
         node->input(0)->type()->kind() == c10::TypeKind::TensorType;
}

bool congruent(const Value *a, const Value *b) {
  if (a == b)
    return true;
  const Node *na = a->node(), *nb = b->node();
  if (keepsOperandType(na) && keepsOperandType(nb) &&
      congruent(na->input(0), nb->input(0)))
    return true;
  if (isTransparent(na) && congruent(na->input(0), b))
    return true;
  if (isTransparent(nb) && congruent(a, nb->input(0)))
    return true;
  // An if's result is one of its branches' results.
  for (auto [x, y] : {std::make_pair(a, b), std::make_pair(b, a)}) {
    const Node *n = x->node();
    if (n->kind() != c10::prim::If)
      continue;
    size_t i = x->offset();
    return congruent(n->blocks()[0]->outputs()[i], y) &&
           congruent(n->blocks()[1]->outputs()[i], y);
  }
  // Only ops whose result shape and dtype follow from their operands and
  // constant arguments: never one whose shape depends on data.
  OpRole role = opRole(na);
  if (role != OpRole::LeadingPreserving && role != OpRole::Reduction)
    return false;
  if (familyOf(na) != familyOf(nb) || na->outputs().size() != 1 ||
      nb->outputs().size() != 1 || !na->blocks().empty() ||
      na->isNondeterministic())
    return false;
  bool arithmetic = familyOf(na) == "arithmetic";
  size_t n = arithmetic ? 2 : na->inputs().size();
  if (na->inputs().size() < n || nb->inputs().size() < n ||
      (!arithmetic && na->inputs().size() != nb->inputs().size()))
    return false;
  for (size_t i = 0; i < n; ++i) {
    const Value *x = na->input(i), *y = nb->input(i);
    bool tensor = x->type()->kind() == c10::TypeKind::TensorType;
    if (tensor ? !congruent(x, y) : *x->type() != *y->type())
      return false;
    // Arguments that decide sizes or dtypes must agree exactly.
    if (!tensor && x != y && inputAffectsShape(na, i) && !sameConstant(x, y))
      return false;
  }
  return true;
}

std::vector<std::pair<Value *, Value *>> hoistBranches(Node *ifNode) {
  for (Block *b : ifNode->blocks()) {
    std::vector<Node *> nodes(b->nodes().begin(), b->nodes().end());
    for (Node *n : nodes)
      n->moveBefore(ifNode);
  }
  std::vector<std::pair<Value *, Value *>> outs;
  for (size_t i = 0; i < ifNode->outputs().size(); ++i)
    outs.emplace_back(ifNode->blocks()[0]->outputs()[i],
                      ifNode->blocks()[1]->outputs()[i]);
  return outs;
}

/// Whether \p out, a result of \p ifNode, is only copied from (the source
/// of `copy_`; its metadata may be read) with nothing written between the if and the copy:
/// branch-writes' write-back, which reads it before anything can write to
/// what it may alias.
static bool onlyCopiedRightAfter(const Value *out, const Node *ifNode) {
  for (const torch::jit::Use &use : out->uses()) {
    if (opRole(use.user) == OpRole::MetadataRead)
      continue; // requires_grad: the guard's
    if (use.user->kind() != c10::aten::copy_ || use.offset != 1)
      return false;
    const Node *owner = use.user;
    while (owner && owner->owningBlock() != ifNode->owningBlock())
      owner = owner->owningBlock()->owningNode();
    if (!owner || !ifNode->isBefore(owner))
      return false;
    for (const Node *n = ifNode->next(); n != owner; n = n->next())
      if (writesAnything(n) || !n->blocks().empty())
        return false;
  }
  return true;
}

std::string unconvertibleReason(const Node *ifNode, const Aliases &aliases,
                                const AnalysisResult *facts,
                                const RewrittenOp &rewritten) {
  std::string why = impureBranchReason(ifNode, facts, rewritten);
  if (!why.empty())
    return why;
  for (const Value *out : ifNode->outputs())
    if (out->type()->kind() == c10::TypeKind::TensorType &&
        aliases.hasWriters(out) && !onlyCopiedRightAfter(out, ifNode))
      // where() makes a new tensor: a write to the result would no longer
      // reach the branch value it aliased.
      return "a result of the if is written to in place";
  return "";
}

/// Whether \p node is inside a guard's branches (guardAttr()), either of
/// them: its fallback does what the original if did on purpose and runs
/// only when the guard fails. The first version of a method specialized on
/// its inputs (specialize-dtypes, -ranks, -shapes) is the method itself,
/// read with more facts: its ifs are the program's own.
static bool inGuard(const Node *node) {
  for (const torch::jit::Block *b = node->owningBlock(); b->owningNode();
       b = b->owningNode()->owningBlock()) {
    const Node *owner = b->owningNode();
    if (owner->hasAttribute(guardAttr()) &&
        (isGuardFallback(b) || !owner->hasAttribute(specializedAttr())))
      return true;
  }
  return false;
}

/// Whether \p node is an if on `bool(t)` of a tensor t: an if on data.
static bool decidedByData(const Node *node) {
  const Node *cond = node->input(0)->node();
  return cond->kind() == c10::aten::Bool &&
         cond->input(0)->type()->kind() == c10::TypeKind::TensorType;
}

bool ifConvert(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  bool changed = false;
  // Innermost first: a nested If is converted before the one around it.
  // Only Ifs are kept: conversions destroy conditions, never Ifs.
  std::vector<Node *> ifs = ctx.facts.analysis(graph).nodesWhere(
      [](c10::Symbol op) { return op == c10::prim::If; });
  if (ifs.empty())
    return false;
  bool stale = false;
  for (auto it = ifs.rbegin(); it != ifs.rend(); ++it) {
    Node *node = *it;
    // Facts about the graph as it is now: a conversion destroys values,
    // and a new one may take a destroyed one's address.
    if (std::exchange(stale, false))
      ctx.facts.invalidate();
    const Aliases &aliases = ctx.facts.aliases(graph);
    const AnalysisResult *facts = &ctx.facts.analysis(graph);
    Node *cond = node->input(0)->node();
    if (!decidedByData(node) || inGuard(node))
      continue;
    if (isDataAssert(node)) {
      ctx.declined(node, kRule, "a data assert; --drop-data-asserts drops it");
      continue;
    }
    std::string why = unconvertibleReason(node, aliases, facts);
    for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i)
      if (node->output(i)->type()->kind() != c10::TypeKind::TensorType)
        why = "an output is a host value (lift-scalars converts those)";
    if (!why.empty()) {
      ctx.declined(node, kRule, why);
      continue;
    }
    torch::jit::WithInsertPoint guard(node);
    Value *t = emit(*graph, "aten::reshape",
                    {cond->input(0), std::vector<int64_t>{}}, node);
    Value *c = emit(*graph, "aten::ne", {t, 0}, node);
    shieldBranches(*graph, node, c, facts);
    auto outs = hoistBranches(node);
    for (size_t i = 0; i < outs.size(); ++i)
      node->output(i)->replaceAllUsesWith(
          selectBranch(*graph, c, outs[i].first, outs[i].second, node));
    ctx.rewrote(node, kRule);
    node->destroy();
    eraseIfDead(cond, ctx, kRule);
    changed = stale = true;
  }
  return changed;
}

bool dropDataAsserts(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  if (!ctx.options.dropDataAsserts)
    return false;
  static constexpr const char *kDropRule = "drop-data-asserts";
  // Found first, then destroyed: an assert's branches only raise, so no
  // assert holds another.
  std::vector<Node *> asserts;
  for (Node *node : collectNodes(graph->block()))
    if (node->kind() == c10::prim::If && decidedByData(node) &&
        !inGuard(node) && isDataAssert(node))
      asserts.push_back(node);
  for (Node *node : asserts) {
    Node *cond = node->input(0)->node();
    ctx.rewrote(node, kDropRule);
    node->destroy();
    eraseIfDead(cond, ctx, kDropRule);
  }
  return !asserts.empty();
}

} // namespace staticify
