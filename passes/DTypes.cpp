//===- DTypes.cpp - The dtype facts of the analysis -----------------------===//

#include "passes/DTypes.h"

#include "passes/Containers.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

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

/// Integer arithmetic on int64 tensors and host ints stays int64.
static DTypeKind intArithmeticDType(const Node *node, const OpInfo *op,
                           const DTypeOf &dtypeOf) {
  const Value *rounding = namedInput(node, "rounding_mode");
  if (op->has(kDivision) && (!rounding || rounding->mustBeNone()))
    return DTypeKind::Unknown; // true division gives floats
  bool anyTensor = false;
  for (const Value *in : node->inputs()) {
    if (in->type()->kind() == c10::TypeKind::TensorType) {
      anyTensor = true;
      if (dtypeOf(in) != DTypeKind::Long)
        return DTypeKind::Unknown;
    } else if (in->type()->kind() != c10::TypeKind::IntType &&
               in->type()->kind() != c10::TypeKind::StringType &&
               !in->mustBeNone()) {
      return DTypeKind::Unknown;
    }
  }
  return anyTensor ? DTypeKind::Long : DTypeKind::Unknown;
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
/// Unknown: a stored tensor the analysis has not reached yet has Unknown.
static DTypeKind heldDType(const Value *c, const DTypeOf &dtypeOf,
                           const std::string *key = nullptr) {
  std::optional<HeldTensors> held = heldTensors(c, key);
  if (!held)
    return DTypeKind::Unknown;
  std::vector<const Value *> tensors = held->stored;
  for (const Node *part : held->parts)
    tensors.push_back(part->input(0));
  // A container an op made: the dtype its rule gave the op's result.
  tensors.insert(tensors.end(), held->produced.begin(), held->produced.end());
  DTypeKind kind = dtypeOf(tensors.front());
  for (const Value *t : tensors)
    if (dtypeOf(t) != kind)
      return DTypeKind::Unknown;
  return kind;
}

DTypeKind inferDType(const Node *node, const Value *out,
                   const DTypeOf &dtypeOf) {
  if (auto tt = out->type()->cast<c10::TensorType>())
    if (auto st = tt->scalarType())
      return dtypeKindOf(*st);
  // A tensor read out of a list or dict, and cat and stack of a list of
  // tensors of one dtype (`torch.cat(r)` of per-level topk indices).
  // Not the container's own fact: an alias (`d["k"].append(m)` of a list
  // stored in d) adds to what it holds without a use of its name.
  if (const Value *c = containerOf(out)) {
    std::optional<std::string> key = readKey(out);
    return heldDType(c, dtypeOf, key ? &*key : nullptr);
  }
  if ((node->kind() == c10::aten::cat || node->kind() == c10::aten::stack) &&
      !node->inputs().empty() && node->input(0)->type()->cast<c10::ListType>())
    return heldDType(node->input(0), dtypeOf);
  const OpInfo *op = opInfo(node);
  DTypeRule rule = op ? op->dtype : DTypeRule::Unknown;
  if (rule == DTypeRule::Bool)
    return DTypeKind::Bool;
  if (rule == DTypeRule::Long)
    return DTypeKind::Long;
  // The indices that sort, topk, max/min(dim) return next to the values.
  if (rule == DTypeRule::LongSecond && node->outputs().size() == 2 &&
      out == node->output(1))
    return DTypeKind::Long;
  // An explicit dtype argument decides (`.bool()`, `.to(torch.uint8)`);
  // without one, a move to a device keeps the dtype and randperm gives
  // int64.
  if (std::optional<size_t> i = inputIndex(node, "dtype")) {
    const Value *dtype = node->input(*i);
    if (auto st = constantInt(dtype))
      return dtypeKindOf(static_cast<c10::ScalarType>(*st));
    if (dtype->mustBeNone() && rule == DTypeRule::ExplicitElseInput)
      return dtypeOf(node->input(0));
    if (dtype->mustBeNone() && rule == DTypeRule::ExplicitElseLong)
      return DTypeKind::Long;
    if (dtype->mustBeNone() && rule == DTypeRule::ExplicitElseLongForInts) {
      for (size_t j = 0; j < *i; ++j) // the numbers come before dtype
        if (node->input(j)->type()->kind() != c10::TypeKind::IntType)
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
  case DTypeRule::IntArithmetic:
    return intArithmeticDType(node, op, dtypeOf);
  case DTypeRule::KeepsInput:
  case DTypeRule::KeepsValueOperand:
  case DTypeRule::KeepsBranches:
    return keptDType(node, rule, dtypeOf);
  default:
    return DTypeKind::Unknown;
  }
}

} // namespace staticify
