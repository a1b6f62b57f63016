//===- BatchTest.cpp - M_batched from a static method ---------------------===//

#include "passes/Batch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>

using namespace staticify;

namespace {

torch::jit::Module moduleWith(const std::string &source) {
  torch::jit::Module m("m");
  m.define(source);
  return m;
}

bool hasNode(torch::jit::Block *block, const std::string &kind) {
  for (torch::jit::Node *n : block->nodes()) {
    if (std::string(n->kind().toQualString()) == kind)
      return true;
    for (torch::jit::Block *b : n->blocks())
      if (hasNode(b, kind))
        return true;
  }
  return false;
}

/// Whether \p method's graph has a node of kind \p kind, in a block too.
bool hasNode(torch::jit::Module &m, const std::string &method,
             const std::string &kind) {
  return hasNode(m.get_method(method).graph()->block(), kind);
}

} // namespace

TEST(Batch, EachRowIsTheMethodOnThatRow) {
  // An elementwise op of a row [N] and a per-row scalar (a 0-d sum), a
  // reduction over every element, a shape read and a row-wise cumsum.
  torch::jit::Module m = moduleWith(R"(
def forward(self, x, w):
    s = x.sum()
    y = (x - s / x.numel()) * w
    return y.cumsum(0), y.max()
)");
  BatchOutcome out =
      addBatchedMethod(m, "forward", parseSignature("f32[?], f32[?]"));
  ASSERT_EQ(out.method, "forward_batched") << out.reason;
  at::Tensor xs = at::randn({5, 7}), ws = at::randn({5, 7});
  auto got = m.get_method("forward_batched")({xs, ws}).toTuple();
  for (int64_t b = 0; b < 5; ++b) {
    auto want = m.forward({xs[b], ws[b]}).toTuple();
    EXPECT_TRUE(at::allclose(got->elements()[0].toTensor()[b],
                             want->elements()[0].toTensor()));
    EXPECT_TRUE(at::allclose(got->elements()[1].toTensor()[b],
                             want->elements()[1].toTensor()));
  }
  // The per-row scalar meets the row with a size-1 dimension after the
  // batch one; the full reduction is over each row's elements.
  EXPECT_TRUE(hasNode(m, "forward_batched", "aten::unsqueeze"));
  EXPECT_TRUE(hasNode(m, "forward_batched", "aten::amax"));
}

TEST(Batch, RandomOpsDrawPerRow) {
  torch::jit::Module m = moduleWith(R"(
def forward(self, x):
    return x[torch.randperm(x.size(0))]
)");
  BatchOutcome out = addBatchedMethod(m, "forward", parseSignature("f32[?]"));
  ASSERT_EQ(out.method, "forward_batched") << out.reason;
  at::Tensor row = at::arange(50, at::kFloat);
  at::Tensor got =
      m.get_method("forward_batched")({row.expand({8, 50}).contiguous()})
          .toTensor();
  for (int64_t b = 0; b < 8; ++b)
    EXPECT_TRUE(at::equal(std::get<0>(got[b].sort()), row)); // a permutation
  EXPECT_FALSE(at::equal(got[0], got[1])); // of its own (50! orders)
}

TEST(Batch, AnOpWithoutABatchedFormIsNamedAndNothingIsAdded) {
  // A value read to the host per row has no batched form.
  torch::jit::Module m = moduleWith(R"(
def forward(self, x):
    return x.new_zeros([3]) + torch.tensor(x.size(0)).float()
)");
  BatchOutcome fine = addBatchedMethod(m, "forward", parseSignature("f32[?]"));
  EXPECT_EQ(fine.method, "forward_batched") << fine.reason; // sizes: shared
  torch::jit::Module dynamic = moduleWith(R"(
def forward(self, x):
    return x[x > 0]
)");
  BatchOutcome refused =
      addBatchedMethod(dynamic, "forward", parseSignature("f32[?]"));
  EXPECT_TRUE(refused.method.empty());
  EXPECT_NE(refused.reason.find("not static"), std::string::npos)
      << refused.reason;
  EXPECT_FALSE(dynamic.find_method("forward_batched"));
  torch::jit::Module lists = moduleWith(R"(
def forward(self, xs: List[Tensor]):
    return xs[0]
)");
  BatchOutcome list =
      addBatchedMethod(lists, "forward", parseSignature("list[f32[?]]"));
  EXPECT_NE(list.reason.find("list argument"), std::string::npos) << list.reason;
}

TEST(Batch, ArgumentsOfTwoBatchSizesRaise) {
  torch::jit::Module m = moduleWith(R"(
def forward(self, x, y):
    return x + y
)");
  ASSERT_EQ(addBatchedMethod(m, "forward", parseSignature("f32[?], f32[?]"))
                .method,
            "forward_batched");
  EXPECT_THROW(m.get_method("forward_batched")({at::ones({3, 4}), at::ones({1, 4})}),
               std::exception); // would broadcast one row against three
  EXPECT_TRUE(at::equal(
      m.get_method("forward_batched")({at::ones({3, 4}), at::ones({3, 4})})
          .toTensor(),
      at::full({3, 4}, 2.0)));
}

TEST(Batch, ABranchThatOnlyRaisesRunsRowByRow) {
  // Its message reads a value of the row: no batched form, so it runs row
  // by row, and raises as the method raises on each row.
  torch::jit::Module m = moduleWith(R"(
def forward(self, x, y):
    assert x.size(0) == y.size(0), "sizes differ; x sums to " + str(int(x.sum()))
    return x * y
)");
  ASSERT_EQ(addBatchedMethod(m, "forward", parseSignature("f32[?], f32[?]"))
                .method,
            "forward_batched");
  EXPECT_TRUE(hasNode(m, "forward_batched", "prim::Loop"));
  EXPECT_THROW(m.get_method("forward_batched")({at::ones({2, 3}), at::ones({2, 4})}),
               std::exception);
  at::Tensor x = at::randn({2, 3}), y = at::randn({2, 3});
  EXPECT_TRUE(at::allclose(
      m.get_method("forward_batched")({x, y}).toTensor(), x * y));
}

TEST(Batch, IndexAddAtEachRowsOwnIndices) {
  // A histogram of each row's classes: index_add_ at per-row indices
  // becomes a scatter_add within each row.
  torch::jit::Module m = moduleWith(R"(
def forward(self, classes, weights):
    counts = torch.zeros([4], dtype=weights.dtype)
    counts.index_add_(0, classes, weights)
    return counts
)");
  ASSERT_EQ(addBatchedMethod(m, "forward", parseSignature("i64[?], f32[?]"))
                .method,
            "forward_batched");
  at::Tensor c = at::randint(0, 4, {3, 9}), w = at::rand({3, 9});
  at::Tensor got = m.get_method("forward_batched")({c, w}).toTensor();
  for (int64_t b = 0; b < 3; ++b)
    EXPECT_TRUE(at::allclose(got[b], m.forward({c[b], w[b]}).toTensor()));
  EXPECT_THROW(m.get_method("forward_batched")(
                   {at::full({3, 9}, 4, at::kLong), w}),
               std::exception); // out of range raises, as index_add_ does
}

TEST(Batch, AViewWrittenWithPerRowValuesIsNotBatched) {
  // part views buf: a copy per row would leave buf without the writes.
  torch::jit::Module m = moduleWith(R"(
def forward(self, x):
    buf = torch.zeros([4])
    part = buf[0:2]
    part.copy_(x[0:2])
    return buf
)");
  BatchOutcome out = addBatchedMethod(m, "forward", parseSignature("f32[?]"));
  EXPECT_TRUE(out.method.empty());
  EXPECT_NE(out.reason.find("makes a view"), std::string::npos) << out.reason;
  EXPECT_FALSE(m.find_method("forward_batched"));
}
