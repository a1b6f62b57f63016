//===- BranchWrites.cpp - writes in a branch on data -> one write after it ===//

#include "passes/BranchWrites.h"
#include "passes/InPlace.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/OpCatalogue.h"

#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <unordered_map>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "branch-writes";

/// An in-place op in a branch and the value whose memory it writes: one made
/// before the if (written back after it) or in the branch.
struct Write {
  Node *node;
  Value *root;
};

bool writesInside(const Node *node) {
  for (const Block *b : node->blocks())
    for (const Node *n : b->nodes())
      if (writesAnything(n) || writesInside(n))
        return true;
  return false;
}

/// Every value \p block's nodes (nested ones too) and its return read.
void readsOf(const Block *block, std::vector<const Value *> &out) {
  for (const Node *n : block->nodes()) {
    out.insert(out.end(), n->inputs().begin(), n->inputs().end());
    for (const Block *b : n->blocks())
      readsOf(b, out);
  }
  out.insert(out.end(), block->outputs().begin(), block->outputs().end());
}

/// What branch-writes does to one if: its writes, and the results that are
/// a written value in both branches (TorchScript's `y += v` in a branch
/// returns the add_'s result, y itself): after the write-back they read y.
struct Plan {
  std::vector<Write> writes;
  std::vector<std::pair<size_t, Value *>> writtenResults; // (result, root)
};

/// The root \p v is (itself, or the result of an in-place op on it), if
/// \p v is one of \p writes' roots or results.
Value *rootOfWritten(const Value *v, const std::vector<Write> &writes) {
  for (const Write &w : writes)
    if (v == w.root || v == w.node->output())
      return w.root;
  return nullptr;
}

/// Why the writes in \p ifNode's branches cannot move after it, or "" with
/// \p plan filled (no writes: nothing to do).
std::string planReason(Node *ifNode, const Aliases &aliases, Plan &plan) {
  std::vector<Write> &writes = plan.writes;
  for (Block *b : ifNode->blocks()) {
    std::unordered_map<const Value *, Value *> rootOf; // in-place results
    for (Node *n : b->nodes()) {
      const std::string op = n->kind().toQualString();
      if (writesInside(n))
        return "a branch writes inside a nested block";
      if (!writesAnything(n)) {
        if (std::string why = unconditionalReason(n, "a branch"); !why.empty())
          return why;
        continue;
      }
      const auto &args = n->schema().arguments();
      for (size_t i = 1; i < args.size(); ++i)
        if (args[i].alias_info() && args[i].alias_info()->isWrite())
          return "'" + op + "' writes to an argument other than its first";
      if (!computableOutOfPlace(n))
        return "'" + op + "' has no out-of-place form";
      Value *y = n->input(0);
      if (auto it = rootOf.find(y); it != rootOf.end())
        y = it->second;
      // A value made in the branch must be new memory (a clone, zeros...),
      // not a view of one made before.
      bool before = !insideOf(y->node(), ifNode);
      if (!before &&
          (y->node()->owningBlock() != b ||
           std::any_of(y->node()->inputs().begin(), y->node()->inputs().end(),
                       [&](const Value *in) {
                         return carriesTensor(in->type()) &&
                                aliases.mayAlias(y, in);
                       })))
        return "a branch writes to a value that may be a view";
      rootOf[n->output()] = y;
      writes.push_back({n, y});
    }
  }
  // A result that is a written value in one branch must be that value in
  // the other too (then it reads the value after the write-back).
  // (A value made in the branch and written there is returned as its
  // last version.)
  auto madeBefore = [&](Value *root) {
    return root && !insideOf(root->node(), ifNode) ? root : nullptr;
  };
  for (size_t i = 0; i < ifNode->outputs().size(); ++i) {
    Value *a = madeBefore(rootOfWritten(ifNode->blocks()[0]->outputs()[i], writes));
    Value *b = madeBefore(rootOfWritten(ifNode->blocks()[1]->outputs()[i], writes));
    if (!a && !b)
      continue;
    if (a != b)
      return "a result of the if is a value it writes in one branch only";
    plan.writtenResults.emplace_back(i, a);
  }
  // A view of a written value read in a branch would see the write there;
  // computed out of place, it would not.
  for (const Write &w : writes)
    for (Block *b : ifNode->blocks()) {
      std::vector<const Value *> reads;
      readsOf(b, reads);
      for (const Value *v : reads)
        if (rootOfWritten(v, writes) != w.root && aliases.mayAlias(v, w.root))
          return "a branch reads a value that may alias one it writes";
    }
  return "";
}

/// Replaces, in \p block and its nested blocks, reads of each root in
/// \p now by its current version.
void readCurrent(Block *block,
                 const std::unordered_map<Value *, Value *> &now) {
  for (Node *n : block->nodes()) {
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (auto it = now.find(n->input(i)); it != now.end())
        n->replaceInput(i, it->second);
    for (Block *b : n->blocks())
      readCurrent(b, now);
  }
}

/// Rewrites \p ifNode's writes (planned) out of place; returns the roots
/// made before it, each now a result of the if.
std::vector<Value *> functionalize(Graph &graph, Node *ifNode,
                                   const std::vector<Write> &writes,
                                   PassContext &ctx) {
  std::vector<Value *> roots;
  for (const Write &w : writes)
    if (!insideOf(w.root->node(), ifNode) &&
        std::find(roots.begin(), roots.end(), w.root) == roots.end())
      roots.push_back(w.root);
  for (Block *b : ifNode->blocks()) {
    std::unordered_map<Value *, Value *> now; // root -> its current version
    std::vector<Node *> nodes(b->nodes().begin(), b->nodes().end());
    for (Node *n : nodes) {
      auto w = std::find_if(writes.begin(), writes.end(),
                            [&](const Write &x) { return x.node == n; });
      for (size_t i = 0; i < n->inputs().size(); ++i)
        if (auto it = now.find(n->input(i)); it != now.end())
          n->replaceInput(i, it->second);
      for (Block *inner : n->blocks())
        readCurrent(inner, now);
      if (w == writes.end())
        continue;
      Value *value = outOfPlace(graph, n, n->input(0));
      now[w->root] = value;
      n->output()->replaceAllUsesWith(value);
      ctx.rewrote(n, kRule);
      n->destroy();
    }
    for (size_t i = 0; i < b->outputs().size(); ++i)
      if (auto it = now.find(b->outputs()[i]); it != now.end())
        b->return_node()->replaceInput(i, it->second);
    for (Value *root : roots)
      b->registerOutput(now.count(root) ? now.at(root) : root);
  }
  for (Value *root : roots)
    ifNode->addOutput()->setType(root->type());
  return roots;
}

/// After \p ifNode (on data): each root written back from the if's
/// result, unconditionally with grad mode off, else only where the
/// condition holds (the guard's fallback): a write there could invalidate a
/// tensor saved for backward, or make the root require grad where the
/// original left it alone.
void writeBack(Graph &graph, Node *ifNode, const std::vector<Value *> &roots) {
  size_t first = ifNode->outputs().size() - roots.size();
  Node *cond = ifNode->input(0)->node();
  torch::jit::WithInsertPoint at(ifNode->next());
  // With grad mode on, a write where the branch was not taken could bump
  // the version of a root an op saved for backward (`z = w * y` with w
  // requiring grad), or make a root require grad: only where it is off
  // (torch.no_grad(), inference) is the write unconditional.
  Value *untracked = emit(
      graph, "aten::__not__",
      {emit(graph, "aten::is_grad_enabled", {}, ifNode)}, ifNode);
  auto copies = [&](Block *block) {
    torch::jit::WithInsertPoint in(block);
    for (size_t k = 0; k < roots.size(); ++k)
      emit(graph, "aten::copy_", {roots[k], ifNode->output(first + k)}, ifNode);
  };
  Node *guard =
      graph.insertNode(graph.create(c10::prim::If, {untracked}, 0));
  guard->setSourceRange(ifNode->sourceRange());
  guard->i_(guardAttr(), 1);
  copies(guard->addBlock());
  Block *fallback = guard->addBlock();
  torch::jit::WithInsertPoint in(fallback);
  // `bool(t)` read again there, so that the if's own read can go when it is
  // converted; any other condition is read there as it is (lift-scalars
  // reads its lifted value there).
  Value *again = cond->kind() == c10::aten::Bool && isTensor(cond->input(0))
                     ? emit(graph, "aten::Bool", {cond->input(0)}, ifNode)
                     : ifNode->input(0);
  Node *taken =
      graph.insertNode(graph.create(c10::prim::If, {again}, 0));
  taken->setSourceRange(ifNode->sourceRange());
  copies(taken->addBlock());
  taken->addBlock();
}

} // namespace

bool branchWrites(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  std::vector<Node *> ifs = ctx.facts.analysis(graph).nodesWhere(
      [](c10::Symbol op) { return op == c10::prim::If; });
  bool changed = false;
  // Innermost first: an inner if's writes move out to its own block first.
  for (auto it = ifs.rbegin(); it != ifs.rend(); ++it) {
    Node *node = *it;
    if (inGuardFallback(node) || !writesInside(node))
      continue;
    if (changed) // facts about the graph as it is now
      ctx.facts.invalidate();
    const AnalysisResult &facts = ctx.facts.analysis(graph);
    if (!facts.knows(node->input(0)) ||
        !facts.info(node->input(0)).isDataDependent())
      continue; // a branch on the host: nothing to gain
    Plan plan;
    std::string why = planReason(node, ctx.facts.aliases(graph), plan);
    if (!why.empty()) {
      ctx.declined(node, kRule, why);
      continue;
    }
    // A result that is the written value reads it after the write-back:
    // the if no longer returns it.
    for (auto it = plan.writtenResults.rbegin();
         it != plan.writtenResults.rend(); ++it) {
      auto [i, root] = *it;
      node->output(i)->replaceAllUsesWith(root);
      for (Block *b : node->blocks())
        b->eraseOutput(i);
      node->eraseOutput(i);
    }
    std::vector<Value *> roots = functionalize(*graph, node, plan.writes, ctx);
    if (!roots.empty())
      writeBack(*graph, node, roots);
    changed = true;
  }
  return changed;
}

} // namespace staticify
