//===- Driver.cpp - The bound pass: walk, dispatch, materialize -----------===//
//
// One forward walk over the graph. A node whose inputs have representations
// goes to the use rules, any other to the root rules (Rules.h); an `if` on a
// lifted bool with pure branches runs both branches and selects with where.
// After the walk, every use of a represented value that no rule absorbed
// materializes it: one `int(count)` and a slice (a sync, reported with its
// location and reason), or `(padded, count)` at outputs with
// --padded-outputs.
//
//===----------------------------------------------------------------------===//

#include "passes/Bounded.h"
#include "passes/BoundedForms.h"

#include "passes/GraphCheckpoint.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/LiftScalars.h"
#include "passes/Partition.h"
#include "passes/RewritePolicy.h"
#include "passes/Selection.h"
#include "passes/bound/Rules.h"
#include "passes/bound/Trials.h"

#include <torch/csrc/jit/passes/constant_propagation.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace bound {

namespace {

std::vector<BoundRule> &ruleTable() {
  static std::vector<BoundRule> rules = [] {
    // Op-specific rules are asked before trait rules (Driver::candidates);
    // within each, in this order.
    std::vector<BoundRule> r;
    addScalarRules(r);
    addRowRules(r);
    addRandomRules(r);
    addIndexRules(r);
    addRootRules(r);
    addDetectionRules(r);
    addContainerRules(r);
    return r;
  }();
  return rules;
}

} // namespace

void registerBoundRule(BoundRule rule) {
  ruleTable().push_back(std::move(rule));
}

const std::vector<BoundRule> &boundRules() { return ruleTable(); }

namespace {

class Driver {
public:
  /// \p roots, when given, are the only nodes root rules are asked about
  /// (one island of the graph; bound decides island by island).
  /// \p cutoff, when given: it and the nodes after it are left as they
  /// are (their uses of rewritten values materialize before them).
  Driver(Graph &graph, PassContext &ctx, const AnalysisResult &analysis,
         const Aliases &aliases,
         const std::unordered_set<const Node *> *roots = nullptr,
         const Node *cutoff = nullptr, bool boundGuards = true,
         bool paddedDicts = true, bool bothBranches = true,
         std::pair<Node *, std::string> notBoth = {})
      : graph(graph), ctx(ctx), rc(graph, ctx, analysis, aliases),
        roots(roots), cutoff(cutoff), bothWhy(std::move(notBoth)) {
    rc.boundGuards = boundGuards;
    rc.paddedDicts = paddedDicts;
    rc.bothBranches = bothBranches;
  }

  /// Whether the run was refused for a padded dict whose later writes the
  /// rules did not all follow: try again without padded dicts.
  bool vetoedPaddedDicts() const { return vetoed && !vetoedBoth; }

  /// Whether the run was refused for both branches of an if that turned
  /// out unsafe to run unconditionally: try again without.
  bool vetoedBothBranches() const { return vetoedBoth; }
  /// The if that vetoed the run (vetoedBothBranches) and why: a node of the
  /// graph as it was, which the restore keeps.
  const std::pair<Node *, std::string> &whyNotBoth() const { return bothWhy; }

  /// The first node, in program order, whose use of a rewritten value
  /// materialized mid-computation: where a second trial may stop.
  const Node *firstMidUse() const { return firstMid; }

  /// Whether the graph changed; \p midSyncPoints, the host reads it now
  /// has for uses mid-computation (RewriteCost). What the rewrites
  /// replaced is left in place, dead, and so are the writers they replaced
  /// (replacedWriters()): the caller erases them when it keeps the rewrite,
  /// or restores the graph (GraphCheckpoint) when it does not.
  bool run(size_t &midSyncPoints) {
    // Rules ask the ranks of values whose producers they have rewritten.
    RankSnapshot ranks(graph, &rc.analysis);
    runBlock(graph.block());
    // A later write of a padded dict entry that no rule followed would
    // leave the entry's count stale (ContainerRules.cpp).
    vetoed = !rc.pendingStores.empty() || vetoedBoth;
    if (!changed || vetoed)
      return false;
    materializeRest();
    midSyncPoints = midReads.size();
    return true;
  }

  /// The writers the rules replaced by static code: they no longer have
  /// uses but write, so only their owner destroys them.
  const std::vector<Node *> &replacedWriters() const { return writers; }

  /// Once the rewrite is kept: the results of joined ifs (joinBranches)
  /// that no use reads any more, with what their branches returned for
  /// them.
  void eraseJoinedResults() {
    for (Node *node : joined)
      for (size_t i = node->outputs().size(); i-- > 0;) {
        if (node->output(i)->hasUses())
          continue;
        for (Block *b : node->blocks())
          b->eraseOutput(i);
        node->eraseOutput(i);
      }
  }

private:
  Graph &graph;
  PassContext &ctx;
  RuleContext rc;
  const std::unordered_set<const Node *> *roots;
  const Node *cutoff;
  const Node *firstMid = nullptr;
  bool changed = false;
  bool vetoed = false;
  bool vetoedBoth = false;
  /// The if whose branches could not both run, and why: this run's, or
  /// (given) the trial's before it, for the report.
  std::pair<Node *, std::string> bothWhy;
  std::vector<Node *> writers;
  std::vector<Node *> joined; // ifs joinBranches gave results
  /// The rules asked about each op, per BoundRule::On.
  std::unordered_map<c10::Symbol, std::vector<const BoundRule *>>
      candidatesOf[2];

  //===--------------------------------------------------------------------===//
  // Walk and dispatch
  //===--------------------------------------------------------------------===//

  void runBlock(Block *block) {
    for (auto it = block->nodes().begin(); it != block->nodes().end();) {
      Node *node = *it;
      ++it; // nodes the visit hoists go before `node`; never revisited
      visit(node);
    }
  }

  /// Whether \p node is an if or loop with the cutoff in its blocks.
  bool holdsCutoff(const Node *node) const {
    for (const Node *n = cutoff->owningBlock()->owningNode(); n;
         n = n->owningBlock()->owningNode())
      if (n == node)
        return true;
    return false;
  }

  void visit(Node *node) {
    if (cutoff && !node->isBefore(cutoff)) {
      // An if or loop that holds the cutoff: what runs before it inside.
      if (holdsCutoff(node))
        for (Block *b : node->blocks())
          runBlock(b);
      return;
    }
    if (node->kind() == c10::prim::If && rc.rep(node->input(0))) {
      if (convertIf(node))
        return;
      if (selectBothBranches(node))
        return;
      if (Node *guard = guardIfByBound(node, rc)) {
        changed = true;
        visit(guard);
        // After the visit, which joins the guard's results (a rewrite).
        std::string why = "the test is decided by the bound of the size where "
                          "it can be; the original if, with its read, where "
                          "not";
        if (bothWhy.first == node) // an earlier trial's
          why += " (" + bothWhy.second + ")";
        ctx.declined(guard, kRule, why);
        return;
      }
    }
    // A guard's fallback (guardAttr()) runs only where the host facts it
    // checks fail: it keeps the original computation, and what it uses
    // from outside is read inside it (coldPath).
    bool isGuard = node->hasAttribute(guardAttr());
    std::optional<EmptyEarlyReturn> early = matchEmptyEarlyReturn(node, rc);
    for (size_t i = 0; i < node->blocks().size(); ++i)
      if (!(isGuard && i == 1))
        runBlock(node->blocks()[i]);
    if (node->kind() == c10::prim::If) {
      joinBranches(node);
      if (early && selectEmptyBranch(node, *early, rc))
        ctx.rewrote(node, kRule);
    }
    if (!node->blocks().empty())
      return; // loops and ifs consume lifted values as host values
    // A list of tensors (cat's, index's) counts by its elements, and one
    // built by appends by what was appended.
    auto hasRep = [&](Value *v) {
      if (rc.rep(v))
        return true;
      Node *list = v->node();
      if (list->kind() != c10::prim::ListConstruct)
        return false;
      if (list->inputs().empty())
        return std::any_of(
            v->uses().begin(), v->uses().end(), [&](const torch::jit::Use &u) {
              return u.user->kind() == c10::aten::append && u.offset == 0 &&
                     rc.rep(u.user->input(1)) != nullptr;
            });
      return std::any_of(list->inputs().begin(), list->inputs().end(),
                         [&](Value *e) { return rc.rep(e) != nullptr; });
    };
    bool anyRep =
        std::any_of(node->inputs().begin(), node->inputs().end(), hasRep);
    if (!writable(node))
      return;
    if (!anyRep && roots && !roots->count(node))
      return; // a root of another island
    torch::jit::WithInsertPoint guard(node);
    if (!dispatch(node, anyRep ? BoundRule::On::Use : BoundRule::On::Root))
      return;
    changed = true;
    if (rc.replacedWriter == node) {
      rc.replacedWriter = nullptr;
      writers.push_back(node);
    }
    rc.absorb(node);
  }

  /// Op-specific rules first, then trait rules, each in registration order.
  const std::vector<const BoundRule *> &candidates(BoundRule::On on,
                                                   c10::Symbol op) {
    auto &byOp = candidatesOf[on == BoundRule::On::Use];
    auto [it, fresh] = byOp.try_emplace(op);
    if (fresh) {
      for (bool traits : {false, true})
        for (const BoundRule &rule : boundRules())
          if (rule.on == on && rule.ops.empty() == traits &&
              (traits || std::count(rule.ops.begin(), rule.ops.end(), op)))
            it->second.push_back(&rule);
    }
    return it->second;
  }

  /// Asks the rules about \p node until one answers; whether one applied.
  /// What a rule that does not apply inserted before the node is removed.
  bool dispatch(Node *node, BoundRule::On on) {
    for (const BoundRule *rule : candidates(on, node->kind())) {
      InsertedBefore inserted(node);
      RuleResult result = rule->fn(node, rc);
      if (result.kind == RuleResult::Kind::Applied)
        return true;
      inserted.rollback();
      if (result.kind == RuleResult::Kind::Declined) {
        if (!result.why.empty())
          ctx.declined(node, kRule, result.why);
        return false;
      }
    }
    return false;
  }

  /// `prim::If` on a lifted bool with pure branches: both branches run,
  /// their results are selected by where().
  bool convertIf(Node *node) {
    Rep *cond = rc.lifted(node->input(0));
    if (!cond || isDataAssert(node))
      return false;
    std::string why = unconvertibleReason(node, rc.aliases);
    for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i) {
      Value *a = node->blocks()[0]->outputs()[i];
      Value *b = node->blocks()[1]->outputs()[i];
      if (liftedDType(node->output(i)->type()))
        continue; // an int, float or bool: selected as a 0-d tensor
      if (!isTensor(node->output(i)))
        why = "the if returns a value that is neither a tensor nor a number";
      else if (rc.analysis.info(a).shape != ShapeDep::Static ||
               rc.analysis.info(b).shape != ShapeDep::Static)
        why = "a branch's tensor has a data-dependent shape";
    }
    if (!why.empty()) {
      ctx.declined(node, kRule, why);
      return false;
    }
    std::vector<Node *> hoisted;
    for (Block *b : node->blocks())
      for (Node *n : b->nodes())
        hoisted.push_back(n);
    auto outs = hoistBranches(node);
    for (Node *n : hoisted)
      visit(n);
    torch::jit::WithInsertPoint guard(node);
    Value *c = cond->value;
    Value *device = rc.deviceOf(c, node);
    for (size_t i = 0; i < outs.size(); ++i) {
      auto [a, b] = outs[i];
      Value *out = node->output(i);
      if (isTensor(out)) {
        // Of static shapes not provably congruent, behind a host-static
        // guard, as if-convert does.
        rc.replaceStatic(out, selectBranch(graph, c, a, b, node));
        continue;
      }
      Rep r(Rep::Kind::Lifted);
      r.range = rc.join(rc.rangeOf(a), rc.rangeOf(b), node);
      r.value = emit(
          graph, "aten::where",
          {c, rc.tensorOf(a, device, node), rc.tensorOf(b, device, node)},
          node);
      rc.setRep(out, r);
    }
    ctx.rewrote(node, "if-convert");
    changed = true;
    return true;
  }

  /// `prim::If` on a lifted bool whose branches the rules make bounded
  /// (BothBranches.cpp): both branches run, hoisted; each result is the
  /// device's pick of the two, padded rows made as many and counts picked
  /// alike. What follows a guard in the hoisted code runs in its fast
  /// block, and each guard's fallback is a copy of the original if.
  bool selectBothBranches(Node *node) {
    Rep *cond = rc.lifted(node->input(0));
    if (!rc.bothBranches || !cond ||
        cond->value->type()->kind() != c10::TypeKind::TensorType ||
        node->hasAttribute(guardAttr()) || node->outputs().empty() ||
        matchEmptyEarlyReturn(node, rc)) // selectEmptyBranch's, cheaper
      return false;
    std::string why = whyNotBothBranches(node, rc);
    if (!why.empty()) {
      bothWhy = {node, "both branches cannot run: " + why};
      ctx.declined(node, kRule, bothWhy.second);
      return false;
    }
    std::unordered_set<const Node *> originals;
    std::vector<Node *> hoisted;
    for (Block *b : node->blocks())
      for (Node *n : collectNodes(b)) {
        originals.insert(n);
        if (n->owningBlock() == b)
          hoisted.push_back(n);
      }
    // The original if, for the guards' fallbacks: a copy made before the
    // walk, inserted once a guard takes it.
    Node *original = graph.createClone(node, [](Value *v) { return v; });
    Node *start = node->prev();
    hoistBranches(node);
    for (Node *n : hoisted)
      visit(n);
    why = whyNotSafeUnconditionally(start->next(), node, originals, rc);
    for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i)
      if (!canPick(node->blocks()[0]->outputs()[i],
                   node->blocks()[1]->outputs()[i], rc))
        why = "a result is not, in both, bounded rows or a static tensor of "
              "one known rank";
    if (!why.empty()) {
      // The trial is run again without; the reason outlives it.
      bothWhy = {node, "both branches cannot run: " + why};
      original->destroy();
      vetoedBoth = true;
      return true;
    }
    std::vector<Node *> guards;
    std::unordered_map<Value *, Value *> renamed;
    nestAfterGuards(start->next(), node, guards, renamed, rc);
    std::vector<std::pair<Value *, Value *>> outs;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      auto name = [&](Value *v) {
        auto it = renamed.find(v);
        return it == renamed.end() ? v : it->second;
      };
      outs.emplace_back(name(node->blocks()[0]->outputs()[i]),
                        name(node->blocks()[1]->outputs()[i]));
    }
    for (Block *b : node->blocks())
      while (!b->outputs().empty())
        b->eraseOutput(b->outputs().size() - 1);
    // The picks, where the innermost guard's static code ends.
    std::vector<Picked> results;
    {
      torch::jit::WithInsertPoint at(
          guards.empty() ? node : guards.back()->blocks()[0]->return_node());
      for (auto [a, b] : outs)
        results.push_back(pick(cond->value, a, b, node, rc));
    }
    returnPicks(guards, original, results, node, rc);
    if (guards.empty())
      original->destroy();
    // The if's results are the picks: bounded by padded rows and a count,
    // or static. The if, now empty, stays as their definition (its results
    // keep what the analysis knows of them), on a constant test.
    {
      torch::jit::WithInsertPoint at(node);
      node->replaceInput(0, graph.insertConstant(true));
    }
    for (size_t i = 0; i < results.size(); ++i) {
      const Picked &r = results[i];
      for (Block *b : node->blocks())
        b->registerOutput(r.padded);
      if (r.count)
        rc.setBounded(node->output(i), r.padded, r.count, r.isIndex, r.is1D);
      else
        rc.replaceStatic(node->output(i), r.padded);
    }
    ctx.rewrote(node, kRule);
    changed = true;
    return true;
  }

  /// One branch's side of a bounded result of an `if`.
  struct BranchRows {
    Value *padded, *count;
    bool isIndex, is1D;
  };

  /// Branch result \p v as padded rows and a count: its representation
  /// when bounded; a static tensor, or any tensor of a guard's \p fallback
  /// (whose host reads count apart), is all rows, counted before \p block
  /// returns. nullopt for anything else.
  std::optional<BranchRows> branchRows(Value *v, Block *block,
                                       bool fallback) {
    if (Rep *r = rc.bounded(v))
      return BranchRows{r->value, r->count, r->isIndex, r->is1D};
    if (!isTensor(v) ||
        (!fallback && rc.analysis.info(v).shape != ShapeDep::Static))
      return std::nullopt;
    torch::jit::WithInsertPoint guard(block->return_node());
    return BranchRows{v, rc.rowsOf(v, v->node()), rc.isIndex(v),
                      knownRank(v, &rc.analysis) == 1};
  }

  /// An `if` on a host bool (a guard's, a size test's) whose branches
  /// return bounded rows, or bounded rows in one and a static tensor in the
  /// other (`torch.empty((0,))` for no boxes): the if returns padded rows
  /// and a count more, and its result is bounded by them. Its padded size is
  /// each branch's, known on the host. Without this, each branch's rows
  /// are cut to their count where they leave the if: a sync in each.
  void joinBranches(Node *node) {
    if (!writable(node))
      return;
    // The results it had: those added here are padded rows and counts.
    const size_t results = node->outputs().size();
    for (size_t i = 0; i < results; ++i) {
      Block *then = node->blocks()[0], *otherwise = node->blocks()[1];
      Value *a = then->outputs()[i], *b = otherwise->outputs()[i];
      if (!rc.bounded(a) && !rc.bounded(b))
        continue;
      InsertedBefore insertedThen(then->return_node());
      InsertedBefore insertedOtherwise(otherwise->return_node());
      std::optional<BranchRows> ra = branchRows(a, then, false);
      std::optional<BranchRows> rb =
          ra ? branchRows(b, otherwise, node->hasAttribute(guardAttr()))
             : std::nullopt;
      if (!ra || !rb) {
        insertedThen.rollback();
        insertedOtherwise.rollback();
        continue; // a branch's rows are cut where they leave the if
      }
      // The result's every use is rewritten or materialized from the new
      // results, so its branches return padded rows too rather than cut
      // their rows to a count.
      then->return_node()->replaceInput(i, ra->padded);
      otherwise->return_node()->replaceInput(i, rb->padded);
      then->registerOutput(ra->padded);
      otherwise->registerOutput(rb->padded);
      Value *padded = node->addOutput()->setType(node->output(i)->type());
      // One count both branches keep, made before the if (FCOS's
      // `if self.normalize_by_size: rel_codes = rel_codes * sizes`): the
      // result keeps it, and with it what it shares with other values.
      Value *count = ra->count;
      if (!rc.sameCount(ra->count, rb->count) ||
          encloses(then, ra->count->node()) ||
          encloses(otherwise, ra->count->node())) {
        then->registerOutput(ra->count);
        otherwise->registerOutput(rb->count);
        count = node->addOutput()->setType(ra->count->type());
      }
      rc.setBounded(node->output(i), padded, count, ra->isIndex && rb->isIndex,
                    ra->is1D && rb->is1D);
      if (joined.empty() || joined.back() != node)
        joined.push_back(node);
      ctx.rewrote(node, kRule);
      changed = true;
    }
  }

  //===--------------------------------------------------------------------===//
  // Materialization
  //===--------------------------------------------------------------------===//

  std::unordered_map<Value *, Value *> materialized;
  std::unordered_map<Value *, Value *> countsOnHost;
  /// The host reads materialization emitted that some use needs
  /// mid-computation (not at an output position).
  std::unordered_set<const Node *> midReads;


  /// \p node, or the first producer up its first inputs with a source
  /// location (a list unpack has none; the where before it does).
  static const Node *located(const Node *node) {
    for (const Node *n = node; n;
         n = n->inputs().empty() ? nullptr : n->input(0)->node()) {
      if (n->sourceRange().source())
        return n;
      if (n->kind() == c10::prim::Param)
        break;
    }
    return node;
  }

  static std::string reasonFor(const Node *user) {
    if (isOutputPosition(user))
      return "materialized: it is returned (--padded-outputs returns "
             "(padded, count) instead)";
    if (user->kind() == c10::prim::Return)
      return "materialized: it leaves a loop or an if";
    return "materialized: '" + std::string(user->kind().toQualString()) +
           "' has no bounded form";
  }

  Value *materialize(Value *v, const Rep &r, const Node *user) {
    if (auto it = materialized.find(v); it != materialized.end())
      return it->second;
    Node *def = v->node();
    // Right after the definition, or after the count's read when another
    // value with the same count was cut there already: one sync each.
    Node *at = def->next();
    Value *&n = countsOnHost[r.count];
    if (r.kind == Rep::Kind::Bounded && n &&
        n->node()->owningBlock() == def->owningBlock() &&
        (n->node() == at || at->isBefore(n->node())))
      at = n->node()->next();
    torch::jit::WithInsertPoint guard(at);
    const Node *anchor = user->sourceRange().source() ? user : located(def);
    bool mid = !isOutputPosition(user);
    // Where a second trial may stop: before the ifs around the use (a
    // read in one branch is paid for the other's too when the values stop
    // before the if), else at the use; a return node has no place of its
    // own.
    const Node *place = user->kind() == c10::prim::Return
                            ? user->owningBlock()->owningNode()
                            : user;
    while (place && place->owningBlock()->owningNode() &&
           place->owningBlock()->owningNode()->kind() == c10::prim::If)
      place = place->owningBlock()->owningNode();
    if (mid && place && (!firstMid || place->isBefore(firstMid)))
      firstMid = place;
    if (r.kind == Rep::Kind::Bounded && (!n || !n->node()->isBefore(at)))
      n = nullptr; // not read yet at this point
    Value *out = emitMaterialized(v, r, anchor, reasonFor(user), n, mid);
    materialized[v] = out;
    return out;
  }

  /// \p v's original value for \p user, a node on a cold path (an error
  /// message's sizes, a guard's fallback) where \p v is defined outside
  /// it: read right before \p user, so the host read runs only on that
  /// path.
  Value *materializeOnColdPath(const Value *v, const Rep &r, Node *user,
                               const char *why) {
    Block *fallback = guardFallbackAround(user, v);
    // Reads go before the fallback's first node as it was before the first
    // of them, in the order they are made.
    Node *start = nullptr;
    if (fallback) {
      auto [it, fresh] = startOf.try_emplace(fallback, nullptr);
      if (fresh)
        it->second = fallback->param_node()->next();
      start = it->second;
    }
    if (!fallback || !definedBefore(r.value, start) ||
        (r.count && !definedBefore(r.count, start))) {
      torch::jit::WithInsertPoint guard(user);
      Value *n = nullptr;
      return emitMaterialized(v, r, user, why, n, false);
    }
    // In a guard's fallback, each value and count is read once, where the
    // fallback starts.
    Value *&out = materializedIn[{fallback, v}];
    if (out)
      return out;
    torch::jit::WithInsertPoint guard(start);
    Value *&n = countsIn[{fallback, r.count}];
    out = emitMaterialized(v, r, user, why, n, false);
    return out;
  }

  std::map<Block *, Node *> startOf;
  std::map<std::pair<Block *, const Value *>, Value *> materializedIn;
  std::map<std::pair<Block *, const Value *>, Value *> countsIn;

  /// \p v's host value from lifted \p r, or bounded \p r cut to its count
  /// (read into \p n unless \p n holds the read already), at the insertion
  /// point. \p mid: the read counts as mid-computation (RewriteCost).
  Value *emitMaterialized(const Value *v, const Rep &r, const Node *anchor,
                          const std::string &why, Value *&n, bool mid) {
    if (r.kind == Rep::Kind::Lifted) {
      const char *op = v->type()->kind() == c10::TypeKind::IntType ? "aten::Int"
                       : v->type()->kind() == c10::TypeKind::BoolType
                           ? "aten::Bool"
                           : "aten::Float";
      Value *out = emit(graph, op, {r.value}, anchor);
      ctx.declined(out->node(), kRule, why);
      if (mid)
        midReads.insert(out->node());
      return out;
    }
    if (!n) {
      n = emit(graph, "aten::Int", {r.count}, anchor);
      ctx.declined(n->node(), kRule, why);
    }
    if (mid) // a shared read counts once
      midReads.insert(n->node());
    Value *out = emit(graph, "aten::slice", {r.value, 0, rc.constant(0), n, 1},
                      anchor);
    ctx.declined(out->node(), kRule, why);
    return out;
  }

  /// `(padded, count)` in place of a bounded graph output.
  bool returnPadded(const Rep &r, const torch::jit::Use &use) {
    if (!ctx.options.paddedOutputs || r.kind != Rep::Kind::Bounded)
      return false;
    Node *user = use.user;
    if (!isOutputPosition(user))
      return false;
    bool inReturnedTuple = user->kind() == c10::prim::TupleConstruct;
    torch::jit::WithInsertPoint guard(user);
    Value *pair =
        graph.insertNode(graph.createTuple({r.value, r.count}))->output();
    user->replaceInput(use.offset, pair);
    if (inReturnedTuple) { // retype the tuple around it
      std::vector<c10::TypePtr> types;
      for (Value *in : user->inputs())
        types.push_back(in->type());
      user->output()->setType(c10::TupleType::create(types));
    }
    return true;
  }

  void materializeRest() {
    for (Value *v : rc.repOrder) {
      const Rep r = rc.reps.at(v);
      if (r.kind == Rep::Kind::WhereList || r.kind == Rep::Kind::RandPerm)
        continue; // their remaining uses keep the original op
      std::vector<torch::jit::Use> uses = v->uses();
      for (const torch::jit::Use &use : uses) {
        if (rc.absorbed.count(use.user) || returnPadded(r, use))
          continue;
        const char *cold = coldPath(use.user, v);
        use.user->replaceInput(use.offset,
                               cold ? materializeOnColdPath(v, r, use.user, cold)
                                    : materialize(v, r, use.user));
      }
    }
  }
};

} // namespace
} // namespace bound

bool boundKeyNames(const std::string &key, const Value *v) {
  if (v->hasDebugName()) {
    std::string name = v->debugName();
    if (size_t dot = name.find('.'); dot != std::string::npos)
      name.resize(dot);
    if (key == name)
      return true;
  }
  size_t colon = key.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return false;
  std::optional<Location> loc = locationOf(v->node());
  if (!loc || key.substr(colon + 1) != std::to_string(loc->line))
    return false;
  std::string file = key.substr(0, colon);
  return loc->file == file ||
         (loc->file.size() > file.size() &&
          loc->file.compare(loc->file.size() - file.size(), file.size(),
                            file) == 0 &&
          loc->file[loc->file.size() - file.size() - 1] == '/');
}

namespace {

/// Each island's trial analyses and checkpoints the whole graph: islands
/// times nodes above this and the graph is decided as a whole (one trial),
/// not island by island. Torchvision's detectors (5k nodes, up to 40
/// islands) are decided island by island; the 12k-node benchmark graph
/// (600 islands) as a whole.
constexpr size_t kIslandTrialNodes = size_t(1) << 18;

/// Trials of one island: the whole, then stopped before the first use that
/// materialized mid-way, at most this many times in all.
constexpr size_t kCutoffTrials = 3;

} // namespace

bool boundShapes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  if (analysis.findings.empty())
    return false; // nothing data-dependent: nothing to try
  // Materializations cost a sync each. The graph's dynamic islands are
  // independent (no def-use edge joins two): each is bounded in place under
  // a checkpoint, and kept only where the policy allows it, so one island
  // with no bounded form leaves the others free. Past kIslandTrialNodes
  // the graph is one trial, as a whole (each costs an analysis).
  RewriteCost current = rewriteCost(analysis);
  std::vector<std::vector<Node *>> islands =
      bound::rootsByIsland(*graph, analysis);
  if (islands.size() * analysis.numNodes > kIslandTrialNodes) {
    std::vector<Node *> all;
    for (const auto &island : islands)
      all.insert(all.end(), island.begin(), island.end());
    islands = {std::move(all)};
  }
  bool changed = false;
  for (size_t k = 0; k < islands.size(); ++k) {
    std::unordered_set<const Node *> only(islands[k].begin(),
                                          islands[k].end());
    const std::unordered_set<const Node *> *filter =
        islands.size() > 1 ? &only : nullptr;
    GraphCheckpoint checkpoint(*graph);
    PassContext before = ctx;
    auto restore = [&] {
      checkpoint.restore();
      ctx = before;
    };
    // A rewrite the policy refuses is tried again, up to kCutoffTrials
    // times, stopping before the first use that materialized mid-way:
    // its values are read there instead of further on, where (past an if
    // on a lifted bool, say) they would cost more reads. RetinaNet's
    // per-level detections then stay bounded up to batched_nms.
    const Node *cutoff = nullptr;
    std::optional<bound::Driver> driver;
    std::optional<DeadNodes> dead;
    RewriteCost after;
    std::string why; // the first trial's reason, when the policy refused it
    bool accepted = false;
    // The trials with guards on bounds (guardIfByBound), then, where the
    // policy refused them all, without: a guard's fallback may move where a
    // later trial stops (Faster R-CNN's RPN).
    bool boundGuards = true;
    // Padded returned dicts, and both branches of ifs on counts, unless a
    // trial's walk vetoed them.
    bool paddedDicts = true;
    bool bothBranches = true;
    std::pair<Node *, std::string> vetoedIf; // the if that refused both
    for (size_t attempt = 0;; ++attempt) {
      size_t midSyncPoints = 0;
      driver.emplace(*graph, ctx, ctx.facts.analysis(graph),
                     ctx.facts.aliases(graph), filter, cutoff, boundGuards,
                     paddedDicts, bothBranches, vetoedIf);
      bool ran = driver->run(midSyncPoints);
      if (!ran) {
        bool withoutBoth = driver->vetoedBothBranches() && bothBranches;
        if (withoutBoth)
          vetoedIf = driver->whyNotBoth();
        bool again =
            withoutBoth || (driver->vetoedPaddedDicts() && paddedDicts);
        restore(); // what the rules recorded while declining goes too
        if (!again)
          break;
        (withoutBoth ? bothBranches : paddedDicts) = false;
        attempt = size_t(-1);
        cutoff = nullptr;
        continue;
      }
      // The cost of the graph as it will be once dead code is erased: what
      // the rewrite replaced is still there, dead, until it is kept.
      ctx.facts.invalidate();
      const AnalysisResult &trial = ctx.facts.analysis(graph);
      dead = findDeadNodes(*graph, driver->replacedWriters());
      after = {bound::liveSyncPoints(trial, dead->all), midSyncPoints};
      if (rewriteAllowed(current, after)) {
        accepted = true;
        break;
      }
      if (why.empty())
        why = "bounded, the graph would reach the host at " +
              std::to_string(after.syncPoints) + " points instead of " +
              std::to_string(current.syncPoints) +
              (after.syncPoints == current.syncPoints
                   ? ", " + std::to_string(after.midSyncPoints) +
                         " of them mid-computation"
                   : "") +
              " (" + bound::materializationSummary(trial, ctx, dead->all) +
              ")";
      const Node *next = driver->firstMidUse();
      restore();
      bool exhausted = attempt + 1 >= kCutoffTrials || !next ||
                       !bound::inGraph(*graph, next);
      if (!exhausted && next->kind() == c10::prim::If)
        next = bound::conditionStart(next); // on the graph as it was
      exhausted |= cutoff && !next->isBefore(cutoff);
      if (exhausted) {
        if (!boundGuards)
          break;
        boundGuards = false; // again, from the whole
        attempt = size_t(-1);
        cutoff = nullptr;
        continue;
      }
      cutoff = next;
    }
    if (!accepted) {
      if (!why.empty())
        bound::declineAll(ctx, islands[k], why);
      continue;
    }
    // The roots past the cutoff are an island of their own, tried next on
    // the values read before it (batched_nms's NMS on the boxes read
    // there); the reason the whole was refused stays with them in case
    // that trial keeps them too.
    if (cutoff) {
      std::vector<Node *> rest;
      for (Node *root : islands[k])
        if (!root->isBefore(cutoff)) {
          ctx.declined(root, bound::kRule,
                       "bounded up to '" +
                           std::string(cutoff->kind().toQualString()) +
                           "', not past it: whole, " + why);
          rest.push_back(root);
        }
      if (!rest.empty())
        islands.insert(islands.begin() + k + 1, std::move(rest));
    }
    for (Node *writer : driver->replacedWriters())
      writer->destroy(); // reported when replaced
    // What the rewrites replaced, converted ifs included, is dead: found
    // above, and nothing changed since but the writers' destruction.
    eraseNodes(dead->order, ctx, bound::kRule);
    driver->eraseJoinedResults();
    // The forms branch on host facts (None arguments, ranks): fold them.
    // Those are immutable values, and normalize folded everything else the
    // graph had, so no alias database is needed here.
    torch::jit::ConstantPropagationImmutableTypes(graph);
    ctx.facts.invalidate();
    // The later islands' roots that are still there (the rewrite of this
    // island leaves them be; one it erased is no longer a root).
    if (k + 1 < islands.size()) {
      std::unordered_set<const Node *> alive;
      for (Node *n : collectNodes(graph->block()))
        alive.insert(n);
      for (size_t j = k + 1; j < islands.size(); ++j)
        islands[j].erase(std::remove_if(islands[j].begin(), islands[j].end(),
                                        [&](Node *n) { return !alive.count(n); }),
                         islands[j].end());
    }
    current = after;
    changed = true;
  }
  return changed;
}

} // namespace staticify
