//===- LowerRegions.h - A method's static regions, lowered one by one ----===//
//
// When a method does not lower whole (an op the bridge does not take, a
// dynamic island), its static regions (passes/Partition.h) may: each becomes
// a method of its own (passes/Outline.h), typed by one example run of the
// method on inputs of the signature (each `?` size 8: floats normal, ints
// zero, bools random), and lowered as a method (lowerMethod); the region's
// method then calls its kernel, the rest of the method stays TorchScript and
// calls it. A region that does not lower is put back where it was.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "lower/LowerModule.h"

namespace staticify::lower {

struct RegionLowering {
  size_t region = 0;  // Segment::number
  std::string method; // the region's method, when it lowered
  LoweringOutcome outcome;
};

/// The regions of \p method (as \p module has it now) lowered for inputs of
/// \p signature; an empty list and \p why set when there is nothing to try
/// (no static region, or the example run raised).
std::vector<RegionLowering>
lowerRegions(torch::jit::Module &module, const std::string &method,
             const std::vector<TensorSignature> &signature,
             const LoweringTargets &targets, std::string &why);

} // namespace staticify::lower
