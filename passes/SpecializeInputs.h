//===- SpecializeInputs.h - A method versioned on its inputs' metadata ----===//
//
// TorchScript records neither the dtype nor the rank of a method's tensor
// inputs, and some rewrites depend on them:
//
// - `obs[valid]` with `valid` a graph input: a bool `valid` selects (a host
//   sync, which the rewrites remove), an int64 one gathers (static).
// - `preds.masked_select(~isnan(target))` broadcasts preds and the mask:
//   its count is the mask's own, shared with `target[~isnan(target)]`,
//   only where preds has target's shape.
// - `x[m.nonzero().squeeze(1)]` is `x[torch.where(m)[0]]`, a selection the
//   rewrites know, only for a 1-D m; nn.Linear experts applied to `x[idx]`
//   keep the selected rows apart only for an x of two dimensions or more.
//
// The compiler cannot tell; the host can, from metadata, without a sync.
// `specialize-dtypes`, `specialize-ranks` and `specialize-shapes` version
// the method on it:
//
//   if valid.dtype == torch.bool:      # a guard (guardAttr); or x.dim() == r,
//                                      # or x.size() == y.size()
//       <the body, valid read as valid.to(torch.bool)>   # a known mask; or x
//                                      # read as x.view([x.size(0), ...]):
//                                      # a known rank; or x.expand_as(y):
//                                      # y's shape
//   else:
//       <the body as it was>            # the fallback: anything else
//
// `.to(torch.bool)` of a bool tensor is the tensor itself, and a view of x
// with x's own sizes is x, so the first version computes what the original
// does. The first version's spellings are made canonical again
// (CanonicalForms.h: a nonzero made a vector is where(m)[0] once m's rank
// is known, a masked_select of a base of its mask's shape is x[m]). Facts
// on graph inputs version the whole body; a shape fact on values the
// method computes (`logits.argmax(-1)` against `labels`) versions what
// follows their definitions.
//
// Which inputs: for dtypes, one given to indexing or an indexed store,
// directly or through ops that keep its dtype (views, clone, a move to a
// device); for ranks, one of unknown rank from which a data-dependent shape
// (nonzero, a selection) is computed, tried at ranks 1 to 3 in turn; for
// shapes, the values whose shapes a masked_select's base and mask keep
// (shapeRoot), where the graph does not show them equal.
//
// The copy is made only where it removes a sync: the rewrites after it are
// tried on both (RewriteTrial), and the versioned method must reach the
// host at fewer points than the method as it is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// The attribute (besides guardAttr()) of the ifs these passes make: 1
/// where specialize-dtypes made it, kSpecializedRanks where
/// specialize-ranks did, kSpecializedShapes where specialize-shapes did.
inline c10::Symbol specializedAttr() {
  return c10::Symbol::attr("staticify_specialized");
}
constexpr int64_t kSpecializedRanks = 2;
constexpr int64_t kSpecializedShapes = 3;

/// The pass `specialize-dtypes`; returns whether the graph changed.
bool specializeDTypes(std::shared_ptr<torch::jit::Graph> &graph,
                      PassContext &ctx);

/// The pass `specialize-ranks`; returns whether the graph changed.
bool specializeRanks(std::shared_ptr<torch::jit::Graph> &graph,
                     PassContext &ctx);

/// The pass `specialize-shapes`; returns whether the graph changed.
bool specializeShapes(std::shared_ptr<torch::jit::Graph> &graph,
                      PassContext &ctx);

} // namespace staticify
