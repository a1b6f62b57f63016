//===- EmptyTestedBranches.h - Reads and stores under a non-empty test ----===//
//
// `if idx.numel() > 0: x[idx] = y[idx] - 1` is its branch: see
// EmptyTestedBranches.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

class PassContext;

/// Replaces each if that runs its branch only where a vector has an
/// element, and whose branch does nothing on an empty one (gathers and
/// stores at that vector's rows, arithmetic on them), by the branch.
/// Returns whether it replaced one.
bool emptyTestedBranches(std::shared_ptr<torch::jit::Graph> &graph,
                         PassContext &ctx);

} // namespace staticify
