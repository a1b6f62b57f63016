/*===- cpu.c - Hand-written kernels the lowered CPU code calls -----------===*
 *
 * The IREE "ukernel" idea: what linalg does not express well (selection,
 * permutation) is a small C function, compiled and linked into every
 * lowered kernel's shared object (lower/CpuTarget.cpp), called from the
 * generated code through MLIR's C interface (a pointer to each memref's
 * descriptor). No allocation, no globals, no dependency but libc.
 *
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct { int64_t rank; void *descriptor; } Unranked;
typedef struct { char *base; char *data; int64_t offset; int64_t dims[]; } Ranked;
typedef struct { void *base; void *data; int64_t offset; int64_t size; int64_t stride; } Memref1;

/* MLIR's memrefCopy: a copy between strided buffers of any rank, which
 * bufferization emits for a slice write (cat) or a branch's result. Rows
 * whose innermost elements are contiguous in both go by one memcpy. */
void memrefCopy(int64_t elemSize, Unranked *src, Unranked *dst) {
  int64_t rank = src->rank;
  Ranked *s = (Ranked *)src->descriptor, *d = (Ranked *)dst->descriptor;
  const int64_t *sizes = s->dims, *ss = s->dims + rank, *ds = d->dims + rank;
  int64_t total = 1;
  for (int64_t i = 0; i < rank; ++i)
    total *= sizes[i];
  if (total == 0)
    return;
  char *from = s->data + s->offset * elemSize, *to = d->data + d->offset * elemSize;
  if (rank == 0) {
    memcpy(to, from, elemSize);
    return;
  }
  /* The innermost dimension as one run when both are contiguous there. */
  int64_t inner = rank - 1;
  int64_t run = (ss[inner] == 1 && ds[inner] == 1) ? sizes[inner] : 1;
  int64_t outer = run > 1 ? rank - 1 : rank; /* dimensions walked one by one */
  int64_t index[rank];
  memset(index, 0, sizeof index);
  int64_t so = 0, doff = 0;
  for (;;) {
    memcpy(to + doff * elemSize, from + so * elemSize, run * elemSize);
    int64_t axis = outer - 1;
    for (; axis >= 0; --axis) {
      so += ss[axis];
      doff += ds[axis];
      if (++index[axis] < sizes[axis])
        break;
      so -= ss[axis] * sizes[axis];
      doff -= ds[axis] * sizes[axis];
      index[axis] = 0;
    }
    if (axis < 0)
      return;
  }
}

/* SplitMix64: the generated code's random streams use the same mixer. */
static uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A uniformly random permutation of 0..n-1 (Fisher-Yates), n = out's size;
 * the bound of each draw by Lemire's multiply-shift, whose bias is below
 * n / 2^64. */
void _mlir_ciface_staticify_randperm_i64(Memref1 *out, int64_t seed) {
  int64_t n = out->size, stride = out->stride;
  int64_t *p = (int64_t *)out->data + out->offset;
  for (int64_t i = 0; i < n; ++i)
    p[i * stride] = i;
  uint64_t state = (uint64_t)seed;
  for (int64_t i = n - 1; i > 0; --i) {
    state = mix64(state);
    uint64_t j = (uint64_t)(((unsigned __int128)state * (uint64_t)(i + 1)) >> 64);
    int64_t t = p[i * stride];
    p[i * stride] = p[j * stride];
    p[j * stride] = t;
  }
}

/* Whether key a (at index ia) comes before key b (at ib) in topk's order:
 * larger first (smaller with !largest), NaN largest as in PyTorch, ties by
 * the lower index. Then the k first keys of a vector in that order, and
 * their indices, k = values' size (at most keys'): a binary heap of the k
 * best seen so far (its root the worst of them), then sorted in place,
 * O(n log k). One pair of functions per key type. */
#define STATICIFY_TOPK(T, SUFFIX)                                                        \
  static int before_##SUFFIX(T a, int64_t ia, T b, int64_t ib, int largest) {            \
    int na = isnan(a), nb = isnan(b);                                                    \
    if (na || nb) {                                                                      \
      if (na && nb)                                                                      \
        return ia < ib;                                                                  \
      return largest ? na : nb;                                                          \
    }                                                                                    \
    if (a != b)                                                                          \
      return largest ? a > b : a < b;                                                    \
    return ia < ib;                                                                      \
  }                                                                                      \
  void _mlir_ciface_staticify_topk_##SUFFIX(Memref1 *keys, Memref1 *values,              \
                                            Memref1 *indices, int64_t largest) {         \
    int64_t n = keys->size, k = values->size;                                            \
    const T *x = (const T *)keys->data + keys->offset;                                   \
    T *v = (T *)values->data + values->offset;                                           \
    int64_t *ix = (int64_t *)indices->data + indices->offset;                            \
    int64_t ks = keys->stride, vs = values->stride, is = indices->stride;                \
    int64_t size = 0;                                                                    \
    if (k <= 0)                                                                          \
      return;                                                                            \
    for (int64_t i = 0; i < n; ++i) {                                                    \
      T key = x[i * ks];                                                                 \
      int64_t h;                                                                         \
      if (size < k) { /* sift up: the worst at the root */                               \
        h = size++;                                                                      \
        while (h > 0) {                                                                  \
          int64_t parent = (h - 1) / 2;                                                  \
          if (!before_##SUFFIX(v[parent * vs], ix[parent * is], key, i, largest))        \
            break;                                                                       \
          v[h * vs] = v[parent * vs];                                                    \
          ix[h * is] = ix[parent * is];                                                  \
          h = parent;                                                                    \
        }                                                                                \
      } else if (before_##SUFFIX(key, i, v[0], ix[0], largest)) { /* replace the root */ \
        h = 0;                                                                           \
        for (;;) {                                                                       \
          int64_t c = 2 * h + 1;                                                         \
          if (c >= size)                                                                 \
            break;                                                                       \
          if (c + 1 < size &&                                                            \
              before_##SUFFIX(v[c * vs], ix[c * is], v[(c + 1) * vs], ix[(c + 1) * is],  \
                              largest))                                                  \
            ++c;                                                                         \
          if (!before_##SUFFIX(key, i, v[c * vs], ix[c * is], largest))                  \
            break;                                                                       \
          v[h * vs] = v[c * vs];                                                         \
          ix[h * is] = ix[c * is];                                                       \
          h = c;                                                                         \
        }                                                                                \
      } else {                                                                           \
        continue;                                                                        \
      }                                                                                  \
      v[h * vs] = key;                                                                   \
      ix[h * is] = i;                                                                    \
    }                                                                                    \
    for (int64_t end = size - 1; end > 0; --end) { /* the worst to the end */            \
      T key = v[end * vs];                                                               \
      int64_t id = ix[end * is], h = 0;                                                  \
      v[end * vs] = v[0];                                                                \
      ix[end * is] = ix[0];                                                              \
      for (;;) {                                                                         \
        int64_t c = 2 * h + 1;                                                           \
        if (c >= end)                                                                    \
          break;                                                                         \
        if (c + 1 < end &&                                                               \
            before_##SUFFIX(v[c * vs], ix[c * is], v[(c + 1) * vs], ix[(c + 1) * is],    \
                            largest))                                                    \
          ++c;                                                                           \
        if (!before_##SUFFIX(key, id, v[c * vs], ix[c * is], largest))                   \
          break;                                                                         \
        v[h * vs] = v[c * vs];                                                           \
        ix[h * is] = ix[c * is];                                                         \
        h = c;                                                                           \
      }                                                                                  \
      v[h * vs] = key;                                                                   \
      ix[h * is] = id;                                                                   \
    }                                                                                    \
  }

STATICIFY_TOPK(float, f32)
STATICIFY_TOPK(double, f64)
