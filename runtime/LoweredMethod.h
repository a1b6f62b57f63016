//===- LoweredMethod.h - A method compiled to a CPU kernel, with fallback -===//
//
// `torch.classes.staticify.LoweredMethod(module, name, kernel, signature,
// results, mlir, flags, cuda)` holds a method's TorchScript (a small module, as
// bytes) and the shared object `staticify --lower=cpu` compiled from it (bytes;
// the MLIR it came from is kept for provenance). `run(inputs)` calls the
// kernel when the inputs are contiguous CPU tensors of the signature's
// dtypes and ranks and the kernel's shape function accepts their sizes;
// otherwise it runs the TorchScript. No LLVM or MLIR is needed to load or
// run it: the object is loaded from memory (memfd_create + dlopen).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/custom_class.h>
#include <torch/script.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace staticify {

class LoweredMethod : public torch::CustomClassHolder {
public:
  LoweredMethod(std::string module, std::string name, std::string kernel,
                std::string signature, std::string results, std::string mlir,
                std::string flags, std::string cuda = "");
  ~LoweredMethod() override;

  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs);

  std::vector<std::string> state() const {
    return {module_,  name_, kernel_, signature_,
            results_, mlir_, flags_,  cuda_};
  }
  /// How many calls the kernel answered, and how many ran the TorchScript
  /// (of those, how many the shape function and how many the kernel's
  /// value checks turned away; the rest did not match the signature).
  std::vector<int64_t> counts() const {
    return {kernelCalls_.load(), fallbackCalls_.load(), rejectedShapes_.load(),
            rejectedValues_.load()};
  }
  std::string mlir() const { return mlir_; }
  /// The CUDA images `--lower=cuda` stored ("host": the host code's shared
  /// object; "kernels": their names; "sm_80", "sm_90": cubins;
  /// "sm_90.ptx"), by name; an empty list without them.
  std::vector<std::string> cudaImageNames() const;
  /// One of them, as bytes (a uint8 tensor).
  at::Tensor cudaImage(const std::string &name) const;
  /// Calls the CUDA kernels answered (a subset of counts()[0]).
  int64_t cudaCalls() const { return cudaCalls_; }
  std::string signature() const { return signature_; }

private:
  struct Arg {
    c10::ScalarType dtype;
    std::vector<int64_t> sizes; // -1: any
  };
  std::string module_, name_, kernel_, signature_, results_, mlir_;
  /// "random": the kernel draws random numbers, from a seed this object
  /// takes from PyTorch's default CPU generator on each call.
  std::string flags_;
  /// --lower=cuda: length-prefixed (name, bytes) records; "" without.
  std::string cuda_;
  std::vector<std::pair<std::string, std::string>> cudaImages_;
  torch::jit::Module fallback_;
  std::vector<Arg> inputs_, outputs_;
  void *handle_ = nullptr;
  int fd_ = -1; // the memfd holding the kernel, open while it is loaded
  void *shapeFn_ = nullptr, *kernelFn_ = nullptr;
  std::atomic<int64_t> kernelCalls_{0}, fallbackCalls_{0}, rejectedShapes_{0},
      rejectedValues_{0}, cudaCalls_{0};
  std::once_flag cpuLoaded_, cudaLoaded_;
  /// The CUDA host code (its own shared object) and, per device, the
  /// loaded module (runtime/LoweredCuda.cpp; opaque here).
  void *cudaHandle_ = nullptr;
  int cudaFd_ = -1;
  /// Its shape function, kernel and staticify_cuda_enter, looked up once.
  void *cudaShapeFn_ = nullptr, *cudaKernelFn_ = nullptr, *cudaEnter_ = nullptr;
  struct CudaState;
  std::shared_ptr<CudaState> cudaState_;

  const std::string *cudaImageBytes(const std::string &name) const;
  /// The descriptors of \p inputs and \p seed; runs \p shapeFn and, if it
  /// accepts the sizes, allocates the results on \p device and adds theirs.
  /// False when the shape function turns the sizes away.
  bool prepareCall(void *shapeFn, const std::vector<at::Tensor> &inputs,
                   int64_t *seed, c10::Device device,
                   std::vector<std::vector<int64_t>> &descs,
                   std::vector<at::Tensor> &results) const;
  bool matchesSignature(const std::vector<at::Tensor> &inputs,
                        c10::Device device) const;
  /// runtime/LoweredCuda.cpp: the CUDA path, or the fallback (a CPU-only
  /// build: always the fallback).
  std::vector<at::Tensor> runCuda(const std::vector<at::Tensor> &inputs);

  bool accepts(const std::vector<at::Tensor> &inputs);
  /// Each input that is not a dense row-major buffer, copied into one.
  static void contiguous(std::vector<at::Tensor> &inputs);
  void loadCpuKernel();
  /// runtime/LoweredCuda.cpp: the per-device state (made with the object,
  /// so concurrent first calls share it).
  static std::shared_ptr<CudaState> makeCudaState();
  std::vector<at::Tensor> runFallback(const std::vector<at::Tensor> &inputs);
};

} // namespace staticify
