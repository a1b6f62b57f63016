//===- StaticifyDialect.cpp - ops, verifiers, interfaces --------*- C++ -*-===//
#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace staticify::mlir_dialect;

#include "staticify/StaticifyDialect.cpp.inc"

void StaticifyDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "staticify/StaticifyOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "staticify/StaticifyOps.cpp.inc"

//===----------------------------------------------------------------------===//
// BoundOp
//===----------------------------------------------------------------------===//

// The attribute is read signed: a negative bound is an error, not a huge one.
static int64_t upperOf(BoundOp op) { return op.getUpperAttr().getInt(); }

LogicalResult BoundOp::verify() {
  int64_t upper = upperOf(*this);
  if (upper < 0)
    return emitOpError("upper bound must be non-negative, got ") << upper;
  unsigned width = getType().isIndex() ? IndexType::kInternalStorageBitWidth
                                       : getType().getIntOrFloatBitWidth();
  if (width < 64 && upper >= (int64_t(1) << (width - 1)))
    return emitOpError("upper bound ")
           << upper << " does not fit in " << getType();
  return success();
}

OpFoldResult BoundOp::fold(FoldAdaptor adaptor) {
  // A constant input inside the range needs no statement about it; one
  // outside is the producer's bug and is kept for the verifier of the caller.
  if (auto c = llvm::dyn_cast_if_present<IntegerAttr>(adaptor.getInput())) {
    int64_t v = c.getValue().getSExtValue();
    if (v >= 0 && v <= upperOf(*this))
      return getInput();
  }
  return {};
}

void BoundOp::inferResultRanges(ArrayRef<ConstantIntRanges> argRanges,
                                SetIntRangeFn setResultRange) {
  unsigned width = argRanges[0].umin().getBitWidth();
  ConstantIntRanges stated = ConstantIntRanges::fromSigned(
      APInt(width, 0), APInt(width, upperOf(*this), /*isSigned=*/true));
  setResultRange(getResult(), argRanges[0].intersection(stated));
}

void BoundOp::populateBoundsForIndexValue(Value value,
                                          ValueBoundsConstraintSet &cstr) {
  cstr.bound(value) == cstr.getExpr(getInput());
  cstr.bound(value) >= 0;
  cstr.bound(value) <= upperOf(*this);
}

//===----------------------------------------------------------------------===//
// TopKOp, RandPermOp
//===----------------------------------------------------------------------===//

LogicalResult TopKOp::verify() {
  auto keys = getKeys().getType(), values = getValues().getType(),
       indices = getIndices().getType();
  if (keys.getRank() != 1 || values.getRank() != 1 || indices.getRank() != 1)
    return emitOpError("takes and gives vectors (rank 1)");
  if (keys.getElementType() != values.getElementType())
    return emitOpError("values must have the keys' element type, got ")
           << values.getElementType() << " for " << keys.getElementType();
  if (!values.isDynamicDim(0) && !indices.isDynamicDim(0) &&
      values.getDimSize(0) != indices.getDimSize(0))
    return emitOpError("values and indices must have one size (k)");
  if (!keys.isDynamicDim(0) && !values.isDynamicDim(0) &&
      values.getDimSize(0) > keys.getDimSize(0))
    return emitOpError("k (")
           << values.getDimSize(0) << ") exceeds the keys' size ("
           << keys.getDimSize(0) << ")";
  return success();
}

LogicalResult RandPermOp::verify() {
  if (auto n = getConstantIntValue(getN()); n && *n < 0)
    return emitOpError("n must be non-negative, got ") << *n;
  auto type = getResult().getType();
  if (auto n = getConstantIntValue(getN());
      n && !type.isDynamicDim(0) && type.getDimSize(0) != *n)
    return emitOpError("result of size ")
           << type.getDimSize(0) << " for n = " << *n;
  return success();
}

LogicalResult ScatterOp::verify() {
  auto dest = getDest().getType(), src = getSrc().getType();
  auto indices = getIndices().getType();
  if (dest.getElementType() != src.getElementType())
    return emitOpError("src's element type ")
           << src.getElementType() << " differs from dest's "
           << dest.getElementType();
  if (!indices.isDynamicDim(0) && !src.isDynamicDim(0) &&
      indices.getDimSize(0) > src.getDimSize(0))
    return emitOpError("more indices (")
           << indices.getDimSize(0) << ") than src elements ("
           << src.getDimSize(0) << ")";
  return success();
}
