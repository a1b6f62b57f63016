//===- Nms.cpp - staticify::nms_padded, torchvision's NMS as a bounded value
//===//
//
// `torch.ops.staticify.nms_padded(boxes, scores, iou_threshold, count=None,
// classes=None) -> (indices, count)`: the indices of the boxes greedy NMS
// keeps, by descending score, padded to boxes' rows with the first index in
// that order, and how many there are (a 0-d int64 on boxes' device). With
// `count` only the first count rows take part (a bounded input); with
// `classes` only rows of one class suppress each other (batched NMS).
//
// On the CPU it equals torchvision::nms, order and ties included (a stable
// descending sort of the scores, then the greedy walk, the float IoU
// compared with the threshold in double, as torchvision's CPU kernel does),
// and the form `nms` in passes/forms/bounded_forms.py, padding included. On
// CUDA it equals the form, padding included: IEEE arithmetic, no FMAs, the
// threshold rounded to float, as torchvision's CUDA kernel rounds it. That
// kernel's own IoU expression is contracted into FMAs by nvcc, so at a
// threshold within one rounding of an IoU it can decide otherwise than the
// CPU and than the form (test/e2e/test_nms.py counts such cases).
//
// `torch.ops.staticify.nms_kept_mask(boxes, scores, iou_threshold,
// count=None, classes=None) -> Tensor`: the same walk as a [N] bool mask of
// the rows it keeps, in the input's order (false from row count on): what
// batched_nms's per-class loop marks in its keep_mask, and the batched-nms
// pass's replacement for that loop. A mask needs no compaction, and rows
// beyond a count stay false, so the mask of padded rows is the padded mask.
//
// On CUDA nothing is read back to the host: a bitmask kernel, then the greedy
// walk in one block on the device (runtime/kernels/nms.cu), then the
// compaction kernel (for the mask, a scatter by the walk order).
// torchvision copies the bitmask to the host instead.
//
//===----------------------------------------------------------------------===//

#include <ATen/ATen.h>
#include <torch/library.h>

#ifdef STATICIFY_WITH_CUDA
#include "runtime/Compact.h"
#include "runtime/kernels/nms.cuh"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <numeric>
#include <vector>

namespace staticify {
namespace {

using at::Tensor;

void checkInputs(const Tensor &boxes, const Tensor &scores,
                 const c10::optional<Tensor> &count,
                 const c10::optional<Tensor> &classes) {
  TORCH_CHECK(boxes.dim() == 2 && boxes.size(1) == 4,
              "staticify::nms_padded expects boxes of shape [N, 4], got ",
              boxes.sizes());
  TORCH_CHECK(scores.dim() == 1 && scores.size(0) == boxes.size(0),
              "staticify::nms_padded expects scores of shape [", boxes.size(0),
              "], got ", scores.sizes());
  TORCH_CHECK(boxes.scalar_type() == scores.scalar_type() &&
                  (boxes.scalar_type() == at::kFloat ||
                   boxes.scalar_type() == at::kDouble),
              "staticify::nms_padded takes float or double boxes and scores "
              "of one dtype, got ",
              boxes.scalar_type(), " and ", scores.scalar_type());
  TORCH_CHECK(scores.device() == boxes.device(),
              "staticify::nms_padded: boxes and scores on different devices");
  if (count)
    TORCH_CHECK(count->dim() == 0 && count->scalar_type() == at::kLong &&
                    count->device() == boxes.device(),
                "staticify::nms_padded expects count as a 0-d int64 tensor "
                "on boxes' device");
  if (classes)
    TORCH_CHECK(classes->dim() == 1 && classes->size(0) == boxes.size(0) &&
                    !at::isFloatingType(classes->scalar_type()) &&
                    classes->device() == boxes.device(),
                "staticify::nms_padded expects classes as a 1-D integer "
                "tensor of boxes' rows on boxes' device");
}

/// The walk order: by descending score, ties by position; with a count, the
/// live rows first. The same ATen calls as the form's `score_order`, so the
/// same permutation on either device.
Tensor scoreOrder(const Tensor &scores, const c10::optional<Tensor> &count) {
  Tensor order =
      std::get<1>(scores.sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  if (count) {
    Tensor dead = at::arange(scores.size(0), count->options()).ge(*count);
    Tensor byLive = std::get<1>(dead.index_select(0, order).to(at::kLong).sort(
        /*stable=*/true, /*dim=*/0, /*descending=*/false));
    order = order.index_select(0, byLive);
  }
  return order;
}

/// The inputs in walk order: boxes (contiguous) and classes (int64), with
/// the order that maps walk positions back to rows.
struct Sorted {
  Tensor order, boxes, classes;
};

Sorted sortInputs(const Tensor &boxes, const Tensor &scores,
                  const c10::optional<Tensor> &count,
                  const c10::optional<Tensor> &classes) {
  checkInputs(boxes, scores, count, classes);
  Sorted s;
  s.order = scoreOrder(scores, count);
  s.boxes = boxes.index_select(0, s.order).contiguous();
  if (classes)
    s.classes = classes->index_select(0, s.order).to(at::kLong).contiguous();
  return s;
}

/// The kept walk positions (padded with position 0) as row indices.
std::tuple<Tensor, Tensor> indicesOf(const Sorted &s, const Tensor &positions,
                                     const Tensor &count) {
  return {s.order.index_select(0, positions), count};
}

const int64_t *classesOf(const Sorted &s) {
  return s.classes.defined() ? s.classes.data_ptr<int64_t>() : nullptr;
}

template <typename T>
int64_t walkCpu(const Tensor &sorted, const int64_t *cls, int64_t limit,
                double threshold, int64_t *positions) {
  auto b = sorted.accessor<T, 2>();
  int64_t n = sorted.size(0);
  // Areas as torchvision computes them: one elementwise product per box.
  Tensor areaT = (sorted.select(1, 2) - sorted.select(1, 0)) *
                 (sorted.select(1, 3) - sorted.select(1, 1));
  const T *area = areaT.contiguous().data_ptr<T>();
  std::vector<char> removed(n, 0);
  // With classes, only rows of one class suppress each other: each class's
  // rows, in walk order (a stable sort by class), are walked alone, so the
  // work is the sum over classes of their rows squared, not the rows
  // squared (SSD300: 90 classes of up to 400 boxes each, 36,000 in all).
  std::vector<int64_t> walk(limit);
  std::iota(walk.begin(), walk.end(), 0);
  if (cls)
    std::stable_sort(walk.begin(), walk.end(),
                     [&](int64_t a, int64_t c) { return cls[a] < cls[c]; });
  for (int64_t begin = 0; begin < limit;) {
    int64_t end = begin + 1;
    while (end < limit && (!cls || cls[walk[end]] == cls[walk[begin]]))
      ++end;
    for (int64_t p = begin; p < end; ++p) {
      int64_t i = walk[p];
      if (removed[i])
        continue;
      for (int64_t q = p + 1; q < end; ++q) {
        int64_t j = walk[q];
        if (removed[j])
          continue;
        T w = std::max(T(0), std::min(b[i][2], b[j][2]) -
                                 std::max(b[i][0], b[j][0]));
        T h = std::max(T(0), std::min(b[i][3], b[j][3]) -
                                 std::max(b[i][1], b[j][1]));
        T inter = w * h;
        T iou = inter / (area[i] + area[j] - inter);
        if (iou > threshold) // in double, as torchvision's CPU kernel
          removed[j] = 1;
      }
    }
    begin = end;
  }
  // The kept rows in walk order (descending score, across classes).
  int64_t kept = 0;
  for (int64_t i = 0; i < limit; ++i)
    if (!removed[i])
      positions[kept++] = i;
  return kept;
}

/// The greedy walk on the CPU: the kept walk positions, padded with
/// position 0, and how many there are.
struct Walk {
  Sorted s;
  Tensor positions;
  int64_t total = 0;
};

Walk walkOnCpu(const Tensor &boxes, const Tensor &scores, double threshold,
               const c10::optional<Tensor> &count,
               const c10::optional<Tensor> &classes) {
  Walk w;
  w.s = sortInputs(boxes, scores, count, classes);
  int64_t n = boxes.size(0);
  int64_t limit = count ? std::clamp<int64_t>(count->item<int64_t>(), 0, n) : n;
  w.positions = at::zeros({n}, w.s.order.options());
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "nms_padded", [&] {
    w.total = walkCpu<scalar_t>(w.s.boxes, classesOf(w.s), limit, threshold,
                                w.positions.data_ptr<int64_t>());
  });
  return w;
}

std::tuple<Tensor, Tensor> nmsPaddedCpu(const Tensor &boxes,
                                        const Tensor &scores, double threshold,
                                        const c10::optional<Tensor> &count,
                                        const c10::optional<Tensor> &classes) {
  Walk w = walkOnCpu(boxes, scores, threshold, count, classes);
  return indicesOf(w.s, w.positions,
                   at::scalar_tensor(w.total, w.s.order.options()));
}

Tensor nmsKeptMaskCpu(const Tensor &boxes, const Tensor &scores,
                      double threshold, const c10::optional<Tensor> &count,
                      const c10::optional<Tensor> &classes) {
  Walk w = walkOnCpu(boxes, scores, threshold, count, classes);
  Tensor rows = w.s.order.index_select(0, w.positions.narrow(0, 0, w.total));
  return at::zeros({boxes.size(0)}, boxes.options().dtype(at::kBool))
      .index_fill_(0, rows, true);
}

#ifdef STATICIFY_WITH_CUDA
/// The greedy walk on the device: which walk positions it keeps ([N] bool;
/// none from position count on).
std::pair<Sorted, Tensor> walkOnCuda(const Tensor &boxes, const Tensor &scores,
                                     double threshold,
                                     const c10::optional<Tensor> &count,
                                     const c10::optional<Tensor> &classes) {
  int64_t n = boxes.size(0);
  TORCH_CHECK(cuda::nmsMaskWords(n) <= 65535,
              "staticify::nms_padded takes at most ", 65535 * 64,
              " boxes on CUDA, got ", n);
  Sorted s = sortInputs(boxes, scores, count, classes);
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  int64_t words = cuda::nmsMaskWords(n);
  Tensor mask = at::empty({n, words}, boxes.options().dtype(at::kLong));
  AT_DISPATCH_FLOATING_TYPES(boxes.scalar_type(), "nms_padded", [&] {
    cuda::launchNmsMask<scalar_t>(
        s.boxes.data_ptr<scalar_t>(), classesOf(s), n,
        static_cast<float>(threshold),
        reinterpret_cast<uint64_t *>(mask.data_ptr<int64_t>()), stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  Tensor keep = at::empty({n}, boxes.options().dtype(at::kBool));
  Tensor scratch = at::empty({words}, mask.options());
  cuda::launchNmsWalk(
      reinterpret_cast<const uint64_t *>(mask.data_ptr<int64_t>()), n,
      count ? count->data_ptr<int64_t>() : nullptr, keep.data_ptr<bool>(),
      reinterpret_cast<uint64_t *>(scratch.data_ptr<int64_t>()), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {std::move(s), keep};
}

std::tuple<Tensor, Tensor> nmsPaddedCuda(const Tensor &boxes,
                                         const Tensor &scores, double threshold,
                                         const c10::optional<Tensor> &count,
                                         const c10::optional<Tensor> &classes) {
  c10::cuda::CUDAGuard device(boxes.device());
  auto [s, keep] = walkOnCuda(boxes, scores, threshold, count, classes);
  auto [positions, total] = compactCuda(keep); // the count stays on the device
  return indicesOf(s, positions, total);
}

Tensor nmsKeptMaskCuda(const Tensor &boxes, const Tensor &scores,
                       double threshold, const c10::optional<Tensor> &count,
                       const c10::optional<Tensor> &classes) {
  c10::cuda::CUDAGuard device(boxes.device());
  auto [s, keep] = walkOnCuda(boxes, scores, threshold, count, classes);
  // The walk order is a permutation: each row is written once.
  return at::zeros_like(keep).scatter_(0, s.order, keep);
}
#endif

} // namespace
} // namespace staticify

TORCH_LIBRARY_FRAGMENT(staticify, m) {
  m.def("nms_padded(Tensor boxes, Tensor scores, float iou_threshold, "
        "Tensor? count=None, Tensor? classes=None) -> (Tensor indices, "
        "Tensor count)");
  m.def("nms_kept_mask(Tensor boxes, Tensor scores, float iou_threshold, "
        "Tensor? count=None, Tensor? classes=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(staticify, CPU, m) {
  m.impl("nms_padded", &staticify::nmsPaddedCpu);
  m.impl("nms_kept_mask", &staticify::nmsKeptMaskCpu);
}

#ifdef STATICIFY_WITH_CUDA
TORCH_LIBRARY_IMPL(staticify, CUDA, m) {
  m.impl("nms_padded", &staticify::nmsPaddedCuda);
  m.impl("nms_kept_mask", &staticify::nmsKeptMaskCuda);
}
#endif
