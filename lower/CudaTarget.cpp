//===- CudaTarget.cpp - Lowered functions to cubins, PTX and host code ----===//
#include "lower/CudaTarget.h"

#include "lower/CpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Target/LLVM/NVVM/Target.h"

#include "llvm/ADT/StringRef.h"

#include <cstdlib>
#include <unistd.h>

namespace staticify::lower {

const char *cudaPipeline() {
  // The CPU pipeline's front half, without the deallocation passes: every
  // buffer a call allocates lives until the call returns (the runtime frees
  // them then, stream-ordered), so no host code inspects device buffers to
  // decide what to free.
  return "staticify-strip-bounds, canonicalize, cse, "
         "staticify-lower-to-ukernels, staticify-lower-scans{chunk=1024}, "
         "staticify-lower-scatters{parallel=1}, "
         "linalg-fuse-elementwise-ops, "
         // A whole-vector reduction: parallel partials, then the partials.
         "staticify-split-reductions, "
         "canonicalize, cse, eliminate-empty-tensors, "
         "one-shot-bufferize{bufferize-function-boundaries=1 "
         "function-boundary-type-conversion=identity-layout-map}, "
         "canonicalize, cse, scf-forall-to-parallel, "
         "linalg-generalize-named-ops, staticify-parallel-dims-first, "
         "convert-linalg-to-parallel-loops, canonicalize, "
         "cse, "
         // Host code touching device memory -> one-thread kernels; parallel
         // loops -> blocks of 256 threads (a guard in each thread, no
         // min/max bounds: the mapping wants constant block sizes).
         "staticify-gpu-serial-regions, "
         "func.func(scf-parallel-loop-tiling{parallel-loop-tile-sizes=256 "
         "no-min-max-bounds=1}, gpu-map-parallel-loops, "
         "convert-parallel-loops-to-gpu), "
         "gpu-launch-sink-index-computations, gpu-kernel-outlining, "
         "staticify-gpu-launch-to-runtime, canonicalize, cse";
}

namespace {

/// The device side, after nvvm-attach-target: on to the NVVM dialect.
const char *kDevicePipeline =
    "gpu.module(expand-strided-metadata, lower-affine, convert-scf-to-cf, "
    "convert-gpu-to-nvvm, canonicalize, cse, reconcile-unrealized-casts)";

/// The host side, once the device code is out: launches are calls, buffers
/// come from the runtime (use-generic-functions: _mlir_memref_to_llvm_*).
const char *kHostPipeline =
    "expand-strided-metadata, lower-affine, "
    "finalize-memref-to-llvm{use-generic-functions=1}, convert-scf-to-cf, "
    "convert-to-llvm, canonicalize, reconcile-unrealized-casts";

const char *const kHostSupportSource =
#include "lower/UkernelsCudaHost.inc"
    ;

bool allowedHostUndefined(::llvm::StringRef name) {
  // Only what cuda_host.c defines; libc's memcpy and memset for small
  // host-side copies.
  static const char *const allowed[] = {"_mlir_memref_to_llvm_alloc",
                                        "_mlir_memref_to_llvm_aligned_alloc",
                                        "_mlir_memref_to_llvm_free",
                                        "staticify_cuda_launch",
                                        "memcpy",
                                        "memset"};
  if (name.starts_with("_mlir_ciface_staticify_"))
    return true;
  for (const char *a : allowed)
    if (name == a)
      return true;
  return false;
}

std::string toolkitPath() {
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *v = getenv(var); v && *v)
      return v;
  return "/usr/local/cuda";
}

int chipNumber(const std::string &chip) {
  if (chip.size() < 5 || chip.compare(0, 3, "sm_") != 0)
    return -1;
  char *end = nullptr;
  long n = strtol(chip.c_str() + 3, &end, 10);
  return *end == '\0' && n > 0 ? int(n) : -1;
}

/// The objects of the module's one gpu.binary, by chip.
std::vector<std::pair<std::string, std::string>>
binaryObjects(mlir::ModuleOp module) {
  std::vector<std::pair<std::string, std::string>> out;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute a : binary.getObjects()) {
      auto object = mlir::cast<mlir::gpu::ObjectAttr>(a);
      auto target = mlir::cast<mlir::NVVM::NVVMTargetAttr>(object.getTarget());
      out.emplace_back(target.getChip().str(),
                       object.getObject().getValue().str());
    }
  });
  return out;
}

} // namespace

std::string validateCudaTargets(const CudaTargets &targets) {
  // The first PTX ISA each chip accepts (PTX ISA release notes).
  auto minimumPtx = [](int chip) {
    return chip >= 120   ? 87
           : chip >= 100 ? 86
           : chip >= 89  ? 78
           : chip == 87  ? 74
           : chip >= 86  ? 71
                         : 70;
  };
  if (targets.ptxVersion < 70 || targets.ptxVersion > 90)
    return "PTX ISA " + std::to_string(targets.ptxVersion) +
           " is outside 7.0-9.0";
  std::vector<std::string> chips = targets.cubinChips;
  chips.push_back(targets.ptxChip);
  for (const std::string &chip : chips) {
    int n = chipNumber(chip);
    if (n < 70)
      return "'" + chip +
             "' is not a CUDA architecture staticify targets "
             "(sm_70 or newer)";
    if (targets.ptxVersion < minimumPtx(n))
      return chip + " needs PTX ISA " + std::to_string(minimumPtx(n)) +
             " or later, not " + std::to_string(targets.ptxVersion);
  }
  return "";
}

CompiledCuda compileForCuda(mlir::ModuleOp module, const std::string &kernel,
                            size_t numInputs, const CudaTargets &targets) {
  CompiledCuda out;
  if (std::string bad = validateCudaTargets(targets); !bad.empty()) {
    out.error = "invalid CUDA target: " + bad;
    return out;
  }
  std::string toolkit = toolkitPath();
  if (access((toolkit + "/bin/ptxas").c_str(), X_OK) != 0) {
    out.error = "no CUDA toolkit at " + toolkit +
                " (ptxas not found): set CUDA_HOME to the toolkit's directory";
    return out;
  }
  // Host memory: the seed and the shape function's sizes.
  mlir::MLIRContext *ctx = module.getContext();
  auto hostMemory = mlir::UnitAttr::get(ctx);
  for (auto fn : module.getOps<mlir::func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    if (fn.getName() == kernel + "_shape") {
      fn->setAttr("staticify.host_only", hostMemory);
      for (unsigned i = numInputs; i < fn.getNumArguments(); ++i)
        fn.setArgAttr(i, "staticify.host", hostMemory);
    } else if (fn.getName() == kernel && numInputs < fn.getNumArguments()) {
      fn.setArgAttr(numInputs, "staticify.host", hostMemory);
    }
  }
  if (std::string e = runPipeline(module, cudaPipeline()); !e.empty()) {
    out.error = "the CUDA pipeline failed: " + e;
    return out;
  }
  if (auto names =
          module->getAttrOfType<mlir::ArrayAttr>("staticify.cuda_kernels"))
    for (mlir::Attribute a : names)
      out.kernels.push_back(mlir::cast<mlir::StringAttr>(a).str());

  // The device code: cubins for each chip, and PTX (from a copy: one
  // gpu-module-to-binary replaces the gpu.module).
  std::string attach;
  std::string ptx = "+ptx" + std::to_string(targets.ptxVersion);
  for (const std::string &chip : targets.cubinChips)
    attach +=
        "nvvm-attach-target{chip=" + chip + " features=" + ptx + " O=3}, ";
  std::string device = attach + kDevicePipeline;
  if (!out.kernels.empty()) {
    if (std::string e = runPipeline(module, device); !e.empty()) {
      out.error = "the CUDA device pipeline failed: " + e;
      return out;
    }
    mlir::OwningOpRef<mlir::ModuleOp> forPtx(module.clone());
    // Keep only the PTX chip's target on the copy.
    forPtx->walk([&](mlir::gpu::GPUModuleOp m) {
      m.setTargetsAttr(mlir::ArrayAttr::get(
          ctx, {mlir::NVVM::NVVMTargetAttr::get(ctx, 3, "nvptx64-nvidia-cuda",
                                                targets.ptxChip, ptx)}));
    });
    auto toBinary = [&](const char *format) {
      return std::string("gpu-module-to-binary{format=") + format +
             " toolkit=" + toolkit + "}";
    };
    if (std::string e = runPipeline(*forPtx, toBinary("isa")); !e.empty()) {
      out.error = "PTX generation failed: " + e;
      return out;
    }
    if (std::string e = runPipeline(module, toBinary("bin")); !e.empty()) {
      out.error = "cubin generation (ptxas) failed: " + e;
      return out;
    }
    for (auto &[chip, bytes] : binaryObjects(module))
      out.images.emplace_back(chip, bytes);
    for (auto &[chip, bytes] : binaryObjects(*forPtx))
      out.images.emplace_back(chip + ".ptx", bytes);
    ::llvm::SmallVector<mlir::gpu::BinaryOp> binaries;
    module.walk([&](mlir::gpu::BinaryOp b) { binaries.push_back(b); });
    for (mlir::gpu::BinaryOp b : binaries)
      b.erase();
  }
  module->removeAttr("gpu.container_module");

  if (std::string e = runPipeline(module, kHostPipeline); !e.empty()) {
    out.error = "the CUDA host pipeline failed: " + e;
    return out;
  }
  CompiledObject host =
      emitSharedObject(module, kHostSupportSource, allowedHostUndefined);
  out.loweredMlir = std::move(host.loweredMlir);
  if (host.sharedObject.empty()) {
    out.error = host.error;
    return out;
  }
  out.hostObject = std::move(host.sharedObject);
  return out;
}

} // namespace staticify::lower
