//===- Bounded.h - The bounded-shape engine (DESIGN §1) -------------------===//
//
// What the padding-free rewrites leave data-dependent becomes *bounded*: a
// tensor padded to a host-static bound, valid rows first, plus `count`, a
// 0-d int64 tensor on the data's device. Host ints read from such shapes are
// *lifted* to 0-d tensors and carry an integer range (a constant lower bound,
// an upper bound that is a host int: a constant or an expression over input
// sizes).
//
// One forward walk over the graph gives each value a representation:
//
//   nonzero/argwhere/where(c)[k]/nonzero_numpy  -> bounded (cumsum+scatter)
//   x[mask], masked_select                      -> bounded gather
//   _unique2, unique_consecutive                -> sort + adjacent diff
//   numel/size(0)/len of a bounded value        -> lifted count
//   int arithmetic, min/max, comparisons        -> lifted, ranges propagate
//   if on a lifted bool, pure branches          -> both branches + where
//   randperm(n) with lifted n (then [:k])       -> top-k of masked keys
//   x[:k] with lifted k, or of a bounded x      -> bounded, count min(k, .)
//   x[i], index_select of/by bounded values     -> bounded, or static when
//                                                  i is static
//   cat of bounded values                       -> compaction
//   elementwise ops / reductions of bounded     -> padded / masked
//   x[i] = v with a bounded i, 0-d v            -> masked_fill_ of hit rows
//
// The forms are TorchScript (passes/forms/bounded_forms.py). A use with no
// bounded form, and a graph output, *materializes* the value there: one
// `int(count)` and a slice (a sync, reported with its location and reason);
// --padded-outputs returns `(padded, count)` at outputs instead. Original
// nodes stay until nothing uses them, so a value nobody could rewrite keeps
// its original computation.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

bool boundShapes(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

/// Whether the `--bound` key \p key (a Python variable name, or FILE:LINE)
/// names \p v.
bool boundKeyNames(const std::string &key, const torch::jit::Value *v);

} // namespace staticify
