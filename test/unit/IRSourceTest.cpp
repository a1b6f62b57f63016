//===- IRSourceTest.cpp - Locations for textual IR ------------------------===//

#include "passes/IRSource.h"
#include "passes/Analysis.h"

#include <gtest/gtest.h>

using namespace staticify;

static const char *const kIR = R"IR(graph(%x : Tensor,
      %n : int):
  # a comment line is not a statement
  %c : int = prim::Constant[value=0]()
  %m : Tensor = aten::gt(%x, %c)
  %b : bool = aten::Bool(%m)
  %y : Tensor = prim::If(%b)
    block0():
      %i : Tensor = aten::nonzero(%m)
      -> (%i)
    block1():
      -> (%x)
  return (%y)
)IR";

static const torch::jit::Node *findKind(const torch::jit::Block *block,
                                        const char *kind) {
  for (const torch::jit::Node *n : block->nodes()) {
    if (std::string(n->kind().toQualString()) == kind)
      return n;
    for (const torch::jit::Block *b : n->blocks())
      if (auto *found = findKind(b, kind))
        return found;
  }
  return nullptr;
}

TEST(IRSource, EveryNodeGetsTheLineAndColumnOfItsOp) {
  auto graph = parseIRWithLocations(kIR, "t.ir");
  struct Expected {
    const char *kind;
    size_t line, column;
  } expected[] = {{"prim::Constant", 4, 14},
                  {"aten::gt", 5, 17},
                  {"aten::Bool", 6, 15},
                  {"prim::If", 7, 17},
                  {"aten::nonzero", 9, 21}};
  for (const Expected &e : expected) {
    const torch::jit::Node *node = findKind(graph->block(), e.kind);
    ASSERT_NE(node, nullptr) << e.kind;
    auto loc = locationOf(node);
    ASSERT_TRUE(loc.has_value()) << e.kind;
    EXPECT_EQ(loc->file, "t.ir");
    EXPECT_EQ(loc->line, e.line) << e.kind;
    EXPECT_EQ(loc->column, e.column) << e.kind;
    EXPECT_EQ(loc->length, std::string(e.kind).size()) << e.kind;
  }
  auto loc = locationOf(findKind(graph->block(), "aten::nonzero"));
  EXPECT_EQ(loc->sourceLine, "      %i : Tensor = aten::nonzero(%m)");
}

TEST(IRSource, BadIRThrows) {
  EXPECT_ANY_THROW(
      parseIRWithLocations("graph(%x : Tensor):\n  %y = \n", "bad.ir"));
}
