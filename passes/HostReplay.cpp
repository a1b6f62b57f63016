//===- HostReplay.cpp - host numbers' tensors read where they were made ---===//

#include "passes/HostReplay.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/OpInfo.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "host-replay";

/// A factory that builds a tensor from host numbers alone: its only
/// tensor-free inputs are the numbers, a dtype, a device and flags.
bool isNumberFactory(const Node *node) {
  static const std::unordered_set<c10::Symbol> factories = [] {
    std::unordered_set<c10::Symbol> ops;
    for (const char *op : {"aten::tensor", "aten::as_tensor",
                           "aten::scalar_tensor", "aten::zeros", "aten::ones",
                           "aten::full"})
      ops.insert(c10::Symbol::fromQualString(op));
    return ops;
  }();
  if (!factories.count(node->kind()) || node->outputs().size() != 1 ||
      !node->maybeSchema())
    return false;
  return std::none_of(node->inputs().begin(), node->inputs().end(),
                      [](const Value *in) { return carriesTensor(in->type()); });
}

/// What a read's tensor is computed from, in an order that computes each
/// node after its operands: factories of host numbers and exact ops.
struct Replay {
  std::vector<Node *> nodes;
  /// The factories' dtypes known only at run time (`tensor.dtype`).
  std::vector<Value *> runtimeDTypes;
  bool onDevice = false; // some factory names a device
};

/// Whether \p v may be written while the chain is replayed: a tensor or a
/// list some node may write (a constant list is never written).
bool mayChange(const Value *v, const Aliases &aliases) {
  if (v->node()->kind() == c10::prim::Constant)
    return false;
  c10::TypeKind kind = v->type()->kind();
  bool mutableType = kind == c10::TypeKind::TensorType ||
                     kind == c10::TypeKind::ListType ||
                     kind == c10::TypeKind::DictType;
  return mutableType && aliases.hasWriters(v);
}

/// Adds what computes \p v to \p replay; false where the host cannot
/// compute it as the device did.
bool chainTo(Value *v, const AnalysisResult &analysis, const Aliases &aliases,
             Replay &replay) {
  Node *node = v->node();
  if (std::find(replay.nodes.begin(), replay.nodes.end(), node) !=
      replay.nodes.end())
    return true;
  bool factory = isNumberFactory(node);
  if ((!factory && !replaysExactly(node)) || mayChange(v, aliases))
    return false;
  for (Value *in : node->inputs()) {
    if (mayChange(in, aliases) && !isTensor(in))
      return false;
    if (isTensor(in) && !(analysis.knows(in) && analysis.info(in).onHost) &&
        !chainTo(in, analysis, aliases, replay))
      return false;
  }
  if (factory) {
    const Value *device = namedInput(node, "device");
    replay.onDevice |= device && !device->mustBeNone();
    Value *dtype = namedInput(node, "dtype");
    if (dtype && !dtype->mustBeNone()) {
      auto known = constantInt(dtype);
      const auto &exact = exactReplayDTypes();
      if (!known)
        replay.runtimeDTypes.push_back(dtype);
      else if (std::find(exact.begin(), exact.end(), *known) == exact.end())
        return false;
    }
  }
  replay.nodes.push_back(node);
  return true;
}

/// Builds \p replay's nodes on the host before the insertion point; returns
/// the host tensor for \p read's operand.
Value *replayOnHost(Graph &graph, const Replay &replay, Value *operand) {
  Value *cpu = graph.insertConstant(c10::Device(c10::kCPU));
  std::unordered_map<Value *, Value *> map;
  cloneNodes(graph, replay.nodes, map, /*afterOriginals=*/false);
  for (Node *n : replay.nodes) {
    if (!isNumberFactory(n))
      continue;
    Node *clone = map.at(n->output())->node();
    const auto &args = n->schema().arguments();
    for (size_t i = 0; i < args.size() && i < n->inputs().size(); ++i)
      if (args[i].name() == "device" && !n->input(i)->mustBeNone())
        clone->replaceInput(i, cpu);
  }
  return map.at(operand);
}

} // namespace

bool hostReplay(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  const Aliases &aliases = ctx.facts.aliases(graph);
  std::vector<Node *> reads;
  for (Node *node : analysis.nodes)
    if (readsOneTensor(node) && analysis.knows(node->input(0)) &&
        !analysis.info(node->input(0)).onHost)
      reads.push_back(node);
  bool changed = false;
  for (Node *read : reads) {
    Replay replay;
    if (!chainTo(read->input(0), analysis, aliases, replay) ||
        !replay.onDevice)
      continue;
    torch::jit::WithInsertPoint point(read);
    Value *result;
    if (replay.runtimeDTypes.empty()) {
      Value *host = replayOnHost(*graph, replay, read->input(0));
      Node *hostRead = graph->insertNode(graph->createClone(
          read, [&](Value *v) { return v == read->input(0) ? host : v; }));
      result = hostRead->output();
    } else {
      // The dtypes decide on the host (metadata: no sync) whether the host
      // computes what the device does; otherwise the device's tensor is
      // read, as before (a guard's fallback, counted apart).
      Value *exact = nullptr;
      for (Value *dtype : replay.runtimeDTypes) {
        Value *in = emit(*graph, "aten::__contains__",
                         {graph->insertConstant(exactReplayDTypes()), dtype},
                         read);
        exact = exact ? emit(*graph, "aten::__and__", {exact, in}, read) : in;
      }
      auto readOf = [&](Value *tensor) {
        return graph
            ->insertNode(graph->createClone(
                read,
                [&](Value *v) { return v == read->input(0) ? tensor : v; }))
            ->output();
      };
      result = emitIf(
          *graph, exact, read,
          [&] { return readOf(replayOnHost(*graph, replay, read->input(0))); },
          [&] { return readOf(read->input(0)); });
      result->setType(read->output()->type());
      result->node()->i_(guardAttr(), 1);
    }
    read->output()->replaceAllUsesWith(result);
    ctx.rewrote(read, kRule);
    read->destroy();
    changed = true;
  }
  return changed;
}

} // namespace staticify
