//===- MaskedReduce.h - reduce(x[mask]) -> reduce(where(mask, x, id)) -----===//
#pragma once

#include "passes/PassContext.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

namespace staticify {

/// A reduction of a selection (`x[m]`, `masked_select(x, m)`) whose reduced
/// dimensions include the selected one becomes the same reduction of the
/// selection's row view padded with the reduction's identity:
///
///   %s = aten::index(%x, [%m]);  %r = aten::sum(%s)
///     ->  %r = aten::sum(aten::where(%keep, %rows, 0))
///
/// sum/nansum/count_nonzero/any pad with 0, prod/all with 1, logsumexp with
/// -inf, norm (p >= 0) with 0; amax/amin/max/min pad with the first selected
/// row (dtype-agnostic); mean becomes sum / count. `numel`, `size(_, 0)` and
/// `len` of a selection become `int(count)` for lift-scalars to keep on the
/// device. Precondition, checked first: the reduction covers dimension 0 of
/// the selection (no dim, None, [], or a constant list containing 0), and a
/// max/min's indices are unused. Empty selections: sum 0, prod 1, mean NaN,
/// any False, all True; max/min (which raise in PyTorch) return an element of
/// x's first row. A selection along dimension d >= 1 (`x[:, m]`) comes here
/// as one along dimension 0 (leading-selections).
bool maskedReduce(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

/// Reduction \p node over the live rows of \p view, emitted at the
/// insertion point: one replacement per output of \p node, or none, with
/// \p why saying what is missing (no identity, dimension 0 not reduced).
/// Shared by masked-reduce and the bound pass (a bounded value's view is its
/// padded rows and their live-row mask). Where \p view's live rows come
/// first (\p compacted: a bounded value's), the positions argmax, argmin
/// and max/min's indices return are the selection's own; elsewhere they
/// would index the unselected rows too, and those reductions are refused.
std::vector<torch::jit::Value *> emitMaskedReduction(torch::jit::Graph &graph,
                                                     torch::jit::Node *node,
                                                     const RowView &view,
                                                     bool compacted,
                                                     std::string &why);

} // namespace staticify
