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
// `staticify::put_valid_rows(x, index, count, values, value_rows, accumulate)`:
// x[index] = values in place for a bounded index (bound's put rule): on the
// CPU the original index_put_ on the valid rows, elsewhere on every padded
// row with the padding sent to a row that is dropped.
//
// All are CompositeImplicitAutograd: built of differentiable ATen ops, so
// gradients flow through them on every backend.
//
//===----------------------------------------------------------------------===//

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace staticify {
namespace {

/// A CPU count, read in place: a CPU tensor's memory is the host's (item()
/// would go through _local_scalar_dense, which sync counters take for a
/// device read).
int64_t cpuCount(const at::Tensor &count) {
  return AT_DISPATCH_INTEGRAL_TYPES(count.scalar_type(), "valid_rows", [&] {
    return static_cast<int64_t>(*count.data_ptr<scalar_t>());
  });
}

void checkCount(const at::Tensor &count, const char *op) {
  TORCH_CHECK(count.dim() == 0 &&
                  at::isIntegralType(count.scalar_type(), /*includeBool=*/false),
              "staticify::", op, " expects a 0-d integer count, got ",
              count.scalar_type(), " of ", count.dim(), " dimensions");
}

at::Tensor validRows(const at::Tensor &x, const at::Tensor &count) {
  TORCH_CHECK(x.dim() >= 1, "staticify::valid_rows expects rows, got a 0-d tensor");
  checkCount(count, "valid_rows");
  if (!x.is_cpu() || !count.is_cpu())
    return x;
  return x.narrow(0, 0, std::clamp<int64_t>(cpuCount(count), 0, x.size(0)));
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

/// x[index] = values (index_put_, accumulate or not) for the first `count`
/// rows of a padded index; \p valueRows: values has one row per index row
/// (else it broadcasts, a 0-d value). On the CPU the original op on the
/// valid rows. Elsewhere on every padded row, with the padding rows sent to
/// an extra row of x that is dropped after (no host read): where an index
/// repeats, which row is written is unspecified there, as in PyTorch's CUDA
/// index_put_.
at::Tensor &putValidRows(at::Tensor &x, const at::Tensor &index,
                         const at::Tensor &count, const at::Tensor &values,
                         bool valueRows, bool accumulate) {
  checkCount(count, "put_valid_rows");
  TORCH_CHECK(index.dim() == 1 && at::isIntegralType(index.scalar_type(), false),
              "staticify::put_valid_rows expects a 1-D integer index");
  TORCH_CHECK(x.dim() >= 1, "staticify::put_valid_rows expects rows, got a 0-d tensor");
  int64_t rows = index.size(0);
  if (valueRows)
    rows = std::min(rows, values.size(0));
  if (x.is_cpu() && index.is_cpu() && count.is_cpu() && values.is_cpu()) {
    int64_t n = std::clamp<int64_t>(cpuCount(count), 0, rows);
    at::Tensor v = valueRows ? values.narrow(0, 0, n) : values;
    return x.index_put_({index.narrow(0, 0, n)}, v, accumulate);
  }
  int64_t n = x.size(0);
  at::Tensor i = index.narrow(0, 0, rows).to(x.device());
  i = at::where(i < 0, i + n, i);
  at::Tensor live = at::arange(rows, i.options()) < count.to(x.device());
  i = at::where(live, i, at::full({}, n, i.options()));
  std::vector<int64_t> one(x.sizes().begin(), x.sizes().end());
  one[0] = 1;
  at::Tensor extended = at::cat({x, at::zeros(one, x.options())});
  at::Tensor v = valueRows ? values.narrow(0, 0, rows) : values;
  extended.index_put_({i}, v.to(x.device()), accumulate);
  return x.copy_(extended.narrow(0, 0, n));
}

} // namespace
} // namespace staticify

TORCH_LIBRARY_FRAGMENT(staticify, m) {
  m.def("valid_rows(Tensor(a) x, Tensor count) -> Tensor(a)");
  m.def("padded_rows(Tensor(a) y, int rows) -> Tensor(a)");
  m.def("put_valid_rows(Tensor(a!) x, Tensor index, Tensor count, Tensor values, "
        "bool value_rows, bool accumulate) -> Tensor(a!)");
}

TORCH_LIBRARY_IMPL(staticify, CompositeImplicitAutograd, m) {
  m.impl("valid_rows", &staticify::validRows);
  m.impl("padded_rows", &staticify::paddedRows);
  m.impl("put_valid_rows", &staticify::putValidRows);
}
