//===- BoundedForms.cpp - The static TorchScript the bound pass inserts ---===//

#include "passes/BoundedForms.h"

#include "BoundedFormsSource.h"

#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>
#include <torch/jit.h>

#include <map>
#include <mutex>
#include <stdexcept>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The TorchScript part of the file: from its first `def` on (the Python
/// imports above it are for running the file as a module).
std::string scriptSource() {
  std::string source = kBoundedFormsSource;
  size_t first = source.find("\ndef ");
  return first == std::string::npos ? source : source.substr(first + 1);
}

struct Forms {
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  std::map<std::string, std::shared_ptr<Graph>> graphs;
};

Forms &forms() {
  static Forms f = [] {
    Forms f;
    f.unit = torch::jit::compile(scriptSource());
    for (torch::jit::Function *fn : f.unit->get_functions()) {
      std::shared_ptr<Graph> g = toGraphFunction(*fn).graph()->copy();
      torch::jit::Inline(*g);
      torch::jit::LowerSimpleTuples(g);
      torch::jit::ConstantPropagation(g, /*ignore_custom_classes=*/true);
      torch::jit::EliminateDeadCode(g);
      // A tuple result becomes several outputs.
      Value *result = g->outputs()[0];
      if (result->type()->kind() == c10::TypeKind::TupleType) {
        torch::jit::WithInsertPoint guard(g->return_node());
        Node *unpack = g->insertNode(g->createTupleUnpack(result));
        g->eraseOutput(0);
        for (Value *element : unpack->outputs())
          g->registerOutput(element);
        torch::jit::LowerSimpleTuples(g);
      }
      torch::jit::EliminateDeadCode(g);
      f.graphs[fn->name()] = g;
    }
    return f;
  }();
  return f;
}

void setSourceRange(torch::jit::Block *block, const Node *anchor) {
  for (Node *n : block->nodes()) {
    n->setSourceRange(anchor->sourceRange());
    for (torch::jit::Block *b : n->blocks())
      setSourceRange(b, anchor);
  }
}

} // namespace

std::vector<std::string> boundedFormNames() {
  std::vector<std::string> names;
  for (const auto &entry : forms().graphs)
    names.push_back(entry.first);
  return names;
}

std::shared_ptr<Graph> boundedFormGraph(const std::string &name) {
  return forms().graphs.at(name);
}

std::vector<Value *> insertForm(Graph &graph, const std::string &name,
                                const std::vector<Value *> &inputs,
                                const Node *anchor) {
  std::shared_ptr<Graph> form = boundedFormGraph(name);
  if (form->inputs().size() != inputs.size())
    throw std::invalid_argument("bounded form '" + name + "' takes " +
                                std::to_string(form->inputs().size()) +
                                " inputs");
  Node *end = graph.insertPoint();
  Node *before = end->prev();
  std::vector<Value *> outs = torch::jit::insertGraph(graph, *form, inputs);
  for (Node *n = before->next(); n != end; n = n->next()) {
    n->setSourceRange(anchor->sourceRange());
    for (torch::jit::Block *b : n->blocks())
      setSourceRange(b, anchor);
  }
  return outs;
}

Value *insertRandomBelow(Graph &graph, int64_t low, Value *high, Value *size,
                         Value *dtype, Value *device, const Node *anchor) {
  auto given = [](const Value *v) { return v && !v->mustBeNone(); };
  if (!given(device)) {
    Node *read = graph.insertNode(graph.create(c10::prim::device, {high}));
    read->output()->setType(c10::DeviceObjType::get());
    read->setSourceRange(anchor->sourceRange());
    device = read->output();
  }
  if (!given(dtype))
    dtype = graph.insertConstant(static_cast<int64_t>(c10::ScalarType::Long));
  return insertForm(graph, "random_below",
                    {graph.insertConstant(low), high, size, dtype, device},
                    anchor)[0];
}

} // namespace staticify
