//===- HoistReads.cpp - a loop's host reads as one copy made before it ----===//

#include "passes/HoistReads.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/OpInfo.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "hoist-reads";

/// A copy's size the guard allows: this many elements per host read the
/// loop makes in all its iterations (torchvision's paste copies 4 per box
/// for 10 reads, the keypoint decoder 4 for 2), or kSmallCopy elements,
/// which cost less to copy than a sync, whatever the reads.
constexpr int64_t kElementsPerRead = 64;
constexpr int64_t kSmallCopy = int64_t(1) << 16;

using Values = std::vector<Value *>;
using Nodes = std::vector<Node *>;

template <typename T> void addOnce(std::vector<T> &list, T item) {
  if (std::find(list.begin(), list.end(), item) == list.end())
    list.push_back(item);
}

/// Every value \p loop makes: its blocks' parameters and the results of
/// \p nodes, every node in its body at any depth.
std::unordered_set<const Value *> madeIn(Node *loop, const Nodes &nodes) {
  std::unordered_set<const Value *> made;
  for (Block *block : loop->blocks())
    for (const Value *param : block->inputs())
      made.insert(param);
  for (Node *node : nodes)
    for (const Value *out : node->outputs())
      made.insert(out);
  return made;
}

/// Where a read's tensor comes from: the nodes computing it from tensors
/// made outside the loop (`within`), in an order that computes each after
/// its operands, and those tensors (`sources`). Nodes before the loop that
/// compute sources from fewer tensors (`rootsOf`) fill `before`.
struct Chain {
  Nodes nodes;
  Values sources;
};

/// Extends \p chain with what computes \p v from tensors made outside the
/// loop (those in \p made are made inside). Returns the node that the host
/// cannot replay, if one is in the way.
const Node *chainTo(Value *v, const std::unordered_set<const Value *> &made,
                    Chain &chain) {
  if (!made.count(v)) {
    addOnce(chain.sources, v);
    return nullptr;
  }
  Node *node = v->node();
  if (std::find(chain.nodes.begin(), chain.nodes.end(), node) !=
      chain.nodes.end())
    return nullptr;
  if (!replaysExactly(node))
    return node;
  for (Value *in : node->inputs()) {
    if (!carriesTensor(in->type()))
      continue;
    if (!isTensor(in))
      return node;
    if (const Node *blocker = chainTo(in, made, chain))
      return blocker;
  }
  chain.nodes.push_back(node);
  return nullptr;
}

/// Extends \p chain with what computes \p v, before the loop, by ops the
/// host replays exactly, from tensors made otherwise (its sources).
void rootsOf(Value *v, Chain &chain) {
  Node *node = v->node();
  if (std::find(chain.nodes.begin(), chain.nodes.end(), node) !=
      chain.nodes.end())
    return;
  // Replayed at the loop, not where it ran: a list argument (view's sizes)
  // may have been written in between, unless it is a constant.
  bool replays = replaysExactly(node) &&
                 std::all_of(node->inputs().begin(), node->inputs().end(),
                             [](const Value *in) {
                               if (carriesTensor(in->type()))
                                 return isTensor(in);
                               return !in->type()->cast<c10::ListType>() ||
                                      in->node()->kind() == c10::prim::Constant;
                             });
  if (!replays)
    return addOnce(chain.sources, v);
  for (Value *in : node->inputs())
    if (isTensor(in))
      rootsOf(in, chain);
  chain.nodes.push_back(node);
}

/// A node of \p nodes that may write a value of \p chain, or null.
const Node *writerAmong(const Nodes &nodes, const Chain &chain,
                        const Aliases &aliases) {
  torch::jit::ValueSet watched(chain.sources.begin(), chain.sources.end());
  for (const Node *n : chain.nodes)
    watched.insert(n->output());
  for (Node *n : nodes)
    if (aliases.writesToAlias(n, watched))
      return n;
  return nullptr;
}

/// Adds \p n and the nodes in its blocks to \p nodes.
void addWithNested(Node *n, Nodes &nodes) {
  nodes.push_back(n);
  for (Block *b : n->blocks())
    for (Node *inner : collectNodes(b))
      nodes.push_back(inner);
}

/// The nodes that may run after \p v is made and before \p loop starts
/// (v is made in a block around the loop): those before the loop in each
/// block from the loop's out to v's, all of a loop's body on the way
/// (earlier iterations), and those after v in its block.
Nodes nodesBetween(Value *v, Node *loop) {
  Node *def = v->node();
  const Block *home = def->owningBlock();
  Nodes between;
  Node *cur = loop;
  while (cur->owningBlock() != home) {
    Block *block = cur->owningBlock();
    Node *owner = block->owningNode();
    if (!owner) // not around the loop after all: every node may
      return collectNodes(loop->owningGraph()->block());
    bool repeats = owner->kind() == c10::prim::Loop;
    for (Node *n : block->nodes())
      if (repeats || n->isBefore(cur))
        addWithNested(n, between);
    cur = owner;
  }
  Node *first = def->kind() == c10::prim::Param ? cur->owningBlock()->nodes().front()
                                                : def->next();
  for (Node *n = first; n != cur; n = n->next())
    addWithNested(n, between);
  return between;
}

/// Whether a node may write a value of \p chain (made before \p loop)
/// before the loop starts.
bool writtenBefore(const Chain &chain, Node *loop, const Aliases &aliases) {
  auto written = [&](Value *v) {
    return writerAmong(nodesBetween(v, loop), Chain{{}, {v}}, aliases) !=
           nullptr;
  };
  return std::any_of(chain.sources.begin(), chain.sources.end(), written) ||
         std::any_of(chain.nodes.begin(), chain.nodes.end(),
                     [&](Node *n) { return written(n->output()); });
}

/// Says why \p rule left \p node alone, unless a rule before it did: the
/// first reason (a value lift-scalars must read, a use bound cannot keep
/// padded) says why it is a sync at all.
void declineUnlessExplained(PassContext &ctx, const Node *node,
                            const std::string &reason) {
  if (!ctx.explained(node))
    ctx.declined(node, kRule, reason);
}

std::string quoted(const Node *node) {
  return "'" + std::string(node->kind().toQualString()) + "'";
}

/// The pass on one for-loop: returns whether it rewrote reads.
bool hoistLoop(Graph &graph, Node *loop, const AnalysisResult &analysis,
               const Aliases &aliases, PassContext &ctx) {
  Block *body = loop->blocks()[0];
  Nodes reads;
  for (Node *node : body->nodes()) {
    auto it = analysis.values.find(node->inputs().empty() ? nullptr
                                                          : node->input(0));
    if (readsOneTensor(node) && it != analysis.values.end() &&
        !it->second.onHost)
      reads.push_back(node);
  }
  if (reads.empty())
    return false;
  Nodes inLoop = collectNodes(body);
  std::unordered_set<const Value *> made = madeIn(loop, inLoop);
  Chain within;
  Nodes hoisted;
  for (Node *read : reads) {
    Chain own;
    if (const Node *blocker = chainTo(read->input(0), made, own)) {
      declineUnlessExplained(
          ctx, read,
          blocker->kind() == c10::prim::Param
              ? "its tensor is carried from one iteration to the next"
              : "its tensor is computed in the loop by " + quoted(blocker) +
                    ", which the host may not replay exactly");
      continue;
    }
    if (const Node *writer = writerAmong(inLoop, own, aliases)) {
      declineUnlessExplained(ctx, read,
                             quoted(writer) +
                                 " in the loop may write what it reads");
      continue;
    }
    for (Node *n : own.nodes)
      addOnce(within.nodes, n);
    for (Value *s : own.sources)
      addOnce(within.sources, s);
    hoisted.push_back(read);
  }
  if (hoisted.empty())
    return false;
  // Fewer tensors to copy, where the sources are computed before the loop
  // from fewer by ops the host replays (and nothing writes any of them
  // before it starts: the host computes them from the copy, there).
  Chain before;
  for (Value *s : within.sources)
    rootsOf(s, before);
  if (before.sources.size() >= within.sources.size() ||
      writtenBefore(before, loop, aliases))
    before = Chain{{}, within.sources};
  if (before.sources.size() > hoisted.size()) {
    for (Node *read : hoisted)
      declineUnlessExplained(ctx, read,
                             "the loop would copy " +
                                 std::to_string(before.sources.size()) +
                                 " tensors for " +
                                 std::to_string(hoisted.size()) + " read" +
                                 (hoisted.size() == 1 ? "" : "s"));
    return false;
  }

  // The copies (the guard's first branch, below).
  Nodes copies;
  auto copy = [&]() {
    std::unordered_map<Value *, Value *> host;
    for (Value *s : before.sources) {
      Value *c = emit(graph, "aten::cpu", {s}, loop);
      copies.push_back(c->node());
      host[s] = c;
    }
    cloneNodes(graph, before.nodes, host, /*afterOriginals=*/false);
    Values out;
    for (Value *s : within.sources)
      out.push_back(host.at(s));
    return out;
  };
  // A guard: the copy where the loop runs and the host replays the ops
  // exactly (dtypes of 32 bits and more, integers, bools: the CPU lacks
  // some half-precision kernels and rounds Scalars to half first).
  // Otherwise the loop reads the device's tensors as before (the
  // fallback, whose reads the analysis counts apart as every guard's).
  // Either way the sources stay computed on the device, with the errors
  // they may raise, though the host computes them from fewer.
  Values onHost;
  {
    torch::jit::WithInsertPoint point(loop);
    Value *holds = emit(graph, "aten::gt", {loop->input(0), int64_t{0}}, loop);
    for (Value *s : before.sources) {
      Value *dtype = emit(graph, "prim::dtype", {s}, loop);
      Value *exact = emit(graph, "aten::__contains__",
                          {graph.insertConstant(exactReplayDTypes()), dtype}, loop);
      holds = emit(graph, "aten::__and__", {holds, exact}, loop);
    }
    // And a copy no larger than the reads it replaces are worth: at most
    // kElementsPerRead elements per read the loop makes, or kSmallCopy in
    // all (sizes are host facts: no sync).
    Value *elements = nullptr;
    for (Value *s : before.sources) {
      Value *n = emit(graph, "aten::numel", {s}, loop);
      elements = elements ? emit(graph, "aten::add", {elements, n}, loop) : n;
    }
    Value *reads = emit(graph, "aten::mul",
                        {loop->input(0),
                         static_cast<int64_t>(hoisted.size() * kElementsPerRead)},
                        loop);
    Value *limit = emit(graph, "prim::max", {reads, kSmallCopy}, loop);
    holds = emit(graph, "aten::__and__",
                 {holds, emit(graph, "aten::le", {elements, limit}, loop)},
                 loop);
    onHost = emitIf(graph, holds, loop, within.sources.size(), copy,
                    [&] { return within.sources; });
    onHost.front()->node()->i_(guardAttr(), 1);
  }
  std::string why = "one copy before the loop for " +
                    std::to_string(hoisted.size()) +
                    " host reads in it, which read the copy";
  for (Node *c : copies)
    ctx.declined(c, kRule, why);

  std::unordered_map<Value *, Value *> map;
  for (size_t i = 0; i < within.sources.size(); ++i)
    map[within.sources[i]] = onHost[i];
  cloneNodes(graph, within.nodes, map, /*afterOriginals=*/true);
  for (Node *read : hoisted) {
    ctx.rewrote(read, kRule);
    read->replaceInput(0, map.at(read->input(0)));
  }
  return true;
}

} // namespace

bool hoistReads(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  Nodes loops;
  for (Node *node : collectNodes(graph->block()))
    if (node->kind() == c10::prim::Loop && constantBool(node->input(1)) == true)
      loops.push_back(node);
  // Inner loops first; each sees the graph as the loops in it left it.
  std::reverse(loops.begin(), loops.end());
  bool changed = false;
  for (Node *loop : loops) {
    if (hoistLoop(*graph, loop, ctx.facts.analysis(graph),
                  ctx.facts.aliases(graph), ctx)) {
      changed = true;
      ctx.facts.invalidate();
    }
  }
  return changed;
}

} // namespace staticify
