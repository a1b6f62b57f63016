//===- CudaTargetTest.cpp - CUDA target options are checked before LLVM ---===//
//
// LLVM aborts the process on a PTX version the chip does not accept (no
// diagnostic): validateCudaTargets must refuse such combinations first, and
// compileForCuda must report them, and a missing toolkit, as errors.
//
//===----------------------------------------------------------------------===//
#include "lower/CudaTarget.h"
#include "lower/CpuTarget.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <gtest/gtest.h>

#include <cstdlib>

using staticify::lower::CudaTargets;
using staticify::lower::validateCudaTargets;

TEST(CudaTargetTest, DefaultTargetsAreValid) {
  EXPECT_EQ(validateCudaTargets(CudaTargets{}), "");
}

TEST(CudaTargetTest, PtxTooOldForTheChipIsRefused) {
  CudaTargets t;
  t.ptxVersion = 70; // PTX 7.0 predates sm_90
  std::string why = validateCudaTargets(t);
  EXPECT_NE(why.find("sm_90 needs PTX ISA 78"), std::string::npos) << why;
}

TEST(CudaTargetTest, EachChipsFirstPtxIsa) {
  for (auto [chip, first] : {std::pair<const char *, int>{"sm_80", 70},
                             {"sm_86", 71},
                             {"sm_87", 74},
                             {"sm_89", 78},
                             {"sm_90", 78},
                             {"sm_100", 86},
                             {"sm_120", 87}}) {
    CudaTargets t;
    t.cubinChips = {chip};
    t.ptxChip = chip;
    t.ptxVersion = first;
    EXPECT_EQ(validateCudaTargets(t), "") << chip;
    t.ptxVersion = first - 1;
    if (first > 70)
      EXPECT_NE(validateCudaTargets(t), "") << chip;
  }
}

TEST(CudaTargetTest, UnknownOrOldChipsAreRefused) {
  for (const char *chip : {"sm_60", "sm_", "sm_9x", "compute_90", ""}) {
    CudaTargets t;
    t.cubinChips = {chip};
    EXPECT_NE(validateCudaTargets(t), "") << chip;
  }
  CudaTargets t;
  t.ptxVersion = 95;
  EXPECT_NE(validateCudaTargets(t).find("outside"), std::string::npos);
}

TEST(CudaTargetTest, CompileReportsInvalidTargetsAndAMissingToolkit) {
  mlir::DialectRegistry registry;
  staticify::lower::registerLoweringDialects(registry);
  mlir::MLIRContext ctx(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  CudaTargets bad;
  bad.ptxVersion = 60;
  auto out = staticify::lower::compileForCuda(*module, "f", 0, bad);
  EXPECT_TRUE(out.hostObject.empty());
  EXPECT_NE(out.error.find("invalid CUDA target"), std::string::npos)
      << out.error;

  const char *old = std::getenv("CUDA_HOME");
  std::string saved = old ? old : "";
  setenv("CUDA_HOME", "/nonexistent-cuda", 1);
  out = staticify::lower::compileForCuda(*module, "f", 0);
  if (old)
    setenv("CUDA_HOME", saved.c_str(), 1);
  else
    unsetenv("CUDA_HOME");
  EXPECT_TRUE(out.hostObject.empty());
  EXPECT_NE(out.error.find("no CUDA toolkit at /nonexistent-cuda"),
            std::string::npos)
      << out.error;
}
