//===- EmptyTestedBranches.cpp - Reads and stores under a non-empty test --===//
//
// Detection code guards its reads and stores at selected rows by a test
// that there are any:
//
//   pos_inds = torch.nonzero(assigned_gt_inds > 0).squeeze()   # mmdetection
//   if pos_inds.numel() > 0:
//       assigned_labels[pos_inds] = gt_labels[assigned_gt_inds[pos_inds] - 1]
//
// Where the vector v is empty, a gather at an integer index of v's rows
// reads nothing and raises on nothing, a store there writes nothing, and
// arithmetic on such rows and 0-d values computes nothing: the branch, run
// anyway, does what the empty else-branch does. So the if is its branch,
// and the test (a read of the device's count) is no longer needed. Every
// node of the branch must be one of those: any other node that reads v's
// rows (an op broadcasting them against another shape, a reduction, which
// may raise on no element), writes, raises, or holds a block keeps the if.
// The rows of v are values of v's leading size: v, an elementwise op of
// them and 0-d operands, or what an integer index of them gathers.
//
//===----------------------------------------------------------------------===//

#include "passes/EmptyTestedBranches.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/OpCatalogue.h"
#include "passes/PassContext.h"
#include "passes/Selection.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "empty-tested-branches";

/// The one index of `x[i]` / `x[i] = w`: the list's only element.
const Value *onlyIndex(const Value *list) {
  const Node *l = list->node();
  return l->kind() == c10::prim::ListConstruct && l->inputs().size() == 1
             ? l->input(0)
             : nullptr;
}

/// An index of int64 values (a bool one is a mask, which raises on a shape
/// that is not x's, an empty one too).
bool integerIndex(const Value *i, const AnalysisResult &facts) {
  return (facts.knows(i) && facts.info(i).dtype == DTypeKind::Long) ||
         whereOfCoordinate(i);
}

/// v where \p cond tests that the vector v has an element: `numel(v) > 0`,
/// `!= 0` or `>= 1`, of `len(v)` or `v.size(0)` alike.
const Value *nonEmptyTested(const Value *cond) {
  const Node *test = cond->node();
  if (test->inputs().size() != 2)
    return nullptr;
  std::optional<int64_t> c = constantInt(test->input(1));
  bool nonEmpty = c && ((test->kind() == c10::aten::gt && *c == 0) ||
                        (test->kind() == c10::aten::ne && *c == 0) ||
                        (test->kind() == c10::aten::ge && *c == 1));
  if (!nonEmpty)
    return nullptr;
  const Node *size = test->input(0)->node();
  const Value *v = size->inputs().empty() ? nullptr : size->input(0);
  if (!v || !isTensor(v) || knownRank(v) != 1)
    return nullptr;
  static const c10::Symbol numel = c10::Symbol::aten("numel");
  bool rows = size->kind() == numel || size->kind() == c10::aten::len ||
              (size->kind() == c10::aten::size && size->inputs().size() == 2 &&
               constantInt(size->input(1)) == 0);
  return rows ? v : nullptr;
}

/// Whether the host numbers of a size list can be any program's: none is
/// a tensor (a list of ints, constants or host values).
bool hostSizes(const Value *list) {
  if (constantIntList(list))
    return true;
  const Node *l = list->node();
  return l->kind() == c10::prim::ListConstruct &&
         std::all_of(l->inputs().begin(), l->inputs().end(), [](const Value *e) {
           return e->type()->kind() == c10::TypeKind::IntType;
         });
}

/// What in a branch is empty wherever the vector v is, each value judged
/// once (a branch's values share their operands).
class EmptyWith {
public:
  EmptyWith(const Value *v, const AnalysisResult &facts) : v(v), facts(facts) {}

  /// Whether \p x has no element wherever v has none, and the op that made
  /// it then raises on nothing a non-empty v would not make it raise on
  /// (host facts: trailing sizes, dtypes): v itself, another coordinate of
  /// v's where(c); an elementwise op of such values and 0-d operands; what
  /// int64 indices of such values (and None) gather from another tensor
  /// (`gt_inds[pos_inds] - 1`, `hidden[None, top_x]`, `weights[top_x, idx,
  /// None]`); a linear layer of such rows; such a value reshaped to host
  /// sizes (`.reshape(-1, h)`).
  bool of(const Value *x) {
    if (auto it = known.find(x); it != known.end())
      return it->second;
    bool result = judge(x);
    known[x] = result;
    return result;
  }

  /// Whether \p node does nothing and raises on nothing where v is empty:
  /// a store at an int64 index empty with v of 0-d values or values empty
  /// with v (index_put_, index_add_), an op whose result is empty with v,
  /// or an op of none of v's rows that raises on no value.
  bool nothingWhenEmpty(const Node *node) {
    if (node->kind() == c10::aten::index_put_ && node->inputs().size() == 4) {
      const Value *i = onlyIndex(node->input(1));
      return i && integerIndex(i, facts) && of(i) &&
             (of(node->input(2)) || provablyZeroDim(node->input(2)));
    }
    if (node->kind() == c10::aten::index_add_ && node->inputs().size() >= 4)
      return integerIndex(node->input(2), facts) && of(node->input(2)) &&
             of(node->input(3));
    if (writesAnything(node) || node->hasSideEffects() || !node->blocks().empty())
      return false;
    if (node->outputs().size() == 1 && of(node->output()))
      return true;
    // It computes what it would have (`hidden.unsqueeze(0)` before the
    // gather at top_x; a dim past the rank raises on every call that takes
    // the branch, a host fact).
    for (const Value *in : node->inputs()) {
      const Node *list = in->node();
      if (of(in) || (list->kind() == c10::prim::ListConstruct &&
                     std::any_of(list->inputs().begin(), list->inputs().end(),
                                 [&](const Value *e) { return of(e); })))
        return false;
    }
    const OpInfo *op = opInfo(node);
    return node->kind() == c10::prim::GetAttr || neverRaisesOnValues(node) ||
           (op && op->has(kRaisesOnlyOnDims) && !op->has(kMayRaise));
  }

private:
  bool judge(const Value *x) {
    if (x == v)
      return true;
    if (const Node *where = whereOfCoordinate(x); where && where == whereOfCoordinate(v))
      return true;
    const Node *def = x->node();
    if (def->kind() == c10::aten::index && def->inputs().size() == 2) {
      const Node *list = def->input(1)->node();
      if (list->kind() != c10::prim::ListConstruct || of(def->input(0)))
        return false;
      bool any = false;
      for (const Value *i : list->inputs()) {
        if (i->mustBeNone())
          continue;
        if (!integerIndex(i, facts) || !of(i))
          return false;
        any = true;
      }
      return any;
    }
    if (def->kind() == c10::aten::linear && def->inputs().size() == 3)
      return of(def->input(0)) && !of(def->input(1)) &&
             (def->input(2)->mustBeNone() || !of(def->input(2)));
    if ((def->kind() == c10::aten::reshape || def->kind() == c10::aten::view) &&
        def->inputs().size() == 2)
      return hostSizes(def->input(1)) && of(def->input(0));
    if (!opElementwise(def) || def->outputs().size() != 1 || writesAnything(def))
      return false;
    bool any = false;
    for (const Value *in : def->inputs()) {
      if (!isTensor(in))
        continue;
      if (of(in))
        any = true;
      else if (!provablyZeroDim(in))
        return false; // another shape could broadcast against no element
    }
    return any;
  }

  const Value *v;
  const AnalysisResult &facts;
  std::unordered_map<const Value *, bool> known;
};

/// Moves the branch of \p ifNode out, where it does nothing on an empty v.
bool rewrite(Node *ifNode, PassContext &ctx, const AnalysisResult &facts) {
  if (!ifNode->outputs().empty() ||
      ifNode->blocks()[1]->nodes().begin() != ifNode->blocks()[1]->nodes().end())
    return false;
  const Value *v = nonEmptyTested(ifNode->input(0));
  if (!v)
    return false;
  torch::jit::Block *branch = ifNode->blocks()[0];
  if (branch->nodes().begin() == branch->nodes().end())
    return false;
  EmptyWith empty(v, facts);
  for (const Node *node : branch->nodes()) {
    // The lists of a gather's or a store's indices, and sizes: plumbing.
    if (node->kind() == c10::prim::ListConstruct ||
        node->kind() == c10::prim::Constant)
      continue;
    if (!empty.nothingWhenEmpty(node)) {
      ctx.declined(ifNode, kRule,
                   "its branch computes '" +
                       std::string(node->kind().toQualString()) +
                       "', which is not known to do nothing on no rows");
      return false;
    }
  }
  std::vector<Node *> nodes(branch->nodes().begin(), branch->nodes().end());
  for (Node *node : nodes)
    node->moveBefore(ifNode);
  Node *cond = ifNode->input(0)->node();
  ctx.rewrote(ifNode, kRule);
  ifNode->destroy();
  eraseIfDead(cond, ctx, kRule);
  return true;
}

} // namespace

bool emptyTestedBranches(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  std::vector<Node *> ifs;
  for (Node *node : collectNodes(graph->block()))
    if (node->kind() == c10::prim::If)
      ifs.push_back(node);
  if (ifs.empty())
    return false;
  const AnalysisResult &facts = ctx.facts.analysis(graph);
  // Innermost first (collectNodes lists an if before its blocks' nodes):
  // a rewrite moves nodes out of one if only, never destroys another.
  bool changed = false;
  for (auto it = ifs.rbegin(); it != ifs.rend(); ++it)
    changed |= rewrite(*it, ctx, facts);
  if (changed)
    ctx.facts.invalidate();
  return changed;
}

} // namespace staticify
