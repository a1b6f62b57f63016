//===- LowerToUkernels.cpp - staticify ops to hand-written kernel calls ---===//
#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace staticify::mlir_dialect {
#define GEN_PASS_DEF_STATICIFYLOWERTOUKERNELS
#include "staticify/Passes.h.inc"
} // namespace staticify::mlir_dialect

using namespace mlir;
using namespace staticify::mlir_dialect;

namespace {

/// The declaration of ukernel \p name, made once per module.
func::FuncOp declare(ModuleOp module, StringRef name, FunctionType type) {
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  auto fn = func::FuncOp::create(b, module.getLoc(), name, type);
  fn.setPrivate();
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return fn;
}

std::string suffix(Type t) {
  return t.isF32() ? "f32" : t.isF64() ? "f64" : "i64";
}

/// A fresh vector buffer of \p n elements of \p element.
Value allocVector(ImplicitLocOpBuilder &b, Type element, Value n) {
  return memref::AllocOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, element), ValueRange{n});
}

Value asTensor(ImplicitLocOpBuilder &b, Value buffer) {
  auto m = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, RankedTensorType::get(m.getShape(), m.getElementType()), buffer,
      /*restrict=*/true, /*writable=*/true);
}

void lower(ModuleOp module, TopKOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  Type element = op.getKeys().getType().getElementType();
  auto strided = MemRefType::get(
      {ShapedType::kDynamic}, element,
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                             {ShapedType::kDynamic}));
  Value keys = bufferization::ToBufferOp::create(b, strided, op.getKeys(),
                                                 b.getUnitAttr());
  Value values = allocVector(b, element, op.getK());
  Value indices = allocVector(b, b.getI64Type(), op.getK());
  auto fn = declare(
      module, "staticify_topk_" + suffix(element),
      b.getFunctionType(
          {strided, values.getType(), indices.getType(), b.getI64Type()}, {}));
  Value largest =
      arith::ConstantOp::create(b, b.getI64IntegerAttr(op.getLargest()));
  func::CallOp::create(b, fn, ValueRange{keys, values, indices, largest});
  Value v = asTensor(b, values), i = asTensor(b, indices);
  if (v.getType() != op.getValues().getType())
    v = tensor::CastOp::create(b, op.getValues().getType(), v);
  if (i.getType() != op.getIndices().getType())
    i = tensor::CastOp::create(b, op.getIndices().getType(), i);
  op.getValues().replaceAllUsesWith(v);
  op.getIndices().replaceAllUsesWith(i);
  op.erase();
}

void lower(ModuleOp module, RandPermOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), op);
  Value perm = allocVector(b, b.getI64Type(), op.getN());
  auto fn = declare(module, "staticify_randperm_i64",
                    b.getFunctionType({perm.getType(), b.getI64Type()}, {}));
  func::CallOp::create(b, fn, ValueRange{perm, op.getSeed()});
  Value t = asTensor(b, perm);
  if (t.getType() != op.getResult().getType())
    t = tensor::CastOp::create(b, op.getResult().getType(), t);
  op.getResult().replaceAllUsesWith(t);
  op.erase();
}

struct LowerToUkernels
    : staticify::mlir_dialect::impl::StaticifyLowerToUkernelsBase<
          LowerToUkernels> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<TopKOp, RandPermOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (auto topk = dyn_cast<TopKOp>(op))
        lower(module, topk);
      else
        lower(module, cast<RandPermOp>(op));
    }
  }
};

} // namespace
