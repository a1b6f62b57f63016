//===- OpInfo.cpp - One table of op traits, keyed by op and overload ------===//

#include "passes/OpInfo.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace staticify {

using c10::Symbol;
using torch::jit::Node;

namespace {

using R = OpRole;
using D = DTypeRule;
using I = Identity;

constexpr Traits kEw = kElementwise;
constexpr Traits kArith = kElementwise | kArithmetic | kScalarOperandTakesTensor;
constexpr Traits kCmp = kElementwise | kComparison | kScalarOperandTakesTensor;
constexpr Traits kCopy = kElementwise | kCopiesInput | kNeverRaises;

/// An op batched on its first operand from rank \p rank on
/// (OpInfo::sampleRank), of that operand's dtype and, unless \p traits
/// says otherwise, its rank.
/// Batched ops raise on shapes and dtypes (host facts), never on values.
OpInfo batched(const char *op, int8_t rank, Traits traits = kKeepsRank) {
  OpInfo info{op, nullptr, R::Other, traits | kNeverRaises, D::KeepsInput};
  info.sampleRank = rank;
  return info;
}

const char *const kOneRowPerNonzero = "returns one row per nonzero element";
const char *const kMaskStore = "with a boolean mask computes the mask's "
                               "nonzero indices (a host sync)";

// clang-format off
const std::vector<OpInfo> kTable = {
    // DESIGN §3: ops whose result shape depends on data.
    {"aten::nonzero", nullptr, R::DynamicShapeRoot, kNonzeroCoordinates | kNonNegativeValues | kNeverRaises, D::Long, I::NotApplicable, nullptr, kOneRowPerNonzero},
    {"aten::argwhere", nullptr, R::DynamicShapeRoot, kNonzeroCoordinates | kNonNegativeValues | kNeverRaises, D::Long, I::NotApplicable, nullptr, kOneRowPerNonzero},
    {"aten::nonzero_numpy", nullptr, R::DynamicShapeRoot, kNoTraits, D::Long, I::NotApplicable, nullptr, "returns the indices of the nonzero elements"},
    {"aten::where", "", R::DynamicShapeRoot, kNoTraits, D::Long, I::NotApplicable, nullptr, "returns the indices of the true elements"},
    {"aten::masked_select", nullptr, R::DynamicShapeRoot, kNoTraits, D::Unknown, I::NotApplicable, nullptr, "returns one element per true mask element"},
    {"aten::_unique", nullptr, R::DynamicShapeRoot, kInverseIndices, D::Unknown, I::NotApplicable, nullptr, "returns one element per distinct value"},
    {"aten::_unique2", nullptr, R::DynamicShapeRoot, kInverseIndices, D::Unknown, I::NotApplicable, nullptr, "returns one element per distinct value"},
    {"aten::unique_dim", nullptr, R::DynamicShapeRoot, kInverseIndices, D::Unknown, I::NotApplicable, nullptr, "returns one slice per distinct slice", RootShape::LeadingIfDim0},
    {"aten::unique_consecutive", nullptr, R::DynamicShapeRoot, kInverseIndices, D::Unknown, I::NotApplicable, nullptr, "returns one element per run of equal values", RootShape::LeadingIfNoDim},
    {"aten::unique_dim_consecutive", nullptr, R::DynamicShapeRoot, kInverseIndices, D::Unknown, I::NotApplicable, nullptr, "returns one slice per run of equal slices", RootShape::LeadingIfDim0},
    {"aten::bincount", nullptr, R::DynamicShapeRoot, kNoTraits, D::Unknown, I::NotApplicable, nullptr, "returns max(input) + 1 bins"},
    {"aten::repeat_interleave", nullptr, R::DynamicShapeRoot, kRootWithTensorRepeats, D::Unknown, I::NotApplicable, nullptr, "with tensor repeats returns sum(repeats) elements", RootShape::LeadingIfDimNoneOr0},
    {"aten::index", nullptr, R::DynamicShapeRoot, kNoTraits, D::KeepsValueOperand, I::NotApplicable, nullptr, "with a boolean mask keeps one element per true mask element", RootShape::MaskIndex},
    {"aten::index_put_", nullptr, R::DynamicShapeRoot, kNoTraits, D::KeepsValueOperand, I::NotApplicable, nullptr, kMaskStore, RootShape::MaskStore},
    {"aten::index_put", nullptr, R::DynamicShapeRoot, kNoTraits, D::KeepsValueOperand, I::NotApplicable, nullptr, kMaskStore, RootShape::MaskStore},
    {"aten::_index_put_impl_", nullptr, R::DynamicShapeRoot, kNoTraits, D::Unknown, I::NotApplicable, nullptr, kMaskStore, RootShape::MaskStore},
    {"torchvision::nms", nullptr, R::DynamicShapeRoot, kNoTraits, D::Long, I::NotApplicable, nullptr, "keeps a data-dependent number of boxes"},

    // The runtime library's kernels (runtime/): static shapes.
    {"staticify::nms_padded", nullptr, R::Other, kNoTraits, D::Long},
    {"staticify::nms_kept_mask", nullptr, R::Other, kNoTraits, D::Bool},
    {"staticify::compact", nullptr, R::Other, kNoTraits, D::Long},
    {"staticify::valid_rows", nullptr, R::Other, kNeverRaises, D::KeepsInput},
    {"staticify::padded_rows", nullptr, R::Other, kNeverRaises, D::KeepsInput},
    {"staticify::put_valid_rows", nullptr, R::Other, kNoTraits, D::KeepsInput},

    // Host-device synchronizations: a tensor value read on the host.
    {"aten::item", nullptr, R::SyncRead},
    {"aten::_local_scalar_dense", nullptr, R::SyncRead},
    {"aten::Int", nullptr, R::SyncRead, kHostConversion, D::Unknown, I::NotApplicable, "aten::to"},
    {"aten::Float", nullptr, R::SyncRead, kHostConversion | kNeverRaises, D::Unknown, I::NotApplicable, "aten::to"},
    {"aten::Bool", nullptr, R::SyncRead, kHostConversion | kNeverRaises, D::Unknown, I::NotApplicable, "aten::to"},
    {"aten::Complex", nullptr, R::SyncRead},
    {"aten::IntImplicit", nullptr, R::SyncRead, kHostConversion},
    {"aten::FloatImplicit", nullptr, R::SyncRead, kHostConversion},
    {"aten::ScalarImplicit", nullptr, R::SyncRead},
    {"aten::ComplexImplicit", nullptr, R::SyncRead},
    {"prim::tolist", nullptr, R::SyncRead},
    // A copy to the host: a sync, after which reads of the copy are none.
    {"aten::cpu", nullptr, R::Other, kCopiesToHost | kNeverRaises},
    {"aten::is_nonzero", nullptr, R::SyncRead},
    {"aten::equal", nullptr, R::SyncRead},
    {"aten::allclose", nullptr, R::SyncRead},
    // Formatting a tensor reads its values (str(t), f"{t}", print(t)).
    {"aten::str", nullptr, R::SyncRead, kFormats},
    {"aten::format", nullptr, R::SyncRead, kFormats},
    {"prim::Print", nullptr, R::SyncRead, kFormats},
    {"aten::warn", nullptr, R::SyncRead, kFormats},

    // size(x, d) raises for d past x's rank and len(x) for a 0-d x: on
    // shapes, never on values.
    {"aten::numel", nullptr, R::ShapeRead, kNeverRaises},
    {"aten::size", nullptr, R::ShapeRead, kNeverRaises},
    {"aten::sym_size", nullptr, R::ShapeRead, kNeverRaises},
    {"aten::sym_numel", nullptr, R::ShapeRead, kNeverRaises},
    {"aten::len", nullptr, R::ShapeRead, kNeverRaises},

    {"aten::dim", nullptr, R::MetadataRead, kNeverRaises},
    {"prim::device", nullptr, R::MetadataRead, kNeverRaises},
    {"prim::dtype", nullptr, R::MetadataRead, kNeverRaises},
    {"prim::layout", nullptr, R::MetadataRead, kNeverRaises},
    {"prim::requires_grad", nullptr, R::MetadataRead, kNeverRaises},
    {"prim::is_cuda", nullptr, R::MetadataRead, kNeverRaises},
    {"prim::is_cpu", nullptr, R::MetadataRead, kNeverRaises},
    {"aten::is_floating_point", nullptr, R::MetadataRead, kNeverRaises},
    {"aten::is_complex", nullptr, R::MetadataRead, kNeverRaises},
    {"aten::__is__", nullptr, R::MetadataRead},
    {"prim::isinstance", nullptr, R::MetadataRead},
    {"aten::__isnot__", nullptr, R::MetadataRead},
    {"aten::result_type", nullptr, R::MetadataRead, kNeverRaises},

    {"prim::ListConstruct", nullptr, R::Plumbing, kNoTraits, D::KeepsInput},
    {"prim::ListUnpack", nullptr, R::Plumbing},
    {"prim::TupleConstruct", nullptr, R::Plumbing},
    {"prim::TupleUnpack", nullptr, R::Plumbing},
    {"prim::TupleIndex", nullptr, R::Plumbing},
    {"aten::__getitem__", nullptr, R::Plumbing, kNoTraits, D::KeepsInput},
    {"prim::unchecked_cast", nullptr, R::Plumbing, kNoTraits, D::KeepsInput},
    // list(xs): a copy of a list (`list(x.size())[1:]`).
    {"aten::list", nullptr, R::Plumbing, kNeverRaises, D::KeepsInput},
    {"aten::append", nullptr, R::Plumbing},
    {"prim::DictConstruct", nullptr, R::Plumbing},
    {"aten::_set_item", nullptr, R::Plumbing},
    {"prim::Uninitialized", nullptr, R::Plumbing},
    {"prim::GetAttr", nullptr, R::Plumbing},

    // Reductions; max/min of an empty tensor raise, sums and norms do not.
    {"aten::sum", nullptr, R::Reduction, kNoTraits, D::Accumulates, I::Zero},
    {"aten::nansum", nullptr, R::Reduction, kNoTraits, D::Accumulates, I::Zero},
    {"aten::mean", nullptr, R::Reduction, kNoTraits, D::Unknown, I::Mean},
    {"aten::amax", nullptr, R::Reduction, kMayRaise, D::Unknown, I::FirstSelected},
    {"aten::amin", nullptr, R::Reduction, kMayRaise, D::Unknown, I::FirstSelected},
    {"aten::max", nullptr, R::Reduction, kMayRaise, D::LongSecond, I::FirstSelected},
    {"aten::min", nullptr, R::Reduction, kMayRaise, D::LongSecond, I::FirstSelected},
    // torch.max(a, b) and torch.min(a, b): maximum and minimum.
    {"aten::max", "other", R::LeadingPreserving, kEw, D::Promotes},
    {"aten::min", "other", R::LeadingPreserving, kEw, D::Promotes},
    {"aten::prod", nullptr, R::Reduction, kNoTraits, D::Accumulates, I::One},
    {"aten::any", nullptr, R::Reduction, kNoTraits, D::BoolUnlessByte, I::Zero},
    {"aten::all", nullptr, R::Reduction, kNoTraits, D::BoolUnlessByte, I::One},
    {"aten::count_nonzero", nullptr, R::Reduction, kNonNegativeValues, D::Long, I::Zero},
    {"aten::norm", nullptr, R::Reduction, kNoTraits, D::Unknown, I::ZeroForPositiveP},
    {"aten::linalg_vector_norm", nullptr, R::Reduction, kNoTraits, D::Unknown, I::ZeroForPositiveP},
    {"aten::logsumexp", nullptr, R::Reduction, kNoTraits, D::Unknown, I::NegInf},
    {"aten::std", nullptr, R::Reduction, kNoTraits, D::Unknown, I::Variance},
    {"aten::var", nullptr, R::Reduction, kNoTraits, D::Unknown, I::Variance},
    {"aten::median", nullptr, R::Reduction, kMayRaise, D::LongSecond, I::None},

    // Elementwise ops, casts and dimension-0 slicing: a leading
    // data-dependent dimension stays leading when every tensor operand
    // shares it.
    {"aten::add", nullptr, R::LeadingPreserving, kArith, D::Promotes, I::NotApplicable, "aten::add"},
    {"aten::sub", nullptr, R::LeadingPreserving, kArith, D::Promotes, I::NotApplicable, "aten::sub"},
    {"aten::rsub", nullptr, R::LeadingPreserving, kArith, D::Promotes},
    {"aten::mul", nullptr, R::LeadingPreserving, kArith, D::Promotes, I::NotApplicable, "aten::mul"},
    {"aten::div", nullptr, R::LeadingPreserving, kEw | kDivision | kScalarOperandTakesTensor | kRaisesOnZeroDivisor, D::Promotes, I::NotApplicable, "aten::div"},
    {"aten::neg", nullptr, R::LeadingPreserving, kEw | kNeverRaises, D::Promotes, I::NotApplicable, "aten::neg"},
    {"aten::abs", nullptr, R::LeadingPreserving, kEw},
    {"aten::exp", nullptr, R::LeadingPreserving, kEw},
    {"aten::log", nullptr, R::LeadingPreserving, kEw},
    {"aten::sqrt", nullptr, R::LeadingPreserving, kEw},
    {"aten::pow", nullptr, R::LeadingPreserving, kEw | kRaisesOnNegativeExponent | kScalarOperandTakesTensor},
    {"aten::sigmoid", nullptr, R::LeadingPreserving, kEw},
    // Elementwise losses: elementwise with reduction none (opElementwise),
    // which normalize makes of a constant mean or sum.
    {"aten::smooth_l1_loss", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::l1_loss", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::mse_loss", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::kl_div", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::soft_margin_loss", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::huber_loss", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::binary_cross_entropy_with_logits", nullptr, R::LeadingPreserving, kEw | kReducedLoss},
    {"aten::relu", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::tanh", nullptr, R::LeadingPreserving, kEw},
    {"aten::clamp", nullptr, R::LeadingPreserving, kEw, D::Promotes},
    {"aten::floor", nullptr, R::LeadingPreserving, kEw},
    {"aten::ceil", nullptr, R::LeadingPreserving, kEw},
    {"aten::round", nullptr, R::LeadingPreserving, kEw},
    {"aten::sign", nullptr, R::LeadingPreserving, kEw},
    {"aten::reciprocal", nullptr, R::LeadingPreserving, kEw},
    {"aten::log2", nullptr, R::LeadingPreserving, kEw},
    {"aten::log10", nullptr, R::LeadingPreserving, kEw},
    {"aten::log1p", nullptr, R::LeadingPreserving, kEw},
    {"aten::expm1", nullptr, R::LeadingPreserving, kEw},
    {"aten::rsqrt", nullptr, R::LeadingPreserving, kEw},
    {"aten::square", nullptr, R::LeadingPreserving, kEw},
    {"aten::trunc", nullptr, R::LeadingPreserving, kEw},
    {"aten::sin", nullptr, R::LeadingPreserving, kEw},
    {"aten::cos", nullptr, R::LeadingPreserving, kEw},
    {"aten::erf", nullptr, R::LeadingPreserving, kEw},
    {"aten::tan", nullptr, R::LeadingPreserving, kEw},
    {"aten::asin", nullptr, R::LeadingPreserving, kEw},
    {"aten::acos", nullptr, R::LeadingPreserving, kEw},
    {"aten::atan", nullptr, R::LeadingPreserving, kEw},
    {"aten::sinh", nullptr, R::LeadingPreserving, kEw},
    {"aten::cosh", nullptr, R::LeadingPreserving, kEw},
    {"aten::exp2", nullptr, R::LeadingPreserving, kEw},
    {"aten::frac", nullptr, R::LeadingPreserving, kEw},
    {"aten::angle", nullptr, R::LeadingPreserving, kEw},
    {"aten::rad2deg", nullptr, R::LeadingPreserving, kEw},
    {"aten::deg2rad", nullptr, R::LeadingPreserving, kEw},
    {"aten::sgn", nullptr, R::LeadingPreserving, kEw},
    {"aten::logit", nullptr, R::LeadingPreserving, kEw},
    {"aten::nan_to_num", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::clamp_min", nullptr, R::LeadingPreserving, kEw, D::Promotes},
    {"aten::clamp_max", nullptr, R::LeadingPreserving, kEw, D::Promotes},
    {"aten::atan2", nullptr, R::LeadingPreserving, kEw},
    {"aten::hypot", nullptr, R::LeadingPreserving, kEw},
    {"aten::copysign", nullptr, R::LeadingPreserving, kEw},
    {"aten::xlogy", nullptr, R::LeadingPreserving, kEw},
    {"aten::logaddexp", nullptr, R::LeadingPreserving, kEw},
    {"aten::lerp", nullptr, R::LeadingPreserving, kEw},
    // Activations: elementwise, of floating tensors only (an integer input
    // raises whatever its values, padded or cut alike).
    {"aten::gelu", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::silu", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::mish", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::elu", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::leaky_relu", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::hardtanh", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::relu6", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::hardsigmoid", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::hardswish", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::softplus", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::remainder", nullptr, R::LeadingPreserving, kEw | kMayRaise | kRaisesOnZeroDivisor, D::Promotes, I::NotApplicable, "aten::remainder"},
    {"aten::fmod", nullptr, R::LeadingPreserving, kEw | kMayRaise | kRaisesOnZeroDivisor},
    {"aten::eq", nullptr, R::LeadingPreserving, kCmp, D::Bool, I::NotApplicable, "aten::eq"},
    {"aten::ne", nullptr, R::LeadingPreserving, kCmp, D::Bool, I::NotApplicable, "aten::ne"},
    {"aten::lt", nullptr, R::LeadingPreserving, kCmp, D::Bool, I::NotApplicable, "aten::lt"},
    {"aten::le", nullptr, R::LeadingPreserving, kCmp, D::Bool, I::NotApplicable, "aten::le"},
    {"aten::gt", nullptr, R::LeadingPreserving, kCmp, D::Bool, I::NotApplicable, "aten::gt"},
    {"aten::ge", nullptr, R::LeadingPreserving, kCmp, D::Bool, I::NotApplicable, "aten::ge"},
    {"aten::logical_and", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::logical_or", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::logical_xor", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::logical_not", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::isnan", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::isinf", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::isfinite", nullptr, R::LeadingPreserving, kEw, D::Bool},
    {"aten::__and__", nullptr, R::LeadingPreserving, kEw, D::KeepsInput, I::NotApplicable, "aten::__and__"},
    {"aten::__or__", nullptr, R::LeadingPreserving, kEw, D::KeepsInput, I::NotApplicable, "aten::__or__"},
    {"aten::__xor__", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::bitwise_and", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::bitwise_or", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::bitwise_not", nullptr, R::LeadingPreserving, kEw, D::KeepsInput},
    {"aten::minimum", nullptr, R::LeadingPreserving, kEw, D::Promotes},
    {"aten::maximum", nullptr, R::LeadingPreserving, kEw, D::Promotes},
    {"aten::where", nullptr, R::LeadingPreserving, kEw | kConditionFirst, D::KeepsBranches},
    {"aten::masked_fill", nullptr, R::LeadingPreserving, kEw | kNeverRaises | kFillValueTakesTensor, D::KeepsValueOperand},
    // The Tensor overloads raise for a value of rank > 0.
    {"aten::masked_fill", "Tensor", R::LeadingPreserving, kEw | kFillValueTakesTensor | kReadsValueOnHost, D::KeepsValueOperand},
    {"aten::masked_fill_", "Tensor", R::Other, kReadsValueOnHost},
    {"aten::index_fill", "int_Tensor", R::Other, kShapeOfFirst | kReadsValueOnHost, D::KeepsValueOperand},
    {"aten::index_fill_", "int_Tensor", R::Other, kReadsValueOnHost},
    {"aten::to", nullptr, R::LeadingPreserving, kEw | kNeverRaises | kTypeOfSecond, D::ExplicitElseInput},
    {"aten::type_as", nullptr, R::LeadingPreserving, kEw | kNeverRaises | kTypeOfSecond},
    {"aten::contiguous", nullptr, R::LeadingPreserving, kCopy, D::KeepsInput},
    {"aten::clone", nullptr, R::LeadingPreserving, kCopy, D::KeepsInput},
    {"aten::detach", nullptr, R::LeadingPreserving, kCopy, D::KeepsInput},
    {"aten::zeros_like", nullptr, R::LeadingPreserving, kNeverRaises | kLikeInput, D::KeepsInput},
    {"aten::ones_like", nullptr, R::LeadingPreserving, kNeverRaises | kLikeInput, D::KeepsInput},
    {"aten::empty_like", nullptr, R::LeadingPreserving, kLikeInput, D::KeepsInput},
    {"aten::full_like", nullptr, R::LeadingPreserving, kLikeInput},
    {"aten::rand_like", nullptr, R::LeadingPreserving, kRandom | kLikeInput},
    {"aten::randn_like", nullptr, R::LeadingPreserving, kRandom | kLikeInput},
    {"aten::cat", nullptr, R::LeadingPreserving, kAlongDim | kMayRaise, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::slice", nullptr, R::LeadingPreserving, kAlongDim | kKeepsRank, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::narrow", nullptr, R::LeadingPreserving, kAlongDim | kMayRaise | kKeepsRank, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::randperm", nullptr, R::LeadingPreserving, kMayRaise | kRandom | kBuildsOnHost | kNonNegativeValues, D::ExplicitElseLong},
    {"aten::arange", nullptr, R::LeadingPreserving, kMayRaise | kBuildsOnHost, D::ExplicitElseLongForInts},

    // Host scalar arithmetic, conversions and the rest.
    {"aten::floor_divide", nullptr, R::LeadingPreserving, kEw | kMayRaise | kRaisesOnZeroDivisor, D::Promotes},
    {"aten::floordiv", nullptr, R::Other, kMayRaise, D::Unknown, I::NotApplicable, "aten::div"},
    {"aten::__rshift__", nullptr, R::Other, kMayRaise},
    {"aten::__lshift__", nullptr, R::Other, kMayRaise},
    {"prim::min", nullptr, R::Other, kNeverRaises, D::Unknown, I::NotApplicable, "aten::minimum"},
    {"prim::max", nullptr, R::Other, kNeverRaises, D::Unknown, I::NotApplicable, "aten::maximum"},
    {"aten::__not__", nullptr, R::Other, kNeverRaises, D::Unknown, I::NotApplicable, "aten::logical_not"},
    // The promotion of two dtypes (raises only for quantized ones, which
    // the reductions the forms promote for do not take either).
    {"aten::promote_types", nullptr, R::Other, kNeverRaises},
    {"prim::NumToTensor", nullptr, R::Other, kNeverRaises | kBuildsOnHost},
    {"aten::scalar_tensor", nullptr, R::Other, kNeverRaises | kBuildsOnHost},
    {"aten::tensor", nullptr, R::Other, kBuildsOnHost, D::ExplicitElseLongForInts},
    {"aten::_shape_as_tensor", nullptr, R::Other, kBuildsOnHost | kReadsOnlyShape},
    // Factories: with no device, on the host; and in-place fills, which
    // stay where their tensor is.
    {"aten::empty", nullptr, R::Other, kBuildsOnHost | kMakesSized},
    {"aten::zeros", nullptr, R::Other, kBuildsOnHost | kMakesSized},
    {"aten::ones", nullptr, R::Other, kBuildsOnHost | kMakesSized},
    {"aten::full", nullptr, R::Other, kBuildsOnHost | kMakesSized},
    {"aten::rand", nullptr, R::Other, kBuildsOnHost | kRandom},
    {"aten::randn", nullptr, R::Other, kBuildsOnHost | kRandom},
    {"aten::randint", nullptr, R::Other, kBuildsOnHost | kRandom},
    {"aten::linspace", nullptr, R::Other, kBuildsOnHost},
    {"aten::uniform_", nullptr, R::Other, kRandom},
    {"aten::normal_", nullptr, R::Other, kRandom},
    // fill_(Tensor) reads its 0-d value on the host (libtorch <= 2.1).
    {"aten::fill_", "Tensor", R::Other, kReadsValueOnHost},
    {"aten::fill_", nullptr, R::Other},
    {"aten::zero_", nullptr, R::Other},
    // In-place ops that change their tensor's shape, not only its contents.
    {"aten::resize_", nullptr, R::Other, kReshapesInPlace},
    {"aten::resize_as_", nullptr, R::Other, kReshapesInPlace},
    {"aten::set_", nullptr, R::Other, kReshapesInPlace},
    {"aten::as_strided_", nullptr, R::Other, kReshapesInPlace},
    {"aten::squeeze_", nullptr, R::Other, kReshapesInPlace},
    {"aten::unsqueeze_", nullptr, R::Other, kReshapesInPlace},
    {"aten::transpose_", nullptr, R::Other, kReshapesInPlace},
    {"aten::swapdims_", nullptr, R::Other, kReshapesInPlace},
    {"aten::swapaxes_", nullptr, R::Other, kReshapesInPlace},
    {"aten::t_", nullptr, R::Other, kReshapesInPlace},
    {"aten::expand_as", nullptr, R::Other, kNeverRaises, D::KeepsValueOperand},
    // Padding raises only on sizes (more pads than dims, a reflection wider
    // than its dim), never on values.
    {"aten::pad", nullptr, R::Other, kNeverRaises, D::KeepsInput},
    {"aten::constant_pad_nd", nullptr, R::Other, kNeverRaises, D::KeepsInput},
    {"aten::isin", nullptr, R::Other, kNoTraits, D::Bool},
    {"aten::isclose", nullptr, R::Other, kNoTraits, D::Bool},
    // Reductions to indices: over the rows of a selection they would index
    // the unselected or padded rows (no fill makes them the cut's), within
    // each row they keep the rows.
    {"aten::argmax", nullptr, R::Reduction, kMayRaise | kNonNegativeValues, D::Long, I::FirstSelected},
    {"aten::argmin", nullptr, R::Reduction, kMayRaise | kNonNegativeValues, D::Long, I::FirstSelected},
    {"aten::argsort", nullptr, R::Other, kKeepsRank | kKeepsShape | kNonNegativeValues | kRaisesOnlyOnDims, D::Long, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::sort", nullptr, R::Other, kKeepsRank | kKeepsShape | kRaisesOnlyOnDims, D::LongSecond, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::topk", nullptr, R::Other, kKeepsRank, D::LongSecond, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::kthvalue", nullptr, R::Other, kNoTraits, D::LongSecond, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::mode", nullptr, R::Other, kNoTraits, D::LongSecond},
    {"aten::cummax", nullptr, R::Other, kNeverRaises, D::LongSecond},
    {"aten::cummin", nullptr, R::Other, kNeverRaises, D::LongSecond},
    {"aten::view", nullptr, R::Other, kNoTraits, D::KeepsInput},
    {"aten::reshape", nullptr, R::Other, kNoTraits, D::KeepsInput},
    // start_dim >= 1: each row flattened on its own (end_dim before it
    // raises, for the padded rows as for the original's).
    {"aten::flatten", nullptr, R::Other, kNoTraits, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"start_dim"}},
    {"aten::squeeze", nullptr, R::Other, kRaisesOnlyOnDims, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::unsqueeze", nullptr, R::Other, kAddsDim | kRaisesOnlyOnDims, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::permute", nullptr, R::Other, kNoTraits, D::KeepsInput},
    {"aten::movedim", nullptr, R::Other, kKeepsRank, D::KeepsInput},
    {"aten::transpose", nullptr, R::Other, kKeepsRank | kRaisesOnlyOnDims, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim0", "dim1"}},
    {"aten::t", nullptr, R::Other, kNoTraits, D::KeepsInput},
    {"aten::expand", nullptr, R::Other, kNoTraits, D::KeepsInput},
    {"aten::view_as", nullptr, R::Other, kNoTraits, D::KeepsValueOperand},
    {"aten::reshape_as", nullptr, R::Other, kNoTraits, D::KeepsValueOperand},
    {"aten::select", nullptr, R::Other, kDropsDim, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    // The functional form of a write into a slice (branch-writes): it clamps
    // its bounds as slice does, and raises only where src has another shape.
    {"aten::slice_scatter", nullptr, R::Other, kKeepsRank | kKeepsShape | kNeverRaises, D::KeepsInput},
    {"aten::repeat", nullptr, R::Other, kNoTraits, D::KeepsInput},
    // one_hot(i, n): a dim of n classes after i's; raises for an i out of
    // [0, n) (IfConvert shields it as an index).
    {"aten::one_hot", nullptr, R::Other, kAddsDim | kMayRaise, D::Long},
    {"aten::flip", nullptr, R::Other, kKeepsShape | kRaisesOnlyOnDims, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dims"}},
    {"aten::roll", nullptr, R::Other, kKeepsShape, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dims"}},
    {"aten::stack", nullptr, R::Other, kNoTraits, D::KeepsInput, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::new_zeros", nullptr, R::Other, kMakesSized, D::KeepsInput},
    {"aten::new_ones", nullptr, R::Other, kMakesSized, D::KeepsInput},
    {"aten::new_full", nullptr, R::Other, kMakesSized, D::KeepsInput},
    {"aten::new_empty", nullptr, R::Other, kMakesSized, D::KeepsInput},
    {"aten::index_select", nullptr, R::Other, kNoTraits, D::KeepsValueOperand},
    {"aten::gather", nullptr, R::Other, kNoTraits, D::KeepsValueOperand},
    // Out-of-place writes into a copy of the first operand: its shape.
    {"aten::scatter", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    {"aten::scatter_add", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    {"aten::scatter_reduce", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    {"aten::index_add", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    {"aten::index_copy", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    {"aten::index_fill", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    {"aten::masked_scatter", nullptr, R::Other, kShapeOfFirst, D::KeepsValueOperand},
    // histc(x, bins, min, max): [bins] counts in x's dtype, whatever x's shape.
    {"aten::histc", nullptr, R::Other, kShapeFromHostArgs, D::KeepsInput},
    // Batched ops (OpInfo::sampleRank): static weights on each row.
    // linear's rank follows its weight's (knownRank): not kKeepsRank.
    batched("aten::linear", 2, kBatchesLeadingDims),
    batched("aten::conv1d", 3),
    batched("aten::conv2d", 4),
    batched("aten::conv3d", 5),
    batched("aten::conv_transpose1d", 3),
    batched("aten::conv_transpose2d", 4),
    batched("aten::conv_transpose3d", 5),
    // Pooling works within each channel, but of an unbatched input it raises
    // on zero channels, which a padded input has none of: batched only.
    // The adaptive pools check only the trailing dims.
    batched("aten::max_pool1d", 3),
    batched("aten::max_pool2d", 4),
    batched("aten::max_pool3d", 5),
    batched("aten::avg_pool1d", 3),
    batched("aten::avg_pool2d", 4),
    batched("aten::avg_pool3d", 5),
    batched("aten::adaptive_avg_pool1d", 2),
    batched("aten::adaptive_avg_pool2d", 3),
    batched("aten::adaptive_avg_pool3d", 4),
    batched("aten::upsample_nearest1d", 3),
    batched("aten::upsample_nearest2d", 4),
    batched("aten::upsample_nearest3d", 5),
    batched("aten::upsample_linear1d", 3),
    batched("aten::upsample_bilinear2d", 4),
    batched("aten::upsample_bicubic2d", 4),
    batched("aten::upsample_trilinear3d", 5),
    // Per sample; batch_norm only with its running statistics (training
    // false: the rule checks it).
    batched("aten::group_norm", 2),
    batched("aten::batch_norm", 2),
    // Row-wise ops the table has no other entry for.
    {"aten::cumsum", nullptr, R::Other, kKeepsRank | kKeepsShape | kNeverRaises, D::Accumulates, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::cumprod", nullptr, R::Other, kKeepsRank | kKeepsShape | kNeverRaises, D::Accumulates, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::logcumsumexp", nullptr, R::Other, kKeepsRank | kKeepsShape | kNeverRaises, D::Unknown, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::softmax", nullptr, R::Other, kKeepsRank | kKeepsShape | kNeverRaises, D::Unknown, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::log_softmax", nullptr, R::Other, kKeepsRank | kKeepsShape | kNeverRaises, D::Unknown, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    // Library ops that check shapes and dtypes (host facts) and never raise
    // on values: a branch or loop body that runs where the original did not
    // may compute them (if-convert, lift-scalars' loops).
    // Row by row over a first operand of rank 2 or more against a matrix or
    // a vector (the rule checks the second's rank: a batch of matrices
    // would broadcast over the rows).
    batched("aten::matmul", 2, kNoTraits),
    batched("aten::mm", 2, kNoTraits),
    batched("aten::cdist", 2, kNoTraits),
    {"aten::cosine_similarity", nullptr, R::Other, kNeverRaises, D::Unknown, I::NotApplicable, nullptr, nullptr, RootShape::Leading, {"dim"}},
    {"aten::bmm", nullptr, R::Other, kNeverRaises},
    {"aten::addmm", nullptr, R::Other, kNeverRaises},
    {"aten::baddbmm", nullptr, R::Other, kNeverRaises},
    {"aten::einsum", nullptr, R::Other, kNeverRaises},
    {"aten::layer_norm", nullptr, R::Other, kNeverRaises},
    {"aten::lstm_cell", nullptr, R::Other, kNeverRaises},
    {"aten::gru_cell", nullptr, R::Other, kNeverRaises},
    {"aten::rnn_tanh_cell", nullptr, R::Other, kNeverRaises},
};
// clang-format on

struct Index {
  /// Per op: the entry for each listed overload, and the catch-all.
  struct Op {
    std::vector<const OpInfo *> overloads;
    const OpInfo *any = nullptr;
  };
  std::unordered_map<Symbol, Op> ops;
};

const Index &index() {
  static const Index idx = [] {
    Index i;
    for (const OpInfo &e : kTable) {
      Index::Op &op = i.ops[Symbol::fromQualString(e.op)];
      if (e.overload)
        op.overloads.push_back(&e);
      else
        op.any = &e;
    }
    return i;
  }();
  return idx;
}

} // namespace

const OpInfo *opInfo(const Node *node) {
  const Index &idx = index();
  auto it = idx.ops.find(node->kind());
  if (it == idx.ops.end())
    return nullptr;
  const Index::Op &op = it->second;
  if (!op.overloads.empty())
    if (const c10::FunctionSchema *schema = node->maybeSchema())
      for (const OpInfo *e : op.overloads)
        if (schema->overload_name() == e->overload)
          return e;
  return op.any;
}

bool anyOpInfo(Symbol op, const std::function<bool(const OpInfo &)> &pred) {
  const Index &idx = index();
  auto it = idx.ops.find(op);
  if (it == idx.ops.end())
    return false;
  const Index::Op &entries = it->second;
  return (entries.any && pred(*entries.any)) ||
         std::any_of(entries.overloads.begin(), entries.overloads.end(),
                     [&](const OpInfo *e) { return pred(*e); });
}

const std::vector<OpInfo> &allOpInfos() { return kTable; }

} // namespace staticify
