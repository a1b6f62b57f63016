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

/// The dtype of \p out, a result of \p node.
DTypeKind inferDType(const torch::jit::Node *node, const torch::jit::Value *out,
                     const DTypeOf &dtypeOf);

} // namespace staticify
