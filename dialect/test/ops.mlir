// RUN: staticify-mlir-opt %s | FileCheck %s
// RUN: staticify-mlir-opt %s | staticify-mlir-opt | FileCheck %s
// RUN: staticify-mlir-opt %s --mlir-print-op-generic | staticify-mlir-opt | FileCheck %s

// CHECK-LABEL: func @bound_index
// CHECK: %[[K:.*]] = staticify.bound %{{.*}} max 500 : index
// CHECK: return %[[K]]
func.func @bound_index(%n: index) -> index {
  %k = staticify.bound %n max 500 : index
  return %k : index
}

// CHECK-LABEL: func @bound_i64
// CHECK: staticify.bound %{{.*}} max 0 : i64
func.func @bound_i64(%n: i64) -> i64 {
  %k = staticify.bound %n max 0 : i64
  return %k : i64
}

// The largest bound an i8 holds.
// CHECK-LABEL: func @bound_i8
// CHECK: staticify.bound %{{.*}} max 127 : i8
func.func @bound_i8(%n: i8) -> i8 {
  %k = staticify.bound %n max 127 : i8
  return %k : i8
}

// CHECK-LABEL: func @topk
// CHECK: %{{.*}}, %{{.*}} = staticify.topk %{{.*}}, %{{.*}} {largest = true} : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
// CHECK: staticify.topk %{{.*}}, %{{.*}} {largest = false} : tensor<8xf64> -> tensor<3xf64>, tensor<3xi64>
func.func @topk(%keys: tensor<?xf32>, %k: index, %small: tensor<8xf64>) -> (tensor<?xf32>, tensor<?xi64>, tensor<3xf64>) {
  %v, %i = staticify.topk %keys, %k {largest = true} : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
  %c3 = arith.constant 3 : index
  %v3, %i3 = staticify.topk %small, %c3 {largest = false} : tensor<8xf64> -> tensor<3xf64>, tensor<3xi64>
  return %v, %i, %v3 : tensor<?xf32>, tensor<?xi64>, tensor<3xf64>
}

// CHECK-LABEL: func @randperm
// CHECK: staticify.randperm %{{.*}}, %{{.*}} : tensor<?xi64>
func.func @randperm(%n: index, %seed: i64) -> tensor<?xi64> {
  %p = staticify.randperm %n, %seed : tensor<?xi64>
  return %p : tensor<?xi64>
}
