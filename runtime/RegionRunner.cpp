//===- RegionRunner.cpp - Runs an outlined static region ------------------===//

#include "runtime/RegionRunner.h"
#include "runtime/RunModule.h"

#include <torch/csrc/jit/serialization/import.h>

#ifdef STATICIFY_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
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
  return runForward(module_, inputs);
}

int64_t RegionRunner::capturedSignatures() const {
  int64_t n = 0;
  for (const auto &entry : captured_)
    n += !entry.second->failed;
  return n;
}

#ifdef STATICIFY_WITH_CUDA
namespace {

/// TorchScript's profiling executor specializes a graph on its first runs
/// (and may compile fused kernels): warm up past that before capturing, so
/// that nothing is compiled or profiled inside the capture.
constexpr int kWarmupRuns = 3;

/// Makes \p waiter wait (on the device) for what is queued on \p producer.
void streamWaits(const c10::cuda::CUDAStream &waiter,
                 const c10::cuda::CUDAStream &producer) {
  at::cuda::CUDAEvent event;
  event.record(producer);
  event.block(waiter);
}

} // namespace

bool RegionRunner::capture(Captured &slot) {
  c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  streamWaits(side, caller);
  bool ok = true;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    try {
      for (int i = 0; i < kWarmupRuns; ++i)
        runPlain(slot.inputs);
    } catch (const std::exception &) {
      ok = false; // the region fails plainly too: let the plain run report it
    }
    if (ok) {
      try {
        slot.graph.capture_begin();
      } catch (const std::exception &) {
        ok = false;
      }
    }
    if (ok) {
      try {
        slot.outputs = runPlain(slot.inputs);
      } catch (const std::exception &) {
        ok = false; // e.g. an op that syncs: the capture is invalidated
      }
      try {
        slot.graph.capture_end(); // ends the capture, valid or not
      } catch (const std::exception &) {
        ok = false;
      }
      if (!ok) {
        (void)cudaGetLastError(); // the failed capture's sticky-free error
        slot.outputs.clear();
      }
    }
  }
  streamWaits(caller, side);
  return ok;
}
#endif

std::vector<at::Tensor> RegionRunner::run(std::vector<at::Tensor> inputs) {
#ifdef STATICIFY_WITH_CUDA
  bool cuda = !inputs.empty();
  for (const at::Tensor &t : inputs)
    cuda &= t.is_cuda();
  if (cuda) {
    std::ostringstream key;
    for (const at::Tensor &t : inputs)
      key << t.sizes() << t.strides() << t.dtype() << t.device() << ";";
    std::shared_ptr<Captured> &slot = captured_[key.str()];
    if (!slot) {
      slot = std::make_shared<Captured>();
      for (const at::Tensor &t : inputs)
        slot->inputs.push_back(t.clone());
      slot->failed = !capture(*slot);
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
