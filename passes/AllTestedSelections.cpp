//===- AllTestedSelections.cpp - x[m] under its own all-test --------------===//
//
// Detection and sequence code filters only where something is filtered:
//
//   if not valid_mask.all():                  # detectron2
//       boxes = boxes[valid_mask]
//   if keep.sum().item() != len(boxes):
//       boxes, scores = boxes[keep], scores[keep]
//
// For a 1-D bool mask m of x's rows, x[m] is x wherever every element of m
// holds: the branch that passes x through computes what the selecting one
// would. So the selection, made whichever way the test goes, is the if's
// result, and the test (a read of the device) is no longer needed. The
// test's spellings are one predicate, "every element of m holds", with a
// polarity: m.all(), (~m).any(), m.sum() == len(x) / x.size(0) /
// m.numel(), on a tensor or read to the host (item(), int()), negated by
// `not`. The mask's dtype, rank and rows are metadata, checked on the host
// (no sync) by a guard; where they differ (a uint8 mask, a mask
// broadcast to other rows) the if runs as it was, in the guard's fallback.
//
//===----------------------------------------------------------------------===//

#include "passes/AllTestedSelections.h"

#include "passes/GraphUtils.h"
#include "passes/PassContext.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A test that holds exactly where every element of `mask` holds
/// (`whenAll`), or exactly where one does not; `rowsOf`, when set, is the
/// tensor whose rows it counts the mask's true elements against.
struct AllTest {
  Value *mask;
  bool whenAll;
  Value *rowsOf = nullptr;
};

/// m where \p v is m.sum() (a tensor, or read to the host).
Value *summedMask(Value *v) {
  Node *n = v->node();
  if (n->kind() == c10::aten::item || n->kind() == c10::aten::Int ||
      n->kind() == c10::aten::ScalarImplicit)
    n = n->input(0)->node();
  if (n->kind() == c10::aten::sum &&
      (n->inputs().size() == 1 ||
       (n->inputs().size() == 2 && n->input(1)->mustBeNone())))
    return n->input(0);
  return nullptr;
}

/// `count == rows` (\p equal) or `count != rows`, either operand first:
/// count the true elements of m, rows len(x), x.size(0) or m.numel().
std::optional<AllTest> countTest(Node *cmp, bool equal) {
  for (int first = 0; first < 2; ++first) {
    Value *m = summedMask(cmp->input(first));
    if (!m)
      continue;
    Node *rows = cmp->input(1 - first)->node();
    if (rows->kind() == c10::Symbol::aten("numel") && rows->input(0) == m)
      return AllTest{m, equal};
    if ((rows->kind() == c10::aten::len && rows->inputs().size() == 1 &&
         isTensor(rows->input(0))) ||
        (rows->kind() == c10::aten::size && rows->inputs().size() == 2 &&
         constantInt(rows->input(1)) == 0))
      return AllTest{m, equal, rows->input(0)};
  }
  return std::nullopt;
}

/// The all-test \p cond (a host bool or a tensor) is, if it is one.
std::optional<AllTest> allTestOf(Value *cond) {
  Node *n = cond->node();
  c10::Symbol kind = n->kind();
  if (kind == c10::aten::__not__ || kind == c10::aten::bitwise_not ||
      kind == c10::aten::logical_not) {
    std::optional<AllTest> inner = allTestOf(n->input(0));
    if (inner)
      inner->whenAll = !inner->whenAll;
    return inner;
  }
  if (kind == c10::aten::Bool && n->inputs().size() == 1 &&
      isTensor(n->input(0)))
    return allTestOf(n->input(0));
  if (kind == c10::aten::all && n->inputs().size() == 1)
    return AllTest{n->input(0), true};
  if (kind == c10::aten::any && n->inputs().size() == 1) {
    Node *neg = n->input(0)->node();
    if (neg->kind() == c10::aten::bitwise_not ||
        neg->kind() == c10::aten::logical_not)
      return AllTest{neg->input(0), false};
  }
  if ((kind == c10::aten::eq || kind == c10::aten::ne) &&
      n->inputs().size() == 2)
    return countTest(n, kind == c10::aten::eq);
  return std::nullopt;
}

/// For each result of the if: the tensor the passing branch returns, and
/// whether the selecting branch returns it selected by \p mask (x[mask])
/// rather than as it is. Empty unless the passing branch computes nothing
/// and the selecting one only those selections.
struct Selected {
  Value *x;
  bool selected;
};
std::vector<Selected> selectionsOf(Block *passing, Block *selecting,
                                   const Value *mask) {
  std::vector<Selected> results;
  if (passing->nodes().begin() != passing->nodes().end())
    return {};
  size_t selections = 0;
  const size_t nodes =
      std::distance(selecting->nodes().begin(), selecting->nodes().end());
  for (size_t i = 0; i < passing->outputs().size(); ++i) {
    Value *x = passing->outputs()[i];
    Value *y = selecting->outputs()[i];
    if (y == x) {
      results.push_back({x, false});
      continue;
    }
    const Node *index = y->node();
    if (index->kind() != c10::aten::index || index->owningBlock() != selecting ||
        index->input(0) != x || !isTensor(x) || y->uses().size() != 1)
      return {};
    const Node *list = index->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct ||
        list->owningBlock() != selecting || list->inputs().size() != 1 ||
        list->input(0) != mask || list->output()->uses().size() != 1)
      return {};
    results.push_back({x, true});
    ++selections;
  }
  // Nothing else runs in the selecting branch: its lists and selections.
  if (selections == 0 || nodes != 2 * selections)
    return {};
  return results;
}

/// `x.size()[:1] == m.size()`: m is a vector of x's rows (false, not a
/// raise, for a 0-d x).
Value *vectorOfRows(Graph &graph, Value *x, Value *m, const Node *anchor) {
  Value *leading = emit(graph, "aten::slice",
                        {emit(graph, "aten::size", {x}, anchor), 0, 1, 1},
                        anchor);
  return emit(graph, "aten::eq",
              {leading, emit(graph, "aten::size", {m}, anchor)}, anchor);
}

/// Moves what only \p fallback uses, of what precedes \p guard in its
/// block, into the fallback, before its first node: the test and its
/// read of the device run only where the fallback does.
void sinkInto(Node *guard, Block *fallback) {
  std::vector<Node *> sunk; // in reverse order
  std::unordered_set<const Node *> moving;
  for (Node *n = guard->prev(); n != guard->owningBlock()->param_node();
       n = n->prev()) {
    if (!n->blocks().empty() || n->hasSideEffects() || n->outputs().empty())
      continue;
    bool onlyThere = true;
    for (const Value *out : n->outputs())
      for (const torch::jit::Use &use : out->uses())
        onlyThere &= moving.count(use.user) || insideOf(use.user, fallback);
    if (onlyThere && n->output(0)->hasUses()) {
      sunk.push_back(n);
      moving.insert(n);
    }
  }
  Node *first = fallback->nodes().front();
  for (auto it = sunk.rbegin(); it != sunk.rend(); ++it)
    (*it)->moveBefore(first);
}

/// Moves what follows \p guard in its block into the guard's fast block,
/// and a copy into its fallback: the guard returns the block's results.
/// Tensors selected by one mask then have one count where they meet again
/// (`scores * widths` of boxes[m] and scores[m]); joined after the guard,
/// each would take its own, since the fallback's tensors may have other
/// rows (a mask broadcast to more rows than boxes has, every element true).
void nestRest(Graph &graph, Node *guard) {
  Block *block = guard->owningBlock();
  Block *fast = guard->blocks()[0], *fallback = guard->blocks()[1];
  std::vector<Node *> rest;
  for (Node *n = guard->next(); n != block->return_node(); n = n->next())
    rest.push_back(n);
  const std::vector<Value *> results(block->outputs().begin(),
                                     block->outputs().end());
  const size_t picked = guard->outputs().size();
  // The fallback's copy reads the original if's results.
  std::unordered_map<Value *, Value *> copies;
  for (size_t i = 0; i < picked; ++i)
    copies[guard->output(i)] = fallback->outputs()[i];
  auto copyOf = [&](Value *v) {
    auto it = copies.find(v);
    return it == copies.end() ? v : it->second;
  };
  {
    torch::jit::WithInsertPoint at(fallback->return_node());
    for (Node *n : rest) {
      Node *copy = graph.insertNode(graph.createClone(n, copyOf));
      for (size_t i = 0; i < n->outputs().size(); ++i)
        copies[n->output(i)] = copy->output(i);
    }
  }
  // The fast block runs the rest itself, on its selections.
  for (Node *n : rest)
    n->moveBefore(fast->return_node());
  std::unordered_map<Value *, Value *> fastOf;
  for (size_t i = 0; i < picked; ++i) {
    fastOf[guard->output(i)] = fast->outputs()[i];
    for (const torch::jit::Use &use : std::vector<torch::jit::Use>(
             guard->output(i)->uses().begin(), guard->output(i)->uses().end()))
      if (insideOf(use.user, fast))
        use.user->replaceInput(use.offset, fast->outputs()[i]);
  }
  for (size_t k = 0; k < results.size(); ++k) {
    Value *r = results[k];
    auto it = fastOf.find(r);
    fast->registerOutput(it == fastOf.end() ? r : it->second);
    fallback->registerOutput(copyOf(r));
    Value *out = guard->addOutput()->setType(r->type());
    block->return_node()->replaceInput(k, out);
  }
  for (size_t i = 0; i < picked; ++i) {
    fast->eraseOutput(0);
    fallback->eraseOutput(0);
    guard->eraseOutput(0);
  }
}

bool rewrite(Graph &graph, Node *node) {
  if (node->kind() != c10::prim::If || node->outputs().empty() ||
      node->hasAttribute(guardAttr()) || inGuardFallback(node))
    return false;
  std::optional<AllTest> test = allTestOf(node->input(0));
  if (!test)
    return false;
  // The branch taken where every element holds passes the tensors on.
  Block *passing = node->blocks()[test->whenAll ? 0 : 1];
  Block *selecting = node->blocks()[test->whenAll ? 1 : 0];
  std::vector<Selected> results = selectionsOf(passing, selecting, test->mask);
  if (results.empty())
    return false;

  torch::jit::WithInsertPoint at(node);
  Value *m = test->mask;
  const auto kBool = static_cast<int64_t>(c10::ScalarType::Bool);
  Value *holds = emit(graph, "aten::eq",
                      {emit(graph, "prim::dtype", {m}, node), kBool}, node);
  std::vector<Value *> rowsOf;
  for (const Selected &r : results)
    if (r.selected)
      rowsOf.push_back(r.x);
  if (test->rowsOf)
    rowsOf.push_back(test->rowsOf);
  for (Value *x : rowsOf)
    holds = emit(graph, "aten::__and__",
                 {holds, vectorOfRows(graph, x, m, node)}, node);
  // The if's uses, which the guard's results take over: the if itself
  // moves into the fallback (its findings with it, counted there).
  std::vector<std::vector<torch::jit::Use>> uses;
  for (Value *out : node->outputs())
    uses.push_back(out->uses());
  std::vector<Value *> picked = emitIf(
      graph, holds, node, results.size(),
      [&] {
        std::vector<Value *> out;
        for (const Selected &r : results) {
          if (!r.selected) {
            out.push_back(r.x);
            continue;
          }
          Value *list = graph
                            .insertNode(graph.createList(
                                c10::OptionalType::create(
                                    c10::TensorType::get()),
                                {m}))
                            ->output();
          out.push_back(emit(graph, "aten::index", {r.x, list}, node));
        }
        return out;
      },
      [&] {
        node->moveBefore(graph.insertPoint());
        return std::vector<Value *>(node->outputs().begin(),
                                    node->outputs().end());
      });
  Node *guard = picked.front()->node();
  guard->i_(guardAttr(), 1);
  for (size_t i = 0; i < picked.size(); ++i) {
    picked[i]->setType(node->output(i)->type());
    for (const torch::jit::Use &use : uses[i])
      use.user->replaceInput(use.offset, picked[i]);
  }
  if (std::count_if(results.begin(), results.end(),
                    [](const Selected &r) { return r.selected; }) > 1)
    nestRest(graph, guard);
  sinkInto(guard, guard->blocks()[1]);
  return true;
}

} // namespace

bool allTestedSelections(std::shared_ptr<Graph> &graph, PassContext &) {
  bool changed = false;
  // Each rewrite moves only the if it visits, whose blocks hold no if.
  for (Node *node : collectNodes(graph->block()))
    if (node->kind() == c10::prim::If)
      changed |= rewrite(*graph, node);
  return changed;
}

} // namespace staticify
