//===- LoweredMethod.h - A method compiled to a CPU kernel, with fallback -===//
//
// `torch.classes.staticify.LoweredMethod(module, name, kernel, signature,
// results, mlir, flags)` holds a method's TorchScript (a small module, as
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

#include <memory>
#include <string>
#include <vector>

namespace staticify {

class LoweredMethod : public torch::CustomClassHolder {
public:
  LoweredMethod(std::string module, std::string name, std::string kernel,
                std::string signature, std::string results, std::string mlir,
                std::string flags);
  ~LoweredMethod() override;

  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs);

  std::vector<std::string> state() const {
    return {module_, name_, kernel_, signature_, results_, mlir_, flags_};
  }
  /// How many calls the kernel answered, and how many ran the TorchScript
  /// (of those, how many the shape function and how many the kernel's
  /// value checks turned away; the rest did not match the signature).
  std::vector<int64_t> counts() const {
    return {kernelCalls_, fallbackCalls_, rejectedShapes_, rejectedValues_};
  }
  std::string mlir() const { return mlir_; }
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
  torch::jit::Module fallback_;
  std::vector<Arg> inputs_, outputs_;
  void *handle_ = nullptr;
  int fd_ = -1; // the memfd holding the kernel, open while it is loaded
  void *shapeFn_ = nullptr, *kernelFn_ = nullptr;
  int64_t kernelCalls_ = 0, fallbackCalls_ = 0, rejectedShapes_ = 0,
          rejectedValues_ = 0;

  bool accepts(const std::vector<at::Tensor> &inputs) const;
  std::vector<at::Tensor> runFallback(const std::vector<at::Tensor> &inputs);
};

} // namespace staticify
