//===- InPlace.cpp - In-place ops and their out-of-place twins -------------===//

#include "passes/InPlace.h"

#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"

#include <torch/csrc/jit/runtime/operator.h>

#include <string>
#include <vector>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static bool isOp(const Node *node, const char *op) {
  return node->kind() == c10::Symbol::fromQualString(op);
}

std::optional<c10::Symbol> twinOf(const Node *node) {
  std::string name = node->kind().toQualString();
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || name.rfind("aten::", 0) != 0 || name.back() != '_')
    return std::nullopt;
  c10::Symbol twin =
      c10::Symbol::fromQualString(name.substr(0, name.size() - 1));
  for (const auto &op : torch::jit::getAllOperatorsFor(twin))
    if (op->schema().overload_name() == schema->overload_name() &&
        op->schema().arguments().size() == schema->arguments().size())
      return twin;
  return std::nullopt;
}

bool computableOutOfPlace(const Node *node) {
  const OpInfo *info = opInfo(node);
  if ((info && info->has(kReshapesInPlace)) || isOp(node, "aten::detach_") ||
      isOp(node, "aten::requires_grad_"))
    return false;
  return isOp(node, "aten::copy_") || isOp(node, "aten::zero_") ||
         twinOf(node).has_value();
}

Value *outOfPlace(Graph &graph, Node *write, Value *now) {
  torch::jit::WithInsertPoint guard(write);
  if (isOp(write, "aten::copy_")) // new memory: src may be another root
    return emit(graph, "aten::clone",
                {emit(graph, "aten::expand_as",
                      {emit(graph, "aten::type_as", {write->input(1), now},
                            write),
                       now},
                      write)},
                write);
  if (isOp(write, "aten::zero_"))
    return emit(graph, "aten::zeros_like", {now}, write);
  std::vector<Value *> inputs(write->inputs().begin(), write->inputs().end());
  inputs[0] = now;
  Node *twin = graph.insertNode(graph.create(*twinOf(write), inputs, 1));
  twin->setSourceRange(write->sourceRange());
  twin->output()->setType(c10::TensorType::get());
  return emit(graph, "aten::type_as", {twin->output(), now}, write);
}

} // namespace staticify
