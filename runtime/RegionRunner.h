//===- RegionRunner.h - Runs an outlined static region, CUDA graphs on GPU
//-===//
//
// `torch.classes.staticify.RegionRunner(module, name)` holds one static
// region of a model (a small TorchScript module whose forward is the region,
// saved as bytes; tensors in and out) and runs it.
// On CUDA tensors, when the libtorch it is built against has CUDA, it
// captures the region into a CUDA graph once per input signature (shapes,
// dtypes, devices, strides) and replays it afterwards; the default CUDA
// generator is registered with the capture, so random ops draw fresh numbers
// on every replay. On CPU, and for a signature whose capture failed, it runs
// the region's graph as it is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/custom_class.h>
#include <torch/script.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace staticify {

class RegionRunner : public torch::CustomClassHolder {
public:
  RegionRunner(std::string module, std::string name);

  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs);

  /// What is saved with the model: the region's module and its name.
  std::vector<std::string> state() const { return {bytes_, name_}; }

  /// How many distinct signatures were captured (0 on CPU).
  int64_t capturedSignatures() const;

private:
  std::string bytes_, name_;
  torch::jit::Module module_;
  struct Captured;
  std::map<std::string, std::shared_ptr<Captured>> captured_;

  std::vector<at::Tensor> runPlain(const std::vector<at::Tensor> &inputs);
#ifdef STATICIFY_WITH_CUDA
  /// Warms up on a side stream, then captures the region's run on
  /// slot.inputs into slot.graph; false (and no graph) if it cannot be.
  bool capture(Captured &slot);
#endif
};

} // namespace staticify
