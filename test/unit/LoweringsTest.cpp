//===- LoweringsTest.cpp - The bridge's table names real operators ---------===//
//
// Each lowering is keyed by a qualified schema name: a key PyTorch does not
// have (a typo, an overload renamed in another version) would never match a
// node, silently. Every key must name a registered operator (or one of the
// node kinds without a schema the bridge evaluates), and a parsed node must
// find its overload's key, not another's.
//
//===----------------------------------------------------------------------===//
#include "lower/TorchToMlir.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <gtest/gtest.h>

#include <set>

using staticify::lower::loweredOperators;
using staticify::lower::loweringKey;

namespace {

/// name.overload -> whether PyTorch registers that operator.
bool registered(const std::string &key) {
  std::string name = key, overload;
  if (auto dot = key.find('.'); dot != std::string::npos) {
    name = key.substr(0, dot);
    overload = key.substr(dot + 1);
  }
  for (const auto &op :
       torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(name)))
    if (op->schema().overload_name() == overload)
      return true;
  return false;
}

} // namespace

TEST(LoweringsTest, EveryKeyNamesAnOperator) {
  // Node kinds the interpreter has no schema for.
  const std::set<std::string> schemaless = {
      "prim::Constant",      "prim::If",         "prim::Loop",
      "prim::ListConstruct", "prim::ListUnpack", "prim::TupleConstruct",
      "prim::TupleUnpack",   "prim::unchecked_cast"};
  ASSERT_FALSE(registered("aten::add.no_such_overload")); // the check works
  std::vector<std::string> keys = loweredOperators();
  EXPECT_GT(keys.size(), 150u);
  for (const std::string &key : keys)
    EXPECT_TRUE(schemaless.count(key) || registered(key))
        << key << " is not an operator of this PyTorch";
}

TEST(LoweringsTest, KeysAreOverloadsNotArgumentCounts) {
  // Host and tensor forms of one op are different operators.
  auto keys = loweredOperators();
  std::set<std::string> set(keys.begin(), keys.end());
  for (const char *key : {"aten::add.Tensor", "aten::add.int", "aten::add.t",
                          "aten::sum", "aten::sum.dim_IntList",
                          "aten::max.dim", "aten::max.other", "aten::max"})
    EXPECT_TRUE(set.count(key)) << key;
  // The float forms of host arithmetic are not lowered (host scalars are
  // index arithmetic), so they must not be found.
  EXPECT_FALSE(set.count("aten::add.float"));
}

TEST(LoweringsTest, ANodeFindsItsOverload) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor, %n : int):
  %one : int = prim::Constant[value=1]()
  %false : bool = prim::Constant[value=0]()
  %a : Tensor = aten::add(%x, %x, %one)
  %b : int = aten::add(%n, %one)
  %v : Tensor, %i : Tensor = aten::max(%x, %one, %false)
  %m : Tensor = aten::max(%x)
  return (%a, %b, %v, %m)
)IR",
                      graph.get());
  std::vector<std::string> expected = {"aten::add.Tensor", "aten::add.int",
                                       "aten::max.dim", "aten::max"};
  size_t i = 0;
  for (torch::jit::Node *n : graph->nodes()) {
    if (n->kind() == c10::prim::Constant)
      continue;
    ASSERT_LT(i, expected.size());
    EXPECT_EQ(loweringKey(n), expected[i++]);
  }
}
