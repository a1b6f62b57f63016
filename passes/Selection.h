//===- Selection.h - `x[mask]` and its static row view --------------------===//
//
// A selection is `x[m]` with a boolean mask m over x's leading dimensions
// (`aten::index(x, [m])`), or `masked_select(x, m)`. Its *row view* is
//
//   rows = x.reshape([m.numel()] + x.size()[m.dim():])     # [n, rest...]
//   keep = m.reshape([m.numel()] + [1] * (rows.dim() - 1))  # [n, 1...]
//
// so that `where(keep, rows, fill)` is x[m] padded to the host-static n rows.
// Every size involved is host-static, nothing infers a -1 (empty tensors are
// fine), and it holds for any mask rank: no rank knowledge is needed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"
#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <unordered_map>

namespace staticify {

struct Selection {
  torch::jit::Node *node = nullptr; // aten::index or aten::masked_select
  torch::jit::Value *base = nullptr;
  torch::jit::Value *mask = nullptr; // bool or uint8
  bool isByteMask = false;
  bool broadcasts = false; // masked_select: base and mask broadcast first
};

/// Recognizes \p v as a selection, using \p analysis for mask dtypes.
std::optional<Selection> matchSelection(torch::jit::Value *v,
                                        const AnalysisResult &analysis);

struct RowView {
  torch::jit::Value *rows = nullptr; // [n, rest...]
  torch::jit::Value *keep = nullptr; // bool [n, 1, ...]
};

/// Emits the row view of \p sel at the insertion point; \p analysis, where
/// given, tells ranks through selections (a vector's row view reads no
/// sizes).
RowView emitRowView(torch::jit::Graph &graph, const Selection &sel,
                    const torch::jit::Node *anchor,
                    const AnalysisResult *analysis = nullptr);

/// `base[mask]` as an aten::index node at the insertion point.
torch::jit::Value *emitSelect(torch::jit::Graph &graph, torch::jit::Value *base,
                              torch::jit::Value *mask,
                              const torch::jit::Node *anchor);

/// The mask, as bool, reshaped to broadcast against \p like
/// (`m.reshape(m.size() + [1] * (like.dim() - m.dim()))`).
torch::jit::Value *emitMaskLike(torch::jit::Graph &graph, const Selection &sel,
                                torch::jit::Value *like,
                                const torch::jit::Node *anchor);

/// Whether nothing writes in place to the selection's base, its mask or the
/// selection itself: only then may a rewrite read them at another point.
bool isUnwritten(const Selection &sel, const Aliases &aliases);

/// The value whose shape \p v provably has, through shape-preserving ops
/// (elementwise ops whose tensor operands keep one shape, casts, clone,
/// `_like` ops, expand_as): \p v itself where none made it.
torch::jit::Value *shapeRoot(torch::jit::Value *v);

/// Whether \p a and \p b provably have the same shape: one shapeRoot.
bool provablySameShape(const torch::jit::Value *a, const torch::jit::Value *b);

/// Whether \p a and \p b provably have the same rank: they derive from one
/// value through rank-preserving ops (elementwise with scalars, casts...).
bool provablySameRank(const torch::jit::Value *a, const torch::jit::Value *b);

/// The where(c) node whose coordinates \p v is one of (`where(c)[k]`, or
/// an element of `i, j = where(c)`); null otherwise. Coordinates of one
/// where are int64 vectors of one count.
const torch::jit::Node *whereOfCoordinate(const torch::jit::Value *v);

/// The rank of \p v where the ops that made it fix it (reshape to a list of
/// known length, unsqueeze, per-row ops, reductions over constant dims,
/// elementwise ops over operands of known rank, and, given \p analysis,
/// x[mask]); nullopt where it is not known before the program runs.
std::optional<int64_t> knownRank(const torch::jit::Value *v,
                                 const AnalysisResult *analysis = nullptr,
                                 int depth = 0);

/// The host value \p v's size along \p dim equals wherever the program
/// gets past the op that made it, from that op's arguments: a factory's
/// size list (`ones([n])`), arange's end (from 0 by 1), a view's moved,
/// unsqueezed, repeated-once or expanded-with-`-1` dim, an elementwise op
/// of one tensor, a narrow's length, a cat's parts' constant sizes summed.
/// Neither a value nor a constant where unknown.
struct SizeSource {
  const torch::jit::Value *value = nullptr; // a host int
  std::optional<int64_t> constant;
};
SizeSource sizeSource(const torch::jit::Value *v, int64_t dim, int depth = 0);

/// Whether host ints \p a and \p b provably hold one number: one value,
/// equal constants, or sizes with one sizeSource().
bool sameHostInt(const torch::jit::Value *a, const torch::jit::Value *b);

/// A lower bound on the rank of \p v: knownRank where known; otherwise from
/// the ops that made it (an index or slice of dim 0 has a dim, unsqueeze
/// one more than its input's bound, elementwise ops the largest of their
/// operands'). 0 where nothing bounds it.
int64_t minimumRank(const torch::jit::Value *v,
                    const AnalysisResult *analysis = nullptr, int depth = 0);

/// While alive, knownRank() answers for the tensors \p graph has when this
/// is made as it would have then, whatever is rewritten since (bound's
/// rules ask about values whose producers they have changed); values made
/// since are answered from the graph as it is. Snapshots nest.
class RankSnapshot {
public:
  RankSnapshot(torch::jit::Graph &graph, const AnalysisResult *analysis);
  ~RankSnapshot();
  RankSnapshot(const RankSnapshot &) = delete;
  RankSnapshot &operator=(const RankSnapshot &) = delete;
  /// The live snapshot answers \p rank for \p v from now on, and answers
  /// again for what comes after \p v's definition (not rewritten yet, in a
  /// forward walk): a rewrite decided between two ranks \p v could have
  /// (bound's if whose then branch's rows stand for the else's,
  /// EmptyShapes.cpp).
  static void assume(const torch::jit::Value *v, int64_t rank);
  /// The ranks it answers: knownRank() asks.
  static const std::unordered_map<const torch::jit::Value *,
                                  std::optional<int64_t>> *live();

private:
  torch::jit::Graph &graph;
  const AnalysisResult *analysis;
  std::unordered_map<const torch::jit::Value *, std::optional<int64_t>> ranks;
  RankSnapshot *previous;
};

/// A dimension argument \p dim of an op on \p of, made non-negative: a
/// negative one counts from the end of a rank knownRank() must fix (plus
/// \p extra: unsqueeze's dims range over rank + 1). nullopt if it cannot.
std::optional<int64_t> resolveDim(int64_t dim, const torch::jit::Value *of,
                                  int64_t extra = 0,
                                  const AnalysisResult *analysis = nullptr);

/// `where(m)[0]` (the row indices of m's true elements): the mask m, if
/// \p v is that.
torch::jit::Value *rowIndicesOf(const torch::jit::Value *v);

/// Whether \p mask provably has \p x's shape, so that x[mask] and
/// masked_select(x, mask) are vectors with one element per true element of
/// mask: a comparison of x with a scalar or a 0-d tensor, or a value of
/// x's shape (provablySameShape).
bool masksEveryElement(const torch::jit::Value *mask,
                       const torch::jit::Value *x);

/// Whether \p mask provably has the shape of \p x's leading mask.dim()
/// dimensions, so that x[mask] cannot raise on shapes: x's own shape
/// (masksEveryElement), or that of a select along x's last dim
/// (`boxes[boxes[:, -1] > 0]`).
bool masksLeadingDims(const torch::jit::Value *mask,
                      const torch::jit::Value *x);

/// Whether \p v is provably a 0-d tensor (a number made a tensor, a full
/// reduction).
bool provablyZeroDim(const torch::jit::Value *v);

} // namespace staticify
