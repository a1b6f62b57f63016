// RUN: staticify-mlir-opt %s -split-input-file -verify-diagnostics --staticify-gpu-launch-to-runtime | FileCheck %s

// Two outlined kernels (two gpu.modules, as gpu-kernel-outlining makes them)
// end in one gpu.module under indexed names, listed on the module; each
// launch is a call with one 8-byte slot per parameter in
// convert-gpu-to-nvvm's order: a rank-1 buffer as aligned pointer twice,
// offset, size, stride; an index as i64; an f32 as its bits, zero-extended.
// CHECK: module attributes {gpu.container_module, staticify.cuda_kernels = ["staticify_k0", "staticify_k1"]}
// CHECK: func.func private @staticify_cuda_launch(i64, i64, i64, i64, i64, i64, i64, i64, memref<?xi64>)
// CHECK-LABEL: func.func @host
// CHECK: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[P64:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK: %{{.*}}, %[[OFF:.*]], %[[SIZE:.*]], %[[STRIDE:.*]] = memref.extract_strided_metadata %arg0
// CHECK: %[[BITS:.*]] = arith.bitcast %arg2 : f32 to i32
// CHECK: %[[F:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK: %[[SLOTS:.*]] = memref.alloca() : memref<7xi64>
// CHECK: memref.store %[[P64]], %[[SLOTS]][%{{.*}}]
// CHECK: memref.store %[[P64]], %[[SLOTS]][%{{.*}}]
// CHECK: memref.store %[[F]], %[[SLOTS]][%{{.*}}]
// CHECK: %[[DYN:.*]] = memref.cast %[[SLOTS]] : memref<7xi64> to memref<?xi64>
// CHECK: %[[K0:.*]] = arith.constant 0 : i64
// CHECK: %[[GX:.*]] = arith.index_cast %arg1 : index to i64
// CHECK: call @staticify_cuda_launch(%[[K0]], %[[GX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[DYN]])
// CHECK: %[[K1:.*]] = arith.constant 1 : i64
// CHECK: call @staticify_cuda_launch(%[[K1]],
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.module @staticify_kernels
// CHECK: gpu.func @staticify_k0
// CHECK: gpu.func @staticify_k1
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  func.func @host(%v: memref<?xf32>, %n: index, %scale: f32) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @host_kernel::@host_kernel blocks in (%n, %c1, %c1) threads in (%c256, %c1, %c1) args(%v : memref<?xf32>, %n : index, %scale : f32)
    gpu.launch_func @host_kernel_0::@host_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%v : memref<?xf32>)
    return
  }
  gpu.module @host_kernel {
    gpu.func @host_kernel(%v: memref<?xf32>, %n: index, %scale: f32) kernel {
      gpu.return
    }
  }
  gpu.module @host_kernel_0 {
    gpu.func @host_kernel(%v: memref<?xf32>) kernel {
      gpu.return
    }
  }
}

// -----

// Two outlined modules each holding a global of one name: every symbol is
// renamed with its uses, so the merged module has one of each.
// CHECK-LABEL: func.func @two
// CHECK: gpu.module @staticify_kernels
// CHECK: memref.global "private" constant @[[G0:staticify_s[0-9]+]] {{.*}} dense<1.0
// CHECK: gpu.func @staticify_k0
// CHECK: memref.get_global @[[G0]]
// CHECK: memref.global "private" constant @[[G1:staticify_s[0-9]+]] {{.*}} dense<2.0
// CHECK: gpu.func @staticify_k1
// CHECK: memref.get_global @[[G1]]
module attributes {gpu.container_module} {
  func.func @two(%v: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%v : memref<4xf32>)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%v : memref<4xf32>)
    return
  }
  gpu.module @a {
    memref.global "private" constant @cst : memref<4xf32> = dense<1.0>
    gpu.func @k(%v: memref<4xf32>) kernel {
      %g = memref.get_global @cst : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @b {
    memref.global "private" constant @cst : memref<4xf32> = dense<2.0>
    gpu.func @k(%v: memref<4xf32>) kernel {
      %g = memref.get_global @cst : memref<4xf32>
      gpu.return
    }
  }
}

// -----

// Nothing to do without kernels: the module is left as it is.
// CHECK-LABEL: func.func @no_kernels
// CHECK-NOT: staticify_cuda_launch
func.func @no_kernels() {
  return
}
