//===- CpuTarget.cpp - Lowered functions to a shared object for this CPU --===//
#include "lower/CpuTarget.h"

#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/Extensions/AllExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace staticify::lower {

void registerLoweringDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::affine::AffineDialect, mlir::arith::ArithDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect,
                  mlir::linalg::LinalgDialect, mlir::LLVM::LLVMDialect,
                  mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::tensor::TensorDialect,
                  staticify::mlir_dialect::StaticifyDialect>();
  mlir::arith::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  mlir::linalg::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::scf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::tensor::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

void registerLoweringPasses() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    mlir::registerAllPasses();
    staticify::mlir_dialect::registerStaticifyPasses();
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

const char *cpuPipeline() {
  // shared/MLIR-NOTES.md: module-anchored, not wrapped in builtin.module().
  return "staticify-strip-bounds, canonicalize, cse, "
         "staticify-lower-to-ukernels, staticify-lower-scans, "
         "staticify-lower-scatters, "
         "linalg-fuse-elementwise-ops, "
         "canonicalize, cse, eliminate-empty-tensors, "
         "one-shot-bufferize{bufferize-function-boundaries=1 "
         "function-boundary-type-conversion=identity-layout-map}, "
         "canonicalize, cse, "
         // Every buffer bufferization allocated is freed on every path.
         "ownership-based-buffer-deallocation, canonicalize, "
         "buffer-deallocation-simplification, "
         "bufferization-lower-deallocations, "
         "canonicalize, cse, convert-linalg-to-loops, convert-scf-to-cf, "
         "expand-strided-metadata, lower-affine, "
         // Buffers from the ukernels' cache (_mlir_memref_to_llvm_*).
         "finalize-memref-to-llvm{use-generic-functions=1}, "
         "convert-to-llvm, reconcile-unrealized-casts";
}

namespace {

std::string runCommand(const std::vector<std::string> &argv) {
  std::string cmd;
  for (const std::string &a : argv)
    cmd += "'" + a + "' ";
  cmd += "2>&1";
  FILE *pipe = popen(cmd.c_str(), "r");
  if (!pipe)
    return "could not run " + argv[0];
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe))
    out.append(buf, n);
  int status = pclose(pipe);
  if (status != 0)
    return argv[0] + " failed: " + out;
  return "";
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// The ukernels (lower/ukernels/cpu.c), linked into every kernel: MLIR's
/// `memrefCopy` (bufferization's copy between strided buffers, for a slice
/// write such as `cat`) and the primitives linalg does not express well
/// (top-k selection, random permutation).
const char *const kSupportSource =
#include "lower/UkernelsCpu.inc"
    ;

/// Symbols the object may take from the process: libc's and libm's, and
/// those kSupportSource defines.
bool allowedUndefined(llvm::StringRef name) {
  static const char *const allowed[] = {
      "malloc",        "free",           "memcpy", "memset",    "memmove",
      "aligned_alloc", "posix_memalign", "abort",  "memrefCopy"};
  if (name.starts_with("_mlir_ciface_staticify_") ||
      name.starts_with("_mlir_memref_to_llvm_"))
    return true; // the ukernels, and their buffer cache
  for (const char *a : allowed)
    if (name == a)
      return true;
  // libm's functions (expf, logf, tanhf, ...) that math lowering may call.
  static const char *const mathPrefixes[] = {
      "exp",  "log",  "tanh",  "sin",  "cos",   "sqrt",  "erf", "pow",
      "fmod", "atan", "floor", "ceil", "round", "trunc", "fabs"};
  for (const char *p : mathPrefixes)
    if (name.starts_with(p))
      return true;
  return false;
}

} // namespace

std::string runPipeline(mlir::ModuleOp module, const std::string &pipeline) {
  registerLoweringPasses();
  mlir::MLIRContext *ctx = module.getContext();
  mlir::PassManager pm(ctx);
  std::string errors;
  llvm::raw_string_ostream errStream(errors);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, errStream)))
    return "the pass pipeline did not parse: " + errors;
  mlir::ScopedDiagnosticHandler handler(ctx, [&](mlir::Diagnostic &d) {
    errStream << d.str() << "\n";
    return mlir::success();
  });
  if (mlir::failed(pm.run(module)))
    return errors.empty() ? std::string("a pass failed") : errors;
  return "";
}

CompiledObject compileForCpu(mlir::ModuleOp module) {
  if (std::string error = runPipeline(module, cpuPipeline()); !error.empty()) {
    CompiledObject out;
    out.error = "the CPU pass pipeline failed: " + error;
    return out;
  }
  return emitSharedObject(module, kSupportSource, allowedUndefined);
}

CompiledObject emitSharedObject(mlir::ModuleOp module, const char *support,
                                bool (*allowed)(::llvm::StringRef)) {
  CompiledObject out;
  {
    llvm::raw_string_ostream s(out.loweredMlir);
    module.print(s);
  }
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule) {
    out.error = "translation to LLVM IR failed";
    return out;
  }
  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), lookupError);
  if (!target) {
    out.error = "no LLVM target for " + triple + ": " + lookupError;
    return out;
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      llvm::Triple(triple), "generic", "", options, llvm::Reloc::PIC_));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(llvm::Triple(triple));
  auto optimize = mlir::makeOptimizingTransformer(3, 0, machine.get());
  if (llvm::Error e = optimize(llvmModule.get())) {
    out.error = "LLVM optimization failed: " + llvm::toString(std::move(e));
    return out;
  }
  for (const llvm::Function &f : *llvmModule)
    if (f.isDeclaration() && !f.isIntrinsic() && !allowed(f.getName())) {
      out.error = "the kernel needs '" + f.getName().str() +
                  "', which the runtime does not provide";
      return out;
    }
  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile)) {
      out.error = "LLVM cannot emit an object for " + triple;
      return out;
    }
    codegen.run(*llvmModule);
  }
  // Link: the system's compiler driver (g++ is a build dependency).
  char dir[] = "/tmp/staticify-lower-XXXXXX";
  if (!mkdtemp(dir)) {
    out.error = "cannot make a temporary directory";
    return out;
  }
  std::string obj = std::string(dir) + "/kernel.o",
              so = std::string(dir) + "/kernel.so",
              supportFile = std::string(dir) + "/support.c";
  {
    std::ofstream f(obj, std::ios::binary);
    f.write(object.data(), object.size());
    std::ofstream c(supportFile);
    c << support;
  }
  // -Bsymbolic: the kernel's own functions (its ukernels, memrefCopy) bind
  // within it, never to another kernel's or a library's of the same name.
  const char *cc = getenv("STATICIFY_CC");
  std::string linkError = runCommand({cc && *cc ? cc : "cc", "-shared", "-fPIC",
                                      "-O2", "-nostartfiles", "-Wl,-Bsymbolic",
                                      "-o", so, obj, supportFile, "-lm"});
  if (linkError.empty())
    out.sharedObject = readFile(so);
  // For profiling and debugging: STATICIFY_KEEP_KERNELS=DIR keeps each
  // kernel (with its symbols) and the LLVM-dialect module it came from.
  if (const char *keep = getenv("STATICIFY_KEEP_KERNELS");
      keep && *keep && linkError.empty()) {
    static int counter = 0;
    std::string base = std::string(keep) + "/kernel-" +
                       std::to_string(getpid()) + "-" +
                       std::to_string(counter++);
    std::ofstream(base + ".so", std::ios::binary) << out.sharedObject;
    std::ofstream(base + ".mlir") << out.loweredMlir;
  }
  if (!linkError.empty())
    out.error = "linking the kernel: " + linkError;
  unlink(obj.c_str());
  unlink(so.c_str());
  unlink(supportFile.c_str());
  rmdir(dir);
  return out;
}

} // namespace staticify::lower
