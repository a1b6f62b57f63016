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

namespace llvm {
class StringRef;
}
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

/// Registers MLIR's passes and staticify's, and LLVM's native target (once).
void registerLoweringPasses();

/// Runs \p pipeline (mlir-opt --pass-pipeline text, module-anchored) on
/// \p module; the diagnostics if it fails, else empty.
std::string runPipeline(mlir::ModuleOp module, const std::string &pipeline);

/// Translates \p module (LLVM dialect) to LLVM IR, optimizes it at -O3 for
/// the host, emits an object and links it with \p support (C source) into a
/// shared object. A function the object leaves undefined must satisfy
/// \p allowed.
CompiledObject emitSharedObject(mlir::ModuleOp module, const char *support,
                                bool (*allowed)(::llvm::StringRef));

/// The pass pipeline compileForCpu runs, as `mlir-opt --pass-pipeline` text.
const char *cpuPipeline();

} // namespace staticify::lower
