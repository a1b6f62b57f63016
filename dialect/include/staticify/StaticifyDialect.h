//===- StaticifyDialect.h - the staticify dialect ---------------*- C++ -*-===//
//
// MLIR only: nothing here includes libtorch. The dialect, its ops and its
// passes (StaticifyDialect.td, StaticifyOps.td, Passes.td).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferIntRangeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "mlir/Pass/Pass.h"

#include "staticify/StaticifyDialect.h.inc"

#define GET_OP_CLASSES
#include "staticify/StaticifyOps.h.inc"

namespace staticify::mlir_dialect {

#define GEN_PASS_DECL
#include "staticify/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "staticify/Passes.h.inc"

} // namespace staticify::mlir_dialect
