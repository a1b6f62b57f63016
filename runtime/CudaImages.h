//===- CudaImages.h - Which stored CUDA image a GPU loads, and checks -----===//
//
// Header-only and CUDA-free, so the choice and the checks are unit-tested
// on machines without a GPU (test/unit/CudaImagesTest.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace staticify::cuda_images {

/// "sm_90" -> 90, "sm_90.ptx" -> 90 (with \p ptx set); -1 otherwise.
inline int archOf(const std::string &name, bool &ptx) {
  ptx = name.size() > 4 && name.compare(name.size() - 4, 4, ".ptx") == 0;
  std::string base = ptx ? name.substr(0, name.size() - 4) : name;
  if (base.size() < 5 || base.compare(0, 3, "sm_") != 0)
    return -1;
  int n = 0;
  for (size_t i = 3; i < base.size(); ++i) {
    if (base[i] < '0' || base[i] > '9' || n > 10000)
      return -1;
    n = n * 10 + (base[i] - '0');
  }
  return n;
}

/// The image a GPU of compute capability \p major.\p minor loads from
/// \p names: the cubin of its major version with the highest minor version
/// not above its own (a cubin runs on later minor versions of its major
/// one), else the PTX of the highest architecture not above it (the driver
/// compiles PTX for newer GPUs). Empty if none fits.
inline std::string choose(const std::vector<std::string> &names, int major,
                          int minor) {
  int device = major * 10 + minor;
  std::string best;
  int bestArch = -1;
  for (const std::string &n : names) {
    bool ptx = false;
    int arch = archOf(n, ptx);
    if (!ptx && arch >= 0 && arch / 10 == major && arch <= device &&
        arch > bestArch) {
      best = n;
      bestArch = arch;
    }
  }
  if (!best.empty())
    return best;
  for (const std::string &n : names) {
    bool ptx = false;
    int arch = archOf(n, ptx);
    if (ptx && arch >= 0 && arch <= device && arch > bestArch) {
      best = n;
      bestArch = arch;
    }
  }
  return best;
}

/// Whether \p bytes is a 64-bit little-endian CUDA ELF whose section table
/// and sections lie inside it: the driver reads a cubin without its length,
/// so a truncated or forged one must not reach it.
inline bool wellFormedCubin(const std::string &bytes) {
  auto u16 = [&](size_t at) {
    uint16_t v;
    std::memcpy(&v, bytes.data() + at, 2);
    return uint64_t(v);
  };
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return uint64_t(v);
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  const uint64_t size = bytes.size();
  if (size < 64 ||
      bytes.compare(0, 4,
                    "\x7f"
                    "ELF") != 0 ||
      bytes[4] != 2 || bytes[5] != 1 ||
      u16(18) != 190) // ELFCLASS64, little-endian, EM_CUDA
    return false;
  uint64_t shoff = u64(40), shentsize = u16(58), shnum = u16(60);
  uint64_t phoff = u64(32), phentsize = u16(54), phnum = u16(56);
  if (shentsize < 64 || shoff > size || shnum > (size - shoff) / shentsize)
    return false;
  if (phnum &&
      (phentsize < 56 || phoff > size || phnum > (size - phoff) / phentsize))
    return false;
  for (uint64_t i = 0; i < shnum; ++i) {
    size_t at = size_t(shoff + i * shentsize);
    uint64_t type = u32(at + 4), offset = u64(at + 24), length = u64(at + 32);
    if (type != 8 /* SHT_NOBITS */ && (offset > size || length > size - offset))
      return false;
  }
  return true;
}

/// Whether \p bytes is PTX text the driver may take: NUL-free (the driver
/// reads up to the first NUL) and starting like PTX.
inline bool wellFormedPtx(const std::string &bytes) {
  return bytes.find('\0') == std::string::npos &&
         bytes.find(".version") != std::string::npos &&
         bytes.find(".target") != std::string::npos;
}

} // namespace staticify::cuda_images
