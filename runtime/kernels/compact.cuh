//===- compact.cuh - The compaction kernel of the bounded forms -----------===//
//
// The scatter step of `compact` (passes/forms/bounded_forms.py) as a CUDA
// kernel: positions of the selected elements, in order, given the inclusive
// prefix sum of the selection. Free of libtorch: CI compiles it with nvcc
// from /usr/local/cuda; the CUDA build of the runtime links it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace staticify::cuda {

/// out[rank[i] - 1] = i for every selected i (keep[i] != 0); out must hold
/// n entries, zeroed by the caller. Launches on \p stream.
void launchCompact(const bool *keep, const int64_t *rank, int64_t n,
                   int64_t *out, void *stream);

} // namespace staticify::cuda
