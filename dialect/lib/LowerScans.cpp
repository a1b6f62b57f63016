//===- LowerScans.cpp - staticify.cumsum to loops -------------------------===//
//
// staticify-lower-scans (Passes.td): one serial loop for the CPU, a chunked
// scan (parallel chunk scans, a scan of the chunk totals, an elementwise
// add) for the GPU, where a serial loop runs in one thread.
//
//===----------------------------------------------------------------------===//
#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace staticify::mlir_dialect {
#define GEN_PASS_DEF_STATICIFYLOWERSCANS
#include "staticify/Passes.h.inc"
} // namespace staticify::mlir_dialect

using namespace mlir;
using staticify::mlir_dialect::CumSumOp;

namespace {

Value add(OpBuilder &b, Location loc, Value x, Value y) {
  if (isa<FloatType>(x.getType()))
    return arith::AddFOp::create(b, loc, x, y);
  return arith::AddIOp::create(b, loc, x, y);
}

Value zeroOf(OpBuilder &b, Location loc, Type t) {
  return arith::ConstantOp::create(b, loc, b.getZeroAttr(t));
}

/// for i < n: acc += x[from + i]; dest[i] = acc. Returns (acc, dest).
scf::ForOp serialScan(OpBuilder &b, Location loc, Value x, Value from, Value n,
                      Value start, Value dest) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  return scf::ForOp::create(
      b, loc, c0, n, c1, ValueRange{start, dest},
      [&](OpBuilder &nb, Location l, Value i, ValueRange carried) {
        Value at = arith::AddIOp::create(nb, l, from, i);
        Value e = tensor::ExtractOp::create(nb, l, x, ValueRange{at});
        Value sum = add(nb, l, carried[0], e);
        Value t =
            tensor::InsertOp::create(nb, l, sum, carried[1], ValueRange{i});
        scf::YieldOp::create(nb, l, ValueRange{sum, t});
      });
}

struct LowerScans
    : staticify::mlir_dialect::impl::StaticifyLowerScansBase<LowerScans> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<CumSumOp> ops;
    getOperation()->walk([&](CumSumOp op) { ops.push_back(op); });
    for (CumSumOp op : ops) {
      Value result = chunk > 0 ? chunked(op) : serial(op);
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }

  Value serial(CumSumOp op) {
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Value x = op.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    Value n = tensor::DimOp::create(b, x, 0);
    Value out = tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{n},
                                        type.getElementType());
    Value c0 = arith::ConstantIndexOp::create(b, 0);
    Value zero = zeroOf(b, b.getLoc(), type.getElementType());
    Value scanned = serialScan(b, b.getLoc(), x, c0, n, zero, out).getResult(1);
    return tensor::CastOp::create(b, type, scanned);
  }

  Value chunked(CumSumOp op) {
    ImplicitLocOpBuilder b(op.getLoc(), op);
    Location loc = b.getLoc();
    Value x = op.getInput();
    auto type = cast<RankedTensorType>(x.getType());
    Type elem = type.getElementType();
    auto vector = RankedTensorType::get({ShapedType::kDynamic}, elem);
    Value n = tensor::DimOp::create(b, x, 0);
    Value size = arith::ConstantIndexOp::create(b, chunk);
    Value m = arith::CeilDivUIOp::create(b, n, size);
    Value zero = zeroOf(b, loc, elem);
    Value c1 = arith::ConstantIndexOp::create(b, 1);

    // 1. Each chunk scanned in place into the result, its total written.
    Value local0 = tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{n}, elem);
    Value totals0 = tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{m}, elem);
    auto forall =
        scf::ForallOp::create(b, ArrayRef<OpFoldResult>{m},
                              ValueRange{local0, totals0}, std::nullopt);
    Block *body = forall.getBody();
    Value i = body->getArgument(0);
    Value local = body->getArgument(1), totals = body->getArgument(2);
    OpBuilder inner(body, body->getTerminator()->getIterator());
    Value start = arith::MulIOp::create(inner, loc, i, size);
    Value len = arith::MinUIOp::create(
        inner, loc, size, arith::SubIOp::create(inner, loc, n, start));
    SmallVector<OpFoldResult> offset{start}, sizes{len},
        stride{inner.getIndexAttr(1)};
    Value slice = tensor::ExtractSliceOp::create(inner, loc, vector, local,
                                                 offset, sizes, stride);
    auto scan = serialScan(inner, loc, x, start, len, zero, slice);
    SmallVector<OpFoldResult> at{i}, one{inner.getIndexAttr(1)};
    auto single = RankedTensorType::get({1}, elem);
    Value total = tensor::ExtractSliceOp::create(inner, loc, single, totals, at,
                                                 one, stride);
    total = tensor::InsertOp::create(
        inner, loc, scan.getResult(0), total,
        ValueRange{arith::ConstantIndexOp::create(inner, loc, 0)});
    OpBuilder publish = OpBuilder::atBlockEnd(forall.getTerminator().getBody());
    tensor::ParallelInsertSliceOp::create(publish, loc, scan.getResult(1),
                                          local, offset, sizes, stride);
    tensor::ParallelInsertSliceOp::create(publish, loc, total, totals, at, one,
                                          stride);

    // 2. The chunks' offsets: an exclusive scan of their totals.
    Value c0 = arith::ConstantIndexOp::create(b, 0);
    Value offsets0 =
        tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{m}, elem);
    Value chunkTotals = forall.getResult(1);
    auto offsets = scf::ForOp::create(
        b, c0, m, c1, ValueRange{zero, offsets0},
        [&](OpBuilder &nb, Location l, Value k, ValueRange carried) {
          Value t = tensor::InsertOp::create(nb, l, carried[0], carried[1],
                                             ValueRange{k});
          Value next =
              add(nb, l, carried[0],
                  tensor::ExtractOp::create(nb, l, chunkTotals, ValueRange{k}));
          scf::YieldOp::create(nb, l, ValueRange{next, t});
        });

    // 3. Each element plus its chunk's offset.
    MLIRContext *ctx = b.getContext();
    AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
    Value out0 = tensor::EmptyOp::create(b, ArrayRef<OpFoldResult>{n}, elem);
    Value offsetTensor = offsets.getResult(1);
    auto result = linalg::GenericOp::create(
        b, TypeRange{vector}, ValueRange{forall.getResult(0)}, ValueRange{out0},
        ArrayRef<AffineMap>{id, id},
        ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
        [&](OpBuilder &nb, Location l, ValueRange args) {
          Value k = linalg::IndexOp::create(nb, l, 0);
          Value c = arith::DivUIOp::create(nb, l, k, size);
          Value o =
              tensor::ExtractOp::create(nb, l, offsetTensor, ValueRange{c});
          linalg::YieldOp::create(nb, l, ValueRange{add(nb, l, args[0], o)});
        });
    return tensor::CastOp::create(b, type, result.getResult(0));
  }
};

} // namespace
