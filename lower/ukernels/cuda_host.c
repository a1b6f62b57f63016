/*===- cuda_host.c - The host side of a CUDA kernel's shared object -------===*
 *
 * `staticify --lower=cuda` compiles a method's host code (sizes, buffer
 * allocation, kernel launches, the calls to primitives) for the CPU and the
 * device code to cubins and PTX (lower/CudaTarget.cpp). This file is linked
 * into the host code's shared object. It holds no CUDA: every call goes
 * through the table the runtime binds before each call (runtime/
 * LoweredCuda.cpp), which allocates from PyTorch's caching allocator and
 * launches on PyTorch's current stream. Nothing here synchronizes.
 *
 *===----------------------------------------------------------------------===*/
#include <stddef.h>
#include <stdint.h>

typedef struct { void *base; void *data; int64_t offset; int64_t size; int64_t stride; } Memref1;

#include "runtime/CudaHostAbi.h"

static __thread const StaticifyCudaRuntime *runtime;
static __thread void *call;

/* Called by the runtime before the kernel's entry point, on the calling
 * thread; (NULL, NULL) after it. */
void staticify_cuda_enter(const StaticifyCudaRuntime *rt, void *c) {
  runtime = rt;
  call = c;
}

/* finalize-memref-to-llvm{use-generic-functions}: device buffers. They
 * live until the call returns (the runtime frees them, stream-ordered). */
void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return runtime->alloc(call, (int64_t)bytes);
}
void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  (void)alignment; /* the caching allocator aligns to 512 bytes */
  return runtime->alloc(call, (int64_t)bytes);
}
void _mlir_memref_to_llvm_free(void *p) { (void)p; }

/* staticify-gpu-launch-to-runtime's call: the parameters' 8-byte slots. */
void staticify_cuda_launch(int64_t kernel, int64_t gx, int64_t gy, int64_t gz,
                           int64_t bx, int64_t by, int64_t bz,
                           int64_t sharedBytes, int64_t *base,
                           int64_t *params, int64_t offset, int64_t count,
                           int64_t stride) {
  (void)base;
  (void)stride;
  int64_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  runtime->launch(call, kernel, grid, block, sharedBytes, params + offset,
                  count);
}

static void topk(int dtype, size_t elem, Memref1 *keys, Memref1 *values,
                 Memref1 *indices, int64_t largest) {
  runtime->topk(call, dtype, (char *)keys->data + keys->offset * elem,
                keys->size, keys->stride,
                (char *)values->data + values->offset * elem,
                (char *)indices->data + indices->offset * sizeof(int64_t),
                values->size, largest);
}
void _mlir_ciface_staticify_topk_f32(Memref1 *keys, Memref1 *values,
                                     Memref1 *indices, int64_t largest) {
  topk(0, sizeof(float), keys, values, indices, largest);
}
void _mlir_ciface_staticify_topk_f64(Memref1 *keys, Memref1 *values,
                                     Memref1 *indices, int64_t largest) {
  topk(1, sizeof(double), keys, values, indices, largest);
}
void _mlir_ciface_staticify_randperm_i64(Memref1 *out, int64_t seed) {
  runtime->randperm(call, (int64_t *)out->data + out->offset, out->size, seed);
}
