/*===- CudaHostAbi.h - The table a --lower=cuda host object calls --------===*
 *
 * C, shared by the runtime (runtime/LoweredCuda.cpp) and the host code's
 * support file (lower/ukernels/cuda_host.c, into which CMake pastes this
 * header when it embeds the file in staticify): one definition of the
 * functions through which the generated host code allocates device memory,
 * launches kernels and calls PyTorch's CUDA primitives.
 *
 *===----------------------------------------------------------------------===*/
#ifndef STATICIFY_CUDA_HOST_ABI_H
#define STATICIFY_CUDA_HOST_ABI_H

#include <stdint.h>

typedef struct StaticifyCudaRuntime {
  /* A device buffer of `bytes`, freed by the runtime when the call returns. */
  void *(*alloc)(void *call, int64_t bytes);
  /* Kernel `kernel` (an index into the image's kernel names) with `count`
   * 8-byte parameter slots. */
  void (*launch)(void *call, int64_t kernel, const int64_t *grid,
                 const int64_t *block, int64_t sharedBytes,
                 const int64_t *params, int64_t count);
  /* torch.topk of a vector; dtype 0 f32, 1 f64; strides in elements. */
  void (*topk)(void *call, int dtype, const void *keys, int64_t n,
               int64_t keyStride, void *values, void *indices, int64_t k,
               int64_t largest);
  /* A random permutation of 0..n-1 drawn from `seed`. */
  void (*randperm)(void *call, int64_t *out, int64_t n, int64_t seed);
} StaticifyCudaRuntime;

#endif /* STATICIFY_CUDA_HOST_ABI_H */
