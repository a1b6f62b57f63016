//===- Simplify.h - What the rewrites leave, said with fewer ops ----------===//
//
// The rewrites emit their forms for operands of any dtype: `x != 0` makes a
// mask of whatever `x` holds, `if x.dtype == ...` picks a path at run time.
// Once they ran, the analysis knows more dtypes than the forms could, and
// every op left costs a launch per call. `simplify`, last in the pipeline:
//
//   x != 0 of a bool x             -> x, where nothing writes x or the
//                                     result and every use of the result
//                                     reads it without keeping a view
//   prim::dtype(x) of a bool x     -> the constant, so that constant
//                                     propagation folds the tests on it
//   op(t, scalar_tensor(c, int64)) -> op(t, c) for an int64 t: min/max as
//                                     clamps, c - t as rsub(t, c)
//   numel/size/dim of op(t, numbers) -> of t, for an elementwise op: reads
//                                     of one shape then merge (the
//                                     pipeline's merge after the rewrites)
//
// then constant propagation and dead code. It merges nothing and touches no
// random op.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// Returns whether the graph changed.
bool simplify(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
