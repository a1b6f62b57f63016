//===- SizeSourceTest.cpp - sizes read as what made them ------------------===//
//
// sameHostInt() takes two size reads for one number where the ops that made
// the tensors fix both to one host value (bound's counts of two cats of one
// selection and n rows compare so). Each case parses a graph returning two
// ints and asks whether they are provably equal.
//
//===----------------------------------------------------------------------===//

#include "passes/Selection.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>

using namespace staticify;

namespace {

bool returnsEqual(const std::string &body) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR("graph(%x : Tensor, %n : int, %k : int):\n"
                      "  %none : NoneType = prim::Constant()\n"
                      "  %zero : int = prim::Constant[value=0]()\n"
                      "  %one : int = prim::Constant[value=1]()\n"
                      "  %two : int = prim::Constant[value=2]()\n"
                      "  %neg : int = prim::Constant[value=-1]()\n" +
                          body,
                      graph.get());
  const auto &outs = graph->outputs();
  return sameHostInt(outs[0], outs[1]);
}

TEST(SizeSource, FactoryAndMovedRepeatedRange) {
  // PyG's add_self_loops: ones(n) beside arange(n) unsqueezed, repeated
  // twice along a new dim 0 and moved to the front.
  EXPECT_TRUE(returnsEqual(R"IR(
  %l : int[] = prim::ListConstruct(%n)
  %o : Tensor = aten::ones(%l, %none, %none, %none, %none)
  %a : Tensor = aten::arange(%zero, %n, %none, %none, %none, %none)
  %u : Tensor = aten::unsqueeze(%a, %zero)
  %r : int[] = prim::ListConstruct(%two, %one)
  %loops : Tensor = aten::repeat(%u, %r)
  %m : Tensor = aten::movedim(%loops, %one, %zero)
  %s0 : int = aten::size(%o, %zero)
  %s1 : int = aten::size(%m, %zero)
  return (%s0, %s1)
)IR"));
}

TEST(SizeSource, ConstantsAndUnsqueezedDims) {
  EXPECT_TRUE(returnsEqual(R"IR(
  %a : Tensor = aten::arange(%n, %none, %none, %none, %none)
  %u : Tensor = aten::unsqueeze(%a, %one)
  %t : Tensor = aten::transpose(%u, %zero, %one)
  %s0 : int = aten::size(%t, %zero)
  return (%s0, %one)
)IR"));
}

TEST(SizeSource, UnknownOrDifferentSizesAreNotEqual) {
  // Another host int, a repeat that multiplies the dim, an input's size, an
  // arange not from 0.
  EXPECT_FALSE(returnsEqual(R"IR(
  %l : int[] = prim::ListConstruct(%n)
  %o : Tensor = aten::ones(%l, %none, %none, %none, %none)
  %s0 : int = aten::size(%o, %zero)
  return (%s0, %k)
)IR"));
  EXPECT_FALSE(returnsEqual(R"IR(
  %a : Tensor = aten::arange(%n, %none, %none, %none, %none)
  %r : int[] = prim::ListConstruct(%two)
  %b : Tensor = aten::repeat(%a, %r)
  %s0 : int = aten::size(%b, %zero)
  return (%s0, %n)
)IR"));
  EXPECT_FALSE(returnsEqual(R"IR(
  %s0 : int = aten::size(%x, %zero)
  return (%s0, %n)
)IR"));
  EXPECT_FALSE(returnsEqual(R"IR(
  %a : Tensor = aten::arange(%one, %n, %none, %none, %none, %none)
  %s0 : int = aten::size(%a, %zero)
  return (%s0, %n)
)IR"));
}

} // namespace
