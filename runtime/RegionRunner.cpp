//===- RegionRunner.cpp - Runs an outlined static region ------------------===//

#include "runtime/RegionRunner.h"

#include <torch/csrc/jit/serialization/import.h>

#ifdef STATICIFY_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <sstream>
#include <stdexcept>

namespace staticify {

struct RegionRunner::Captured {
#ifdef STATICIFY_WITH_CUDA
  at::cuda::CUDAGraph graph;
#endif
  std::vector<at::Tensor> inputs, outputs;
  bool failed = false;
};

RegionRunner::RegionRunner(std::string module, std::string name)
    : bytes_(std::move(module)), name_(std::move(name)) {
  std::istringstream in(bytes_);
  module_ = torch::jit::load(in);
}

std::vector<at::Tensor>
RegionRunner::runPlain(const std::vector<at::Tensor> &inputs) {
  std::vector<c10::IValue> stack(inputs.begin(), inputs.end());
  c10::IValue out = module_.forward(std::move(stack));
  std::vector<at::Tensor> result;
  if (out.isTuple()) {
    for (const c10::IValue &v : out.toTupleRef().elements())
      result.push_back(v.toTensor());
  } else {
    result.push_back(out.toTensor());
  }
  return result;
}

int64_t RegionRunner::capturedSignatures() const {
  int64_t n = 0;
  for (const auto &entry : captured_)
    n += !entry.second->failed;
  return n;
}

std::vector<at::Tensor> RegionRunner::run(std::vector<at::Tensor> inputs) {
  bool cuda = !inputs.empty();
  for (const at::Tensor &t : inputs)
    cuda &= t.is_cuda();
#ifdef STATICIFY_WITH_CUDA
  if (cuda) {
    std::ostringstream key;
    for (const at::Tensor &t : inputs)
      key << t.sizes() << t.strides() << t.dtype() << t.device() << ";";
    std::shared_ptr<Captured> &slot = captured_[key.str()];
    if (!slot) {
      slot = std::make_shared<Captured>();
      for (const at::Tensor &t : inputs)
        slot->inputs.push_back(t.clone());
      try {
        // Warm up on a side stream (allocations, lazy init), then capture.
        c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
        side.wait(c10::cuda::getCurrentCUDAStream());
        {
          c10::cuda::CUDAStreamGuard guard(side);
          runPlain(slot->inputs);
          slot->graph.capture_begin();
          slot->outputs = runPlain(slot->inputs);
          slot->graph.capture_end();
        }
        c10::cuda::getCurrentCUDAStream().wait(side);
      } catch (const std::exception &) {
        slot->failed = true; // a region that cannot be captured runs plainly
      }
    }
    if (!slot->failed) {
      for (size_t i = 0; i < inputs.size(); ++i)
        slot->inputs[i].copy_(inputs[i]);
      slot->graph.replay();
      std::vector<at::Tensor> out;
      for (const at::Tensor &t : slot->outputs)
        out.push_back(t.clone()); // the next replay overwrites the buffers
      return out;
    }
  }
#else
  (void)cuda;
#endif
  return runPlain(inputs);
}

} // namespace staticify

TORCH_LIBRARY(staticify, m) {
  m.class_<staticify::RegionRunner>("RegionRunner")
      .def(torch::init<std::string, std::string>())
      .def("run", &staticify::RegionRunner::run)
      .def("captured_signatures", &staticify::RegionRunner::capturedSignatures)
      .def_pickle(
          [](const c10::intrusive_ptr<staticify::RegionRunner> &self) {
            return self->state();
          },
          [](std::vector<std::string> state) {
            return c10::make_intrusive<staticify::RegionRunner>(state.at(0),
                                                                state.at(1));
          });
}
