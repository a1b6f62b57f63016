//===- IndexToMask.cpp - Row gathers by where(m)[0] -> mask selections ----===//

#include "passes/IndexToMask.h"

#include "passes/GraphUtils.h"
#include "passes/MaskPropagate.h"
#include "passes/MaskStore.h"
#include "passes/MaskedReduce.h"
#include "passes/RewritePolicy.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/alias_analysis.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "index-to-mask";

struct Compacted {
  Value *isVector; // bool: m.dim() == 1, known on the host
  Value *rows;     // int64 [N]: row indices of the true elements, then 0s
  Value *valid;    // bool [N]: the selected slots
};

/// The selected slots of m: for a 1-D m its own true positions (then
/// x[where(m)[0]] is x aligned to m's length, selected by m: one pass);
/// otherwise the row indices of m's true elements compacted into m.numel()
/// slots. The branch is on m's rank, known on the host: no sync, and both
/// branches are static.
Compacted emitCompaction(Graph &graph, Value *mask, const Node *anchor) {
  // 0-d masks too: where(m)[0] of a 0-d m selects row 0 when m holds.
  Value *isVector = emit(graph, "aten::le",
                         {emit(graph, "aten::dim", {mask}, anchor), 1}, anchor);
  // where(m) selects m's nonzero elements, whatever m's dtype.
  Value *flat = emit(
      graph, "aten::ne",
      {emit(graph, "aten::reshape", {mask, std::vector<int64_t>{-1}}, anchor),
       0},
      anchor);
  Value *n = emit(graph, "aten::numel", {flat}, anchor);
  Value *longType =
      graph.insertConstant(static_cast<int64_t>(c10::ScalarType::Long));
  Value *device = emit(graph, "prim::device", {mask}, anchor);
  Value *positions = emit(graph, "aten::arange", {n}, anchor,
                          {torch::jit::NamedValue("dtype", longType),
                           torch::jit::NamedValue("device", device)});
  Value *rows = emitIf(
      graph, isVector, anchor, [&] { return positions; },
      [&] {
        // Row of flat position p: p // (numel / size(0)), guarded against
        // 0-size.
        Value *size0 = emit(graph, "aten::size", {mask, 0}, anchor);
        Value *stride = emit(
            graph, "prim::max",
            {emit(graph, "aten::floordiv",
                  {n, emit(graph, "prim::max", {size0, 1}, anchor)}, anchor),
             1},
            anchor);
        Value *rowOf = emit(
            graph, "aten::div", {positions, stride}, anchor,
            {torch::jit::NamedValue("rounding_mode", std::string("floor"))});
        Value *rank = emit(graph, "aten::cumsum", {flat, 0}, anchor,
                           {torch::jit::NamedValue("dtype", longType)});
        Value *slot = emit(
            graph, "aten::where",
            {flat, emit(graph, "aten::sub", {rank, 1}, anchor), n}, anchor);
        Value *np1 = emit(graph, "aten::add", {n, 1}, anchor);
        Value *sizes =
            graph.insertNode(graph.createList(c10::IntType::get(), {np1}))
                ->output();
        Value *zeros = emit(graph, "aten::zeros", {sizes}, anchor,
                            {torch::jit::NamedValue("dtype", longType),
                             torch::jit::NamedValue("device", device)});
        Value *scattered =
            emit(graph, "aten::scatter", {zeros, 0, slot, rowOf}, anchor);
        return emit(graph, "aten::slice", {scattered, 0, 0, n}, anchor);
      });
  Value *valid = emitIf(
      graph, isVector, anchor, [&] { return flat; },
      [&] {
        Value *count = emit(graph, "aten::sum", {flat}, anchor);
        return emit(graph, "aten::lt", {positions, count}, anchor);
      });
  return {isVector, rows, valid};
}

/// x's first rows aligned to \p n slots: x[:n], padded with zero rows when
/// x is shorter (those rows are never validly selected: the original would
/// raise).
Value *emitAligned(Graph &graph, Value *x, Value *n, const Node *anchor) {
  Value *size0 = emit(graph, "aten::size", {x, 0}, anchor);
  Value *longEnough = emit(graph, "aten::ge", {size0, n}, anchor);
  return emitIf(
      graph, longEnough, anchor,
      [&] {
        return emit(graph, "aten::slice", {x, 0, 0, n}, anchor);
      },
      [&] {
        Value *rest = emit(graph, "aten::slice",
                           {emit(graph, "aten::size", {x}, anchor), 1}, anchor);
        Value *missing =
            graph
                .insertNode(graph.createList(
                    c10::IntType::get(),
                    {emit(graph, "aten::sub", {n, size0}, anchor)}))
                ->output();
        Value *pad = emit(
            graph, "aten::new_zeros",
            {x, emit(graph, "aten::add", {missing, rest}, anchor)}, anchor);
        Value *both =
            graph
                .insertNode(graph.createList(c10::TensorType::get(), {x, pad}))
                ->output();
        return emit(graph, "aten::cat", {both, 0}, anchor);
      });
}

/// x itself, or a one-row stand-in when x has no rows, so that the padding
/// slots (index 0) can always be gathered. The branch is on a host-static
/// size: no sync.
Value *emitGatherable(Graph &graph, Value *x, const Node *anchor) {
  Value *size0 = emit(graph, "aten::size", {x, 0}, anchor);
  Value *hasRows = emit(graph, "aten::gt", {size0, 0}, anchor);
  return emitIf(
      graph, hasRows, anchor, [&] { return x; },
      [&] {
        Value *rest = emit(graph, "aten::slice",
                           {emit(graph, "aten::size", {x}, anchor), 1}, anchor);
        Value *one = graph
                         .insertNode(graph.createList(
                             c10::IntType::get(), {graph.insertConstant(1)}))
                         ->output();
        Value *shape = emit(graph, "aten::add", {one, rest}, anchor);
        return emit(graph, "aten::new_zeros", {x, shape}, anchor);
      });
}

/// One row gather by where(m)[0].
struct Site {
  Node *node;
  std::string op;
  Value *index; // where(m)[0]
};

/// The sites of one mask, in program order.
struct Group {
  Value *mask;
  std::vector<Site> sites;
};

/// Every row gather by where(m)[0] of an unwritten mask, grouped by mask
/// (groups in the order of their first site).
std::vector<Group> collectGroups(const std::vector<Node *> &candidates,
                                 const Aliases &aliases,
                                 PassContext *ctx) {
  std::vector<Group> groups;
  std::unordered_map<Value *, size_t> groupOf;
  for (Node *node : candidates) {
    Value *index = nullptr;
    std::string op = node->kind().toQualString();
    if ((op == "aten::gather" || op == "aten::index_select") &&
        constantInt(node->input(1)) == 0)
      index = node->input(2);
    else if (op == "aten::index" &&
             node->input(1)->node()->kind() == c10::prim::ListConstruct &&
             node->input(1)->node()->inputs().size() == 1)
      index = node->input(1)->node()->input(0);
    if (!index)
      continue;
    Value *mask = rowIndicesOf(index);
    if (!mask)
      continue;
    if (aliases.hasWriters(mask)) {
      // The compaction is computed where the mask is defined.
      if (ctx)
        ctx->declined(node, kRule, "the mask is written to in place");
      continue;
    }
    auto [it, fresh] = groupOf.emplace(mask, groups.size());
    if (fresh)
      groups.push_back({mask, {}});
    groups[it->second].sites.push_back({node, std::move(op), index});
  }
  return groups;
}

/// Whether rewriting \p group can only remove syncs: one site, the only use
/// of its where(m), which then dies (one nonzero becomes at most one
/// selection). Otherwise the where may stay, or one nonzero becomes several
/// selections, each of which syncs unless a later pass absorbs it.
bool neverAddsSyncs(const Group &group) {
  if (group.sites.size() != 1)
    return false;
  const Value *index = group.sites.front().index;
  const Node *where = index->node()->input(0)->node();
  return index->uses().size() == 1 && where->outputs().size() == 1 &&
         where->output()->uses().size() == 1;
}

/// Rewrites every site of \p group in \p graph.
void rewriteGroup(Graph &graph, const Group &group, PassContext &ctx) {
  Value *mask = group.mask;
  // Emitted once per mask, right where the mask is defined, so that it
  // dominates every user (several `where(m)[0]` reads share it).
  Node *def = mask->node();
  Node *at = def->kind() == c10::prim::Param
                 ? def->owningBlock()->nodes().front() // a block input
                 : def->next();
  Compacted c;
  {
    torch::jit::WithInsertPoint guard(at);
    c = emitCompaction(graph, mask, group.sites.front().node);
  }
  for (const Site &site : group.sites) {
    Node *node = site.node;
    torch::jit::WithInsertPoint guard(node);
    Value *rows = emitIf(
        graph, c.isVector, node,
        [&] {
          Value *n = emit(graph, "aten::numel", {mask}, node);
          Value *aligned = emitAligned(graph, node->input(0), n, node);
          if (site.op != "aten::gather")
            return aligned;
          // gather(x, 0, i) needs x.dim() == i.dim() == 1: say so, for the
          // rank proofs of mask-propagate (a no-op view where it succeeds).
          return emit(graph, "aten::reshape",
                      {aligned, std::vector<int64_t>{-1}}, node);
        },
        [&] {
          Value *source = emitGatherable(graph, node->input(0), node);
          // Every input first, then the node that reads them.
          Value *list = site.op == "aten::index"
                            ? graph
                                  .insertNode(graph.createList(
                                      c10::OptionalType::ofTensor(), {c.rows}))
                                  ->output()
                            : nullptr;
          Node *padded = graph.insertNode(
              graph.createClone(node, [](Value *v) { return v; }));
          padded->replaceInput(0, source);
          if (list)
            padded->replaceInput(1, list);
          else
            padded->replaceInput(2, c.rows);
          padded->output()->setType(c10::TensorType::get());
          return padded->output();
        });
    Value *result = emitSelect(graph, rows, c.valid, node);
    node->output()->replaceAllUsesWith(result);
    ctx.rewrote(node, kRule);
    node->destroy();
  }
}

/// Orders groups last first. A group's mask may be the result of an earlier
/// group's gather (`f = flags[where(m)[0]]; boxes[where(f)[0]]`): rewritten
/// first, the later group reads that gather's node, whose result the earlier
/// group then replaces by one defined before it (so it still dominates) and
/// only then destroys.
void rewriteInReverse(std::vector<size_t> &groups) {
  std::sort(groups.rbegin(), groups.rend());
}

/// The graph's cost (sync points, data-dependent values) once the groups
/// numbered in \p chosen are rewritten and the passes that absorb
/// selections have run: what the pipeline would make of that choice.
RewriteCost costAfter(Graph &graph, const std::vector<Group> &groups,
                      const std::vector<size_t> &chosen,
                      const PassContext &ctx) {
  RewriteTrial trial(graph, ctx);
  std::shared_ptr<Graph> &copy = trial.graph();
  std::vector<size_t> order = chosen;
  rewriteInReverse(order);
  for (size_t k : order) {
    // The group's sites in the copy.
    Group twin{trial.counterpart(groups[k].mask), {}};
    for (const Site &s : groups[k].sites)
      twin.sites.push_back(
          {trial.counterpart(s.node), s.op, trial.counterpart(s.index)});
    rewriteGroup(*copy, twin, trial.ctx());
  }
  eraseDeadNodes(*copy, trial.ctx(), kRule);
  trial.runPasses({"mask-propagate", "masked-reduce", "mask-store"});
  return trial.cost();
}

/// Trials are whole-graph pipeline runs: a graph with more groups that need
/// one than this keeps the rest as they are (and says so).
constexpr size_t kMaxTrials = 16;

} // namespace

bool indexToMask(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // Row gathers: the nodes of the ops collectGroups matches.
  std::vector<Node *> candidates =
      ctx.facts.analysis(graph).nodesWhere([](c10::Symbol op) {
        return op == c10::aten::gather || op == c10::aten::index_select ||
               op == c10::aten::index;
      });
  if (candidates.empty())
    return false;
  std::vector<Group> groups =
      collectGroups(candidates, ctx.facts.aliases(graph), &ctx);
  std::vector<size_t> chosen;
  std::vector<size_t> uncertain;
  for (size_t k = 0; k < groups.size(); ++k)
    (neverAddsSyncs(groups[k]) ? chosen : uncertain).push_back(k);
  // A group that may add syncs is rewritten only if, with the later mask
  // passes, the graph syncs no more often than without it.
  if (!uncertain.empty()) {
    RewriteCost base = costAfter(*graph, groups, chosen, ctx);
    for (size_t i = 0; i < uncertain.size(); ++i) {
      const Group &group = groups[uncertain[i]];
      std::string why;
      if (i >= kMaxTrials) {
        why = "not tried: more than " + std::to_string(kMaxTrials) +
              " masks whose rewrite could add syncs";
      } else {
        std::vector<size_t> with = chosen;
        with.push_back(uncertain[i]);
        RewriteCost cost = costAfter(*graph, groups, with, ctx);
        if (rewriteAllowed(base, cost)) {
          chosen = std::move(with);
          base = cost;
          continue;
        }
        why = "rewritten, the graph would sync at " +
              std::to_string(cost.syncPoints) + " points instead of " +
              std::to_string(base.syncPoints) +
              " (the selections are not absorbed by a reduction or a store)";
      }
      for (const Site &site : group.sites)
        ctx.declined(site.node, kRule, why);
    }
  }
  rewriteInReverse(chosen);
  for (size_t k : chosen)
    rewriteGroup(*graph, groups[k], ctx);
  return !chosen.empty();
}

} // namespace staticify
