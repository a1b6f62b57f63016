// RUN: staticify-mlir-opt %s --staticify-lower-to-ukernels | FileCheck %s

// Each op becomes buffers and a call; one declaration per ukernel.
// CHECK-DAG: func.func private @staticify_topk_f32(memref<?xf32, strided<[?], offset: ?>>, memref<?xf32>, memref<?xi64>, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @staticify_topk_i64(memref<?xi64, strided<[?], offset: ?>>, memref<?xi64>, memref<?xi64>, i64) attributes {llvm.emit_c_interface}
// CHECK-DAG: func.func private @staticify_randperm_i64(memref<?xi64>, i64) attributes {llvm.emit_c_interface}
// CHECK-NOT: func.func private @staticify_topk_f32

// CHECK-LABEL: func @topk
// CHECK: %[[KEYS:.*]] = bufferization.to_buffer %arg0 read_only
// CHECK: %[[V:.*]] = memref.alloc(%arg1) : memref<?xf32>
// CHECK: %[[I:.*]] = memref.alloc(%arg1) : memref<?xi64>
// CHECK: %[[SMALLEST:.*]] = arith.constant 0 : i64
// CHECK: call @staticify_topk_f32(%[[KEYS]], %[[V]], %[[I]], %[[SMALLEST]])
// CHECK: %[[VT:.*]] = bufferization.to_tensor %[[V]] restrict writable
// CHECK: %[[IT:.*]] = bufferization.to_tensor %[[I]] restrict writable
// CHECK: return %[[VT]], %[[IT]]
func.func @topk(%keys: tensor<?xf32>, %k: index) -> (tensor<?xf32>, tensor<?xi64>) {
  %v, %i = staticify.topk %keys, %k {largest = false} : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
  return %v, %i : tensor<?xf32>, tensor<?xi64>
}

// A second call of the same ukernel reuses its declaration.
// CHECK-LABEL: func @topk_twice
// CHECK-COUNT-2: call @staticify_topk_f32
func.func @topk_twice(%keys: tensor<?xf32>, %k: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
  %w, %j = staticify.topk %keys, %k {largest = true} : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
  return %v, %w : tensor<?xf32>, tensor<?xf32>
}

// Integer keys take their own ukernel.
// CHECK-LABEL: func @topk_i64
// CHECK: call @staticify_topk_i64
func.func @topk_i64(%keys: tensor<?xi64>, %k: index) -> (tensor<?xi64>, tensor<?xi64>) {
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<?xi64> -> tensor<?xi64>, tensor<?xi64>
  return %v, %i : tensor<?xi64>, tensor<?xi64>
}

// CHECK-LABEL: func @randperm
// CHECK: %[[P:.*]] = memref.alloc(%arg0) : memref<?xi64>
// CHECK: call @staticify_randperm_i64(%[[P]], %arg1)
// CHECK: bufferization.to_tensor %[[P]] restrict writable
func.func @randperm(%n: index, %seed: i64) -> tensor<?xi64> {
  %p = staticify.randperm %n, %seed : tensor<?xi64>
  return %p : tensor<?xi64>
}

// Nothing else is touched.
// CHECK-LABEL: func @other
// CHECK-NEXT: arith.addf
// CHECK-NEXT: return
func.func @other(%x: f32) -> f32 {
  %y = arith.addf %x, %x : f32
  return %y : f32
}

// Unused results of a pure op: canonicalization removes it before lowering.
// RUN: staticify-mlir-opt %s --canonicalize --staticify-lower-to-ukernels | FileCheck %s --check-prefix=DEAD
// DEAD-LABEL: func @unused
// DEAD-NOT: call
// DEAD: return
func.func @unused(%keys: tensor<?xf32>, %k: index) {
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
  return
}
