//===- BranchWrites.h - writes in a branch on data -> one write after it --===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// An `if` on data (`bool(t)`, `t.item() > 0`) whose branches write in place (`if m.any(): x[m] = 0`,
/// which mask-store makes `x.masked_fill_(m, 0)`) computes out of place
/// instead, and the if returns each written value; one write after the if
/// puts it back:
///
///   if bool(t): y.op_(a)        ->   y1 = if bool(t): y.op(a).type_as(y)
///                                         else: y
///                                    y.copy_(y1)
///
/// so its branches are pure and if-convert (or lift-scalars) can run both.
/// Where the branch is not taken, y1 is y (after conversion, a select of
/// y's own values) and the copy writes y's values back. Preconditions, each
/// reported: the writes are in-place ops that change values only (not
/// squeeze_, resize_, detach_...) with an out-of-place twin of the same
/// overload (`copy_` becomes `type_as(src, y).expand_as(y)`), at the top
/// of a branch, to a value made before the if or in the branch; nothing else
/// in the branch may write, raise, print or loop; no view of a written value
/// is read in the branch, and no result of the if aliases one. The write is
/// behind a guard on grad mode: with it on, an unconditional write could
/// invalidate a tensor saved for backward, so the fallback writes only
/// where the condition holds (a read of the device, counted apart).
bool branchWrites(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
