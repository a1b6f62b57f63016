//===- OptionalResults.cpp - an if's Optional result read where it is set --===//

#include "passes/OptionalResults.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <algorithm>
#include <memory>
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

/// `o = None if c else v` (or `v if c else None`), v a tensor.
struct OptionalResult {
  Node *producer;
  Value *result;
  bool noneWhenTrue;
  Value *value; // v, yielded by its block
};

std::optional<OptionalResult> matchOptional(Node *node, size_t i) {
  if (node->kind() != c10::prim::If)
    return std::nullopt;
  Value *a = node->blocks()[0]->outputs()[i], *b = node->blocks()[1]->outputs()[i];
  bool noneWhenTrue = a->mustBeNone();
  Value *v = noneWhenTrue ? b : a;
  if (noneWhenTrue == b->mustBeNone() || !isTensor(v) ||
      v->type()->kind() != c10::TypeKind::TensorType)
    return std::nullopt;
  return OptionalResult{node, node->output(i), noneWhenTrue, v};
}

/// `o is None` (true) or `o is not None` (false) of \p o: nullopt for
/// another node.
std::optional<bool> testsNone(const Node *n, const Value *o) {
  if (n->kind() != c10::aten::__is__ && n->kind() != c10::aten::__isnot__)
    return std::nullopt;
  if (!((n->input(0) == o && n->input(1)->mustBeNone()) ||
        (n->input(1) == o && n->input(0)->mustBeNone())))
    return std::nullopt;
  return n->kind() == c10::aten::__is__;
}

/// Whether \p block runs only where \p r's result is not None: it, or a
/// block around it, is the branch of an if on `o is not None`, `o is None`,
/// the producer's condition or its negation that says so.
bool runsWhereSet(const Block *block, const OptionalResult &r) {
  Value *c = r.producer->input(0);
  for (; block->owningNode(); block = block->owningNode()->owningBlock()) {
    const Node *branch = block->owningNode();
    if (branch->kind() != c10::prim::If)
      continue;
    bool inThen = branch->blocks()[0] == block;
    const Value *cond = branch->input(0);
    const Node *test = cond->node();
    bool thenSet; // the then branch runs only where o is set
    if (std::optional<bool> isNone = testsNone(test, r.result))
      thenSet = !*isNone;
    else if (cond == c)
      thenSet = !r.noneWhenTrue;
    else if (test->kind() == c10::aten::__not__ && test->input(0) == c)
      thenSet = r.noneWhenTrue;
    else
      continue;
    if (inThen == thenSet)
      return true;
  }
  return false;
}

/// The nodes of \p block that \p v depends on, in order; empty where one of
/// them may not move (nested blocks, effects, writes, random draws).
std::vector<Node *> sliceIn(Block *block, Value *v) {
  std::vector<Node *> slice;
  std::unordered_set<const Node *> seen;
  std::vector<Value *> work = {v};
  while (!work.empty()) {
    Value *x = work.back();
    work.pop_back();
    Node *n = x->node();
    if (n->owningBlock() != block || !seen.insert(n).second)
      continue;
    if (!n->blocks().empty() || n->hasSideEffects() || writesAnything(n) ||
        n->isNondeterministic() || n->kind() == c10::prim::Param)
      return {};
    slice.push_back(n);
    for (Value *in : n->inputs())
      work.push_back(in);
  }
  std::sort(slice.begin(), slice.end(),
            [](const Node *a, const Node *b) { return a->isBefore(b); });
  return slice;
}

} // namespace

bool forwardOptionalResults(std::shared_ptr<Graph> &graph) {
  std::vector<OptionalResult> candidates;
  for (Node *node : collectNodes(graph->block()))
    for (size_t i = 0; node->kind() == c10::prim::If && i < node->outputs().size(); ++i)
      if (std::optional<OptionalResult> r = matchOptional(node, i))
        candidates.push_back(*r);
  std::unique_ptr<Aliases> aliases;
  bool changed = false;
  for (const OptionalResult &r : candidates) {
    Block *valueBlock = r.value->node()->owningBlock();
    if (valueBlock != r.producer->blocks()[r.noneWhenTrue ? 1 : 0])
      continue;
    std::vector<Node *> casts, tests;
    bool movable = true;
    for (const torch::jit::Use &use : r.result->uses()) {
      Node *user = use.user;
      if (testsNone(user, r.result)) {
        tests.push_back(user);
      } else if (user->kind() == c10::prim::unchecked_cast &&
                 insideOf(user, r.producer->owningBlock()) &&
                 runsWhereSet(user->owningBlock(), r)) {
        casts.push_back(user);
      } else {
        movable = false;
      }
    }
    if (!movable || casts.empty())
      continue;
    std::vector<Node *> slice = sliceIn(valueBlock, r.value);
    // Only what reads the device moves: it can be rewritten where it is
    // used (a padding mask, pinned-sizes); the rest stays where it was.
    if (slice.empty() ||
        std::none_of(slice.begin(), slice.end(), [](const Node *n) {
          return readsOneTensor(n);
        }))
      continue;
    // What it reads must hold the same values where it is read now.
    if (!aliases)
      aliases = std::make_unique<Aliases>(graph);
    bool unwritten = true;
    for (Node *n : slice)
      for (Value *in : n->inputs())
        if (in->node()->owningBlock() != valueBlock && isTensor(in) &&
            aliases->hasWriters(in))
          unwritten = false;
    if (!unwritten)
      continue;
    // The tests: the producer's condition.
    for (Node *test : tests) {
      torch::jit::WithInsertPoint at(test);
      bool isNone = *testsNone(test, r.result);
      Value *c = r.producer->input(0);
      Value *by = isNone == r.noneWhenTrue ? c : emit(*graph, "aten::__not__", {c}, test);
      test->output()->replaceAllUsesWith(by);
      test->destroy();
    }
    // The casts: the value, computed where they are.
    for (Node *cast : casts) {
      torch::jit::WithInsertPoint at(cast);
      std::unordered_map<Value *, Value *> map;
      cloneNodes(*graph, slice, map, false);
      cast->output()->replaceAllUsesWith(map.at(r.value));
      cast->destroy();
    }
    changed = true;
  }
  return changed;
}

} // namespace staticify
