//===- SplitReductions.cpp - Whole-vector reductions in parallel chunks ---===//
//
// staticify-split-reductions (Passes.td): on tensors, before bufferization,
// in the CUDA pipeline. A reduction of a vector to a scalar otherwise
// becomes one serial loop, which on a GPU runs in one thread.
//
//===----------------------------------------------------------------------===//
#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace staticify::mlir_dialect {
#define GEN_PASS_DEF_STATICIFYSPLITREDUCTIONS
#include "staticify/Passes.h.inc"
} // namespace staticify::mlir_dialect

using namespace mlir;

namespace {

constexpr const char *kLevel = "staticify.split_level";
constexpr int64_t kMaxLevel = 2; // n -> n/chunk -> n/chunk^2, then serial

/// The identity of \p combiner on \p type, if it is one this pass knows.
std::optional<TypedAttr> identityOf(Operation *combiner, Type type) {
  auto intAttr = [&](const APInt &v) -> TypedAttr {
    return IntegerAttr::get(type, v);
  };
  auto floatAttr = [&](double v) -> TypedAttr {
    return FloatAttr::get(type, v);
  };
  unsigned width = type.getIntOrFloatBitWidth();
  if (isa<arith::AddIOp, arith::OrIOp, arith::XOrIOp, arith::MaxUIOp>(combiner))
    return intAttr(APInt::getZero(width));
  if (isa<arith::MulIOp>(combiner))
    return intAttr(APInt(width, 1));
  if (isa<arith::AndIOp, arith::MinUIOp>(combiner))
    return intAttr(APInt::getAllOnes(width));
  if (isa<arith::MaxSIOp>(combiner))
    return intAttr(APInt::getSignedMinValue(width));
  if (isa<arith::MinSIOp>(combiner))
    return intAttr(APInt::getSignedMaxValue(width));
  if (!isa<FloatType>(type))
    return std::nullopt;
  auto ft = cast<FloatType>(type);
  if (isa<arith::AddFOp>(combiner))
    return floatAttr(-0.0); // x + -0.0 == x, also for x = -0.0
  if (isa<arith::MulFOp>(combiner))
    return floatAttr(1.0);
  if (isa<arith::MaxNumFOp, arith::MaximumFOp>(combiner))
    return FloatAttr::get(
        type, APFloat::getInf(ft.getFloatSemantics(), /*Negative=*/true));
  if (isa<arith::MinNumFOp, arith::MinimumFOp>(combiner))
    return FloatAttr::get(type, APFloat::getInf(ft.getFloatSemantics()));
  return std::nullopt;
}

struct SplitReductions
    : staticify::mlir_dialect::impl::StaticifySplitReductionsBase<
          SplitReductions> {
  using Base::Base;

  void runOnOperation() override {
    // Split the outer reductions first; each split makes a smaller one,
    // split in turn up to kMaxLevel.
    for (int64_t level = 0; level < kMaxLevel; ++level) {
      SmallVector<linalg::GenericOp> candidates;
      getOperation()->walk([&](linalg::GenericOp op) {
        auto at = op->getAttrOfType<IntegerAttr>(kLevel);
        if ((at ? at.getInt() : 0) == level)
          candidates.push_back(op);
      });
      for (linalg::GenericOp op : candidates)
        split(op, level);
    }
  }

  /// The combiner of \p op's body: the op its yield yields, which uses the
  /// accumulator once and nothing else does.
  Operation *combinerOf(linalg::GenericOp op) {
    Block &body = op.getRegion().front();
    BlockArgument acc = body.getArguments().back();
    auto yield = cast<linalg::YieldOp>(body.getTerminator());
    Operation *c = yield.getValues()[0].getDefiningOp();
    if (!c || c->getBlock() != &body || c->getNumOperands() != 2 ||
        !acc.hasOneUse() || *acc.getUsers().begin() != c)
      return nullptr;
    return c;
  }

  void split(linalg::GenericOp op, int64_t level) {
    if (op.getNumLoops() != 1 || op.getNumDpsInits() != 1 ||
        op.getNumReductionLoops() != 1 || op->getNumResults() != 1 ||
        op.getNumDpsInputs() == 0)
      return;
    auto maps = op.getIndexingMapsArray();
    if (maps.back().getNumResults() != 0)
      return;
    Value n;
    for (OpOperand *in : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(in);
      auto type = dyn_cast<RankedTensorType>(in->get().getType());
      if (!type)
        return;
      if (map.isIdentity() && type.getRank() == 1)
        n = in->get();
      else if (map.getNumResults() != 0)
        return;
    }
    if (!n)
      return;
    Operation *combiner = combinerOf(op);
    Value init = op.getDpsInits()[0];
    Type elem = cast<RankedTensorType>(init.getType()).getElementType();
    std::optional<TypedAttr> identity =
        combiner ? identityOf(combiner, elem) : std::nullopt;
    if (!identity)
      return;

    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value size = tensor::DimOp::create(b, n, 0);
    Value chunkSize = arith::ConstantIndexOp::create(b, chunk);
    Value m = arith::CeilDivUIOp::create(b, size, chunkSize);
    Value partials = linalg::FillOp::create(
                         b, ValueRange{arith::ConstantOp::create(b, *identity)},
                         ValueRange{tensor::EmptyOp::create(
                             b, ArrayRef<OpFoldResult>{m}, elem)})
                         .getResult(0);
    // The chunk dimension needs an operand of its size: an unread one.
    Value lanes =
        tensor::EmptyOp::create(b, ArrayRef<int64_t>{chunk}, b.getI8Type());
    MLIRContext *ctx = b.getContext();
    AffineExpr d0 = getAffineDimExpr(0, ctx), d1 = getAffineDimExpr(1, ctx);
    SmallVector<AffineMap> phase1Maps{AffineMap::get(2, 0, {d1}, ctx),
                                      AffineMap::get(2, 0, {d0}, ctx)};
    Block &body = op.getRegion().front();
    auto phase1 = linalg::GenericOp::create(
        b, TypeRange{partials.getType()}, ValueRange{lanes},
        ValueRange{partials}, phase1Maps,
        {utils::IteratorType::parallel, utils::IteratorType::reduction},
        [&](OpBuilder &nb, Location loc, ValueRange args) {
          Value acc = args[1];
          Value i = linalg::IndexOp::create(nb, loc, 0);
          Value j = linalg::IndexOp::create(nb, loc, 1);
          Value at = arith::AddIOp::create(
              nb, loc, arith::MulIOp::create(nb, loc, j, m), i);
          Value valid = arith::CmpIOp::create(
              nb, loc, arith::CmpIPredicate::ult, at, size);
          Value zero = arith::ConstantIndexOp::create(nb, loc, 0);
          Value safe = arith::SelectOp::create(nb, loc, valid, at, zero);
          IRMapping map;
          for (auto [k, in] : llvm::enumerate(op.getDpsInputOperands())) {
            bool scalar = op.getMatchingIndexingMap(in).getNumResults() == 0;
            Value v = tensor::ExtractOp::create(
                nb, loc, in->get(), scalar ? ValueRange{} : ValueRange{safe});
            map.map(body.getArgument(k), v);
          }
          map.map(body.getArguments().back(), acc);
          // The element the body computes on is `at` now, not the loop's
          // index (arange, rand: a body may read its position).
          for (Operation &inner : body.without_terminator()) {
            if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
              map.map(index.getResult(), at);
              continue;
            }
            nb.clone(inner, map);
          }
          Value r = map.lookup(
              cast<linalg::YieldOp>(body.getTerminator()).getValues()[0]);
          linalg::YieldOp::create(
              nb, loc,
              ValueRange{arith::SelectOp::create(nb, loc, valid, r, acc)});
        });
    // The partials into the original initial value.
    SmallVector<AffineMap> phase2Maps{
        AffineMap::get(1, 0, {getAffineDimExpr(0, ctx)}, ctx),
        AffineMap::get(1, 0, {}, ctx)};
    BlockArgument oldAcc = body.getArguments().back();
    auto phase2 = linalg::GenericOp::create(
        b, op->getResultTypes(), ValueRange{phase1.getResult(0)},
        ValueRange{init}, phase2Maps, {utils::IteratorType::reduction},
        [&](OpBuilder &nb, Location loc, ValueRange args) {
          IRMapping map;
          for (Value operand : combiner->getOperands())
            map.map(operand, operand == oldAcc ? args[1] : args[0]);
          Operation *c = nb.clone(*combiner, map);
          linalg::YieldOp::create(nb, loc, c->getResults());
        });
    phase2->setAttr(kLevel, b.getI64IntegerAttr(level + 1));
    op->replaceAllUsesWith(phase2->getResults());
    op->erase();
  }
};

} // namespace
