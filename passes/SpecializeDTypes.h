//===- SpecializeDTypes.h - A method versioned on its inputs' dtypes ------===//
//
// `obs[valid]` with `valid` a graph input: a bool `valid` selects (a host
// sync, which the rewrites remove), an int64 one gathers (static). The
// compiler cannot tell which; the host can, from metadata, without a sync.
// `specialize-dtypes` versions the method on it:
//
//   if valid.dtype == torch.bool:      # a guard (guardAttr)
//       <the body, valid read as valid.to(torch.bool): a known mask>
//   else:
//       <the body as it was>            # the fallback: anything else
//
// `.to(torch.bool)` of a bool tensor is the tensor itself, so the first
// version computes what the original does, and the rewrites then see a
// mask. Inputs are specialized only where their dtype would decide an
// index: one given to indexing or an indexed store, directly or through
// ops that keep its dtype (views, clone, a move to a device).
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

/// The attribute (besides guardAttr()) of the if specialize-dtypes makes.
inline c10::Symbol specializedAttr() {
  return c10::Symbol::attr("staticify_specialized");
}

/// The pass `specialize-dtypes`; returns whether the graph changed.
bool specializeDTypes(std::shared_ptr<torch::jit::Graph> &graph,
                      PassContext &ctx);

} // namespace staticify
