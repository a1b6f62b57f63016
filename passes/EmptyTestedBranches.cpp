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
#include "passes/OpCatalogue.h"
#include "passes/PassContext.h"
#include "passes/Selection.h"

#include <optional>
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
  return facts.knows(i) && facts.info(i).dtype == DTypeKind::Long;
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

/// Whether \p x has v's rows, none wherever the vector \p v has none.
bool ofRows(const Value *x, const Value *v, const AnalysisResult &facts,
            int depth = 0) {
  if (x == v)
    return true;
  if (depth > 8)
    return false;
  const Node *def = x->node();
  if (def->kind() == c10::aten::index && def->inputs().size() == 2) {
    const Value *i = onlyIndex(def->input(1));
    return i && integerIndex(i, facts) && ofRows(i, v, facts, depth + 1);
  }
  if (!opElementwise(def) || def->outputs().size() != 1 || writesAnything(def))
    return false;
  bool any = false;
  for (const Value *in : def->inputs()) {
    if (!isTensor(in))
      continue;
    if (ofRows(in, v, facts, depth + 1))
      any = true;
    else if (!provablyZeroDim(in))
      return false; // another shape could broadcast against no rows
  }
  return any;
}

/// Whether \p node does nothing and raises on nothing where \p v is empty:
/// a store at an integer index of v's rows of 0-d values or values of v's
/// rows, or an op whose result has v's rows (ofRows).
bool nothingWhenEmpty(const Node *node, const Value *v,
                      const AnalysisResult &facts) {
  if (node->kind() == c10::aten::index_put_ && node->inputs().size() == 4) {
    const Value *i = onlyIndex(node->input(1));
    const Value *w = node->input(2);
    return i && integerIndex(i, facts) && ofRows(i, v, facts) &&
           (ofRows(w, v, facts) || provablyZeroDim(w));
  }
  return node->outputs().size() == 1 && !writesAnything(node) &&
         ofRows(node->output(), v, facts);
}

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
  for (const Node *node : branch->nodes()) {
    // The list of a gather's or a store's one index: plumbing.
    if (node->kind() == c10::prim::ListConstruct && node->inputs().size() == 1)
      continue;
    if (!nothingWhenEmpty(node, v, facts)) {
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
