//===- Passes.cpp - staticify dialect passes --------------------*- C++ -*-===//
#include "staticify/StaticifyDialect.h"

namespace staticify::mlir_dialect {
#define GEN_PASS_DEF_STATICIFYSTRIPBOUNDS
#include "staticify/Passes.h.inc"
} // namespace staticify::mlir_dialect

using namespace mlir;
using namespace staticify::mlir_dialect;

namespace {
struct StripBounds
    : staticify::mlir_dialect::impl::StaticifyStripBoundsBase<StripBounds> {
  void runOnOperation() override {
    getOperation()->walk([](BoundOp op) {
      op.getResult().replaceAllUsesWith(op.getInput());
      op.erase();
    });
  }
};
} // namespace
