/*===- cpu.c - Hand-written kernels the lowered CPU code calls -----------===*
 *
 * The IREE "ukernel" idea: what linalg does not express well (selection,
 * permutation) is a small C function, compiled and linked into every
 * lowered kernel's shared object (lower/CpuTarget.cpp), called from the
 * generated code through MLIR's C interface (a pointer to each memref's
 * descriptor). No dependency but libc; scratch memory, where a ukernel
 * needs it, from malloc and freed before it returns. The one global state is
 * the cache of the generated code's large buffers (below).
 *
 *===----------------------------------------------------------------------===*/
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The generated code's buffers (finalize-memref-to-llvm with
 * use-generic-functions): a temporary of a large input is megabytes, and
 * libc's malloc hands such blocks back to the system when they are freed
 * (mmap, heap trimming), so that every call pays page faults to touch them
 * again (a third of the lowered sampler's time at 1e6 rows). Blocks of 64 KiB
 * and more are kept, up to 32 of them, and reused by a later request of at
 * most their capacity and at least half of it; the cache is this kernel's
 * (each lowered method's shared object has its own) and is released when
 * the object is unloaded. Smaller blocks go to libc as they are. Every block
 * carries a 64-byte header (its capacity, and whether it is cached-size), so
 * the data stays 64-byte aligned for the vector code. */
enum { kHeader = 64, kSlots = 32 };
static const size_t kCachedMin = (size_t)64 << 10;
static struct { void *block; size_t capacity; } cache[kSlots];
static atomic_flag cacheLock = ATOMIC_FLAG_INIT;

static void lockCache(void) {
  while (atomic_flag_test_and_set_explicit(&cacheLock, memory_order_acquire))
    ;
}
static void unlockCache(void) {
  atomic_flag_clear_explicit(&cacheLock, memory_order_release);
}

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t bytes) {
  (void)alignment; /* at most 64 in generated code: the header keeps it */
  if (bytes >= kCachedMin) {
    void *found = NULL;
    lockCache();
    for (int i = 0; i < kSlots && !found; ++i)
      if (cache[i].block && cache[i].capacity >= bytes &&
          cache[i].capacity / 2 <= bytes) {
        found = cache[i].block;
        cache[i].block = NULL;
      }
    unlockCache();
    if (found)
      return (char *)found + kHeader;
  }
  void *block = aligned_alloc(kHeader, (bytes + kHeader + kHeader - 1) /
                                           kHeader * kHeader);
  if (!block)
    return NULL;
  *(size_t *)block = bytes;
  return (char *)block + kHeader;
}

void *_mlir_memref_to_llvm_alloc(size_t bytes) {
  return _mlir_memref_to_llvm_aligned_alloc(kHeader, bytes);
}

void _mlir_memref_to_llvm_free(void *p) {
  if (!p)
    return;
  void *block = (char *)p - kHeader;
  size_t capacity = *(size_t *)block;
  if (capacity >= kCachedMin) {
    lockCache();
    int slot = -1;
    for (int i = 0; i < kSlots && slot < 0; ++i)
      if (!cache[i].block)
        slot = i;
    if (slot >= 0) {
      cache[slot].block = block;
      cache[slot].capacity = capacity;
    }
    unlockCache();
    if (slot >= 0)
      return;
  }
  free(block);
}

__attribute__((destructor)) static void releaseCache(void) {
  for (int i = 0; i < kSlots; ++i) {
    free(cache[i].block);
    cache[i].block = NULL;
  }
}

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

/* topk without scratch memory (for a few keys of many, or when malloc
 * fails): a binary heap of
 * the k best seen so far (its root the worst of them), then sorted in
 * place, O(n log k). Whether key a (at index ia) comes before key b (at
 * ib): larger first (smaller with !largest), NaN largest, ties by index. */
#define STATICIFY_TOPK_HEAP(T, SUFFIX)                                                        \
  static int before_##SUFFIX(T a, int64_t ia, T b, int64_t ib, int largest) {            \
    int na = a != a, nb = b != b; /* NaN; never for integers */                        \
    if (na || nb) {                                                                      \
      if (na && nb)                                                                      \
        return ia < ib;                                                                  \
      return largest ? na : nb;                                                          \
    }                                                                                    \
    if (a != b)                                                                          \
      return largest ? a > b : a < b;                                                    \
    return ia < ib;                                                                      \
  }                                                                                      \
  /* Puts (key, id) into the heap's slot h, or below it: the heap of size    \
   * entries keeps its worst at the root. */                                    \
  static inline void sift_down_##SUFFIX(T *v, int64_t vs, int64_t *ix,           \
                                        int64_t is, int64_t size, int64_t h, T key, \
                                        int64_t id, int64_t largest) {           \
    for (;;) {                                                                   \
      int64_t c = 2 * h + 1;                                                     \
      if (c >= size)                                                             \
        break;                                                                   \
      if (c + 1 < size && before_##SUFFIX(v[c * vs], ix[c * is], v[(c + 1) * vs],\
                                          ix[(c + 1) * is], largest))            \
        ++c; /* the worse child */                                               \
      if (!before_##SUFFIX(key, id, v[c * vs], ix[c * is], largest))             \
        break;                                                                   \
      v[h * vs] = v[c * vs];                                                     \
      ix[h * is] = ix[c * is];                                                   \
      h = c;                                                                     \
    }                                                                            \
    v[h * vs] = key;                                                             \
    ix[h * is] = id;                                                             \
  }                                                                              \
  static void topk_heap_##SUFFIX(Memref1 *keys, Memref1 *values,                 \
                                 Memref1 *indices, int64_t largest) {            \
    int64_t n = keys->size, k = values->size;                                    \
    const T *x = (const T *)keys->data + keys->offset;                           \
    T *v = (T *)values->data + values->offset;                                   \
    int64_t *ix = (int64_t *)indices->data + indices->offset;                    \
    int64_t ks = keys->stride, vs = values->stride, is = indices->stride;        \
    int64_t size = 0;                                                            \
    if (k <= 0)                                                                  \
      return;                                                                    \
    for (int64_t i = 0; i < n; ++i) {                                            \
      T key = x[i * ks];                                                         \
      if (size < k) { /* sift up: the worst at the root */                       \
        int64_t h = size++;                                                      \
        while (h > 0) {                                                          \
          int64_t parent = (h - 1) / 2;                                          \
          if (!before_##SUFFIX(v[parent * vs], ix[parent * is], key, i, largest))\
            break;                                                               \
          v[h * vs] = v[parent * vs];                                            \
          ix[h * is] = ix[parent * is];                                          \
          h = parent;                                                            \
        }                                                                        \
        v[h * vs] = key;                                                         \
        ix[h * is] = i;                                                          \
      } else if (before_##SUFFIX(key, i, v[0], ix[0], largest)) {                \
        sift_down_##SUFFIX(v, vs, ix, is, size, 0, key, i, largest);             \
      }                                                                          \
    }                                                                            \
    for (int64_t end = size - 1; end > 0; --end) { /* the worst to the end */    \
      T key = v[end * vs];                                                       \
      int64_t id = ix[end * is];                                                 \
      v[end * vs] = v[0];                                                        \
      ix[end * is] = ix[0];                                                      \
      sift_down_##SUFFIX(v, vs, ix, is, end, 0, key, id, largest);               \
    }                                                                            \
  }

STATICIFY_TOPK_HEAP(float, f32)
STATICIFY_TOPK_HEAP(double, f64)
STATICIFY_TOPK_HEAP(int64_t, i64)

/* torch.topk of a vector: the k first keys in topk's order (larger first,
 * smaller with !largest; NaN largest, as in PyTorch; ties by the lower
 * index), and their indices, k = values' size (at most keys').
 *
 * Radix select, then radix sort. Each key maps to an unsigned integer whose
 * order is topk's (the sign-magnitude float flipped; NaN the largest; -0.0
 * equal to 0.0; inverted for !largest). A histogram of the top 16 bits over
 * all keys finds those of the k-th key; the keys with that digit are
 * the candidates, and each next digit's histogram runs over the candidates
 * alone (compacted each time), so that after a pass or two only a few keys
 * remain. The keys above the k-th, then those equal to it in index order,
 * are the k; a stable least-significant-digit radix sort orders them, ties
 * staying in index order. Scratch: the 16-bit histogram, the candidates,
 * and 2k (key, index) pairs. */
#define STATICIFY_TOPK(T, U, BITS, SUFFIX, FLOATING)                             \
  typedef struct { U key; int64_t index; } Pair_##SUFFIX;                         \
  /* Branch-free: the signs of random keys would defeat a predictor. */        \
  static inline U order_##SUFFIX(T x, int largest) {                             \
    U u;                                                                         \
    const U sign = (U)1 << (BITS - 1);                                           \
    if (FLOATING) {                                                              \
      x = x + (T)0; /* -0.0 + 0.0 is 0.0: -0.0 ties with 0.0, as in PyTorch */  \
      memcpy(&u, &x, sizeof u);                                                  \
      U negative = (U)0 - (u >> (BITS - 1)); /* all ones for a negative key */   \
      u ^= negative | sign;                                                      \
      U nan = (U)0 - (U)(x != x);                                                \
      u |= nan; /* NaN: the largest */                                           \
    } else {                                                                     \
      u = (U)x ^ sign; /* two's complement: the sign bit flipped */              \
    }                                                                            \
    return u ^ ((U)0 - (U)!largest);                                             \
  }                                                                              \
  /* The digit of the need-th largest among hist's, and how many lie above. */  \
  static int pick_##SUFFIX(const int64_t *hist, int64_t *need) {                 \
    int d = 255;                                                                 \
    int64_t above = 0;                                                           \
    for (; d > 0 && above + hist[d] < *need; --d)                                \
      above += hist[d];                                                          \
    *need -= above;                                                              \
    return d;                                                                    \
  }                                                                              \
  void _mlir_ciface_staticify_topk_##SUFFIX(Memref1 *keys, Memref1 *values,      \
                                            Memref1 *indices, int64_t largest) { \
    int64_t n = keys->size, k = values->size;                                    \
    const T *x = (const T *)keys->data + keys->offset;                           \
    T *v = (T *)values->data + values->offset;                                   \
    int64_t *ix = (int64_t *)indices->data + indices->offset;                    \
    int64_t ks = keys->stride, vs = values->stride, is = indices->stride;        \
    if (k <= 0)                                                                  \
      return;                                                                    \
    /* A few keys of many: the heap's one pass wins (measured: 2.1 ms against   \
     * 12.9 for k = 1e3 of 1e6 random doubles; 30 against 15 for k = 5e4). */   \
    if ((uint64_t)k * 256 <= (uint64_t)n) {                                      \
      topk_heap_##SUFFIX(keys, values, indices, largest);                        \
      return;                                                                    \
    }                                                                            \
    /* The first digit is 16 bits wide (a 512 KB histogram): keys of one    \
     * range share their top byte, not their top 16 bits, so after this pass  \
     * few candidates remain. */                                                \
    int64_t *wide = calloc(65536, sizeof *wide);                                 \
    Pair_##SUFFIX *a = malloc(2 * (size_t)k * sizeof *a), *b;                    \
    int64_t *cand = NULL;                                                        \
    if (!wide || !a) {                                                           \
      free(wide);                                                                \
      free(a);                                                                   \
      topk_heap_##SUFFIX(keys, values, indices, largest);                        \
      return;                                                                    \
    }                                                                            \
    b = a + k;                                                                   \
    int shift = BITS - 16;                                                       \
    for (int64_t i = 0; i < n; ++i)                                              \
      ++wide[order_##SUFFIX(x[i * ks], (int)largest) >> shift];                  \
    int64_t need = k, above = 0;                                                 \
    int64_t d = 65535;                                                           \
    for (; d > 0 && above + wide[d] < need; --d)                                 \
      above += wide[d];                                                          \
    need -= above;                                                               \
    U prefix = (U)d << shift;                                                    \
    int64_t m = wide[d];                                                         \
    free(wide);                                                                  \
    cand = malloc((size_t)m * sizeof *cand);                                     \
    if (!cand) {                                                                 \
      free(a);                                                                   \
      topk_heap_##SUFFIX(keys, values, indices, largest);                        \
      return;                                                                    \
    }                                                                            \
    for (int64_t i = 0, j = 0; i < n && j < m; ++i)                              \
      if ((order_##SUFFIX(x[i * ks], (int)largest) >> shift) == (U)d)            \
        cand[j++] = i;                                                           \
    /* The next digits, 8 bits each, over the candidates alone. */              \
    int64_t hist[256];                                                           \
    for (shift -= 8; shift >= 0 && m > 1; shift -= 8) {                          \
      memset(hist, 0, sizeof hist);                                              \
      for (int64_t j = 0; j < m; ++j)                                            \
        ++hist[(order_##SUFFIX(x[cand[j] * ks], (int)largest) >> shift) & 255];  \
      int e = pick_##SUFFIX(hist, &need);                                        \
      prefix |= (U)e << shift;                                                   \
      int64_t kept = 0;                                                          \
      for (int64_t j = 0; j < m; ++j) {                                          \
        cand[kept] = cand[j];                                                    \
        kept += (int)((order_##SUFFIX(x[cand[j] * ks], (int)largest) >> shift) & \
                      255) == e;                                                 \
      }                                                                          \
      m = kept;                                                                  \
    }                                                                            \
    /* One candidate left before the last digit: it is the k-th key. */         \
    U kth = m == 1 && shift >= 0 ? order_##SUFFIX(x[cand[0] * ks], (int)largest) \
                                 : prefix;                                       \
    free(cand);                                                                  \
    /* The k: every key above the k-th, then `need` equal to it. */              \
    int64_t taken = 0;                                                           \
    for (int64_t i = 0; i < n && taken < k; ++i) {                               \
      U ui = order_##SUFFIX(x[i * ks], (int)largest);                            \
      if (ui > kth || (ui == kth && need > 0)) {                                 \
        need -= ui == kth;                                                       \
        a[taken].key = ui;                                                       \
        a[taken++].index = i;                                                    \
      }                                                                          \
    }                                                                            \
    /* Stable radix sort by key, descending: ties keep index order. */           \
    for (int s = 0; s < BITS; s += 8) {                                          \
      int64_t count[256] = {0}, at[256];                                         \
      for (int64_t j = 0; j < taken; ++j)                                        \
        ++count[(a[j].key >> s) & 255];                                          \
      if (count[(a[0].key >> s) & 255] == taken)                                 \
        continue; /* one digit for all: already in order */                      \
      at[255] = 0;                                                               \
      for (int e = 254; e >= 0; --e)                                             \
        at[e] = at[e + 1] + count[e + 1];                                        \
      for (int64_t j = 0; j < taken; ++j)                                        \
        b[at[(a[j].key >> s) & 255]++] = a[j];                                   \
      Pair_##SUFFIX *t = a;                                                      \
      a = b;                                                                     \
      b = t;                                                                     \
    }                                                                            \
    for (int64_t j = 0; j < taken; ++j) {                                        \
      v[j * vs] = x[a[j].index * ks];                                            \
      ix[j * is] = a[j].index;                                                   \
    }                                                                            \
    free(a < b ? a : b);                                                         \
  }

STATICIFY_TOPK(float, uint32_t, 32, f32, 1)
STATICIFY_TOPK(double, uint64_t, 64, f64, 1)
STATICIFY_TOPK(int64_t, uint64_t, 64, i64, 0)
