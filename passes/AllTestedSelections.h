//===- AllTestedSelections.h - x[m] under its own all-test ----------------===//
//
// `if not m.all(): x = x[m]` is `x = x[m]`: see AllTestedSelections.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

class PassContext;

/// Replaces each if that selects tensors by a mask m only where not every
/// element of m holds, and passes them on otherwise, by the selections,
/// behind a host guard on m's dtype (bool), rank (1) and rows (the
/// tensors'); the if, and what only it reads, moves into the guard's
/// fallback. Returns whether it replaced one.
bool allTestedSelections(std::shared_ptr<torch::jit::Graph> &graph,
                         PassContext &ctx);

} // namespace staticify
