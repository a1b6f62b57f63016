// RUN: staticify-mlir-opt %s --staticify-strip-bounds | FileCheck %s

// CHECK-LABEL: func @strip
// CHECK-NOT: staticify.bound
// CHECK: %[[E:.*]] = tensor.empty(%arg0) : tensor<?xf32>
// CHECK: return %[[E]]
func.func @strip(%n: index) -> tensor<?xf32> {
  %k = staticify.bound %n max 500 : index
  %e = tensor.empty(%k) : tensor<?xf32>
  return %e : tensor<?xf32>
}

// Nothing else changes: a function without bounds is left as it is.
// CHECK-LABEL: func @untouched
// CHECK: %[[S:.*]] = arith.addi %arg0, %arg0 : index
// CHECK: return %[[S]]
func.func @untouched(%n: index) -> index {
  %s = arith.addi %n, %n : index
  return %s : index
}
