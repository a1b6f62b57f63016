//===- GraphUtilsTest.cpp - emit's schema cache against libtorch ----------===//
//
// `emit` matches a call it has seen before against the one schema it matched
// then, instead of asking emitBuiltinCall to try every overload. Each call
// below is emitted twice (a miss, then a hit) into one graph and inserted
// twice by libtorch's Graph::insert into another: the nodes must be the same,
// down to the overload, the conversions inserted and the result types.
//
//===----------------------------------------------------------------------===//

#include "passes/GraphUtils.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <vector>

using namespace staticify;
using torch::jit::Graph;
using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// What made \p value, recursively: graph inputs by position, constants by
/// value, nodes by kind and overload; every value with its type.
std::string describe(const Value *value) {
  std::ostringstream out;
  const Node *node = value->node();
  if (node->kind() == c10::prim::Param) {
    out << "in" << value->offset();
  } else if (node->kind() == c10::prim::Constant) {
    out << "const(" << *torch::jit::toIValue(value) << ")";
  } else {
    out << node->kind().toQualString();
    if (const c10::FunctionSchema *schema = node->maybeSchema())
      out << "." << schema->overload_name();
    out << "#" << value->offset() << "/" << node->outputs().size() << "(";
    for (const Value *input : node->inputs())
      out << describe(input) << ",";
    out << ")";
  }
  out << ":" << value->type()->str();
  return out.str();
}

struct Call {
  const char *op;
  /// The arguments, made from the graph's inputs (x: Tensor, n: int,
  /// f: float, b: bool).
  std::function<std::vector<NamedValue>(Graph &)> args;
  std::vector<std::string> kwargNames = {};
};

std::shared_ptr<Graph> inputsGraph() {
  auto graph = std::make_shared<Graph>();
  graph->addInput("x")->setType(c10::TensorType::get());
  graph->addInput("n")->setType(c10::IntType::get());
  graph->addInput("f")->setType(c10::FloatType::get());
  graph->addInput("b")->setType(c10::BoolType::get());
  return graph;
}

} // namespace

TEST(Emit, ASecondCallMatchesWhatLibtorchWouldMatch) {
  auto in = [](Graph &g, size_t i) { return g.inputs()[i]; };
  std::vector<Call> calls = {
      // Exact matches, scalar constants and graph scalars.
      {"aten::ne", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), 0};
       }},
      {"aten::ne", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), in(g, 2)};
       }},
      {"aten::sum", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0)};
       }},
      {"aten::to", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), static_cast<int64_t>(c10::ScalarType::Long)};
       }},
      {"aten::where", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), in(g, 0), in(g, 0)};
       }},
      {"aten::reshape", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), std::vector<int64_t>{-1}};
       }},
      {"prim::device", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0)};
       }},
      // Integer arithmetic on host scalars, and a bool.
      {"aten::mul", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 1), in(g, 1)};
       }},
      {"aten::__not__", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 3)};
       }},
      // A scalar on the left: libtorch inlines a builtin function.
      {"aten::mul", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 1), in(g, 0)};
       }},
      // Only with a conversion (a tensor where an int is expected).
      {"aten::eye", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0)};
       }},
      // Several results: a tuple, and a named tuple.
      {"aten::sort", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), 0, true};
       }},
      {"aten::max", [&](Graph &g) -> std::vector<NamedValue> {
         return {in(g, 0), 1};
       }},
      // A keyword argument.
      {"aten::scalar_tensor",
       [&](Graph &g) -> std::vector<NamedValue> { return {in(g, 2)}; },
       {"dtype"}},
  };
  auto cached = inputsGraph(), reference = inputsGraph();
  const Node *anchor = cached->return_node();
  for (const Call &call : calls) {
    for (int round = 0; round < 2; ++round) {
      auto kwargs = [&](Graph &g) {
        std::vector<NamedValue> named;
        for (const std::string &name : call.kwargNames)
          named.emplace_back(name, static_cast<int64_t>(c10::ScalarType::Int));
        return named;
      };
      Value *ours = emit(*cached, call.op, call.args(*cached), anchor,
                         kwargs(*cached));
      Value *theirs = reference->insert(c10::Symbol::fromQualString(call.op),
                                        call.args(*reference),
                                        kwargs(*reference));
      EXPECT_EQ(describe(ours), describe(theirs))
          << call.op << ", call " << round + 1;
    }
  }
}
