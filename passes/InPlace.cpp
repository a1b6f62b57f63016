//===- InPlace.cpp - In-place ops and their out-of-place twins -------------===//

#include "passes/InPlace.h"

#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/csrc/jit/passes/restore_mutation.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <string>
#include <unordered_set>
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

static c10::Symbol wasInPlaceAttr() {
  static const c10::Symbol attr = c10::Symbol::attr("staticify_was_in_place");
  return attr;
}

static void collectActivations(torch::jit::Block *block,
                               std::vector<Node *> &out) {
  for (Node *node : block->nodes()) {
    if (torch::jit::activation_type_promotion_mapping.count(node->kind()))
      out.push_back(node);
    for (torch::jit::Block *inner : node->blocks())
      collectActivations(inner, out);
  }
}

bool functionalActivations(std::shared_ptr<Graph> &graph) {
  std::vector<Node *> before;
  collectActivations(graph->block(), before);
  if (!torch::jit::InplaceToFunctionalActivation(graph))
    return false;
  // Those made now: nodes alive before the pass keep their addresses, and
  // none of them is destroyed by it.
  std::unordered_set<Node *> old(before.begin(), before.end());
  std::vector<Node *> after;
  collectActivations(graph->block(), after);
  for (Node *node : after)
    if (!old.count(node))
      node->i_(wasInPlaceAttr(), 1);
  return true;
}

bool restoreInPlaceActivations(std::shared_ptr<Graph> &graph) {
  std::vector<Node *> nodes;
  collectActivations(graph->block(), nodes);
  // Decided on one alias database, then rewritten: each chosen input has one
  // use, the activation, and is fresh (made by a node without effects that
  // does not return its inputs' memory) or a chosen activation's result,
  // whose own input is such a value; so every write lands on memory nothing
  // else reads.
  std::unique_ptr<torch::jit::AliasDb> aliases;
  std::vector<Node *> chosen;
  for (Node *node : nodes) {
    if (!node->hasAttribute(wasInPlaceAttr()) || node->outputs().size() != 1)
      continue;
    Value *x = node->input(0);
    if (x->uses().size() != 1)
      continue;
    if (torch::jit::activation_type_promotion_mapping.at(node->kind())) {
      // sigmoid and tanh of an integer tensor are float: in place they raise.
      auto in = x->type()->cast<c10::TensorType>();
      auto out = node->output()->type()->cast<c10::TensorType>();
      if (!in || !out || !in->scalarType() ||
          in->scalarType() != out->scalarType())
        continue;
    }
    if (!aliases)
      aliases = std::make_unique<torch::jit::AliasDb>(graph);
    if (!torch::jit::MutationRemover::hasSideEffectOrAlias(x, aliases.get()))
      chosen.push_back(node);
  }
  bool changed = false;
  for (Node *node : chosen) {
    c10::Symbol inPlace = c10::Symbol::fromQualString(
        std::string(node->kind().toQualString()) + "_");
    Node *write = graph->create(inPlace, node->inputs(), 1);
    if (!write->maybeSchema()) {
      write->destroy();
      continue;
    }
    write->insertBefore(node);
    write->setSourceRange(node->sourceRange());
    write->output()->setType(node->output()->type());
    node->output()->replaceAllUsesWith(write->output());
    node->destroy();
    changed = true;
  }
  return changed;
}

} // namespace staticify
