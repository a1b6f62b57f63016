// RUN: staticify-mlir-opt %s -split-input-file --staticify-split-reductions | FileCheck %s

// A masked sum of a vector: partials over chunks of 1024 (element i*1 +
// j*m of partial i, masked past the end), each from -0.0 (the identity of
// addf), then the partials split once more and summed into the initial value.
// CHECK-LABEL: func.func @masked_sum
// CHECK: %[[N:.*]] = tensor.dim %arg1
// CHECK: %[[M:.*]] = arith.ceildivui %[[N]], %c1024
// CHECK: %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ID]] : f32)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: %[[I:.*]] = linalg.index 0
// CHECK: %[[J:.*]] = linalg.index 1
// CHECK: %[[JM:.*]] = arith.muli %[[J]], %[[M]]
// CHECK: %[[AT:.*]] = arith.addi %[[JM]], %[[I]]
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[AT]], %[[N]]
// CHECK: %[[SAFE:.*]] = arith.select %[[VALID]], %[[AT]]
// CHECK: tensor.extract %arg0[%[[SAFE]]]
// CHECK: tensor.extract %arg1[%[[SAFE]]]
// CHECK: %[[SUM:.*]] = arith.addf
// CHECK: arith.select %[[VALID]], %[[SUM]]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction"]{{.*}}staticify.split_level = 2
func.func @masked_sum(%x: tensor<?xf32>, %mask: tensor<?xi1>, %init: tensor<f32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x, %mask : tensor<?xf32>, tensor<?xi1>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %k: i1, %acc: f32):
    %v = arith.select %k, %a, %zero : f32
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Must not touch: a combiner with no identity the pass knows (subf), a
// reduction to a row (not a scalar), and max with its index (two outputs).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: ceildivui
// CHECK-NOT: tensor<1024xi8>
// CHECK: return
func.func @left_alone(%x: tensor<?xf32>, %y: tensor<?x?xf32>, %init: tensor<f32>, %rows: tensor<?xf32>, %idx: tensor<i64>) -> (tensor<f32>, tensor<?xf32>, tensor<f32>, tensor<i64>) {
  %a = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<?xf32>) outs(%init : tensor<f32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.subf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<?x?xf32>) outs(%rows : tensor<?xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  %c:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<?xf32>) outs(%init, %idx : tensor<f32>, tensor<i64>) {
  ^bb0(%v: f32, %acc: f32, %i: i64):
    %gt = arith.cmpf ogt, %v, %acc : f32
    %m = arith.select %gt, %v, %acc : f32
    %j = linalg.index 0 : index
    %j64 = arith.index_cast %j : index to i64
    %k = arith.select %gt, %j64, %i : i64
    linalg.yield %m, %k : f32, i64
  } -> (tensor<f32>, tensor<i64>)
  return %a, %b, %c#0, %c#1 : tensor<f32>, tensor<?xf32>, tensor<f32>, tensor<i64>
}
