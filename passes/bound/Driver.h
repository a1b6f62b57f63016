//===- Driver.h - The bound pass's conversion driver ----------------------===//
//
// One forward walk over a graph (or one island of it). A node whose inputs
// have representations goes to the use rules, any other to the root rules
// (Rules.h); an `if` on a lifted bool runs both branches where it can
// (DriverIfs.cpp). After the walk, every use of a represented value that no
// rule absorbed materializes it: one `int(count)` and a slice (a sync,
// reported with its location and reason), or `(padded, count)` at outputs
// with --padded-outputs. boundShapes (Driver.cpp) runs it in trials the
// rewrite policy weighs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/bound/Rules.h"

#include <torch/csrc/jit/ir/ir.h>

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace staticify::bound {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

class Driver {
public:
  /// \p roots, when given, are the only nodes root rules are asked about
  /// (one island of the graph; bound decides island by island).
  /// \p cutoff, when given: it and the nodes after it are left as they
  /// are (their uses of rewritten values materialize before them).
  Driver(torch::jit::Graph &graph, PassContext &ctx,
         const AnalysisResult &analysis, const Aliases &aliases,
         const std::unordered_set<const Node *> *roots = nullptr,
         const Node *cutoff = nullptr, bool boundGuards = true,
         bool paddedDicts = true, bool bothBranches = true,
         bool indexedLists = true,
         std::pair<Node *, std::string> notBoth = {})
      : graph(graph), ctx(ctx), rc(graph, ctx, analysis, aliases), roots(roots),
        cutoff(cutoff), bothWhy(std::move(notBoth)) {
    rc.boundGuards = boundGuards;
    rc.paddedDicts = paddedDicts;
    rc.bothBranches = bothBranches;
    rc.indexedLists = indexedLists;
    rc.cutoff = cutoff;
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

  /// Whether the walk kept a list padded that is read by index or split
  /// (ListRules.cpp).
  bool madeIndexedLists() const { return rc.madeIndexedLists; }

  /// The random orders drawn so far (RuleContext::randomOrders): the
  /// caller hands those of the islands it kept to the next island's walk.
  std::vector<RuleContext::RandomOrder> &randomOrders() {
    return rc.randomOrders;
  }

  /// The first node, in program order, whose use of a rewritten value
  /// materialized mid-computation: where a second trial may stop.
  const Node *firstMidUse() const { return firstMid; }

  /// Whether the graph changed; \p midSyncPoints, the host reads it now
  /// has for uses mid-computation (RewriteCost). What the rewrites
  /// replaced is left in place, dead, and so are the writers they replaced
  /// (replacedWriters()): the caller erases them when it keeps the rewrite,
  /// or restores the graph (GraphCheckpoint) when it does not.
  bool run(size_t &midSyncPoints);

  /// The writers the rules replaced by static code: they no longer have
  /// uses but write, so only their owner destroys them.
  const std::vector<Node *> &replacedWriters() const { return writers; }

  /// Once the rewrite is kept: the results of joined ifs (joinBranches)
  /// that no use reads any more, with what their branches returned for
  /// them.
  void eraseJoinedResults();

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

  void runBlock(Block *block);

  /// Whether \p node is an if or loop with the cutoff in its blocks.
  bool holdsCutoff(const Node *node) const;

  void visit(Node *node);

  /// Op-specific rules first, then trait rules, each in registration order.
  const std::vector<const BoundRule *> &candidates(BoundRule::On on,
                                                   c10::Symbol op);

  /// Asks the rules about \p node until one answers; whether one applied.
  /// What a rule that does not apply inserted before the node is removed.
  bool dispatch(Node *node, BoundRule::On on);
  /// Asks the rules registered for prim::Loop about loop \p node, before
  /// its body is walked; whether one applied (the body is then not walked).
  bool dispatchLoop(Node *node);
  /// Asks \p rules about \p node in order until one answers; whether one
  /// applied. What a rule that does not apply inserted before the node is
  /// removed.
  bool ask(Node *node, const std::vector<const BoundRule *> &rules);
  /// The rules registered for prim::Loop, found when a loop first asks.
  std::optional<std::vector<const BoundRule *>> loopRules;

  /// `prim::If` on a lifted bool with pure branches: both branches run,
  /// their results are selected by where().
  bool convertIf(Node *node);

  /// `prim::If` on a lifted bool whose branches the rules make bounded
  /// (BothBranches.cpp): both branches run, hoisted; each result is the
  /// device's pick of the two, padded rows made as many and counts picked
  /// alike. What follows a guard in the hoisted code runs in its fast
  /// block, and each guard's fallback is a copy of the original if.
  bool selectBothBranches(Node *node);

  /// One branch's side of a bounded result of an `if`.
  struct BranchRows {
    Value *padded, *count;
    bool isIndex, is1D;
  };

  /// Branch result \p v as padded rows and a count: its representation
  /// when bounded; a static tensor, or any tensor of a guard's \p fallback
  /// (whose host reads count apart), is all rows, counted before \p block
  /// returns. nullopt for anything else.
  std::optional<BranchRows> branchRows(Value *v, Block *block, bool fallback);

  /// An `if` on a host bool (a guard's, a size test's) whose branches
  /// return bounded rows, or bounded rows in one and a static tensor in the
  /// other (`torch.empty((0,))` for no boxes): the if returns padded rows
  /// and a count more, and its result is bounded by them. Its padded size is
  /// each branch's, known on the host. Without this, each branch's rows
  /// are cut to their count where they leave the if: a sync in each.
  void joinBranches(Node *node);

  //===--------------------------------------------------------------------===//
  // Materialization
  //===--------------------------------------------------------------------===//

  std::unordered_map<Value *, Value *> materialized;
  std::unordered_map<Value *, Value *> countsOnHost;
  /// The host read of the count of rows selected by an unwritten mask
  /// (Rep::selectedBy): every selection by it has as many.
  std::unordered_map<Value *, Value *> countsOfMask;
  /// A read of \p count (equal to what \p read reads), before the if whose
  /// branch made \p read, where \p at, after that if, needs the count too:
  /// \p read's uses take it. \p read itself where there is no such if or
  /// \p count is not known before it.
  Value *hoistRead(Value *read, Value *count, Node *at, const std::string &why);
  /// The unwritten mask whose true elements \p r's rows count, if known:
  /// \p r's own, or that of a selection x[m] with \p r's count.
  Value *maskOfCount(const Rep &r);
  /// The host reads materialization emitted that some use needs
  /// mid-computation (not at an output position).
  std::unordered_set<const Node *> midReads;

  /// \p node, or the first producer up its first inputs with a source
  /// location (a list unpack has none; the where before it does).
  static const Node *located(const Node *node);

  std::string reasonFor(const Node *user) const;

  /// Whether a host read for \p user is mid-computation (not at an output
  /// position); if so, notes where a second trial may stop for it.
  bool noteUse(const Node *user);
  Value *materialize(Value *v, const Rep &r, const Node *user);

  /// \p v's original value for \p user, a node on a cold path (an error
  /// message's sizes, a guard's fallback) where \p v is defined outside
  /// it: read right before \p user, so the host read runs only on that
  /// path.
  Value *materializeOnColdPath(const Value *v, const Rep &r, Node *user,
                               const char *why);

  std::map<Block *, Node *> startOf;
  std::map<std::pair<Block *, const Value *>, Value *> materializedIn;
  std::map<std::pair<Block *, const Value *>, Value *> countsIn;

  /// \p v's host value from lifted \p r, or bounded \p r cut to its count
  /// (read into \p n unless \p n holds the read already), at the insertion
  /// point. \p mid: the read counts as mid-computation (RewriteCost).
  Value *emitMaterialized(const Value *v, const Rep &r, const Node *anchor,
                          const std::string &why, Value *&n, bool mid);

  /// `(padded, count)` in place of a bounded graph output.
  bool returnPadded(const Rep &r, const torch::jit::Use &use);
  /// A use by leading-selections' view that moves the rows back to their
  /// dim (`movedim(x, 0, d)`) whose one use is an output position: with
  /// --padded-outputs, the view of the padded rows and the count.
  bool returnPaddedAlongDim(const Rep &r, const torch::jit::Use &use);
  /// Replaces \p user's input \p offset, an output position, by the pair
  /// (\p padded, \p count), padded along \p dim, retyping a returned
  /// tuple around it; in a version's block, the other blocks return that
  /// output whole with its size along \p dim.
  void returnPair(Node *user, size_t offset, Value *padded, Value *count,
                  int64_t dim);

  void materializeRest();
  /// A copy of bounded list \p r, each element cut to its count (of a size
  /// list: the counts), made right before \p user: one host read per
  /// element, in a loop.
  Value *materializeList(const Rep &r, Node *user);
};

} // namespace staticify::bound
