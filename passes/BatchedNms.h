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
///   marked = keep_mask.masked_fill(nms_kept_mask(boxes, scores, t, None,
///                                                idxs), True)
///
/// (the runtime's kernel staticify::nms_kept_mask with its classes: static,
/// no sync), behind a guard (guardAttr()) on what the host knows: idxs,
/// scores and keep_mask are vectors of boxes' rows, boxes have 4 columns and
/// one dtype with the scores, idxs are not floating point (a NaN class
/// matches no row), all on one device. When the guard fails, the original
/// loop runs on a copy of keep_mask. Either way the mask is a new value,
/// which keep_mask's uses after the loop read: a mask never written in
/// place is one the bound pass can pad (batched_nms's strategy test on
/// bounded boxes runs both strategies on the device).
///
/// Preconditions: the loop runs over the rows of `_unique2(idxs)` (only the
/// loop uses it), its body is exactly the four statements above (nothing
/// else is read or written), the value stored is a constant made with
/// keep_mask's dtype, keep_mask is made fresh (zeros_like) and read only for
/// its metadata before the loop, and it does not alias boxes, scores or
/// idxs.
/// Without the kernel the loop is kept and reported: torchvision takes it
/// above 1,000 boxes (CPU) or 5,000 (CUDA), where the TorchScript form
/// nms_kept_mask (a greedy walk of N sequential steps) is many times slower
/// than the loop's syncs.
/// A loop with a torchvision::nms that does not match is reported with the
/// reason.
bool batchedNms(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
