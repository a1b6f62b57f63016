//===- SpecializeTraining.h - The saved training flags as constants -------===//
//
// `--specialize-training`: every read of a submodule's `training` flag
// becomes the flag's saved value (as torch.jit.freeze does for an eval
// module), so `normalize` removes the branches of the other mode before the
// analysis sees them. An eval export of a detector then carries no loss,
// matcher or sampler code. Off by default: a module trained after export
// would keep its eval branches; the report lists the pass when it ran.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// Replaces `self.<path>.training` reads (a chain of prim::GetAttr from the
/// graph's first input) by PassOptions::savedTraining's answer for the path.
/// Returns whether the graph changed.
bool specializeTraining(std::shared_ptr<torch::jit::Graph> &graph,
                        PassContext &ctx);

} // namespace staticify
