//===- OpInfo.h - One table of op traits, keyed by op and overload --------===//
//
// Everything staticify knows about an op is one entry of one table
// (OpInfo.cpp): its role in the analysis, orthogonal traits, the dtype rule
// of its results, the identity of a reduction, the tensor form of a host
// scalar op, and why a data-dependent shape arises. Passes ask this table
// instead of keeping lists of op names; op names appear elsewhere only where
// IR is emitted.
//
// An entry names an op and either one overload (`aten::where` with overload
// "" is `where(Tensor condition)`, the root; other `where` overloads are
// elementwise) or, with no overload, every overload not listed on its own.
// test/unit/OpInfoTest.cpp checks every entry against the operator registry
// of the libtorch it runs against, so drift between PyTorch versions fails a
// test instead of silently losing a rule.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace staticify {

/// What an op is to the analysis (DESIGN §1): exactly one per entry.
enum class OpRole {
  /// Returns a tensor whose shape depends on its inputs' data (`nonzero`...).
  DynamicShapeRoot,
  /// Copies device data to the host (`item`, `int(t)`...), when fed a tensor.
  SyncRead,
  /// Reads the shape of a tensor (`numel`, `size`, `len`): free on a
  /// host-static shape, data-dependent on a data-dependent one.
  ShapeRead,
  /// Reads tensor metadata that never depends on data (`dim`, `device`...).
  MetadataRead,
  /// Moves values around without computing (lists, tuples, casts of types):
  /// propagates classes and never produces a finding of its own.
  Plumbing,
  /// A reduction whose result shape ignores the input's shape when no `dim`
  /// is given (`sum`, `mean`, `amax`...).
  Reduction,
  /// Elementwise and dimension-0-preserving ops: a data-dependent leading
  /// dimension stays the only data-dependent one.
  LeadingPreserving,
  Other,
};

/// Orthogonal facts about an op, combined with `|`.
enum Trait : uint64_t {
  kNoTraits = 0,
  /// Each result element depends only on the operands' elements at the same
  /// (broadcast) position: safe to run on padding and unselected elements.
  kElementwise = 1u << 0,
  /// Works along input(1)'s dimension (slice, narrow, cat): along dimension
  /// 0 a data-dependent leading dimension stays leading.
  kAlongDim = 1u << 1,
  /// May raise on some input values (integer division by zero, a
  /// reduction of an empty tensor, an index out of range).
  kMayRaise = 1u << 2,
  /// Never raises, whatever the values (host conversions, copies, scans:
  /// cumsum raises only on a bad dim or dtype, which no value changes).
  kNeverRaises = 1u << 3,
  /// Draws random numbers.
  kRandom = 1u << 4,
  /// A SyncRead that reads every argument (str, format, print), not only
  /// its first.
  kFormats = 1u << 5,
  /// Converts a tensor or a Scalar to a host number (`int(t)`, `float(t)`).
  kHostConversion = 1u << 6,
  /// A binary tensor op whose scalar `other` also takes a 0-d tensor.
  kScalarOperandTakesTensor = 1u << 7,
  /// Returns its first input's values unchanged (clone, contiguous, detach).
  kCopiesInput = 1u << 8,
  /// add/sub/mul: results follow the same promotion rules.
  kArithmetic = 1u << 9,
  /// eq/ne/lt/le/gt/ge.
  kComparison = 1u << 10,
  /// Division: true division of tensors never raises; with a rounding mode,
  /// or on host ints (ZeroDivisionError), it may.
  kDivision = 1u << 11,
  /// A DynamicShapeRoot only with tensor repeats and no `output_size`
  /// (repeat_interleave); otherwise its shape follows from host values.
  kRootWithTensorRepeats = 1u << 12,
  /// zeros_like & co.: the result has the input's shape and reads none of
  /// its values.
  kLikeInput = 1u << 15,
  /// where(c, a, b): the first operand is a condition, not a value.
  kConditionFirst = 1u << 16,
  /// Builds a tensor from host numbers (torch.tensor, scalar_tensor): with
  /// no device given, on the host.
  kBuildsOnHost = 1u << 17,
  /// Reads only the shape of its tensor inputs (_shape_as_tensor).
  kReadsOnlyShape = 1u << 18,
  /// masked_fill: the fill value also takes a 0-d tensor.
  kFillValueTakesTensor = 1u << 14,
  /// A root whose second result is inverse indices of the input's shape
  /// (the unique family).
  kInverseIndices = 1u << 13,
  /// The result has its first input's rank, whatever its dimension
  /// arguments (per-row ops, sort, transpose, slice, narrow).
  kKeepsRank = 1u << 19,
  /// The result has one dimension more than its input (unsqueeze).
  kAddsDim = 1u << 20,
  /// The result has one dimension fewer than its input (select).
  kDropsDim = 1u << 21,
  /// A loss with a `reduction` argument (none, mean, sum): elementwise with
  /// none; normalize turns a constant mean or sum into none and a reduction.
  kReducedLoss = 1u << 22,
  /// The result has its first input's shape, whatever its dimension
  /// arguments (softmax, cumsum, flip, roll): along dim 0 of a vector too.
  kKeepsShape = 1u << 23,
  /// Returns the coordinates of its input's nonzero elements, one row each:
  /// [count of nonzeros, input.dim()] (nonzero, argwhere).
  kNonzeroCoordinates = 1u << 24,
  /// Written in place, its first input may change shape (resize_, set_,
  /// squeeze_, transpose_...). Every other in-place op keeps its tensor's
  /// shape: only the contents change.
  kReshapesInPlace = 1u << 25,
  /// Raises only where an integer divisor is 0 (div with a rounding mode,
  /// remainder, fmod): of a divisor that is a host number, a host fact.
  kRaisesOnZeroDivisor = 1u << 26,
  /// Of a second tensor operand, reads only its dtype and device
  /// (`to(other)`, `type_as`): the result has the first's shape.
  kTypeOfSecond = 1u << 27,
  /// Reads its last argument, a 0-d tensor, on the host: masked_fill's and
  /// index_fill's Tensor overloads take value.item() (PyTorch's CUDA
  /// kernels; seen in a profile on an H100). A host-device sync unless the
  /// value is on the host.
  kReadsValueOnHost = 1u << 28,
  /// Makes a new tensor of its `size` argument's shape (empty, zeros, ones,
  /// full and their new_ forms).
  kMakesSized = 1u << 29,
  /// Copies its tensor to the host (`t.cpu()`): a sync point unless it is
  /// there already; reading the copy is none (passes/HoistReads.h).
  kCopiesToHost = 1u << 30,
  /// pow: raises only where an integer base meets a negative integer
  /// exponent; never with a constant exponent that is a float or >= 0.
  kRaisesOnNegativeExponent = 1u << 31,
  /// Its first result holds no negative value, whatever its inputs:
  /// permutations, positions and counts (randperm, nonzero, argmax,
  /// count_nonzero). An index made so needs no wrap from the end.
  kNonNegativeValues = 1ull << 32,
  /// Raises only for a dimension argument (its rowDims) past its first
  /// input's rank (sort, flip, transpose, unsqueeze: one past it): no value
  /// changes that, and a rank the ops before bound from below
  /// (minimumRank) shows it cannot (IfConvert's raisesUnshielded).
  kRaisesOnlyOnDims = 1ull << 33,
  /// The result has its first input's shape, whatever the shapes of its
  /// other tensor operands: an out-of-place write into a copy of it
  /// (index_add, index_copy, index_fill, scatter, scatter_add,
  /// scatter_reduce, masked_scatter). Indices and sources of data-dependent
  /// length change its contents, not its shape.
  kShapeOfFirst = 1ull << 34,
  /// The result's shape follows from host arguments alone, never from its
  /// tensor operands' shapes (histc: [bins]).
  kShapeFromHostArgs = 1ull << 35,
  /// A batched op (sampleRank) that works on its first operand's last dim
  /// alone: every dim before it is a batch dim, whatever the rank (linear).
  kBatchesLeadingDims = 1ull << 36,
};
using Traits = uint64_t;

/// How the dtype of an op's results follows from its operands, when the
/// result type does not say.
enum class DTypeRule : uint8_t {
  Unknown,
  Bool,
  /// int64 indices (nonzero, argmax, nms).
  Long,
  /// bool, except uint8 for a uint8 input, which PyTorch keeps (any, all).
  BoolUnlessByte,
  /// The second result is int64 indices (sort, topk, max(dim)).
  LongSecond,
  /// The tensor operands' common dtype (views, copies, bitwise ops, cat).
  KeepsInput,
  /// The gathered value's dtype, not the indices' (index, gather, scatter).
  KeepsValueOperand,
  /// where(c, a, b): a's and b's common dtype.
  KeepsBranches,
  /// PyTorch's type promotion over the tensor and number operands (add,
  /// sub, mul, remainder, neg, div): bool * bool is bool, int64 with ints
  /// int64, true division a float, and no operand that is never a mask
  /// makes one (passes/DTypes.cpp).
  Promotes,
  /// Sums and products (sum, prod, cumsum, cumprod): int64 for bool and
  /// integer inputs, the float's own dtype otherwise, a `dtype` argument
  /// first; never a mask.
  Accumulates,
  /// The `dtype` argument, or with None the input's (to).
  ExplicitElseInput,
  /// The `dtype` argument, or with None int64 (randperm).
  ExplicitElseLong,
  /// The `dtype` argument, or with None int64 when every number argument
  /// is an int (arange(n), arange(a, b, 2)), as PyTorch infers it.
  ExplicitElseLongForInts,
};

/// The value a masked reduction fills unselected elements with.
enum class Identity : uint8_t {
  /// Not a reduction.
  NotApplicable,
  /// A reduction with no identity staticify uses (std, var, median).
  None,
  Zero,
  One,
  NegInf,
  /// mean: a sum with zero fill divided by the count.
  Mean,
  /// amax/amin/max/min have no identity on every dtype: the first selected
  /// row fills the rest.
  FirstSelected,
  /// norm: zero for p > 0 (the default), none otherwise.
  ZeroForPositiveP,
  /// var/std: two masked passes (the mean, then the squared deviations),
  /// divided by max(0, count - correction).
  Variance,
};

/// For a DynamicShapeRoot: which dimensions of its result depend on data.
enum class RootShape : uint8_t {
  /// Only dimension 0 (nonzero, masked_select, unique of a flat result).
  Leading,
  /// x[i0, ...]: a root only when an index is a mask (or may be one);
  /// leading when a mask comes first.
  MaskIndex,
  /// x[mask] = v: a root (a sync) only with a mask; the result keeps x's
  /// shape.
  MaskStore,
  /// Leading when the constant `dim` argument (input 1) is 0 (unique_dim).
  LeadingIfDim0,
  /// Leading when the `dim` argument is None (unique_consecutive).
  LeadingIfNoDim,
  /// Leading when the `dim` argument is None or 0 (repeat_interleave).
  LeadingIfDimNoneOr0,
};

struct OpInfo {
  /// The qualified op name (`aten::where`).
  const char *op;
  /// One overload's name ("" for the unnamed one), or nullptr: every
  /// overload without an entry of its own.
  const char *overload;
  OpRole role;
  Traits traits = kNoTraits;
  DTypeRule dtype = DTypeRule::Unknown;
  Identity identity = Identity::NotApplicable;
  /// For a host scalar op: the op computing it on 0-d tensors (lift-scalars).
  const char *tensorForm = nullptr;
  /// For a DynamicShapeRoot: why the shape depends on data, in a few words.
  const char *reason = nullptr;
  RootShape rootShape = RootShape::Leading;
  /// Row-wise on dims >= 1: given these dimension arguments >= 1, each row
  /// of dimension 0 is computed from the same row of each operand alone
  /// (sort along dim 1, softmax, cat along dim 1). Not every op with a
  /// `dim` is: renorm and weight_norm mix rows.
  std::vector<const char *> rowDims = {};
  /// Batched on its first operand (linear, convolutions, pooling,
  /// interpolation, normalization with fixed statistics): once that operand
  /// has this rank or more, each row of dimension 0 of the result is
  /// computed from the same row of it alone, with the other operands
  /// (weights, statistics, sizes) shared by every row, and no value of a
  /// row makes the op raise. Below it the op mixes rows (an unbatched
  /// convolution takes dimension 0 as channels, linear contracts a
  /// vector) or raises. 0: not batched.
  int8_t sampleRank = 0;

  bool has(Traits t) const { return (traits & t) == t; }
};

/// The entry for \p node, or nullptr when the table does not know its op.
const OpInfo *opInfo(const torch::jit::Node *node);

/// Whether some entry of op \p op (an overload's, or the catch-all)
/// satisfies \p pred: whether a node of that op may be one a pass wants,
/// asked once per op (AnalysisResult::nodesWhere) and checked per node
/// after.
bool anyOpInfo(c10::Symbol op, const std::function<bool(const OpInfo &)> &pred);

/// Every entry, in table order (for tests and documentation).
const std::vector<OpInfo> &allOpInfos();

} // namespace staticify
