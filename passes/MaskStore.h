//===- MaskStore.h - x[mask] = v -> masked_fill_ / where ------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// `index_put_(x, [m], v)` with a boolean mask m (`x[m] = v`, and `x[m] op= v`
/// once mask-propagate has made `x[m] op v` a selection `(x op v)[m]`)
/// becomes, in place on x so that aliases see the change:
///
///   v 0-d (a number, a 0-d tensor):   x.masked_fill_(m', v)
///   v a selection y[m], same mask:    x.copy_(where(m', y, x))
///
/// with m' = m reshaped to broadcast against x. The functional `index_put`
/// becomes `where(m', v, x).type_as(x)`. Precondition: m is the only index,
/// `accumulate` is False, and y provably has x's rank (it derives from x
/// through elementwise ops with scalars). Otherwise nothing changes and the
/// report says why.
bool maskStore(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
