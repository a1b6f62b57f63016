//===- OpInfoTest.cpp - The op table against the libtorch it runs with ----===//
//
// Every entry must name an op (and overload) that the operator registry of
// this libtorch knows: a PyTorch upgrade that renames an overload fails here
// instead of silently turning a rule off. Custom ops (torchvision::nms) are
// checked once their library is loaded; the runtime library's kernels
// (staticify::nms_padded) always.
//
//===----------------------------------------------------------------------===//

#include "passes/OpInfo.h"
#include "passes/OpCatalogue.h"

#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>

using namespace staticify;

namespace {

/// Node kinds TorchScript's interpreter and emitter handle without a
/// registered operator: they have no schema to check.
bool isInterpreterPrimitive(const std::string &op) {
  static const std::set<std::string> primitives = {
      "prim::ListConstruct", "prim::ListUnpack",    "prim::TupleConstruct",
      "prim::TupleUnpack",   "prim::TupleIndex",    "prim::DictConstruct",
      "prim::Uninitialized", "prim::GetAttr",       "prim::unchecked_cast",
      "prim::NumToTensor",   "prim::device",        "prim::dtype",
      "prim::Print",         "prim::requires_grad", "prim::is_cuda",
      "prim::layout",        "prim::min",           "prim::max",
      "prim::tolist",        "prim::isinstance"};
  return primitives.count(op) != 0;
}

/// Loads the runtime library, which registers the staticify:: kernels.
bool loadRuntime() {
#ifdef STATICIFY_RUNTIME_LIBRARY
  static const bool loaded =
      dlopen(STATICIFY_RUNTIME_LIBRARY, RTLD_NOW | RTLD_GLOBAL) != nullptr;
  return loaded;
#else
  return false;
#endif
}

/// Loads torchvision's custom ops if this machine has them.
bool loadTorchvision() {
#ifdef STATICIFY_TORCHVISION_OPS
  static const bool loaded =
      std::strlen(STATICIFY_TORCHVISION_OPS) != 0 &&
      dlopen(STATICIFY_TORCHVISION_OPS, RTLD_NOW | RTLD_GLOBAL) != nullptr;
  return loaded;
#else
  return false;
#endif
}

std::vector<std::shared_ptr<torch::jit::Operator>>
registered(const std::string &op) {
  return torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(op));
}

const OpInfo *infoOf(const std::string &ir, c10::Symbol kind) {
  static std::vector<std::shared_ptr<torch::jit::Graph>> keep;
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(ir, graph.get());
  keep.push_back(graph);
  for (const torch::jit::Node *n : graph->nodes())
    if (n->kind() == kind)
      return opInfo(n);
  return nullptr;
}

} // namespace

TEST(OpInfo, EveryEntryIsRegisteredInThisLibtorch) {
  bool custom = loadTorchvision();
  ASSERT_TRUE(loadRuntime()) << "the runtime library did not load";
  size_t checked = 0;
  for (const OpInfo &e : allOpInfos()) {
    std::string op = e.op;
    bool isRuntime = op.rfind("staticify::", 0) == 0;
    bool isCustom =
        op.rfind("aten::", 0) != 0 && op.rfind("prim::", 0) != 0 && !isRuntime;
    if (isCustom && !custom)
      continue;
    auto ops = registered(op);
    if (ops.empty()) {
      EXPECT_TRUE(isInterpreterPrimitive(op))
          << op << " is not a registered operator of this libtorch";
      EXPECT_EQ(e.overload, nullptr) << op << " has no overloads to key by";
      continue;
    }
    ++checked;
    if (!e.overload)
      continue;
    bool found = false;
    for (const auto &o : ops)
      found |= o->schema().overload_name() == e.overload;
    EXPECT_TRUE(found) << op << " has no overload '" << e.overload << "'";
  }
  EXPECT_GT(checked, 150u);
}

TEST(OpInfo, TensorFormsAreRegistered) {
  for (const OpInfo &e : allOpInfos()) {
    if (e.tensorForm) {
      EXPECT_FALSE(registered(e.tensorForm).empty())
          << e.op << "'s tensor form " << e.tensorForm << " is not registered";
    }
  }
}

TEST(OpInfo, EntriesAreUnique) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const OpInfo &e : allOpInfos()) {
    auto key = std::make_pair(std::string(e.op),
                              e.overload ? std::string("=") + e.overload : "*");
    EXPECT_TRUE(seen.insert(key).second)
        << e.op << " (" << key.second << ") is listed twice";
  }
}

TEST(OpInfo, EveryReductionSaysWhatItsIdentityIs) {
  for (const OpInfo &e : allOpInfos()) {
    if (e.role == OpRole::Reduction)
      EXPECT_NE(e.identity, Identity::NotApplicable)
          << e.op << " is a reduction: give its identity, or Identity::None";
    else
      EXPECT_EQ(e.identity, Identity::NotApplicable)
          << e.op << " is not a reduction but has an identity";
  }
}

TEST(OpInfo, RootsSayWhyAndTraitsAgree) {
  for (const OpInfo &e : allOpInfos()) {
    EXPECT_EQ(e.role == OpRole::DynamicShapeRoot, e.reason != nullptr)
        << e.op << ": a root has a reason, nothing else does";
    EXPECT_FALSE(e.has(kMayRaise) && e.has(kNeverRaises)) << e.op;
    if (e.has(kComparison)) {
      EXPECT_EQ(e.dtype, DTypeRule::Bool) << e.op;
    }
  }
}

TEST(OpInfo, OverloadsAreToldApartBySchema) {
  auto where = c10::Symbol::fromQualString("aten::where");
  const OpInfo *indices = infoOf(R"IR(
graph(%c : Tensor):
  %r : Tensor[] = aten::where(%c)
  return (%r))IR",
                                 where);
  const OpInfo *select = infoOf(R"IR(
graph(%c : Tensor, %a : Tensor, %b : Tensor):
  %r : Tensor = aten::where(%c, %a, %b)
  return (%r))IR",
                                where);
  ASSERT_NE(indices, nullptr);
  ASSERT_NE(select, nullptr);
  EXPECT_EQ(indices->role, OpRole::DynamicShapeRoot);
  EXPECT_EQ(indices->dtype, DTypeRule::Long);
  EXPECT_EQ(select->role, OpRole::LeadingPreserving);
  EXPECT_TRUE(select->has(kElementwise));
  EXPECT_EQ(select->dtype, DTypeRule::KeepsBranches);
}

TEST(OpInfo, UnknownOpsHaveNoEntry) {
  EXPECT_EQ(infoOf(R"IR(
graph(%x : Tensor):
  %r : Tensor = aten::lgamma(%x)
  return (%r))IR",
                   c10::Symbol::fromQualString("aten::lgamma")),
            nullptr);
}

TEST(OpInfo, NeverRaisesFollowsTheTraits) {
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor, %y : Tensor, %i : int, %j : int):
  %none : NoneType = prim::Constant()
  %floor : str = prim::Constant[value="floor"]()
  %a : Tensor = aten::div(%x, %y)
  %b : Tensor = aten::div(%x, %y, %floor)
  %c : float = aten::div(%i, %j)
  %d : Tensor = aten::remainder(%x, %y)
  %e : Tensor = aten::sum(%x, %none)
  %zero : int = prim::Constant[value=0]()
  %false : bool = prim::Constant[value=0]()
  %dims : int[] = prim::ListConstruct(%zero)
  %f : Tensor = aten::amax(%x, %dims, %false)
  %g : int = prim::min(%i, %j)
  return (%a, %b, %c, %d, %e, %f, %g))IR",
                      graph.get());
  std::vector<bool> expected = {true, false, false, false, true, false, true};
  size_t k = 0;
  for (const torch::jit::Node *n : graph->nodes()) {
    if (n->kind() == c10::prim::Constant ||
        n->kind() == c10::prim::ListConstruct)
      continue;
    ASSERT_LT(k, expected.size());
    EXPECT_EQ(neverRaisesOnValues(n), expected[k]) << *n;
    ++k;
  }
  EXPECT_EQ(k, expected.size());
}
