//===- DTypes.h - The dtype facts of the analysis -------------------------===//
//
// Just enough dtype knowledge to tell a boolean mask from an index tensor:
// a result's dtype from its TorchScript type when it says, else from the
// op's dtype rule (OpInfo::dtype), an explicit `dtype` argument, and the
// dtypes of its operands (\p dtypeOf, the analysis's current facts).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"

#include <torch/csrc/jit/ir/ir.h>

#include <functional>

namespace staticify {

using DTypeOf = std::function<DTypeKind(const torch::jit::Value *)>;

/// The dtype kind of scalar type \p t.
DTypeKind dtypeKindOf(c10::ScalarType t);

/// Whether an analysis has reached a value yet (its dtype is a fact).
using Reached = std::function<bool(const torch::jit::Value *)>;

/// The dtype of \p out, a result of \p node. With \p reached, a tensor
/// read out of a container takes the dtype of those it holds that the
/// analysis has reached: one appended later in the program is not there
/// yet, and one appended later in a loop's body the analysis reaches on its
/// next pass over the body, which repeats until no dtype changes.
DTypeKind inferDType(const torch::jit::Node *node, const torch::jit::Value *out,
                     const DTypeOf &dtypeOf, const Reached *reached = nullptr);

} // namespace staticify
