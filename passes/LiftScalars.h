//===- LiftScalars.h - host scalars read from data -> 0-d device tensors --===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <vector>

namespace staticify {

/// A host scalar read from device data (`int(t)`, `float(t)`, `bool(t)`,
/// their implicit forms, `t.item()`, and the size of a data-dependent tensor
/// such as `where(m)[0].numel()`, which is m's count of nonzero elements)
/// stays on the device as a 0-d tensor, and so does everything computed
/// from it:
///
///   %n = aten::Int(%t); %m = prim::min(%n, 5); %y = aten::mul(%x, %m)
///     -> %n' = t.reshape([]).to(int64); %m' = minimum(%n', 5); %y = mul(%x,
///     %m')
///
/// The region grows from the read through int/float/bool arithmetic,
/// comparisons, min/max, casts, value arguments of tensor ops (`x * n`,
/// `where(c, x, n)`, `masked_fill(m, n)`) and conditions of ifs, which are
/// converted as if-convert does (their scalar results join the region).
/// Ints are int64, floats float64, bools bool; a float passed to a tensor op
/// is first cast to that op's result_type, as a Python float would be. An
/// item() keeps t's dtype and may only be converted (int/float/bool) or
/// passed to a tensor op, since other arithmetic on it has a run-time type.
/// Precondition: *every* use in the region accepts a tensor. A use that
/// needs a host value (a size such as randperm(n), a returned int, a list)
/// leaves the whole region as it was, so lifting never adds a sync; the
/// report names the use.
bool liftScalars(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

/// The dtype a lifted scalar of TorchScript type \p t has: int64 for int,
/// float64 for float, bool for bool.
std::optional<c10::ScalarType> liftedDType(const c10::TypePtr &t);

/// Whether \p node is host scalar arithmetic with a tensor form (`+`, `-`,
/// `*`, `/`, `//`, min, max, comparisons, not/and/or, int()/float()/bool()).
bool isScalarOp(const torch::jit::Node *node);

/// \p t cast to \p dtype (bool: `t != 0`).
torch::jit::Value *castTo(torch::jit::Graph &graph, torch::jit::Value *t,
                          c10::ScalarType dtype,
                          const torch::jit::Node *anchor);

/// Scalar op \p node computed on 0-d tensors \p operands (one per input:
/// lifted values, or host scalars made tensors), with Python's promotion
/// (int to float in mixed arithmetic, true division in float).
torch::jit::Value *
emitScalarOpOnTensors(torch::jit::Graph &graph, torch::jit::Node *node,
                      const std::vector<torch::jit::Value *> &operands);

} // namespace staticify
