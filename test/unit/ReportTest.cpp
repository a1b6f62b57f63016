//===- ReportTest.cpp - Diagnostics and JSON rendering
//---------------------===//

#include "passes/Report.h"

#include <gtest/gtest.h>

using namespace staticify;

static Finding makeFinding(size_t id, Category c, Role r) {
  Finding f;
  f.id = id;
  f.category = c;
  f.role = r;
  f.op = "aten::nonzero";
  f.value = "%idx";
  f.message = "'aten::nonzero' returns one row per nonzero element";
  Location loc;
  loc.file = "model.py";
  loc.line = 12;
  loc.column = 11;
  loc.length = 13;
  loc.sourceLine = "    idx = torch.nonzero(m)";
  f.location = loc;
  return f;
}

TEST(Report, DiagnosticHasLocationSourceLineAndCaret) {
  Finding f = makeFinding(0, Category::DynamicShape, Role::Root);
  std::string text = renderFinding(f, {f});
  EXPECT_EQ(text,
            "model.py:12:11: warning: 'aten::nonzero' returns one row per "
            "nonzero element [dynamic-shape]\n"
            "    idx = torch.nonzero(m)\n"
            "          ^~~~~~~~~~~~~\n"); // 13 columns: torch.nonzero
}

TEST(Report, CaretKeepsTabsAndStopsAtEndOfLine) {
  Finding f = makeFinding(0, Category::HostSync, Role::Root);
  f.location->sourceLine = "\tx = t.item()";
  f.location->column = 6;
  f.location->length = 100; // a range running past the line
  std::string text = renderFinding(f, {f});
  EXPECT_NE(text.find("\n\t    ^~~~~~~~\n"), std::string::npos) << text;
}

TEST(Report, DerivedFindingNamesItsRootCauses) {
  Finding root = makeFinding(0, Category::DynamicShape, Role::Root);
  Finding derived = makeFinding(1, Category::HostSync, Role::Derived);
  derived.op = "aten::numel";
  derived.location->line = 13;
  derived.causes = {0};
  std::string text = renderFinding(derived, {root, derived});
  EXPECT_NE(text.find("model.py:13:11: note: data-dependent because of "
                      "'aten::nonzero' at model.py:12:11"),
            std::string::npos)
      << text;
}

TEST(Report, RewrittenFindingIsARemarkNamingItsRule) {
  Finding f = makeFinding(0, Category::DynamicShape, Role::Root);
  f.action = "rewritten";
  f.rule = "masked-reduce";
  std::string text = renderFinding(f, {f});
  EXPECT_EQ(text.rfind("model.py:12:11: remark: ", 0), 0u) << text;
  EXPECT_NE(text.find("note: rewritten by masked-reduce"), std::string::npos);
}

TEST(Report, FindingWithoutLocationShowsTheNode) {
  Finding f = makeFinding(0, Category::DynamicShape, Role::Root);
  f.location.reset();
  f.nodeText = "%idx : Tensor = aten::nonzero(%m)";
  std::string text = renderFinding(f, {f});
  EXPECT_EQ(text.rfind("<graph>: warning: ", 0), 0u) << text;
  EXPECT_NE(text.find("    %idx : Tensor = aten::nonzero(%m)\n"),
            std::string::npos);
}

TEST(Report, JsonEscapesStringsAndCarriesTheSchemaVersion) {
  Report r;
  r.toolVersion = "0.1.0";
  r.input = "dir/\"odd\"\nname.pt";
  MethodReport m;
  m.name = "forward";
  Finding f = makeFinding(0, Category::ControlFlow, Role::Derived);
  f.location->sourceLine = "\tif x:\x01";
  m.findings.push_back(f);
  m.before.counts = m.after.counts = countByCategory(m.findings);
  r.methods.push_back(m);
  std::string json = renderJson(r);
  EXPECT_NE(json.find("\"schema\": \"staticify-report\""), std::string::npos);
  EXPECT_NE(json.find("\"version\": 1"), std::string::npos);
  EXPECT_NE(json.find("\"input\": \"dir/\\\"odd\\\"\\nname.pt\""),
            std::string::npos);
  EXPECT_NE(json.find("\"source\": \"\\tif x:\\u0001\""), std::string::npos);
  EXPECT_NE(json.find("\"output\": null"), std::string::npos);
  EXPECT_NE(json.find("\"rule\": null"), std::string::npos);
  EXPECT_NE(json.find("\"control-flow\": 1"), std::string::npos);
}

TEST(Report, CountsAndStaticness) {
  std::vector<Finding> fs = {
      makeFinding(0, Category::HostSync, Role::Root),
      makeFinding(1, Category::HostSync, Role::Derived),
      makeFinding(2, Category::DataDerived, Role::Derived)};
  CategoryCounts c = countByCategory(fs);
  EXPECT_EQ(c[Category::HostSync], 2u);
  EXPECT_EQ(c[Category::DataDerived], 1u);
  EXPECT_EQ(c[Category::DynamicShape], 0u);
  EXPECT_EQ(c.total(), 3u);
  GraphSummary s;
  EXPECT_TRUE(s.isStatic());
  s.counts = c;
  EXPECT_FALSE(s.isStatic());
}
