//===- LeadingSelections.h - Selections along dim d >= 1 along dim 0 ------===//
//
// The rules for selections (mask-propagate, masked-reduce, index-to-mask,
// bound) work on the dimension a selection makes data-dependent when it is
// dimension 0. A selection along dimension d >= 1 is the same selection
// along dimension 0 of x with d moved to the front, moved back after:
//
//   x[:, ..., i]            -> x.movedim(d, 0)[i].movedim(0, d)
//   x.index_select(d, i)    -> x.movedim(d, 0).index_select(0, i).movedim(0, d)
//
// exact for any 1-D index i, a mask or integers (both raise where the
// original does: a mask not of x's size there, an index out of range). The
// move back is then sunk past what works per element or along dimensions,
// each by its own layout fact:
//
//   f(t, u, s)              -> f(s_t, s_u, s).movedim(0, d)   elementwise,
//                              t and u moved from the same d, of one rank,
//                              s a number or 0-d
//   r(t, dims, keepdim)     -> r(s, dims') [.movedim(0, d')]  a reduction
//   g(t, dim)               -> g(s, dim').movedim(0, d)        softmax, cumsum,
//                              sort, topk: the result keeps t's rank
//   t.size(k)               -> s.size(k')
//
// (dims' the same dimensions of s = t.movedim(d, 0)), so that a reduction
// over the selected dimension meets a selection along dimension 0. What
// nothing sinks past stays a view of the dim-0 selection, as before.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

bool leadingSelections(std::shared_ptr<torch::jit::Graph> &graph,
                       PassContext &ctx);

} // namespace staticify
