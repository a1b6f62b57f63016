//===- Compact.cpp - staticify::compact, the forms' compaction as an op ---===//
//
// `torch.ops.staticify.compact(keep) -> (positions, count)`: the positions of
// a 1-D bool tensor's true elements, in order, padded with zeros to keep's
// length, and their count as a 0-d int64 tensor on keep's device. The same
// function as `compact` in passes/forms/bounded_forms.py (the reference the
// tests compare it with), as one kernel on CUDA instead of a scatter.
//
//===----------------------------------------------------------------------===//

#include "runtime/Compact.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#ifdef STATICIFY_WITH_CUDA
#include "runtime/kernels/compact.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace staticify {
namespace {

void checkKeep(const at::Tensor &keep) {
  TORCH_CHECK(keep.dim() == 1 && keep.scalar_type() == at::kBool,
              "staticify::compact expects a 1-D bool tensor, got ",
              keep.scalar_type(), " of ", keep.dim(), " dimensions");
}

std::tuple<at::Tensor, at::Tensor> compactCpu(const at::Tensor &keep) {
  checkKeep(keep);
  at::Tensor k = keep.contiguous();
  int64_t n = k.numel();
  at::Tensor out = at::zeros({n}, k.options().dtype(at::kLong));
  const bool *in = k.data_ptr<bool>();
  int64_t *pos = out.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    if (in[i])
      pos[count++] = i;
  return {out, at::scalar_tensor(count, out.options())};
}

} // namespace

#ifdef STATICIFY_WITH_CUDA
std::tuple<at::Tensor, at::Tensor> compactCuda(const at::Tensor &keep) {
  checkKeep(keep);
  at::Tensor k = keep.contiguous();
  at::Tensor rank = at::cumsum(k, 0, at::kLong);
  at::Tensor out = at::zeros({k.numel()}, rank.options());
  cuda::launchCompact(k.data_ptr<bool>(), rank.data_ptr<int64_t>(), k.numel(),
                      out.data_ptr<int64_t>(),
                      c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // The count stays on the device: no host sync.
  at::Tensor count =
      k.numel() ? rank[-1].clone() : at::zeros({}, rank.options());
  return {out, count};
}
#endif

} // namespace staticify

TORCH_LIBRARY_FRAGMENT(staticify, m) {
  m.def("compact(Tensor keep) -> (Tensor positions, Tensor count)");
}

TORCH_LIBRARY_IMPL(staticify, CPU, m) {
  m.impl("compact", &staticify::compactCpu);
}

#ifdef STATICIFY_WITH_CUDA
TORCH_LIBRARY_IMPL(staticify, CUDA, m) {
  m.impl("compact", &staticify::compactCuda);
}
#endif
