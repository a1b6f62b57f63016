//===- Batch.h - A static method as a batched one ---------------*- C++ -*-===//
//
// `--batch`: for a static method M, the method `M_batched` in which every
// tensor argument and result has a leading batch dimension and row b is what
// M computes on row b (vmap's semantics; each row draws its own random
// numbers). Each value of M is batched (a leading dimension of B rows) or
// shared by every row (host numbers, sizes, what no batched value reaches,
// the module's weights); each op is rewritten by the rule of its class in
// the op table (passes/OpInfo.h): an elementwise op aligns its batched
// operands' ranks, an op along a dimension (`rowDims`) or a reduction works
// one dimension further, shape reads drop the batch dimension, an op batched
// on its first operand (`sampleRank`: linear, convolutions) takes the rows as
// its batch, indexing indexes within each row, and a random op draws per row
// (randperm: the order of B x n uniform keys). An op with no rule, or one the
// rule cannot show row-wise, is named and the method is not added.
//
// Per-row ranks come from one example run of M on inputs of the signature
// (`--input-types`); a value that run does not reach and whose rank a rule
// needs is named too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Signature.h"

#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

namespace staticify {

struct BatchOutcome {
  /// The method added (`forward_batched`), or "" when none was.
  std::string method;
  /// Why none was: the first op or value without a batched form.
  std::string reason;
};

/// Adds `<method>_batched` to \p module for \p method (already processed:
/// static, inlined), whose tensor arguments have \p signature.
BatchOutcome addBatchedMethod(torch::jit::Module &module,
                              const std::string &method,
                              const std::vector<TensorSignature> &signature);

} // namespace staticify
