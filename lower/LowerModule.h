//===- LowerModule.h - `staticify --lower` on a module's methods ---------===//
#pragma once

#include "lower/TorchToMlir.h"

#include <torch/script.h>

#include <string>
#include <vector>

namespace staticify::lower {

/// What happened to one method.
struct LoweringOutcome {
  std::string method;
  bool lowered = false;
  /// Why not (the unsupported op and its line, or a compile error); empty
  /// when lowered.
  std::string reason;
  std::string mlir;       // the functions on tensors, before lowering
  size_t kernelBytes = 0; // the CPU shared object's size
  double seconds = 0;     // bridge + compile + link
  /// --lower=cuda: whether the CUDA target compiled, why not, and what it
  /// made: the number of kernels and each image's size ("sm_80": bytes).
  bool cudaLowered = false;
  std::string cudaReason;
  size_t cudaKernels = 0;
  std::vector<std::pair<std::string, size_t>> cudaImages;
};

/// The targets to compile for: the CPU (a kernel for CPU tensors) and CUDA
/// (cubins and PTX, and host code that launches on PyTorch's stream).
struct LoweringTargets {
  bool cpu = true;
  bool cuda = false;
};

/// Compiles \p method of \p module (its graph as staticify left it) for
/// CPU inputs of \p signature. On success the method becomes a call to a
/// `torch.classes.staticify.LoweredMethod` attribute holding the kernel
/// and the method's TorchScript (run for any other input); on failure the
/// method is left as it is and the outcome says why.
/// With \p targets.cuda, the same for CUDA tensors; the method is
/// replaced when at least one target compiled.
LoweringOutcome lowerMethod(torch::jit::Module &module,
                            const std::string &method,
                            const std::vector<TensorSignature> &signature,
                            const LoweringTargets &targets = {});

} // namespace staticify::lower
