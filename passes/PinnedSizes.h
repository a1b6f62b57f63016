//===- PinnedSizes.h - data-dependent lengths that a later op fixes -------===//
//
// Some ops raise unless two sizes agree: `out.index_add_(0, index, src)`
// needs as many indices as src has rows. Where such an op runs every time
// the value it checks is made (same block), every run that succeeds has
// the checked length equal to the other, static size, and the contract
// (DESIGN.md: only runs where the original succeeds are kept) lets the
// producer be computed at that size from the start.
//
// The `pinned-sizes` pass takes `repeat_interleave` by a tensor of repeats
// (torchrec's and PyG's segment ids, `repeat_interleave(arange(B),
// lengths)`, Pointcept's offset2batch), whose length is the repeats' sum,
// pinned by `index_add`/`index_copy` (in place or not) at its index:
// position j of the result belongs to the segment where the repeats'
// running sum first passes j, `searchsorted(cumsum(r), arange(S),
// right=True)`, of static length S. The self form gathers x's elements by
// those ids, behind a host guard (metadata) that r has one count per
// element (a single repeat broadcasts otherwise; then the original runs).
// Where the repeats do not sum to S, or one is negative, the original
// raises; the rewrite returns ids of the segments it reaches instead.
//
// Widths are pinned too (PinnedWidths.cpp): `arange(int(t))` carried into
// an elementwise op with a tensor of size S along its width, which
// broadcasting pins to S or 1, runs from `arange(S) * (t != 1)` behind a
// host guard.
//
// Left alone: a use of the result before the pinning op (it would see the
// length before the check), a pinning op in another block (it may not run),
// `output_size=` given (the length is the host's already), a dim other than
// 0 or None.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// `arange(n)` of a count read from the device whose width broadcasting
/// pins to a size of the program's (PinnedWidths.cpp): the padding mask
/// `arange(int(lengths.max()))[None, :] < lengths[:, None]` applied to
/// a padded batch. Part of the pass.
bool pinnedWidths(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

/// The pass (see the file comment). Returns whether it changed the graph.
bool pinnedSizes(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

} // namespace staticify
