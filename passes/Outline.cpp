//===- Outline.cpp - Static regions as separate methods -------------------===//

#include "passes/Outline.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

void collectUses(Node *node, std::vector<Value *> &inputs) {
  for (Value *in : node->inputs())
    inputs.push_back(in);
  for (Block *b : node->blocks())
    for (Node *n : b->nodes())
      collectUses(n, inputs);
  for (Block *b : node->blocks())
    for (Value *out : b->return_node()->inputs())
      inputs.push_back(out);
}

bool isInside(const Value *v, const std::unordered_set<const Node *> &region,
              const Block *top) {
  const Node *n = topLevel(v->node(), top);
  return n && region.count(n);
}

} // namespace

std::optional<OutlinedRegion>
outlineNodes(torch::jit::Module &module, Graph &graph, Block *block,
             const std::vector<Node *> &nodes, const std::string &name,
             size_t number) {
  Value *self = graph.inputs().at(0);
  std::unordered_set<const Node *> region(nodes.begin(), nodes.end());
  // Inputs: values from outside (constants are copied in instead).
  std::vector<Value *> inputs;
  std::unordered_set<Value *> seen;
  for (Node *n : nodes) {
    std::vector<Value *> used;
    collectUses(n, used);
    for (Value *v : used)
      if (!isInside(v, region, block) && v != self &&
          v->node()->kind() != c10::prim::Constant && seen.insert(v).second)
        inputs.push_back(v);
  }
  // Outputs: results used after the region.
  std::vector<Value *> outputs;
  for (Node *n : nodes)
    for (Value *out : n->outputs())
      if (std::any_of(out->uses().begin(), out->uses().end(),
                      [&](const torch::jit::Use &u) {
                        return !region.count(topLevel(u.user, block));
                      }))
        outputs.push_back(out);
  if (outputs.empty())
    return std::nullopt; // nothing leaves it: a region of pure side effects

  // The region's graph: self, the inputs, then copies of its nodes.
  auto sub = std::make_shared<Graph>();
  std::unordered_map<Value *, Value *> map;
  Value *subSelf = sub->addInput("self");
  subSelf->setType(self->type());
  map[self] = subSelf;
  for (Value *v : inputs) {
    Value *in = sub->addInput();
    in->setType(v->type());
    if (v->hasDebugName())
      in->setDebugName(v->debugName());
    map[v] = in;
  }
  auto lookup = [&](Value *v) -> Value * {
    if (auto it = map.find(v); it != map.end())
      return it->second;
    // A constant from outside: copied in.
    Node *copy = sub->createClone(v->node(), [](Value *x) { return x; });
    sub->block()->prependNode(copy);
    map[v] = copy->output();
    return copy->output();
  };
  for (Node *n : nodes) {
    Node *copy = sub->insertNode(sub->createClone(n, lookup));
    for (size_t i = 0; i < n->outputs().size(); ++i)
      map[n->output(i)] = copy->output(i);
  }
  std::vector<c10::TypePtr> outTypes;
  for (Value *v : outputs)
    outTypes.push_back(v->type());
  if (outputs.size() == 1) {
    sub->registerOutput(map.at(outputs[0]));
  } else {
    std::vector<Value *> elements;
    for (Value *v : outputs)
      elements.push_back(map.at(v));
    sub->registerOutput(sub->insertNode(sub->createTuple(elements))->output());
  }

  // The method.
  auto type = module.type();
  c10::QualifiedName qualname(*type->name(), name);
  torch::jit::Function *fn =
      type->compilation_unit()->create_function(qualname, sub);
  type->addMethod(fn);

  // The call, where the region was.
  torch::jit::WithInsertPoint guard(nodes.front());
  std::vector<Value *> args = {self};
  args.insert(args.end(), inputs.begin(), inputs.end());
  Node *call = graph.insertNode(graph.create(c10::prim::CallMethod, args, 1));
  call->s_(c10::attr::name, name);
  call->output()->setType(sub->outputs()[0]->type());
  std::vector<Value *> results = {call->output()};
  if (outputs.size() > 1)
    results =
        graph.insertNode(graph.createTupleUnpack(call->output()))->outputs().vec();
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i]->replaceAllUsesWith(results[i]);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    (*it)->destroy();

  OutlinedRegion r;
  r.method = name;
  r.region = number;
  for (Value *v : inputs)
    r.inputs.push_back(v->type());
  r.outputs = outTypes;
  r.graph = sub;
  r.call = call;
  return r;
}

std::vector<OutlinedRegion> outlineRegions(torch::jit::Module &module,
                                           const std::string &method,
                                           Graph &graph,
                                           const PartitionResult &partition,
                                           size_t minNodes) {
  std::vector<OutlinedRegion> result;
  Block *top = graph.block();
  std::vector<std::vector<Node *>> members(partition.segments.size());
  for (Node *n : top->nodes())
    if (std::optional<size_t> seg = partition.segmentOf.find(n))
      members[*seg].push_back(n);
  for (size_t s = 0; s < partition.segments.size(); ++s) {
    const Segment &seg = partition.segments[s];
    if (seg.kind != Segment::Kind::StaticRegion || seg.numNodes < minNodes)
      continue;
    if (auto r = outlineNodes(module, graph, top, members[s],
                              method + "_region_" + std::to_string(seg.number),
                              seg.number))
      result.push_back(std::move(*r));
  }
  return result;
}

} // namespace staticify
