//===- BoundedFormsTest.cpp - The forms the bound pass inserts are static -===//

#include "passes/BoundedForms.h"
#include "passes/Analysis.h"

#include <gtest/gtest.h>

#include <set>

using namespace staticify;

namespace {

/// Every form the engine inserts, with its number of results.
const std::pair<const char *, size_t> kForms[] = {
    {"compact", 2},
    {"live_rows", 1},
    {"coordinate", 1},
    {"nonzero", 2},
    {"where_index", 2},
    {"select_rows", 2},
    {"select_checked_rows", 2},
    {"repeat_rows", 2},
    {"masked_select", 2},
    {"random_prefix", 1},
    {"gather_rows", 1},
    {"gather_vector_rows", 1},
    {"row_at", 1},
    {"flat_position", 1},
    {"softmax_rows", 1},
    {"cat_two_rows", 2},
    {"put_at_mask_out", 1},
    {"unique_consecutive_rows", 4},
    {"row_stride", 1},
    {"coordinate_at", 1},
    {"random_true_positions", 1},
    {"gather_rows_at", 1},
    {"cat_rows", 2},
    {"put_rows", 1},
    {"unique", 4},
    {"unique_consecutive", 4},
    {"unique_rows", 4},
    {"keep_rows", 1},
    {"sort_rows", 2},
    {"sort_dim", 2},
    {"slice_positions", 1},
};

TEST(BoundedFormsTest, EveryFormIsStaticUnderOurOwnAnalysis) {
  for (auto [name, results] : kForms) {
    SCOPED_TRACE(name);
    std::shared_ptr<torch::jit::Graph> g = boundedFormGraph(name);
    AnalysisResult a = analyzeGraph(*g);
    EXPECT_TRUE(a.findings.empty())
        << a.findings.front().op << ": " << a.findings.front().message;
    EXPECT_TRUE(a.outputsStatic);
    EXPECT_EQ(g->outputs().size(), results); // tuples are flattened
  }
}

TEST(BoundedFormsTest, TheNamesAreTheFilesFunctions) {
  std::vector<std::string> names = boundedFormNames();
  std::set<std::string> known(names.begin(), names.end());
  for (auto [name, results] : kForms)
    EXPECT_TRUE(known.count(name)) << name;
  EXPECT_THROW(boundedFormGraph("no_such_form"), std::out_of_range);
}

TEST(BoundedFormsTest, InsertedNodesPointAtTheAnchor) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Value *x = graph->addInput("x");
  x->setType(c10::TensorType::get());
  torch::jit::Node *anchor =
      graph->appendNode(graph->create(c10::aten::relu, {x}));
  graph->registerOutput(anchor->output());
  torch::jit::WithInsertPoint guard(anchor);
  auto outs = insertForm(*graph, "nonzero", {x}, anchor);
  ASSERT_EQ(outs.size(), 2u);
  for (torch::jit::Node *n : graph->nodes())
    if (n != anchor && n->kind() != c10::prim::Constant) {
      EXPECT_EQ(n->sourceRange().start(), anchor->sourceRange().start());
    }
  EXPECT_THROW(insertForm(*graph, "nonzero", {x, x}, anchor),
               std::invalid_argument);
}

} // namespace
