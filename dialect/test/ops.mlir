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
