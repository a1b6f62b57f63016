//===- GraphCheckpointTest.cpp - Undoing a rewrite without a copy ---------===//

#include "passes/GraphCheckpoint.h"
#include "passes/GraphUtils.h"
#include "passes/IRSource.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace staticify;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

const char *kGraph = R"IR(graph(%x : Tensor, %c : bool):
  %zero : int = prim::Constant[value=0]()
  %m : Tensor = aten::gt(%x, %zero)
  %n : Tensor = aten::nonzero(%m)
  %y : Tensor = prim::If(%c)
    block0():
      %a : Tensor = aten::relu(%n)
      -> (%a)
    block1():
      %b : Tensor = aten::neg(%n)
      -> (%b)
  %z : Tensor = aten::mul(%y, %x)
  return (%z)
)IR";

std::string text(const Graph &graph) {
  std::ostringstream os;
  os << graph;
  return os.str();
}

Node *find(Graph &graph, const char *op) {
  for (Node *node : collectNodes(graph.block()))
    if (node->kind() == c10::Symbol::fromQualString(op))
      return node;
  return nullptr;
}

} // namespace

TEST(GraphCheckpoint, RestoreUndoesWhatARewriteDoes) {
  auto graph = parseIRWithLocations(kGraph, "checkpoint.ir");
  const std::string before = text(*graph);
  GraphCheckpoint checkpoint(*graph);
  Node *branch = find(*graph, "prim::If");
  Node *mul = find(*graph, "aten::mul");
  ASSERT_TRUE(branch && mul);
  EXPECT_TRUE(checkpoint.holds(branch));
  // What bound's rules and driver do: new nodes (one with a block), inputs
  // and block results replaced, branches hoisted out of an if, a name taken
  // by a new value, a result retyped.
  Value *relu = branch->blocks()[0]->nodes().front()->output();
  for (torch::jit::Block *b : branch->blocks()) {
    std::vector<Node *> nodes(b->nodes().begin(), b->nodes().end());
    for (Node *n : nodes)
      n->moveBefore(branch);
  }
  torch::jit::WithInsertPoint guard(branch);
  Value *abs = graph->insert(c10::aten::abs, {relu});
  abs->setDebugName("x"); // renames the graph input %x
  Value *picked = emitIf(
      *graph, graph->inputs()[1], branch,
      [&] { return graph->insert(c10::aten::sigmoid, {abs}); },
      [&] { return abs; });
  branch->output()->replaceAllUsesWith(picked);
  branch->blocks()[0]->return_node()->replaceInput(0, abs);
  graph->return_node()->replaceInput(0, picked);
  mul->output()->setType(c10::TensorType::get()->withScalarType(at::kFloat));
  EXPECT_NE(text(*graph), before);
  EXPECT_FALSE(checkpoint.holds(abs->node()));

  checkpoint.restore();
  EXPECT_EQ(text(*graph), before);
}

TEST(GraphCheckpoint, RestoreOfAnUnchangedGraphChangesNothing) {
  auto graph = parseIRWithLocations(kGraph, "checkpoint.ir");
  const std::string before = text(*graph);
  GraphCheckpoint checkpoint(*graph);
  checkpoint.restore();
  EXPECT_EQ(text(*graph), before);
}

TEST(GraphCheckpoint, RestoreErasesResultsANodeGained) {
  // bound's rule for an `if` of bounded values: each branch returns a count
  // more, and so does the if, whose users take the new result.
  auto graph = parseIRWithLocations(kGraph, "checkpoint.ir");
  const std::string before = text(*graph);
  GraphCheckpoint checkpoint(*graph);
  Node *branch = find(*graph, "prim::If");
  Node *mul = find(*graph, "aten::mul");
  ASSERT_TRUE(branch && mul);
  for (torch::jit::Block *b : branch->blocks()) {
    torch::jit::WithInsertPoint guard(b->return_node());
    b->registerOutput(graph->insert(c10::aten::size, {b->outputs()[0], 0}));
  }
  Value *count = branch->addOutput()->setType(c10::IntType::get());
  torch::jit::WithInsertPoint guard(mul);
  mul->replaceInput(1, graph->insert(c10::aten::mul, {mul->input(1), count}));
  ASSERT_EQ(branch->outputs().size(), 2u);
  EXPECT_NE(text(*graph), before);

  checkpoint.restore();
  EXPECT_EQ(branch->outputs().size(), 1u);
  EXPECT_EQ(text(*graph), before);
}

TEST(GraphCheckpoint, RestoreDestroysNewNodesWhateverOrderTheBlocksComeIn) {
  // What bound's guards do (nestAfterGuards): a node that was there moves
  // into a block, where a new node inside it uses a value made in that
  // block. Moved back, the node's block comes before the value's in a walk
  // of the graph: the new user must still go first.
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor, %n : int, %c : bool):
  %true : bool = prim::Constant[value=1]()
  prim::Loop(%n, %true)
    block0(%i : int):
      %r : Tensor = aten::relu(%x)
      -> (%true)
  %y : Tensor = prim::If(%c)
    block0():
      %a : Tensor = aten::neg(%x)
      -> (%a)
    block1():
      -> (%x)
  return (%y)
)IR",
                                    "order.ir");
  const std::string before = text(*graph);
  GraphCheckpoint checkpoint(*graph);
  Node *loop = find(*graph, "prim::Loop");
  Node *branch = find(*graph, "prim::If");
  ASSERT_TRUE(loop && branch);
  torch::jit::Block *body = loop->blocks()[0];
  Value *made;
  {
    torch::jit::WithInsertPoint at(body->return_node());
    made = graph->insert(c10::aten::sigmoid, {graph->inputs()[0]});
  }
  branch->moveBefore(body->return_node());
  {
    torch::jit::WithInsertPoint at(branch->blocks()[0]->return_node());
    Value *user = graph->insert(c10::aten::mul, {made, made});
    branch->blocks()[0]->return_node()->replaceInput(0, user);
  }
  graph->return_node()->replaceInput(0, graph->inputs()[0]);
  graph->lint();
  EXPECT_NE(text(*graph), before);

  EXPECT_NO_THROW(checkpoint.restore());
  EXPECT_EQ(text(*graph), before);
}
