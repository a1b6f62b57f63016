//===- nms.cu - The padded NMS kernels ------------------------------------===//

#include "nms.cuh"

#include <cuda_runtime.h>

namespace staticify::cuda {
namespace {

constexpr int kTile = 64;
constexpr int kWalkThreads = 256;
constexpr int64_t kSharedWords = 48 * 1024 / sizeof(uint64_t);

__host__ __device__ inline int64_t wordsOf(int64_t n) { return (n + 63) / 64; }

// Round-to-nearest arithmetic that the compiler may not fuse into FMAs:
// ATen computes each of these as its own elementwise op.
__device__ inline float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline double div(double a, double b) { return __ddiv_rn(a, b); }

template <typename T>
__device__ inline bool overlaps(const T *a, const T *b, T threshold) {
  T w = sub(min(a[2], b[2]), max(a[0], b[0]));
  T h = sub(min(a[3], b[3]), max(a[1], b[1]));
  T inter = mul(w > T(0) ? w : T(0), h > T(0) ? h : T(0));
  T areaA = mul(sub(a[2], a[0]), sub(a[3], a[1]));
  T areaB = mul(sub(b[2], b[0]), sub(b[3], b[1]));
  return div(inter, sub(add(areaA, areaB), inter)) > threshold;
}

template <typename T>
__global__ void maskKernel(const T *boxes, const int64_t *classes, int64_t n,
                           float threshold, uint64_t *mask) {
  int64_t rowTile = blockIdx.y, colTile = blockIdx.x;
  if (colTile < rowTile)
    return;
  int64_t words = wordsOf(n);
  __shared__ T tile[kTile * 4];
  __shared__ int64_t tileClasses[kTile];
  int64_t col = colTile * kTile + threadIdx.x;
  if (col < n) {
    for (int k = 0; k < 4; ++k)
      tile[threadIdx.x * 4 + k] = boxes[col * 4 + k];
    if (classes)
      tileClasses[threadIdx.x] = classes[col];
  }
  __syncthreads();
  int64_t row = rowTile * kTile + threadIdx.x;
  if (row >= n)
    return;
  const T *box = boxes + row * 4;
  int64_t cols = min(static_cast<int64_t>(kTile), n - colTile * kTile);
  uint64_t bits = 0;
  for (int64_t k = 0; k < cols; ++k) {
    int64_t j = colTile * kTile + k;
    if (j <= row || (classes && tileClasses[k] != classes[row]))
      continue;
    if (overlaps(box, tile + k * 4, static_cast<T>(threshold)))
      bits |= uint64_t(1) << k;
  }
  mask[row * words + colTile] = bits;
}

__global__ void walkKernel(const uint64_t *mask, int64_t n,
                           const int64_t *count, bool *keep,
                           uint64_t *global) {
  extern __shared__ uint64_t shared[];
  int64_t words = wordsOf(n);
  uint64_t *removed = global ? global : shared;
  int64_t limit = n;
  if (count)
    limit = max(int64_t(0), min(*count, n));
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x)
    removed[w] = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    keep[i] = false;
  __syncthreads();
  // Every thread takes the same path: the set is read after a barrier, and
  // written only after a second one.
  for (int64_t w = 0; w * kTile < limit; ++w) {
    uint64_t word = removed[w];
    __syncthreads();
    for (int bit = 0; bit < kTile; ++bit) {
      int64_t i = w * kTile + bit;
      if (i >= limit)
        break;
      if (word >> bit & 1)
        continue;
      if (threadIdx.x == 0)
        keep[i] = true;
      const uint64_t *row = mask + i * words;
      for (int64_t v = w + threadIdx.x; v < words; v += blockDim.x)
        removed[v] |= row[v];
      __syncthreads();
      word = removed[w];
      __syncthreads();
    }
  }
}

} // namespace

template <typename T>
void launchNmsMask(const T *boxes, const int64_t *classes, int64_t n,
                   float threshold, uint64_t *mask, void *stream) {
  if (n == 0)
    return;
  auto tiles = static_cast<unsigned>(nmsMaskWords(n));
  maskKernel<T><<<dim3(tiles, tiles), kTile, 0,
                  static_cast<cudaStream_t>(stream)>>>(boxes, classes, n,
                                                       threshold, mask);
}

template void launchNmsMask<float>(const float *, const int64_t *, int64_t,
                                   float, uint64_t *, void *);
template void launchNmsMask<double>(const double *, const int64_t *, int64_t,
                                    float, uint64_t *, void *);

void launchNmsWalk(const uint64_t *mask, int64_t n, const int64_t *count,
                   bool *keep, uint64_t *scratch, void *stream) {
  if (n == 0)
    return;
  int64_t words = nmsMaskWords(n);
  bool fits = words <= kSharedWords;
  walkKernel<<<1, kWalkThreads, fits ? words * sizeof(uint64_t) : 0,
               static_cast<cudaStream_t>(stream)>>>(mask, n, count, keep,
                                                    fits ? nullptr : scratch);
}

} // namespace staticify::cuda
