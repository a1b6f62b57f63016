//===- OpCatalogue.h - Questions about a node, answered from the op table -===//
//
// Questions about one node that the analysis and the rewrites ask, answered
// from the op table (OpInfo.h) and the node's schema: which role it plays,
// which arguments decide a result's shape, whether it may raise on values it
// would never have seen.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/OpInfo.h"

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <vector>

namespace staticify {

/// The role of \p node: its table entry's, refined by its arguments (a
/// sync read only when it reads a tensor, `repeat_interleave` a root only
/// with tensor repeats and no `output_size`).
OpRole opRole(const torch::jit::Node *node);

/// For a DynamicShapeRoot: why the shape depends on data, in a few words.
std::string dynamicShapeReason(const torch::jit::Node *node);

/// Whether input \p index of \p node can change the shape of its results
/// (`n` of randperm, `end` of slice, `size` of zeros) rather than only values
/// (`other` of add, `index` of select). Conservative: true when unknown.
bool inputAffectsShape(const torch::jit::Node *node, size_t index);

/// The name of input \p index in \p node's schema, if it has one.
std::optional<std::string> inputName(const torch::jit::Node *node,
                                     size_t index);

/// How many of \p node's inputs are tensors (max(a, b) has two, max(a) one).
size_t countTensorInputs(const torch::jit::Node *node);

/// Whether \p node computes each result element from the operands' elements
/// at the same (broadcast) position: kElementwise ops, losses only with
/// reduction none.
bool opElementwise(const torch::jit::Node *node);

/// The reduction (1 mean, 2 sum) of a loss with a constant one other than
/// none (kReducedLoss), or 0.
int64_t lossReduction(const torch::jit::Node *node);

/// Whether the node writes to its first input (`append`, `index_put_`...).
bool mutatesFirstInput(const torch::jit::Node *node);

/// Whether the node's schema writes to any of its arguments: in place (its
/// first), an out= variant's out, a list's contents.
bool writesAnything(const torch::jit::Node *node);

/// Whether a schema argument with \p alias is written, itself or an
/// element of it.
bool writesThrough(const c10::AliasInfo &alias);

/// Whether \p node can run on values it would never have seen in the
/// original program (unselected elements, the branch not taken) without
/// raising: elementwise ops other than integer division/remainder/pow,
/// casts, sums and means, list plumbing, metadata, host int arithmetic
/// other than division. Conservative: false when unknown.
bool neverRaisesOnValues(const torch::jit::Node *node);

/// A constant lower bound of host int \p v: a constant, 0 for a size or an
/// int() of a tensor of no negative element, and sums, differences with
/// constants and maxima of those (`len(t) + 1`, `max(1, n - w)`).
std::optional<int64_t> sizeLowerBound(const torch::jit::Value *v,
                                      int depth = 0);

/// `randint(low, high, size)` (and `randint(high, size)`) drawing on the
/// default generator, strided, of a constant low, of sizes no value makes
/// negative, and either on a device given or read only as host numbers
/// (`int(torch.randint(0, n, (1,)).item())`: where it is drawn is not seen).
/// Where high > low it cannot raise, and it draws as `random_below` does.
struct IntDraw {
  size_t highOffset;
  int64_t low;
  torch::jit::Value *size, *dtype, *device;
};
std::optional<IntDraw> intDraw(const torch::jit::Node *node);

/// Whether \p size (an int or a list of ints) holds sizes no value makes
/// negative: another tensor's sizes, constants >= 0, lists of those and
/// single sizes, and such lists joined or sliced.
bool nonNegativeSizes(const torch::jit::Value *size, int depth = 0);

/// A host read of one device tensor's values: `int(t)`, `t.item()`,
/// `t.tolist()` (a formatting read reads every argument: not one). Not
/// `t.cpu()`, whose result is a new tensor (of the copy, it would be a
/// view).
bool readsOneTensor(const torch::jit::Node *node);

/// Whether the host computes \p node's result exactly as any device does,
/// from the same operand values, in the dtypes exactReplayDTypes() lists
/// (and the node writes nothing): views, integer arithmetic and single
/// IEEE roundings, rounding to integers, clamps, comparisons, any and all.
/// No transcendental (device libraries differ in the last place) and no
/// cast (devices answer NaN-to-int differently).
bool replaysExactly(const torch::jit::Node *node);

/// The dtypes in which replaysExactly's ops give the same numbers on the
/// host as on a device: integers, float32, float64, bool (not half
/// precision: libtorch's CPU lacks some of its kernels and rounds Scalars
/// to half first).
const std::vector<int64_t> &exactReplayDTypes();

} // namespace staticify
