//===- DTypes.cpp - The dtype facts of the analysis -----------------------===//

#include "passes/DTypes.h"

#include "passes/Containers.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <algorithm>

namespace staticify {

using torch::jit::Node;
using torch::jit::Value;

DTypeKind dtypeKindOf(c10::ScalarType t) {
  switch (t) {
  case c10::ScalarType::Bool:
    return DTypeKind::Bool;
  case c10::ScalarType::Byte:
    return DTypeKind::Byte;
  case c10::ScalarType::Long:
    return DTypeKind::Long;
  default:
    return DTypeKind::Other;
  }
}

/// PyTorch's type promotion, as far as it tells masks from numbers. The
/// result is bool only where every operand is; uint8 only where the
/// tensors are bool or uint8 and no number is a float. A tensor that is
/// never a mask keeps the result from being one, except beside a uint8
/// tensor: a 0-d int64 operand does not promote a uint8 tensor with
/// dimensions (their category is the same), and ranks are not known here.
/// A number takes part by its category: a float makes integers and bools
/// a float, an int makes bools int64 and leaves integer tensors as they
/// are.
static DTypeKind promotedDType(const Node *node, const OpInfo *op,
                               const DTypeOf &dtypeOf) {
  const Value *rounding = namedInput(node, "rounding_mode");
  if (op->has(kDivision) && (!rounding || rounding->mustBeNone()))
    return DTypeKind::Other; // true division gives floats
  const Value *alpha = namedInput(node, "alpha"); // a factor, not an operand
  int bools = 0, bytes = 0, longs = 0, numbers = 0, unknown = 0;
  bool floatNumber = false, intNumber = false, anyNumber = false;
  for (const Value *in : node->inputs()) {
    if (in == alpha || in == rounding || in->mustBeNone())
      continue;
    switch (in->type()->kind()) {
    case c10::TypeKind::TensorType:
      switch (dtypeOf(in)) {
      case DTypeKind::Bool:
        ++bools;
        break;
      case DTypeKind::Byte:
        ++bytes;
        break;
      case DTypeKind::Long:
        ++longs;
        break;
      case DTypeKind::Unknown:
        ++unknown;
        break;
      default:
        ++numbers;
      }
      break;
    case c10::TypeKind::IntType:
      intNumber = true;
      break;
    case c10::TypeKind::FloatType:
      floatNumber = true;
      break;
    case c10::TypeKind::BoolType: // no category above any tensor's
    case c10::TypeKind::StringType:
      break;
    default:
      anyNumber = true; // Scalar (int or float), complex: not a mask
    }
  }
  int tensors = bools + bytes + longs + numbers + unknown;
  if (tensors == 0)
    return DTypeKind::Unknown;
  if (floatNumber) // bools and integers become floats; floats stay
    return bools + bytes + longs == tensors ? DTypeKind::Other
                                            : DTypeKind::Numeric;
  if (unknown > 0)
    return DTypeKind::Unknown;
  if (bools == tensors)
    return intNumber                ? DTypeKind::Long
           : anyNumber              ? DTypeKind::Numeric
                                    : DTypeKind::Bool;
  if (bytes > 0)
    return bools + bytes == tensors && !anyNumber ? DTypeKind::Byte
                                                   : DTypeKind::Unknown;
  if (numbers == 0 && !anyNumber) // int64 and bools, int numbers
    return DTypeKind::Long;
  return DTypeKind::Numeric;
}

/// Sums and products: a `dtype` argument decides; without one, bools and
/// integers accumulate in int64, a float in its own dtype.
static DTypeKind accumulatedDType(const Node *node, const DTypeOf &dtypeOf) {
  if (const Value *dtype = namedInput(node, "dtype")) {
    if (auto st = constantInt(dtype))
      return dtypeKindOf(static_cast<c10::ScalarType>(*st));
    if (!dtype->mustBeNone())
      return DTypeKind::Unknown;
  }
  DTypeKind in = dtypeOf(node->input(0));
  if (in == DTypeKind::Bool || in == DTypeKind::Byte || in == DTypeKind::Long)
    return DTypeKind::Long;
  return DTypeKind::Numeric; // int32 too: int64 then
}

/// Bitwise ops on masks, views, copies and selections keep their
/// operands' common dtype; a gather, the gathered value's; where, its
/// branches'.
static DTypeKind keptDType(const Node *node, DTypeRule rule,
                  const DTypeOf &dtypeOf) {
  DTypeKind kind = DTypeKind::Unknown;
  bool first = true;
  for (const Value *in : node->inputs()) {
    if (!carriesTensor(in->type()))
      continue;
    if (rule == DTypeRule::KeepsBranches && in == node->input(0))
      continue; // the condition, not a value
    DTypeKind d = dtypeOf(in);
    if (first)
      kind = d;
    else if (kind != d)
      return DTypeKind::Unknown;
    first = false;
    if (rule == DTypeRule::KeepsValueOperand)
      break; // the gathered value decides, not the indices
  }
  return kind;
}

/// The one dtype of the tensors container \p c holds (heldTensors), or
/// Unknown; with \p reached, of those the analysis has reached (inferDType).
static DTypeKind heldDType(const Value *c, const DTypeOf &dtypeOf,
                           const std::string *key = nullptr,
                           const Reached *reached = nullptr) {
  std::optional<HeldTensors> held = heldTensors(c, key);
  if (!held)
    return DTypeKind::Unknown;
  std::vector<const Value *> tensors = held->stored;
  for (const Node *part : held->parts)
    tensors.push_back(part->input(0));
  // A container an op made: the dtype its rule gave the op's result.
  tensors.insert(tensors.end(), held->produced.begin(), held->produced.end());
  if (reached)
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                 [&](const Value *t) { return !(*reached)(t); }),
                  tensors.end());
  if (tensors.empty())
    return DTypeKind::Unknown;
  DTypeKind kind = dtypeOf(tensors.front());
  for (const Value *t : tensors)
    if (dtypeOf(t) != kind)
      return DTypeKind::Unknown;
  return kind;
}

DTypeKind inferDType(const Node *node, const Value *out,
                   const DTypeOf &dtypeOf, const Reached *reached) {
  if (auto tt = out->type()->cast<c10::TensorType>())
    if (auto st = tt->scalarType())
      return dtypeKindOf(*st);
  // A tensor read out of a list or dict, and cat and stack of a list of
  // tensors of one dtype (`torch.cat(r)` of per-level topk indices).
  // Not the container's own fact: an alias (`d["k"].append(m)` of a list
  // stored in d) adds to what it holds without a use of its name.
  if (const Value *c = containerOf(out)) {
    std::optional<std::string> key = readKey(out);
    return heldDType(c, dtypeOf, key ? &*key : nullptr, reached);
  }
  if ((node->kind() == c10::aten::cat || node->kind() == c10::aten::stack) &&
      !node->inputs().empty() && node->input(0)->type()->cast<c10::ListType>())
    return heldDType(node->input(0), dtypeOf, nullptr, reached);
  // An op writing a tensor in place returns it, in its dtype (copy_ and
  // resize_as_ of another dtype included: copy_ casts).
  if (mutatesFirstInput(node) && out == node->output(0) &&
      !node->inputs().empty() && isTensor(node->input(0)) && isTensor(out))
    return dtypeOf(node->input(0));
  const OpInfo *op = opInfo(node);
  DTypeRule rule = op ? op->dtype : DTypeRule::Unknown;
  if (rule == DTypeRule::Bool)
    return DTypeKind::Bool;
  if (rule == DTypeRule::Long)
    return DTypeKind::Long;
  // The indices that sort, topk, max/min(dim) return next to the values,
  // which keep the input's dtype.
  if (rule == DTypeRule::LongSecond && node->outputs().size() == 2)
    return out == node->output(1) ? DTypeKind::Long : dtypeOf(node->input(0));
  // An explicit dtype argument decides (`.bool()`, `.to(torch.uint8)`);
  // without one, a move to a device keeps the dtype and randperm gives
  // int64.
  if (std::optional<size_t> i = inputIndex(node, "dtype")) {
    const Value *dtype = node->input(*i);
    if (auto st = constantInt(dtype))
      return dtypeKindOf(static_cast<c10::ScalarType>(*st));
    // Another tensor's dtype (`v.to(x.dtype)`, `full_like(..., dtype=
    // x.dtype)`): that tensor's, where known.
    if (dtype->node()->kind() == c10::prim::dtype)
      return dtypeOf(dtype->node()->input(0));
    if (dtype->mustBeNone() && rule == DTypeRule::ExplicitElseInput)
      return dtypeOf(node->input(0));
    if (dtype->mustBeNone() && rule == DTypeRule::ExplicitElseLong)
      return DTypeKind::Long;
    if (dtype->mustBeNone() && rule == DTypeRule::ExplicitElseLongForInts) {
      // Ints, or lists of them (torch.tensor([0, 2]): int64 too).
      auto ints = [](c10::TypePtr t) {
        while (auto list = t->cast<c10::ListType>())
          t = list->getElementType();
        return t->kind() == c10::TypeKind::IntType;
      };
      for (size_t j = 0; j < *i; ++j) // the numbers come before dtype
        if (!ints(node->input(j)->type()))
          return DTypeKind::Unknown;
      return DTypeKind::Long;
    }
  }
  switch (rule) {
  case DTypeRule::BoolUnlessByte: {
    DTypeKind in = dtypeOf(node->input(0));
    return in == DTypeKind::Unknown || in == DTypeKind::Byte ? in
                                                             : DTypeKind::Bool;
  }
  case DTypeRule::Promotes:
    return promotedDType(node, op, dtypeOf);
  case DTypeRule::Accumulates:
    return accumulatedDType(node, dtypeOf);
  case DTypeRule::KeepsInput:
  case DTypeRule::KeepsValueOperand:
  case DTypeRule::KeepsBranches:
    return keptDType(node, rule, dtypeOf);
  default:
    return DTypeKind::Unknown;
  }
}

} // namespace staticify
