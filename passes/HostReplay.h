//===- HostReplay.h - host numbers' tensors read where they were made -----===//
//
// torchvision's normalize builds `std = torch.as_tensor(std, dtype=dtype,
// device=tensor.device)` from a list of host numbers and checks
// `if (std == 0).any(): raise ValueError(...)`. The tensor read is made from
// host numbers only, but on the data's device: the read waits for the
// stream though no data is involved.
//
// The `host-replay` pass computes such a read's tensor again on the host,
// from the same numbers, by the same ops, and reads that: no sync. It takes
// a read (`bool(t)`, `t.item()`, `t.tolist()`...) of a tensor computed only
// from host values by ops that give the host a device's numbers exactly
// (replaysExactly: comparisons, any/all, integer arithmetic, single IEEE
// roundings, views), starting from factories of host numbers
// (`torch.tensor`, `as_tensor`, `scalar_tensor`, `zeros`, `ones`, `full`)
// on any device. The replay builds on the CPU instead and reads there; the
// device's tensors stay for their other uses. Where a factory's dtype is
// known only at run time (`tensor.dtype`), a guard on it (metadata: no
// sync) replays only in the dtypes the host computes as a device does
// (exactReplayDTypes) and reads the device's tensor otherwise. Left alone:
// a chain through another op (a transcendental, a cast, data), or one whose
// tensors or lists something may write.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// The pass (see the file comment). Returns whether it changed the graph.
bool hostReplay(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
