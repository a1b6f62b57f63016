//===- IndexToMask.h - Row gathers by where(m)[0] -> mask selections ------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// Canonical form for row gathers by the indices of a mask:
///
///   gather(x, 0, where(m)[0]), index_select(x, 0, where(m)[0]),
///   x[where(m)[0]]   ->   G[valid]
///
/// For a 1-D m (the common case), G is x aligned to m's length and valid is
/// m itself: one pass. Otherwise G gathers x by the row indices of m's true
/// elements compacted into m.numel() slots (cumsum + scatter, O(N); padding
/// slots read row 0) and valid = arange(m.numel()) < count. The choice is a
/// branch on m.dim(), known on the host: no sync, both branches static.
/// Exact for any rank of m.
bool indexToMask(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
