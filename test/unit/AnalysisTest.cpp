//===- AnalysisTest.cpp - The value-class lattice and the dataflow --------===//

#include "passes/Analysis.h"
#include "passes/IRSource.h"

#include <gtest/gtest.h>

using namespace staticify;

static ValueInfo dd(ShapeDep s, std::initializer_list<uint32_t> roots) {
  ValueInfo v;
  v.cls = ValueClass::DataDependent;
  v.shape = s;
  for (uint32_t r : roots)
    v.addRoot(r);
  return v;
}

TEST(ValueInfo, JoinIsTheLeastUpperBound) {
  ValueInfo a = dd(ShapeDep::Leading, {1});
  ValueInfo b;
  b.cls = ValueClass::DeviceData;
  b.dtype = DTypeKind::Bool;
  ValueInfo ab = a, ba = b;
  EXPECT_FALSE(ab.join(b)); // a already dominates b: nothing changes
  EXPECT_TRUE(ba.join(a));
  EXPECT_EQ(ab, ba); // commutative
  EXPECT_EQ(ab.cls, ValueClass::DataDependent);
  EXPECT_EQ(ab.shape, ShapeDep::Leading);
  EXPECT_EQ(ab.dtype, DTypeKind::Unknown); // disagreeing dtypes
  ValueInfo again = ab;
  EXPECT_FALSE(again.join(ab)); // idempotent: reports no change
}

TEST(ValueInfo, RootsAreDeduplicatedAndCapped) {
  ValueInfo v = dd(ShapeDep::Static, {3, 3, 1});
  EXPECT_EQ(v.numRoots, 2);
  for (uint32_t r = 10; r < 20; ++r)
    v.addRoot(r);
  EXPECT_EQ(v.numRoots, ValueInfo::kMaxRoots);
}

static AnalysisResult analyze(const char *ir) {
  auto graph = parseIRWithLocations(ir, "t.ir");
  return analyzeGraph(*graph);
}

TEST(Analysis, LoopCarriedDependenceIsFoundAtTheFixpointAndReportedOnce) {
  // `m` becomes data-dependent only at the end of the first iteration; the
  // branch on it inside the loop must still be found, exactly once.
  auto r = analyze(R"IR(graph(%x : Tensor):
  %t : bool = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %four : int = prim::Constant[value=4]()
  %out : int = prim::Loop(%four, %t, %zero)
    block0(%i : int, %m : int):
      %c : bool = aten::gt(%m, %zero)
      %v : int = prim::If(%c)
        block0():
          -> (%zero)
        block1():
          -> (%m)
      %s : Tensor = aten::select(%x, %zero, %i)
      %m2 : int = aten::Int(%s)
      -> (%t, %m2)
  return (%out)
)IR");
  size_t ifs = 0, syncs = 0;
  for (const Finding &f : r.findings) {
    ifs += f.op == "prim::If";
    syncs += f.op == "aten::Int";
  }
  EXPECT_EQ(ifs, 1u);
  EXPECT_EQ(syncs, 1u);
  EXPECT_EQ(r.numNodes, 8u); // 3 constants, the loop, 4 in its body
  EXPECT_FALSE(r.outputsStatic);
}

TEST(Analysis, StaticGraphHasNoFindingsAndStaticOutputs) {
  auto r = analyze(R"IR(graph(%x : Tensor, %w : Tensor):
  %y : Tensor = aten::matmul(%x, %w)
  %z : Tensor = aten::relu(%y)
  %n : int = aten::size(%z, %y)
  return (%z)
)IR");
  EXPECT_TRUE(r.findings.empty());
  EXPECT_TRUE(r.outputsStatic);
}

TEST(Analysis, SizeReadsOfLeadingDynamicTensors) {
  // nonzero(m) is [count, rank]: dimension 1 is static, dimension 0 is not.
  auto r = analyze(R"IR(graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %m : Tensor = aten::gt(%x, %zero)
  %i : Tensor = aten::nonzero(%m)
  %rank : int = aten::size(%i, %one)
  %count : int = aten::size(%i, %zero)
  return (%rank, %count)
)IR");
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].op, "aten::nonzero");
  EXPECT_EQ(r.findings[1].op, "aten::size");
  EXPECT_EQ(r.findings[1].location->line, 7u); // the size(i, 0), not size(i, 1)
  EXPECT_EQ(r.findings[1].role, Role::Derived);
  EXPECT_EQ(r.findings[1].causes, std::vector<size_t>{0});
}
