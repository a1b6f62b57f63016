//===- MaskPropagate.h - f(x[m], y[m]) -> f(x, y)[m] ----------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// Moves a mask past elementwise ops so that it is applied once, at the
/// consumer (where masked-reduce or mask-store take it):
///
///   f(x[m], y[m], s)   ->  f(x, y, s)[m]          (s a number or 0-d)
///   x[m][g[m]]         ->  x[m' & g]              (m' = m broadcast to g)
///
/// Preconditions, checked first: every tensor operand of f is a selection by
/// the very same mask value or provably 0-d; the selected tensors provably
/// have the same rank (so their trailing dimensions broadcast the same way
/// with and without the mask); f never raises on values (no integer
/// division, remainder or pow), since it now also runs on unselected
/// elements.
bool maskPropagate(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
