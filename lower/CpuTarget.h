//===- CpuTarget.h - Lowered functions to a shared object for this CPU ----===//
//
// MLIR and LLVM only (no libtorch): a module of functions on tensors in
// destination-passing style (TorchToMlir.h) becomes an object file compiled
// in-process by LLVM, linked into a small shared object by the system's C
// compiler driver. The runtime loads the bytes from memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace mlir {
class ModuleOp;
class DialectRegistry;
} // namespace mlir

namespace staticify::lower {

/// The dialects the bridge emits and the CPU pipeline needs, with their
/// bufferization and LLVM-translation interfaces.
void registerLoweringDialects(mlir::DialectRegistry &registry);

struct CompiledObject {
  std::string sharedObject; // the .so's bytes; empty on failure
  std::string error;        // why, when empty
  std::string loweredMlir;  // the module after the pass pipeline (LLVM dialect)
};

/// Runs the CPU pipeline on \p module (in place), translates it to LLVM IR,
/// optimizes at -O3 for the host CPU's generic features (the object runs on
/// any x86-64/AArch64 of the same architecture), emits an object and links
/// it with `cc -shared`. A symbol left undefined other than libc's and
/// libm's is an error (the runtime loads the object without MLIR's runner
/// libraries).
CompiledObject compileForCpu(mlir::ModuleOp module);

/// The pass pipeline compileForCpu runs, as `mlir-opt --pass-pipeline` text.
const char *cpuPipeline();

} // namespace staticify::lower
