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
#include <unordered_set>

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
  const Block *branch; // the branch it is in (node goes when functionalized)
  /// The views the write goes through, made in the branch from the root
  /// (`y[i] = v`, `y[:, a:b] = v`: selects and slices), outermost first.
  std::vector<Node *> views;
};

/// `select(x, d, i)` or `slice(x, d, s, e, step)` with host arguments: a
/// view whose write has a functional form (scatterInto).
bool isScatterableView(const Node *n) {
  if (n->kind() != c10::aten::select && n->kind() != c10::aten::slice)
    return false;
  if (!isTensor(n->input(0)) || n->outputs().size() != 1)
    return false;
  return std::none_of(n->inputs().begin() + 1, n->inputs().end(),
                      [](const Value *in) { return carriesTensor(in->type()); });
}

/// The views from a root to \p y, made in \p block, each read only by
/// the next (or the write) and for its metadata: empty where \p y is no
/// such view.
std::vector<Node *> viewChain(Value *y, const Block *block) {
  std::vector<Node *> chain;
  for (Value *v = y; v->node()->owningBlock() == block &&
                     isScatterableView(v->node());
       v = v->node()->input(0)) {
    // Read only by the next view or the write, and for its dtype and
    // device (`y[0] = 1.0` makes its value with the view's).
    size_t valueReads = 0;
    for (const torch::jit::Use &use : v->uses())
      valueReads += use.user->kind() != c10::prim::dtype &&
                    use.user->kind() != c10::prim::device;
    if (valueReads != 1)
      return {};
    chain.push_back(v->node());
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

/// The value \p view's write-back makes of its base: \p base with \p
/// content where the view is, made before \p at. A slice's by
/// slice_scatter, which clamps its bounds as slice does (it raises only
/// where content has another shape than the slice, and content is made of
/// it). A select's by where() at the row k, which never raises: hoisted,
/// a k out of range where the branch is not taken writes nothing (the
/// select itself is shielded: if-convert).
Value *scatterInto(Graph &graph, Node *view, Value *base, Value *content,
                   Node *at) {
  torch::jit::WithInsertPoint before(at);
  if (view->kind() == c10::aten::slice) {
    std::vector<torch::jit::NamedValue> args = {base, content};
    for (size_t i = 1; i < view->inputs().size(); ++i)
      args.emplace_back(view->input(i));
    return emit(graph, "aten::slice_scatter", args, view);
  }
  Value *rank = emit(graph, "aten::dim", {base}, view);
  Value *d = view->input(1);
  if (std::optional<int64_t> c = constantInt(d); !c || *c < 0)
    d = emit(graph, "aten::remainder", {d, rank}, view); // from the end
  Value *n = emit(graph, "aten::size", {base, d}, view);
  Value *k = view->input(2);
  Value *p = emit(graph, "aten::arange", {n}, view,
                  {torch::jit::NamedValue("device",
                                          emit(graph, "prim::device", {base}, view))});
  // Row k counted from either end: no row where k is out of range.
  Value *row = emit(graph, "aten::__or__",
                    {emit(graph, "aten::eq", {p, k}, view),
                     emit(graph, "aten::eq",
                          {p, emit(graph, "aten::add", {k, n}, view)}, view)},
                    view);
  Value *trailing = emit(graph, "aten::sub",
                         {emit(graph, "aten::sub", {rank, d}, view), 1}, view);
  Value *shape = emit(
      graph, "aten::add",
      {graph.insertNode(graph.createList(c10::IntType::get(), {n}))->output(),
       emit(graph, "aten::mul", {std::vector<int64_t>{1}, trailing}, view)},
      view);
  // Of the rows (d = 0) content broadcasts against base as it is; along
  // another dim it takes that dim back.
  Value *rows = constantInt(d) == 0
                    ? content
                    : emit(graph, "aten::unsqueeze", {content, d}, view);
  return emit(graph, "aten::where",
              {emit(graph, "aten::reshape", {row, shape}, view), rows, base},
              view);
}

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
      // A write into a view of the root made here (`y[i] = v`): the root
      // with the view's new content scattered into it.
      std::vector<Node *> views = viewChain(y, b);
      if (!views.empty()) {
        if (n->output()->hasUses())
          return "a branch reads the view '" + op + "' writes";
        y = views.front()->input(0);
      }
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
      if (views.empty())
        rootOf[n->output()] = y;
      writes.push_back({n, y, b, std::move(views)});
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
  // (The views a write goes through are read only by it.)
  std::unordered_set<const Value *> written;
  for (const Write &w : writes)
    for (const Node *view : w.views)
      written.insert(view->output());
  // A view of the root made in the branch (`y[0] * 2.0` after `y[1] =
  // ...`) reads the root's version where it is made, as out of place it
  // does, unless a write to the root comes between it and a read of it.
  auto freshView = [&](const Value *v, const Value *root) {
    const Node *view = v->node();
    if (!insideOf(view, ifNode) || !isScatterableView(view) ||
        (view->input(0) != root && rootOfWritten(view->input(0), writes) != root))
      return false;
    for (const Write &x : writes)
      if (x.root == root && x.node->owningBlock() == view->owningBlock() &&
          view->isBefore(x.node))
        for (const torch::jit::Use &use : v->uses())
          if (!use.user->isBefore(x.node))
            return false;
    return true;
  };
  for (const Write &w : writes)
    for (Block *b : ifNode->blocks()) {
      std::vector<const Value *> reads;
      readsOf(b, reads);
      for (const Value *v : reads)
        if (!written.count(v) && rootOfWritten(v, writes) != w.root &&
            !freshView(v, w.root) && aliases.mayAlias(v, w.root))
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
      // Through views: each one's new content scattered into its base, out
      // to the root (the views read the root's current version already).
      for (auto view = w->views.rbegin(); view != w->views.rend(); ++view)
        value = scatterInto(graph, *view, (*view)->input(0), value, n);
      now[w->root] = value;
      if (w->views.empty())
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
/// result, unconditionally with grad mode off, else only where a branch
/// that writes it is taken (the guard's fallback): a write there could invalidate a
/// tensor saved for backward, or make the root require grad where the
/// original left it alone.
void writeBack(Graph &graph, Node *ifNode, const std::vector<Value *> &roots,
               const std::vector<Write> &writes) {
  size_t first = ifNode->outputs().size() - roots.size();
  // Which branch writes each root (the then branch, the else branch, or
  // both): where grad mode is on, the fallback writes a root back only
  // where a branch that writes it is taken.
  auto writtenIn = [&](const Block *b, const Value *root) {
    return std::any_of(writes.begin(), writes.end(), [&](const Write &w) {
      return w.root == root && w.branch == b;
    });
  };
  Node *cond = ifNode->input(0)->node();
  torch::jit::WithInsertPoint at(ifNode->next());
  // With grad mode on, a write where the branch was not taken could bump
  // the version of a root an op saved for backward (`z = w * y` with w
  // requiring grad), or make a root require grad: only where it is off
  // (torch.no_grad(), inference) is the write unconditional.
  Value *untracked = emit(
      graph, "aten::__not__",
      {emit(graph, "aten::is_grad_enabled", {}, ifNode)}, ifNode);
  // \p branch: the branch whose writes are copied back; null: all.
  auto copies = [&](Block *block, const Block *branch) {
    torch::jit::WithInsertPoint in(block);
    for (size_t k = 0; k < roots.size(); ++k)
      if (!branch || writtenIn(branch, roots[k]))
        emit(graph, "aten::copy_", {roots[k], ifNode->output(first + k)}, ifNode);
  };
  Node *guard =
      graph.insertNode(graph.create(c10::prim::If, {untracked}, 0));
  guard->setSourceRange(ifNode->sourceRange());
  guard->i_(guardAttr(), 1);
  copies(guard->addBlock(), nullptr);
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
  copies(taken->addBlock(), ifNode->blocks()[0]);
  copies(taken->addBlock(), ifNode->blocks()[1]);
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
      writeBack(*graph, node, roots, plan.writes);
    changed = true;
  }
  return changed;
}

} // namespace staticify
