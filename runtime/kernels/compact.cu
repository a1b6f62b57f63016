//===- compact.cu - The compaction kernel of the bounded forms ------------===//

#include "compact.cuh"

#include <cuda_runtime.h>

namespace staticify::cuda {

__global__ void compactKernel(const bool *keep, const int64_t *rank, int64_t n,
                              int64_t *out) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (keep[i])
      out[rank[i] - 1] = i;
}

void launchCompact(const bool *keep, const int64_t *rank, int64_t n,
                   int64_t *out, void *stream) {
  if (n == 0)
    return;
  constexpr int kThreads = 256;
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535)
    blocks = 65535; // the grid-stride loop covers the rest
  compactKernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                  static_cast<cudaStream_t>(stream)>>>(keep, rank, n, out);
}

} // namespace staticify::cuda
