//===- AnalysisTest.cpp - The value-class lattice and the dataflow --------===//

#include "passes/Analysis.h"
#include "passes/IRSource.h"
#include "passes/Partition.h"

#include <ATen/Functions.h>
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

TEST(Partition, TopLevelNodesTakeTheirBlocksNodesFromTheCensus) {
  // A loop whose body holds the one data-dependent op is a dynamic island
  // of its own nodes and its body's; the nodes around it are two static
  // regions; constants are in no segment.
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor):
  %t : bool = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %a : Tensor = aten::relu(%x)
  %b : Tensor = aten::neg(%a)
  %out : Tensor = prim::Loop(%two, %t, %b)
    block0(%i : int, %acc : Tensor):
      %n : Tensor = aten::nonzero(%acc)
      %s : Tensor = aten::sum(%n)
      %next : Tensor = aten::add(%acc, %s, %two)
      -> (%t, %next)
  %c : Tensor = aten::sigmoid(%x)
  %d : Tensor = aten::add(%c, %out, %two)
  return (%d)
)IR",
                                    "t.ir");
  AnalysisResult analysis = analyzeGraph(*graph);
  ASSERT_EQ(analysis.topLevel.size(), 7u); // constants included
  PartitionResult p = partitionGraph(*graph, analysis);
  std::vector<std::pair<Segment::Kind, size_t>> got;
  for (const Segment &s : p.segments)
    got.emplace_back(s.kind, s.numNodes);
  using K = Segment::Kind;
  // relu, neg | the loop and its 3 body nodes | sigmoid, add (the full
  // reduction makes the loop's result static again).
  std::vector<std::pair<K, size_t>> want = {
      {K::StaticRegion, 2}, {K::DynamicIsland, 4}, {K::StaticRegion, 2}};
  EXPECT_EQ(got, want);
}

TEST(Partition, AValueWrittenWithDataLaterIsDynamicWhereItIsMade) {
  // `out` is made static, then resize_ gives it a data-dependent length.
  // Its class is final only once the analysis has seen the write:
  // zeros_like belongs to the island.
  auto graph = parseIRWithLocations(R"IR(graph(%q : Tensor, %x : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %s : Tensor = aten::sigmoid(%x)
  %m : Tensor = aten::gt(%q, %zero)
  %pairs : Tensor = aten::nonzero(%m)
  %k : int = aten::size(%pairs, %zero)
  %out : Tensor = aten::zeros_like(%s, %none, %none, %none, %none, %none)
  %sizes : int[] = prim::ListConstruct(%k)
  %w : Tensor = aten::resize_(%out, %sizes, %none)
  return (%out)
)IR",
                                    "t.ir");
  AnalysisResult analysis = analyzeGraph(*graph);
  const torch::jit::Value *out = graph->outputs()[0];
  ASSERT_TRUE(analysis.info(out).isDataDependent());
  PartitionResult p = partitionGraph(*graph, analysis);
  std::optional<size_t> seg = p.segmentOf.find(out->node());
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(p.segments[*seg].kind, Segment::Kind::DynamicIsland);
}

TEST(Analysis, AWriteAtDataDependentRowsKeepsTheTensorsShape) {
  // GShard's combine (test/e2e/bounded_models.py, AddAtBoundedRows) and
  // torchvision's batched_nms (`keep_mask[curr[keep]] = True`): rows
  // written at indices of data-dependent length change the contents of
  // the tensor written, not its shape, so reading its size is no sync.
  auto graph = parseIRWithLocations(R"IR(graph(%q : Tensor, %x : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : float = prim::Constant[value=2.]()
  %true : bool = prim::Constant[value=1]()
  %false : bool = prim::Constant[value=0]()
  %s : Tensor = aten::sigmoid(%x)
  %m : Tensor = aten::gt(%q, %zero)
  %pairs : Tensor = aten::nonzero(%m)
  %pred : Tensor = aten::select(%pairs, %one, %one)
  %out : Tensor = aten::zeros_like(%s, %none, %none, %none, %none, %none)
  %rows : Tensor?[] = prim::ListConstruct(%pred)
  %picked : Tensor = aten::index(%s, %rows)
  %scaled : Tensor = aten::mul(%picked, %two)
  %w : Tensor = aten::index_add_(%out, %zero, %pred, %scaled, %one)
  %keep : Tensor = aten::zeros_like(%q, %none, %none, %none, %none, %none)
  %t : Tensor = aten::scalar_tensor(%true, %none, %none, %none, %none)
  %w2 : Tensor = aten::index_put_(%keep, %rows, %t, %false)
  %n : int = aten::size(%keep, %zero)
  return (%out, %keep, %n)
)IR",
                                    "t.ir");
  AnalysisResult analysis = analyzeGraph(*graph);
  const auto &outs = graph->outputs();
  for (const torch::jit::Value *v : {outs[0], outs[1]}) {
    EXPECT_EQ(analysis.info(v).cls, ValueClass::DeviceData) << v->debugName();
    EXPECT_EQ(analysis.info(v).shape, ShapeDep::Static) << v->debugName();
  }
  EXPECT_FALSE(analysis.info(outs[2]).isDataDependent());
  for (const Finding &f : analysis.findings)
    EXPECT_NE(f.op, "aten::size") << f.message;
}

TEST(Analysis, AListsLengthIsDataDependentOnlyWhereItsWritesAre) {
  // torchvision's poolers take `[boxes[keep]]`: a list of one tensor of
  // data-dependent shape, whose length (`enumerate(boxes)`) is 1. A list
  // appended to under a data-dependent branch, or in a loop of
  // data-dependent trip count (read before the append, too), has a
  // data-dependent length; isinstance reads a type, never data.
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor):
  %zero : int = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %m : Tensor = aten::gt(%x, %zero)
  %l : Tensor?[] = prim::ListConstruct(%m)
  %sel : Tensor = aten::index(%x, %l)
  %one : Tensor[] = prim::ListConstruct(%sel)
  %n1 : int = aten::len(%one)
  %isl : bool = prim::isinstance[types=[Tensor[]]](%one)
  %grown : Tensor[] = prim::ListConstruct()
  %k : int = aten::size(%sel, %zero)
  %c : bool = aten::gt(%k, %zero)
  prim::If(%c)
    block0():
      %a : Tensor[] = aten::append(%grown, %x)
      -> ()
    block1():
      -> ()
  %n2 : int = aten::len(%grown)
  %looped : Tensor[] = prim::ListConstruct()
  %seen : int = prim::Loop(%k, %true, %zero)
    block0(%i : int, %acc : int):
      %n3 : int = aten::len(%looped)
      %b : Tensor[] = aten::append(%looped, %x)
      -> (%true, %n3)
  return (%n1, %isl, %n2, %seen)
)IR",
                                    "t.ir");
  AnalysisResult analysis = analyzeGraph(*graph);
  const auto &outs = graph->outputs();
  EXPECT_FALSE(analysis.info(outs[0]).isDataDependent());
  EXPECT_FALSE(analysis.info(outs[1]).isDataDependent());
  EXPECT_TRUE(analysis.info(outs[2]).isDataDependent());
  EXPECT_TRUE(analysis.info(outs[3]).isDataDependent());
  for (const torch::jit::Node *n : graph->nodes()) {
    if (n->kind() == c10::prim::Loop) {
      EXPECT_TRUE(analysis.info(n->blocks()[0]->outputs()[1]).isDataDependent());
    }
  }
}

TEST(Analysis, AFoldedTupleOfHostTensorsIsReadWithoutASync) {
  // Constant propagation folds `(torch.tensor(0.0), False)` into one
  // constant (RandAugment's magnitude table): the tensor in it lives on the
  // host, so reading it back is no sync; one on a device would be.
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::Value *folded = graph->insertConstant(
      c10::ivalue::Tuple::create(at::scalar_tensor(0.5), c10::IValue(false)));
  auto *unpack = graph->insertNode(graph->createTupleUnpack(folded));
  torch::jit::Value *read = graph->insert(
      c10::Symbol::fromQualString("aten::item"), {unpack->output(0)});
  graph->registerOutput(read);
  AnalysisResult r = analyzeGraph(*graph);
  EXPECT_TRUE(r.info(folded).onHost);
  EXPECT_TRUE(r.info(unpack->output(0)).onHost);
  EXPECT_TRUE(r.findings.empty());
}

TEST(Analysis, ABranchOnIsCpuReadsItsTensorOnTheHost) {
  // `if x.is_cpu: n = int(x.sum())`: in the then-branch x is on the host,
  // and so is its sum, so the read is no sync; the same read in the
  // else-branch, or of another tensor, is one. Each branch's buffer made
  // on `x.device` lives where x does.
  auto graph = parseIRWithLocations(R"IR(graph(%x : Tensor, %y : Tensor):
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %cpu : bool = prim::is_cpu(%x)
  %n : int = prim::If(%cpu)
    block0():
      %s : Tensor = aten::sum(%x, %none)
      %a : int = aten::Int(%s)
      %d : Device = prim::device(%x)
      %sizes : int[] = prim::ListConstruct(%a)
      %buf : Tensor = aten::zeros(%sizes, %none, %none, %d, %none)
      %b : int = aten::Int(%buf)
      %t : Tensor = aten::sum(%y, %none)
      %c : int = aten::Int(%t)
      %ab : int = aten::add(%a, %b)
      -> (%ab)
    block1():
      %s2 : Tensor = aten::sum(%x, %none)
      %e : int = aten::Int(%s2)
      -> (%e)
  return (%n))IR",
                                     "t.ir");
  AnalysisResult r = analyzeGraph(*graph); // findingNodes point into graph
  // The reads of y's sum and of x's in the else-branch; not x's in the
  // then-branch, nor that of the buffer made on x's device.
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].category, Category::HostSync);
  EXPECT_EQ(r.findings[1].category, Category::HostSync);
  EXPECT_EQ(r.findingNodes[0]->input(0)->debugName(), "t");
  EXPECT_EQ(r.findingNodes[1]->input(0)->debugName(), "s2");
}
