//===- CudaTarget.h - Lowered functions to cubins, PTX and host code ------===//
//
// MLIR and LLVM only (no libtorch): the bridge's functions (TorchToMlir.h)
// become device code (one gpu.module: a cubin for each of sm_80 and sm_90,
// and PTX that newer GPUs compile when they load it) and host code (sizes,
// buffers, launches) in a shared object for this CPU, which launches
// through the runtime's table on PyTorch's current stream
// (lower/ukernels/cuda_host.c, runtime/LoweredCuda.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace staticify::lower {

struct CompiledCuda {
  std::string error;                // why not, when hostObject is empty
  std::string hostObject;           // the host code's .so
  std::vector<std::string> kernels; // by launch index
  std::vector<std::pair<std::string, std::string>> images; // "sm_80", cubin...
  std::string loweredMlir; // the host module after its pipeline
};

/// The GPUs the cubins are for, and the PTX ISA they are written in
/// (checked against each other before LLVM sees them: a PTX version the
/// chip does not accept aborts the process inside LLVM).
struct CudaTargets {
  std::vector<std::string> cubinChips{"sm_80", "sm_90"};
  std::string ptxChip = "sm_90"; // PTX for this chip and every newer one
  int ptxVersion = 80;           // PTX ISA 8.0 (CUDA 12.0 and later)
};

/// Why \p targets is not a valid combination, or empty.
std::string validateCudaTargets(const CudaTargets &targets);

/// Compiles \p module (the bridge's shape function `<kernel>_shape` and the
/// kernel \p kernel, on tensors) for CUDA, in place. The kernel's first
/// \p numInputs arguments are its inputs; the argument after them (the seed)
/// and the shape function's seed and sizes are host memory, every other buffer
/// device memory. Fails, saying why, when the code would read device memory on
/// the host.
CompiledCuda compileForCuda(mlir::ModuleOp module, const std::string &kernel,
                            size_t numInputs, const CudaTargets &targets = {});

/// The pipeline up to the host/device split, as `--pass-pipeline` text.
const char *cudaPipeline();

} // namespace staticify::lower
