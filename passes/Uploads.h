//===- Uploads.h - host numbers built on the device, not copied there -----===//
//
// `torch.tensor(s, dtype=..., device=d)` and `torch.as_tensor([a, b, c],
// dtype=..., device=d)` build a tensor in pageable host memory and copy it
// to d. On CUDA that copy waits for the stream to drain (PyTorch's copy
// from pageable memory ends in cudaStreamSynchronize): a host-device sync
// the program never asked for. A profile of torchvision's RetinaNet on an
// H100 found 17 of the 19 syncs left after staticify's rewrites there
// (GeneralizedRCNNTransform's normalize and resize_boxes,
// AnchorGenerator.generate_anchors; docs/benchmarks.md).
//
// The `uploads` pass builds such tensors on the device instead: a number as
// `full([], s)`, a list element by element (`fill_` of each row, a loop of
// host-static trip count) up to kMaxUploadElements, in the value's natural
// dtype (int64, float64, bool), where every host number is exact, then cast
// as TorchScript's torch.tensor casts. It makes floats in the default dtype
// first (0.485 with dtype=float64 is 0.48500001430511475): a number by a
// checked conversion (1e300 raises), which `full` in the default dtype
// repeats, a list by a cast (1e300 is inf), which a cast from float64
// repeats; then to the dtype asked for. Left alone: no device (a host tensor, no
// copy), requires_grad, nested lists.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// Longer lists keep the copy: one fill per element stops paying for the
/// sync it saves.
constexpr int64_t kMaxUploadElements = 64;

/// Rewrites \p node if it is such an upload; the new nodes are inserted
/// before it and it is destroyed. Returns whether it did.
bool buildOnDevice(torch::jit::Graph &graph, torch::jit::Node *node);

} // namespace staticify
