//===- staticify-mlir-opt.cpp - mlir-opt with the staticify dialect -------===//
//
// Drives the dialect's lit tests: every upstream dialect and pass, plus the
// staticify dialect and its passes.
//
//===----------------------------------------------------------------------===//
#include "staticify/StaticifyDialect.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  staticify::mlir_dialect::registerStaticifyPasses();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registry.insert<staticify::mlir_dialect::StaticifyDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "staticify MLIR optimizer driver\n", registry));
}
