//===- Compact.h - The compaction other runtime ops build on
//---------------===//
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace staticify {

/// staticify::compact on a 1-D bool CUDA tensor: the positions of its true
/// elements, in order, padded with zeros to its length, and their count (a
/// 0-d int64 on its device, never read by the host). Only in a build with
/// CUDA (STATICIFY_WITH_CUDA).
std::tuple<at::Tensor, at::Tensor> compactCuda(const at::Tensor &keep);

} // namespace staticify
