//===- nms.cuh - The padded NMS kernels -----------------------------------===//
//
// staticify::nms_padded on CUDA (runtime/Nms.cpp) in two launches, neither of
// which the host waits for:
//
//   1. the overlap bitmask: for boxes already sorted by descending score,
//      bit j of word w of row i says whether row i suppresses row j =
//      64 * w + bit (j > i, same class when classes are given, IoU above
//      the threshold). One 64 x 64 tile per block.
//   2. the greedy walk, on the device: one block keeps the suppressed set as
//      a bitmask and walks the rows in order; a row not suppressed is kept
//      and ORs its mask row into the set. Only kept rows cost a step.
//
// Free of libtorch: CI compiles it with nvcc from /usr/local/cuda; the CUDA
// build of the runtime links it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace staticify::cuda {

/// The words of one mask row for \p n boxes.
inline int64_t nmsMaskWords(int64_t n) { return (n + 63) / 64; }

/// mask[i * words + w] for the tiles on and right of the diagonal (w >= i /
/// 64; the walk reads no other). \p boxes: n x 4 (x1, y1, x2, y2),
/// contiguous, sorted; \p classes: n or null. The IoU is computed with
/// round-to-nearest operations, no contraction, so it equals the one ATen's
/// elementwise ops compute, and compared with \p threshold as torchvision's
/// CUDA kernel compares it (rounded to float).
template <typename T>
void launchNmsMask(const T *boxes, const int64_t *classes, int64_t n,
                   float threshold, uint64_t *mask, void *stream);

/// keep[i] for each sorted row i: the greedy walk over \p mask. Rows from
/// *count on (when \p count is not null: a device int64) are never kept.
/// \p scratch: nmsMaskWords(n) words of device memory, used when the set
/// does not fit in shared memory.
void launchNmsWalk(const uint64_t *mask, int64_t n, const int64_t *count,
                   bool *keep, uint64_t *scratch, void *stream);

} // namespace staticify::cuda
