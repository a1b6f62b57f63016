//===- KernelAbi.h - Calling and loading lowered kernels ----------------===//
//
// What the CPU kernel and the CUDA host code share: MLIR's C-interface
// memref descriptors, calls with N descriptor pointers, and loading a
// shared object from bytes (memfd_create + dlopen, no file, no LLVM).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace staticify::abi {

/// A memref descriptor as MLIR's C interface takes it: base and aligned
/// pointers, offset, then sizes and strides (rank of each).
inline std::vector<int64_t> descriptor(void *data, c10::IntArrayRef sizes,
                                       c10::IntArrayRef strides) {
  std::vector<int64_t> d(3 + 2 * sizes.size());
  d[0] = reinterpret_cast<int64_t>(data);
  d[1] = reinterpret_cast<int64_t>(data);
  d[2] = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    d[3 + i] = sizes[i];
    d[3 + sizes.size() + i] = strides[i];
  }
  return d;
}

/// Calls a C-interface function of N descriptor pointers.
template <size_t... I>
void callWith(void *fn, std::vector<void *> &args, std::index_sequence<I...>) {
  using F = void (*)(decltype(I, (void *)nullptr)...);
  reinterpret_cast<F>(fn)(args[I]...);
}
template <size_t N> void callN(void *fn, std::vector<void *> &args) {
  if constexpr (N == 0) {
    throw std::runtime_error("LoweredMethod: too many arguments");
  } else {
    if (args.size() == N)
      return callWith(fn, args, std::make_index_sequence<N>());
    callN<N - 1>(fn, args);
  }
}
constexpr size_t kMaxArgs = 32;

/// A shared object loaded from \p bytes: the handle (null if it does not
/// load) and the memfd, which stays open while it is loaded: dlopen knows a
/// library by its path, and a closed descriptor's number (so its
/// /proc/self/fd path) would be reused by the next object, which dlopen
/// would then take for this one.
std::pair<void *, int> loadFromMemory(const std::string &bytes,
                                      const std::string &name);
void unload(void *handle, int fd);

} // namespace staticify::abi
