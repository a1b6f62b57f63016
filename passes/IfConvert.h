//===- IfConvert.h - if on device data -> both branches + where -----------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <string>
#include <vector>

namespace staticify {

/// `prim::If(bool(t))` with a tensor t, pure branches and tensor outputs:
///
///   %c = aten::Bool(%t);  %y = prim::If(%c) {-> %a} {-> %b}
///     ->  (both branches, hoisted);  %y = aten::where(%t', %a, %b)
///
/// with t' = t reshaped to [] (keeping bool()'s one-element check, a
/// host-static one) and made boolean. Preconditions: both branches are
/// side-effect free (no write to any value, no raise, no print; nested ifs
/// included) and every op in them never raises on values, or has a shield
/// that keeps its raise to the branch taken (shieldBranches: an integer
/// division, an index by int64 values); no result is written to in place
/// afterwards. A pair of results not provably
/// congruent (same shape and dtype: the same value, the same elementwise or
/// reduction op on congruent operands, or clone/contiguous/detach of one,
/// or masked_fill with a mask of its own shape), which where() could
/// broadcast or promote, is selected behind a guard (selectBranch). A
/// branch that only raises (a
/// data assert) is kept and reported (drop-data-asserts, earlier, drops
/// them under --drop-data-asserts).
bool ifConvert(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

/// With --drop-data-asserts (PassContext options): every data assert
/// (isDataAssert, on `bool(t)` of a tensor t, outside guards) is removed
/// with the condition only it used, nested ones included. Run early, so
/// that the passes judging ifs on data see no assert: one whose message
/// formats the tensors it checks (`"min {} > max {}".format(lo, hi)`)
/// would otherwise keep an enclosing if from being converted.
bool dropDataAsserts(std::shared_ptr<torch::jit::Graph> &graph,
                     PassContext &ctx);

/// Why the branches of \p ifNode cannot both run unconditionally, or "":
/// side effects, writes, raises, loops, or ops that may raise on values
/// that no shield (shieldBranches) keeps to the branch taken. With \p facts,
/// an index by int64 values is shielded too.
/// \p rewritten, where given, names the ops its caller rewrites into forms
/// that cannot raise (bound's row_at reads zeros past a bounded value's
/// live rows): they are not counted.
using RewrittenOp = std::function<bool(const torch::jit::Node *)>;
std::string impureBranchReason(const torch::jit::Node *ifNode,
                               const AnalysisResult *facts = nullptr,
                               const RewrittenOp &rewritten = nullptr);

/// impureBranchReason, or a result of the if being written to in place.
std::string unconvertibleReason(const torch::jit::Node *ifNode,
                                const Aliases &aliases,
                                const AnalysisResult *facts = nullptr,
                                const RewrittenOp &rewritten = nullptr);

/// Before both branches of \p ifNode run (converted, with \p c, a 0-d bool
/// tensor, true where the first is taken): every op in them that may raise
/// on values and has a shield gets safe operands where its branch is not
/// taken, and the original ones where it is. A division's divisor becomes
/// 1, an int64 index 0 (by \p facts' dtypes), on the device; so in the
/// branch taken the op raises exactly when the original did, and in the
/// other never. The host checks first (metadata) that the operand shares
/// c's device and, for an index, that the indexed dim is not empty;
/// otherwise the guard's fallback reads c on the host.
void shieldBranches(torch::jit::Graph &graph, torch::jit::Node *ifNode,
                    torch::jit::Value *c, const AnalysisResult *facts);

/// shieldBranches for one block whose ops now run where they did not:
/// \p taken and \p notTaken, 0-d bool tensors, tell where the original ran
/// them (a converted loop's iterations past its exit run its body too).
void shieldBlock(torch::jit::Graph &graph, torch::jit::Block *block,
                 torch::jit::Value *taken, torch::jit::Value *notTaken,
                 const AnalysisResult *facts);

/// Why \p node could not run where the original did not run it, whatever
/// its operands (\p where names the place: "a branch", "the body"): it
/// raises, loops, writes to a value or has a side effect; or "".
std::string unconditionalReason(const torch::jit::Node *node,
                                const std::string &where);

/// Zeros of \p x's shape but for one row along \p dim: a stand-in that
/// index 0 reads without raising where x has no rows there (the shields,
/// and mask-propagate's gathers by selected indices).
torch::jit::Value *emitOneAlong(torch::jit::Graph &graph, torch::jit::Value *x,
                                int64_t dim, const torch::jit::Node *anchor);

/// Whether \p node raises only for a dim past its input's rank (OpInfo's
/// kRaisesOnlyOnDims: sort, flip, transpose; unsqueeze past the rank + 1)
/// and each of its dims is a constant within the rank the ops that made
/// the input bound from below (minimumRank: `m.sum(-2).unsqueeze(1)`): then
/// it never raises, whichever branch runs. flatten(x, s, e) too, where s
/// comes before e at every rank from that bound up.
bool dimsWithinRank(const torch::jit::Node *node, const AnalysisResult *facts);

/// Whether \p node may raise on values and no shield (shieldBlock) keeps
/// the raise to where the original ran it.
bool raisesUnshielded(const torch::jit::Node *node,
                      const AnalysisResult *facts);

/// Whether \p a and \p b provably have the same shape and dtype.
bool congruent(const torch::jit::Value *a, const torch::jit::Value *b);

/// `where(c, a, b)` for a 0-d bool tensor \p c and the results \p a and
/// \p b of two hoisted branches (at the insertion point). Of results not
/// provably congruent, behind a guard (guardAttr()) on host facts: when
/// their shapes, dtypes and devices agree at run time, where() is exact;
/// otherwise the fallback branch picks one the way the original if did, by
/// `bool(c)` (a host read, counted apart).
torch::jit::Value *selectBranch(torch::jit::Graph &graph, torch::jit::Value *c,
                                torch::jit::Value *a, torch::jit::Value *b,
                                const torch::jit::Node *anchor);

/// Moves every node of both branches of \p ifNode before it; returns the
/// branch outputs as (then, else) pairs. The If is left without nodes in its
/// blocks; the caller replaces its outputs and destroys it.
std::vector<std::pair<torch::jit::Value *, torch::jit::Value *>>
hoistBranches(torch::jit::Node *ifNode);

/// Whether \p ifNode is a data assert: no outputs, one branch that raises,
/// the other empty.
bool isDataAssert(const torch::jit::Node *ifNode);

} // namespace staticify
