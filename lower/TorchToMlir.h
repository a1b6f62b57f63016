//===- TorchToMlir.h - A TorchScript graph as MLIR functions on tensors ---===//
//
// The bridge: the one place that sees both libtorch and MLIR. A graph
// (a method after staticify's rewrites) and an input signature (each
// input's dtype and rank, sizes known or `?`) become two MLIR functions:
//
//   @<name>_shape(inputs as memrefs, memref<i64> seed, memref<Kxi64> sizes)
//       sizes[0] = 1 if the kernel computes what the graph computes for
//       these inputs (every size check the graph would make holds), 0 if
//       not (the caller runs the TorchScript instead, which raises the
//       error or handles the case); then each result's sizes.
//   @<name>(inputs as memrefs, memref<i64> seed, results as memrefs,
//           memref<i64> status)
//       the computation, writing into buffers the caller allocated with
//       the sizes @<name>_shape gave (destination-passing style); status 1,
//       or 0 where a check on values failed (an index out of range: PyTorch
//       raises), and the caller runs the TorchScript instead.
//
// Host values the graph computes from ranks and sizes (what staticify's
// static programs are full of: `dim(x) == 0`, `size(x)[1:]`, loops over a
// shape) are evaluated while building: a branch or loop they decide is
// folded; what depends on a size becomes index arithmetic in both
// functions. An op outside the supported subset stops the lowering, and
// the result names it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "passes/Signature.h"

namespace mlir {
class MLIRContext;
class ModuleOp;
template <typename OpTy> class OwningOpRef;
} // namespace mlir

namespace torch::jit {
struct Graph;
struct Node;
} // namespace torch::jit

namespace staticify::lower {

using staticify::TensorSignature;
using staticify::parseSignature;
using staticify::formatSignature;

/// What the bridge made of a graph.
struct BridgeResult {
  /// Empty when the graph lowered; otherwise why not, naming the op and
  /// its source line ("aten::nonzero at model.py:12: not supported by the
  /// bridge").
  std::string unsupported;
  /// The result signature: dtype and rank of each output (sizes -1).
  std::vector<TensorSignature> results;
  /// Whether the graph draws random numbers: the caller passes a fresh
  /// seed on each call (from PyTorch's default generator).
  bool random = false;
};

/// The device a kernel runs on: what `x.is_cuda` is inside it, and whether
/// its shape function may read a tensor's values (on the CPU only: on a GPU
/// that read is a sync).
enum class KernelDevice { Cpu, Cuda };

/// Builds `@<name>_shape` and `@<name>` for \p graph into \p module.
/// \p graph's first input is the module (`self`) when \p hasSelf.
BridgeResult buildFunctions(const torch::jit::Graph &graph, bool hasSelf,
                            const std::vector<TensorSignature> &signature,
                            const std::string &name, mlir::ModuleOp module,
                            KernelDevice device = KernelDevice::Cpu);

/// Every operator the bridge lowers, by qualified schema name
/// ("aten::add.Tensor"), or by symbol for nodes without a schema
/// ("prim::ListConstruct"); sorted.
std::vector<std::string> loweredOperators();
/// The key \p node is lowered by in loweredOperators(): its schema's
/// qualified name with the overload ("aten::add.int"), else its kind.
std::string loweringKey(const torch::jit::Node *node);

using staticify::dtypeName;

} // namespace staticify::lower
