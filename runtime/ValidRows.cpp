//===- ValidRows.cpp - An op batched on rows computes the valid rows only -===//
//
// A bounded value (passes/Bounded.h) is padded rows and a count: the first
// `count` rows are the original's, the rest are padding nothing reads. An op
// batched on rows (linear, a convolution, roi_align of bounded boxes) is
// rewritten to run on every padded row, which on a device costs nothing
// beyond the work (no host read), but on the CPU is work the original never
// did: Faster R-CNN's box head on 1,000 padded proposals where 375 hold.
//
// `staticify::valid_rows(x, count) -> Tensor`: on the CPU, x's first count
// rows (a view; the count is a CPU tensor, so reading it waits for no
// device); elsewhere x itself, since reading a device count would be a
// host-device sync. `staticify::padded_rows(y, rows) -> Tensor`: y with rows
// rows, the ones past its own filled with zeros (y itself when it has them).
// Between the two, the batched op computes the valid rows on the CPU and
// every padded row elsewhere; the valid rows are equal either way, and the
// padding is zeros or the op of padding, which the count says nothing reads.
//
// Both are CompositeImplicitAutograd: built of differentiable ATen ops, so
// gradients flow through them on every backend.
//
//===----------------------------------------------------------------------===//

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace staticify {
namespace {

at::Tensor validRows(const at::Tensor &x, const at::Tensor &count) {
  TORCH_CHECK(x.dim() >= 1, "staticify::valid_rows expects rows, got a 0-d tensor");
  TORCH_CHECK(count.dim() == 0 &&
                  at::isIntegralType(count.scalar_type(), /*includeBool=*/false),
              "staticify::valid_rows expects a 0-d integer count, got ",
              count.scalar_type(), " of ", count.dim(), " dimensions");
  if (!x.is_cpu() || !count.is_cpu())
    return x;
  // Read in place: a CPU tensor's memory is the host's (item() would go
  // through _local_scalar_dense, which sync counters take for a device read).
  int64_t n = AT_DISPATCH_INTEGRAL_TYPES(count.scalar_type(), "valid_rows", [&] {
    return static_cast<int64_t>(*count.data_ptr<scalar_t>());
  });
  return x.narrow(0, 0, std::clamp<int64_t>(n, 0, x.size(0)));
}

at::Tensor paddedRows(const at::Tensor &y, int64_t rows) {
  TORCH_CHECK(y.dim() >= 1, "staticify::padded_rows expects rows, got a 0-d tensor");
  TORCH_CHECK(y.size(0) <= rows, "staticify::padded_rows: ", y.size(0),
              " rows do not fit in ", rows);
  if (y.size(0) == rows)
    return y;
  // constant_pad_nd's pairs run from the last dimension: dim 0's is last.
  std::vector<int64_t> pad(2 * y.dim(), 0);
  pad.back() = rows - y.size(0);
  return at::constant_pad_nd(y, pad, 0);
}

} // namespace
} // namespace staticify

TORCH_LIBRARY_FRAGMENT(staticify, m) {
  m.def("valid_rows(Tensor(a) x, Tensor count) -> Tensor(a)");
  m.def("padded_rows(Tensor(a) y, int rows) -> Tensor(a)");
}

TORCH_LIBRARY_IMPL(staticify, CompositeImplicitAutograd, m) {
  m.impl("valid_rows", &staticify::validRows);
  m.impl("padded_rows", &staticify::paddedRows);
}
