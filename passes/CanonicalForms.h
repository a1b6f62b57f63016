//===- CanonicalForms.h - One spelling per idiom --------------------------===//
//
// Equal spellings of one computation become one, so that the analysis and
// the rules meet each idiom once, however a program writes it (normalize
// applies these to every node):
//
//   flatten(x) (all dims)              -> reshape(x, [-1])
//   argwhere(m)                        -> nonzero(m)
//   masked_select(x, m), x of m's shape -> x[m]
//   nonzero(m)[:, 0]                   -> where(m)[0]
//   nonzero(m).squeeze(1) (or -1), .view(-1),
//   .reshape(-1), .flatten(), m 1-D    -> where(m)[0]
//   abs(t) (Python's builtin)          -> t.abs()
//   int(t.item()), float(t.item())     -> int(t), float(t)
//   bincount(x, minlength=L >= 256),   -> zeros(L).index_add(0, x.long(),
//   or of int64 x viewed as L elements    ones), for a uint8 (int64) x (a
//   (bincount(...).view(C, C)),           guard on its dtype: no sync)
//   x.shape[i], constant i             -> x.size(i)
//   f(a.expand_as(x), b.expand_as(x)), -> f(a, b).expand_as(x), where the
//   f elementwise                         result is only read
//   an op computed twice               -> once (mergeEqualTensorOps)
//
// Each is exact wherever the original does not raise (a 0-d m: nonzero(m)
// has no column 0, where(m)[0] is [0] when m is true).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace staticify {

/// One mask written out at each use (`a.view(-1) == 1` twice) is one mask:
/// a tensor op that equals one before it (same op, same operands and
/// attributes; deterministic, writing nothing) is replaced by it where that
/// one dominates, when neither's result is written to (made afresh,
/// followed through their aliases; or a view no op uses to write). Lists,
/// tuples and constants are left as they are: a rule may own an index
/// list. Returns whether it merged.
///
/// With \p reads, after the rewrites: host reads and data-dependent shapes
/// merge too, and their host-number results, except the nodes \p reads
/// names (the original's, whose findings the report tracks): three cuts of
/// selections by one mask read their one count once, as TorchScript's
/// executor would run them.
/// \p merged, when given, hears of each node just before it goes.
/// With \p plumbing (once no rule follows), devices and lists of host
/// numbers that ops only read merge too: the forms repeat them at each use.
using MergeReads = std::function<bool(const torch::jit::Node *)>;
bool mergeEqualTensorOps(
    const std::shared_ptr<torch::jit::Graph> &graph,
    const MergeReads *reads = nullptr,
    const std::function<void(const torch::jit::Node *)> *merged = nullptr,
    bool plumbing = false);

/// Whether every use of \p v passes it to an op that neither writes that
/// argument nor returns a view of it (no return, no container, no alias):
/// another value of equal contents that nothing writes may stand for it.
bool readOnlyByOps(const torch::jit::Value *v);

/// `x[U.expand_as(x)].view(-1, C)` (or `.reshape`, or expanded to
/// `x.size()`), U = `m.unsqueeze(d)` or an elementwise op of such
/// unsqueezes and host numbers, all at one d (-1, or a constant d >= 0):
/// ssd.pytorch's `conf_data[(pos_idx.long() + neg_idx.long()).gt(0)]
/// .view(-1, num_classes)`, masked LM heads' `logits.masked_select(
/// mask.unsqueeze(-1).expand_as(logits)).view(-1, V)` (once it reads
/// `logits[...]`). Where U has x's shape with a last size of 1, each
/// unsqueeze is at its operand's end, C is x's last size and U is a bool
/// mask (expandedRowsTest: metadata, no sync), it selects x's rows where
/// m holds, m being U's tree without the unsqueezes (rowsOfExpanded): the
/// expanded mask takes whole rows in row-major order and the view regroups
/// their elements as rows. specialize-shapes versions a method on it.
struct ExpandedRows {
  torch::jit::Value *x = nullptr;
  torch::jit::Value *width = nullptr;      // C, a host int, or
  int64_t constantWidth = 0;               // C, where width is null
  torch::jit::Value *unsqueezed = nullptr; // U
  int64_t dim = -1;                        // d
  std::vector<torch::jit::Value *> leaves; // the unsqueezes' operands
};
std::optional<ExpandedRows> matchExpandedRows(torch::jit::Node *node);
/// Whether the test may read \p width (a C) again wherever it is: a
/// module attribute (`self.num_classes`).
bool widthReadAnywhere(const torch::jit::Value *width);
/// The host test of \p rows' facts, at \p anchor.
torch::jit::Value *expandedRowsTest(torch::jit::Graph &graph,
                                    const ExpandedRows &rows,
                                    const torch::jit::Node *anchor);
/// `x[m]` for \p unsqueezed's tree m without its unsqueezes, at \p anchor.
torch::jit::Value *rowsOfExpanded(torch::jit::Graph &graph, torch::jit::Value *x,
                                  torch::jit::Value *unsqueezed,
                                  const torch::jit::Node *anchor);

/// Rewrites \p node into its canonical form, inserting the new nodes before
/// it and destroying it (and nothing else); returns whether it did.
bool canonicalizeSpelling(torch::jit::Graph &graph, torch::jit::Node *node);

/// `x.dim()` (and `len(x.shape)`, where nothing writes the list) in
/// \p block of an x whose rank the ops that made it fix
/// (knownRank: a view to a list of known length, an elementwise op of
/// such, nonzero's coordinates) is that rank, and constant propagation then
/// takes the branch a test of it decides: detectron2's nonzero_tuple tests
/// `x.dim() == 0` before `x.nonzero()`, which then no longer leaves an if.
/// Returns whether it folded one.
bool foldKnownRanks(std::shared_ptr<torch::jit::Graph> &graph,
                    torch::jit::Block *block);

} // namespace staticify
