//===- LowerModule.h - `staticify --lower=cpu` on a module's methods ------===//
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
  size_t kernelBytes = 0; // the shared object's size
  double seconds = 0;     // bridge + compile + link
};

/// Compiles \p method of \p module (its graph as staticify left it) for
/// CPU inputs of \p signature. On success the method becomes a call to a
/// `torch.classes.staticify.LoweredMethod` attribute holding the kernel
/// and the method's TorchScript (run for any other input); on failure the
/// method is left as it is and the outcome says why.
LoweringOutcome
lowerMethodForCpu(torch::jit::Module &module, const std::string &method,
                  const std::vector<TensorSignature> &signature);

} // namespace staticify::lower
