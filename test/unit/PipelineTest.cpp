//===- PipelineTest.cpp - Pass registry and pipeline driver ---------------===//

#include "passes/Pipeline.h"
#include "passes/IRSource.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace staticify;
using torch::jit::Graph;

TEST(Pipeline, PassListIsCheckedAgainstTheRegistry) {
  EXPECT_EQ(parsePassList("inline,normalize"),
            (std::vector<std::string>{"inline", "normalize"}));
  EXPECT_EQ(parsePassList(""), std::vector<std::string>{});
  for (const char *list : {",,", "inline,,normalize", "inline,"})
    EXPECT_THROW(parsePassList(list), std::invalid_argument) << list;
  try {
    parsePassList("normalize,bogus");
    FAIL() << "an unknown pass was accepted";
  } catch (const std::invalid_argument &e) {
    std::string what = e.what();
    EXPECT_NE(what.find("unknown pass 'bogus'"), std::string::npos);
    EXPECT_NE(what.find("normalize"), std::string::npos); // lists known ones
  }
}

TEST(Pipeline, NoInlineDropsOnlyTheInlinePass) {
  auto with = defaultPipeline(true), without = defaultPipeline(false);
  EXPECT_EQ(with.front(), "inline");
  EXPECT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(std::find(without.begin(), without.end(), "inline"), without.end());
}

TEST(Pipeline, NormalizationAloneIsNotARewrite) {
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor):
  %two : int = prim::Constant[value=2]()
  %three : int = prim::Constant[value=3]()
  %five : int = aten::add(%two, %three)
  %dead : Tensor = aten::relu(%x)
  %y : Tensor = aten::mul(%x, %five)
  return (%y)
)IR",
                                    "t.ir");
  PipelineResult r = runPipeline(graph, "forward", {"normalize"});
  EXPECT_FALSE(r.rewritten);
  std::ostringstream os;
  os << *graph;
  EXPECT_EQ(os.str().find("aten::add"), std::string::npos) << os.str();
  EXPECT_EQ(os.str().find("aten::relu"), std::string::npos) << os.str();
}

TEST(Pipeline, NormalizationKeepsRandomOpsApart) {
  // Two draws with identical inputs must stay two draws.
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor):
  %n : int = prim::Constant[value=8]()
  %none : NoneType = prim::Constant()
  %a : Tensor = aten::randperm(%n, %none, %none, %none, %none)
  %b : Tensor = aten::randperm(%n, %none, %none, %none, %none)
  %y : Tensor = aten::add(%a, %b, %n)
  return (%y)
)IR",
                                    "t.ir");
  runPipeline(graph, "forward", {"normalize"});
  std::ostringstream os;
  os << *graph;
  std::string text = os.str();
  size_t first = text.find("aten::randperm");
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(text.find("aten::randperm", first + 1), std::string::npos) << text;
}

TEST(Pipeline, VerifyEachCatchesSilentChangesAndBrokenGraphs) {
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor):
  %y : Tensor = aten::relu(%x)
  return (%y)
)IR",
                                    "verify.ir");
  PassInfo fake{"fake", "a pass under test", true, nullptr};
  std::string before = graph->toString(false);
  EXPECT_NO_THROW(verifyAfter(fake, *graph, /*changed=*/false, before));
  // A pass that mutates and then says it did nothing.
  torch::jit::WithInsertPoint guard(graph->return_node());
  torch::jit::Node *neg = graph->insertNode(graph->create(c10::aten::neg, 1));
  neg->addInput(graph->inputs()[0]);
  try {
    verifyAfter(fake, *graph, /*changed=*/false, before);
    FAIL() << "a silent change passed";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("pass 'fake' changed the graph"),
              std::string::npos);
  }
  EXPECT_NO_THROW(verifyAfter(fake, *graph, /*changed=*/true, before));
  // A use before its definition fails lint: relu now reads neg's result.
  graph->nodes().front()->replaceInput(0, neg->output());
  try {
    verifyAfter(fake, *graph, /*changed=*/true, before);
    FAIL() << "a broken graph passed lint";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("fails lint"), std::string::npos);
  }
}

TEST(Pipeline, ReplaceGraphContentsRestoresAGraphInPlace) {
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor, %k : int):
  %zero : int = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %m : Tensor = aten::gt(%x, %zero)
  %l : Tensor?[] = prim::ListConstruct(%m)
  %y : Tensor = aten::index(%x, %l)
  %s : Tensor = aten::sum(%y, %none)
  return (%s)
)IR",
                                    "t.ir");
  Graph *object = graph.get();
  std::shared_ptr<Graph> before = graph->copy();
  std::string text = before->toString(/*print_source_locations=*/false);
  PipelineResult r = runPipeline(graph, "forward", defaultPipeline(false));
  ASSERT_TRUE(r.rewritten);
  ASSERT_NE(graph->toString(false), text);
  replaceGraphContents(*graph, *before);
  EXPECT_EQ(graph.get(), object); // the same graph object, as a method holds
  EXPECT_EQ(graph->toString(false), text);
  graph->lint();
}
