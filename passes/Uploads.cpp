//===- Uploads.cpp - host numbers built on the device, not copied there ---===//

#include "passes/Uploads.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/LiftScalars.h"

#include <optional>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The form that fills a list of \p dtype's host numbers in on a device.
const char *listForm(c10::ScalarType dtype) {
  switch (dtype) {
  case c10::ScalarType::Long:
    return "ints_on";
  case c10::ScalarType::Double:
    return "floats_on";
  default:
    return "bools_on";
  }
}

const c10::Symbol kFallback = c10::Symbol::attr("staticify_upload_kept");

} // namespace

bool buildOnDevice(Graph &graph, Node *node) {
  bool isTensorOp = node->kind() == c10::aten::tensor;
  if (!(isTensorOp || node->kind() == c10::Symbol::fromQualString("aten::as_tensor")) ||
      node->inputs().size() != (isTensorOp ? 4u : 3u) || node->hasAttribute(kFallback))
    return false;
  Value *data = node->input(0), *dtype = node->input(1), *device = node->input(2);
  if (device->type()->kind() != c10::TypeKind::DeviceObjType ||
      (isTensorOp && constantBool(node->input(3)) != false))
    return false;
  bool list = data->type()->kind() == c10::TypeKind::ListType;
  // The dtype every value of the host number type holds exactly.
  std::optional<c10::ScalarType> natural = liftedDType(
      list ? data->type()->expectRef<c10::ListType>().getElementType() : data->type());
  if (!natural)
    return false;
  bool noDType = dtype->mustBeNone();
  if (!noDType && dtype->type()->kind() != c10::TypeKind::IntType)
    return false; // an Optional the run time resolves
  torch::jit::WithInsertPoint guard(node);
  // TorchScript's torch.tensor makes floats in the default dtype first
  // (0.485 with dtype=float64 is 0.48500001430511475): a number by a
  // checked conversion (1e300 raises), a list by a cast (1e300 is inf).
  bool floats = *natural == c10::ScalarType::Double;
  Value *defaultDType = floats ? emitDefaultDType(graph, node) : nullptr;
  auto cast = [&](Value *built) {
    return noDType ? built : emit(graph, "aten::to", {built, dtype}, node);
  };
  Value *result;
  if (!list) {
    Value *number = *natural == c10::ScalarType::Bool // a Scalar takes numbers
                        ? emit(graph, "aten::Int", {data}, node)
                        : data;
    Value *made = floats ? defaultDType
                         : graph.insertConstant(static_cast<int64_t>(*natural));
    result = cast(emit(graph, "aten::full", {std::vector<int64_t>{}, number}, node,
                       {{"dtype", made}, {"device", device}}));
  } else {
    Value *small = emit(graph, "aten::le",
                        {emit(graph, "aten::len", {data}, node), kMaxUploadElements},
                        node);
    result = emitIf(
        graph, small, node,
        [&] {
          Value *exact = insertForm(graph, listForm(*natural), {data, device}, node)[0];
          return cast(floats ? emit(graph, "aten::to", {exact, defaultDType}, node) : exact);
        },
        [&] {
          Node *kept = graph.insertNode(graph.createClone(node, [](Value *v) { return v; }));
          kept->i_(kFallback, 1);
          return kept->output();
        });
  }
  node->output()->replaceAllUsesWith(result);
  node->destroy();
  return true;
}

} // namespace staticify
