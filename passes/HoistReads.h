//===- HoistReads.h - a loop's host reads as one copy made before it ------===//
//
// What the rewrites cannot make static, a loop often reads element by
// element: torchvision's `paste_masks_in_image` reads ten integers of each
// box (`int(box[2] - box[0] + 1)`, `max(box[0], 0)`, the slice bounds of
// the paste), `heatmaps_to_keypoints` two (`int(widths_ceil[i].item())`).
// On CUDA each read waits for the stream to drain, once per box: Mask
// R-CNN's postprocess makes 10 syncs per detection.
//
// The `hoist-reads` pass copies the tensors a for-loop reads to the host
// once, right before the loop (`t.cpu()`: one sync), and makes the loop's
// reads read the copy (no sync). What the loop computes between the tensor
// and the read is computed again on the host, from the copy, so it must
// give the host exactly the device's numbers; only ops that do qualify
// (replaysExactly: views, integer arithmetic and single IEEE roundings,
// rounding to integers, clamps, comparisons; no transcendental, whose
// libraries differ in the last place, and no cast, whose NaN-to-int the
// devices answer differently).
//
// Where several tensors a loop reads are computed outside it, by such ops,
// from fewer tensors (the keypoint decoder's `widths_ceil` and
// `heights_ceil`, both from the boxes), those are copied instead and the
// rest computed on the host. A read is left alone, and the report says why,
// when its tensor is computed in the loop by another op, when something in
// the loop may write what it reads, or when the loop would copy more
// tensors than it has reads (never more sync points than before). Only
// reads that every iteration makes move (not those under an if in the
// loop), and the copy is behind a guard: it is made where the loop runs
// once or more and the copied tensors have dtypes whose ops the host
// computes as a device does (not half precision, whose CPU kernels
// libtorch 1.13 partly lacks and whose Scalars it rounds first); otherwise
// the loop reads the device's tensors as before. A run that never reaches
// a read never copies. The whole tensor is copied, however few of its
// elements the loop reads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// The pass (see the file comment). Returns whether it changed the graph.
bool hoistReads(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
