//===- LowerScatters.cpp - staticify.scatter to loops ---------------------===//
//
// staticify-lower-scatters (Passes.td): one serial loop for the CPU; for the
// GPU, where a serial loop runs in one thread, two parallel passes that give
// the serial loop's result: each target's winner (the largest i writing it,
// by atomic max), then the winners' writes.
//
//===----------------------------------------------------------------------===//
#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace staticify::mlir_dialect {
#define GEN_PASS_DEF_STATICIFYLOWERSCATTERS
#include "staticify/Passes.h.inc"
} // namespace staticify::mlir_dialect

using namespace mlir;
using staticify::mlir_dialect::ScatterOp;

namespace {

/// indices[i] clamped into [0, n), as an index.
Value target(OpBuilder &b, Location loc, Value indices, Value i, Value n) {
  Value j = tensor::ExtractOp::create(b, loc, indices, ValueRange{i});
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  Value last = arith::SubIOp::create(
      b, loc,
      arith::IndexCastOp::create(b, loc, b.getI64Type(), n),
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1)));
  Value clamped = arith::MinSIOp::create(
      b, loc, arith::MaxSIOp::create(b, loc, j, zero), last);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), clamped);
}

/// for i < count: body(i), as one scf.parallel.
void parallelFor(ImplicitLocOpBuilder &b, Value count,
                 function_ref<void(OpBuilder &, Location, Value)> body) {
  Value c0 = arith::ConstantIndexOp::create(b, 0);
  Value c1 = arith::ConstantIndexOp::create(b, 1);
  scf::ParallelOp::create(b, ValueRange{c0}, ValueRange{count}, ValueRange{c1},
                          [&](OpBuilder &nb, Location l, ValueRange ivs) {
                            body(nb, l, ivs[0]);
                          });
}

struct LowerScatters
    : staticify::mlir_dialect::impl::StaticifyLowerScattersBase<LowerScatters> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<ScatterOp> ops;
    getOperation()->walk([&](ScatterOp op) { ops.push_back(op); });
    for (ScatterOp op : ops) {
      Value result = parallel ? inParallel(op) : serial(op);
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }

  /// for i < m: dest[clamp(indices[i])] = src[i], in order.
  Value serial(ScatterOp op) {
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value dest = op.getDest(), indices = op.getIndices(), src = op.getSrc();
    Value n = tensor::DimOp::create(b, dest, 0);
    Value m = tensor::DimOp::create(b, indices, 0);
    Value c0 = arith::ConstantIndexOp::create(b, 0);
    Value c1 = arith::ConstantIndexOp::create(b, 1);
    auto loop = scf::ForOp::create(
        b, c0, m, c1, ValueRange{dest},
        [&](OpBuilder &nb, Location l, Value i, ValueRange carried) {
          Value at = target(nb, l, indices, i, n);
          Value v = tensor::ExtractOp::create(nb, l, src, ValueRange{i});
          Value t =
              tensor::InsertOp::create(nb, l, v, carried[0], ValueRange{at});
          scf::YieldOp::create(nb, l, ValueRange{t});
        });
    return loop.getResult(0);
  }

  /// winner[t] = max{i : clamp(indices[i]) == t}; then out = dest, and
  /// out[t] = src[winner[t]] where a winner exists. Every pass is an
  /// scf.parallel over memory the pass allocates; the result is a tensor
  /// again (to_tensor restrict: nothing else aliases the buffer).
  Value inParallel(ScatterOp op) {
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value dest = op.getDest(), indices = op.getIndices(), src = op.getSrc();
    auto type = cast<RankedTensorType>(dest.getType());
    Type elem = type.getElementType();
    Value n = tensor::DimOp::create(b, dest, 0);
    Value m = tensor::DimOp::create(b, indices, 0);
    auto vectorOf = [](Type t) {
      return MemRefType::get({ShapedType::kDynamic}, t);
    };
    Value winners = memref::AllocOp::create(b, vectorOf(b.getI64Type()),
                                            ValueRange{n});
    Value out = memref::AllocOp::create(b, vectorOf(elem), ValueRange{n});
    parallelFor(b, n, [&](OpBuilder &nb, Location l, Value t) {
      Value none = arith::ConstantOp::create(nb, l, nb.getI64IntegerAttr(-1));
      memref::StoreOp::create(nb, l, none, winners, ValueRange{t});
      Value v = tensor::ExtractOp::create(nb, l, dest, ValueRange{t});
      memref::StoreOp::create(nb, l, v, out, ValueRange{t});
    });
    parallelFor(b, m, [&](OpBuilder &nb, Location l, Value i) {
      Value at = target(nb, l, indices, i, n);
      Value i64 = arith::IndexCastOp::create(nb, l, nb.getI64Type(), i);
      memref::AtomicRMWOp::create(nb, l, arith::AtomicRMWKind::maxs, i64,
                                  winners, ValueRange{at});
    });
    parallelFor(b, m, [&](OpBuilder &nb, Location l, Value i) {
      Value at = target(nb, l, indices, i, n);
      Value i64 = arith::IndexCastOp::create(nb, l, nb.getI64Type(), i);
      Value w = memref::LoadOp::create(nb, l, winners, ValueRange{at});
      Value won =
          arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, w, i64);
      scf::IfOp::create(nb, l, won, [&](OpBuilder &tb, Location tl) {
        Value v = tensor::ExtractOp::create(tb, tl, src, ValueRange{i});
        memref::StoreOp::create(tb, tl, v, out, ValueRange{at});
        scf::YieldOp::create(tb, tl);
      });
    });
    Value result = bufferization::ToTensorOp::create(
        b, RankedTensorType::get({ShapedType::kDynamic}, elem), out,
        /*restrict=*/true, /*writable=*/true);
    return tensor::CastOp::create(b, type, result);
  }
};

} // namespace
