//===- BatchedNms.h - batched_nms's per-class loop -> one NMS of classes --===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

namespace staticify {

/// torchvision's batched_nms, per-class strategy (`_batched_nms_vanilla`):
///
///   for class_id in torch.unique(idxs):
///       curr = torch.where(idxs == class_id)[0]
///       keep = torchvision::nms(boxes[curr], scores[curr], t)
///       keep_mask[curr[keep]] = True
///
/// syncs once for the unique and three times per class. The loop marks in
/// keep_mask the rows that one greedy NMS keeps when only boxes of one class
/// suppress each other, so with --runtime-ops it becomes
///
///   keep_mask.masked_fill_(index_mask(nms_padded(boxes, scores, t,
///                                                None, idxs)), True)
///
/// (the runtime's kernel staticify::nms_padded with its classes, then the
/// form index_mask: static, no sync), behind a guard (guardAttr()) on what the host knows: idxs, scores and
/// keep_mask are vectors of boxes' rows, boxes have 4 columns and one dtype
/// with the scores, idxs are not floating point (a NaN class matches no
/// row), all on one device. When the guard fails, the original loop runs.
///
/// Preconditions: the loop runs over the rows of `_unique2(idxs)` (only the
/// loop uses it), its body is exactly the four statements above (nothing
/// else is read or written), the value stored is a constant made with
/// keep_mask's dtype, and keep_mask does not alias boxes, scores or idxs.
/// Without the kernel the loop is kept and reported: torchvision takes it
/// above 1,000 boxes (CPU) or 5,000 (CUDA), where the TorchScript form
/// nms_kept_mask (a greedy walk of N sequential steps) is many times slower
/// than the loop's syncs.
/// A loop with a torchvision::nms that does not match is reported with the
/// reason.
bool batchedNms(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
