//===- RunModule.h - A saved region's forward on tensors ------------------===//
#pragma once

#include <torch/script.h>

#include <vector>

namespace staticify {

/// \p module's forward on \p inputs; a tuple result becomes its elements.
/// What the runtime's classes run as TorchScript (a region, a fallback).
inline std::vector<at::Tensor>
runForward(torch::jit::Module &module, const std::vector<at::Tensor> &inputs) {
  std::vector<c10::IValue> stack(inputs.begin(), inputs.end());
  c10::IValue out = module.forward(std::move(stack));
  std::vector<at::Tensor> result;
  if (out.isTuple()) {
    for (const c10::IValue &v : out.toTupleRef().elements())
      result.push_back(v.toTensor());
  } else {
    result.push_back(out.toTensor());
  }
  return result;
}

} // namespace staticify
