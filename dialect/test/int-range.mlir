// RUN: staticify-mlir-opt %s --int-range-optimizations | FileCheck %s

// A comparison against the bound folds; one inside the range does not.
// CHECK-LABEL: func @fold_against_bound
// CHECK-DAG: %[[TRUE:.*]] = arith.constant true
// CHECK-DAG: %[[FALSE:.*]] = arith.constant false
// CHECK: %[[MID:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK: return %[[TRUE]], %[[FALSE]], %[[MID]]
func.func @fold_against_bound(%n: index) -> (i1, i1, i1) {
  %k = staticify.bound %n max 500 : index
  %c501 = arith.constant 501 : index
  %c0 = arith.constant 0 : index
  %c100 = arith.constant 100 : index
  %le = arith.cmpi ult, %k, %c501 : index
  %neg = arith.cmpi slt, %k, %c0 : index
  %mid = arith.cmpi ult, %k, %c100 : index
  return %le, %neg, %mid : i1, i1, i1
}

// The input's own range narrows the stated one: min(n, 10) bounded by 500 is
// at most 10.
// CHECK-LABEL: func @intersect
// CHECK: %[[TRUE:.*]] = arith.constant true
// CHECK: return %[[TRUE]]
func.func @intersect(%n: index) -> i1 {
  %c0 = arith.constant 0 : index
  %c10 = arith.constant 10 : index
  %c11 = arith.constant 11 : index
  %pos = arith.maxsi %n, %c0 : index
  %m = arith.minsi %pos, %c10 : index
  %k = staticify.bound %m max 500 : index
  %lt = arith.cmpi slt, %k, %c11 : index
  return %lt : i1
}

// A constant inside the range folds the op away; outside, it stays.
// CHECK-LABEL: func @constant
// CHECK: %[[C7:.*]] = arith.constant 7 : index
// CHECK: %[[B:.*]] = staticify.bound %{{.*}} max 5 : index
// CHECK: return %[[C7]], %[[B]]
func.func @constant() -> (index, index) {
  %c7 = arith.constant 7 : index
  %a = staticify.bound %c7 max 9 : index
  %b = staticify.bound %c7 max 5 : index
  return %a, %b : index, index
}
