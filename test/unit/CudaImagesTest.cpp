//===- CudaImagesTest.cpp - The image a GPU loads; malformed images -------===//
#include "runtime/CudaImages.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace staticify::cuda_images;

namespace {
const std::vector<std::string> kStored{"host", "kernels", "sm_80", "sm_90",
                                       "sm_90.ptx"};
} // namespace

TEST(CudaImagesTest, EachArchitectureLoadsItsFamilysCubinOrThePtx) {
  EXPECT_EQ(choose(kStored, 8, 0), "sm_80");      // A100
  EXPECT_EQ(choose(kStored, 8, 6), "sm_80");      // RTX 30xx: sm_80 runs on 8.6
  EXPECT_EQ(choose(kStored, 8, 9), "sm_80");      // L4, RTX 40xx
  EXPECT_EQ(choose(kStored, 9, 0), "sm_90");      // H100, H200
  EXPECT_EQ(choose(kStored, 10, 0), "sm_90.ptx"); // B200: the driver's JIT
  EXPECT_EQ(choose(kStored, 12, 0), "sm_90.ptx");
  EXPECT_EQ(choose(kStored, 7, 5), "");   // T4: the TorchScript runs
  EXPECT_EQ(choose({"sm_80"}, 9, 0), ""); // no PTX: nothing fits
}

TEST(CudaImagesTest, ArchitectureNames) {
  bool ptx = false;
  EXPECT_EQ(archOf("sm_90", ptx), 90);
  EXPECT_FALSE(ptx);
  EXPECT_EQ(archOf("sm_90.ptx", ptx), 90);
  EXPECT_TRUE(ptx);
  for (const char *bad : {"host", "sm_", "sm_9a", "compute_90", ""})
    EXPECT_EQ(archOf(bad, ptx), -1) << bad;
}

TEST(CudaImagesTest, OnlyWholeCubinsReachTheDriver) {
  // A real cubin, from the toolkit where there is one.
  std::string nvcc = "/usr/local/cuda/bin/nvcc";
  if (std::system((nvcc + " --version > /dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "no CUDA toolkit";
  std::string dir = testing::TempDir();
  std::ofstream(dir + "k.cu") << "__global__ void k(float *x) { x[0] = 1; }\n";
  ASSERT_EQ(std::system((nvcc + " -cubin -arch=sm_80 " + dir + "k.cu -o " +
                         dir + "k.cubin")
                            .c_str()),
            0);
  std::ifstream in(dir + "k.cubin", std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::string cubin = s.str();
  ASSERT_TRUE(wellFormedCubin(cubin));
  for (size_t cut :
       {size_t(0), size_t(10), size_t(63), cubin.size() / 2, cubin.size() - 1})
    EXPECT_FALSE(wellFormedCubin(cubin.substr(0, cut))) << cut;
  std::string forged = cubin;
  forged[60] = char(0xff); // e_shnum: more sections than the file holds
  forged[61] = char(0x7f);
  EXPECT_FALSE(wellFormedCubin(forged));
  std::string notCuda = cubin;
  notCuda[18] = 62; // EM_X86_64
  EXPECT_FALSE(wellFormedCubin(notCuda));
}

TEST(CudaImagesTest, PtxChecks) {
  EXPECT_TRUE(wellFormedPtx(".version 8.0\n.target sm_90\n"));
  EXPECT_FALSE(
      wellFormedPtx(std::string(".version 8.0\n.target sm_90\0x", 27)));
  EXPECT_FALSE(wellFormedPtx("garbage"));
}
