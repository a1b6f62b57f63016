// The split reductions compute what the serial ones do: run on the CPU with
// small chunks (n = 10, chunk 4: partials of 3 elements, then of 1), and
// without the split, for the same inputs.
// RUN: staticify-mlir-opt %s \
// RUN:   --pass-pipeline="builtin.module(staticify-split-reductions{chunk=4}, one-shot-bufferize{bufferize-function-boundaries=1}, convert-linalg-to-loops, convert-scf-to-cf, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-to-llvm, reconcile-unrealized-casts)" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   --shared-libs=%mlir_lib_dir/libmlir_c_runner_utils.so,%mlir_lib_dir/libmlir_runner_utils.so \
// RUN: | FileCheck %s
// RUN: staticify-mlir-opt %s \
// RUN:   --pass-pipeline="builtin.module(one-shot-bufferize{bufferize-function-boundaries=1}, convert-linalg-to-loops, convert-scf-to-cf, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-to-llvm, reconcile-unrealized-casts)" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   --shared-libs=%mlir_lib_dir/libmlir_c_runner_utils.so,%mlir_lib_dir/libmlir_runner_utils.so \
// RUN: | FileCheck %s

// Masked sum of 1..10 at the even positions (1 + 3 + 5 + 7 + 9), plus an
// initial value of 100.
// CHECK: 125
// Maximum of signed integers, all negative.
// CHECK-NEXT: -2
// Count of true elements.
// CHECK-NEXT: 4
// Sum of an empty vector: the initial value.
// CHECK-NEXT: 7
// A body that reads its position (as arange and rand do): sum of x[i] * i
// for x = 1..10, 1*0 + 2*1 + ... + 10*9.
// CHECK-NEXT: 330

func.func @masked_sum(%x: tensor<?xf32>, %m: tensor<?xi1>) -> f32 {
  %zero = arith.constant 0.0 : f32
  %hundred = arith.constant 100.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%hundred : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x, %m : tensor<?xf32>, tensor<?xi1>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %k: i1, %acc: f32):
    %v = arith.select %k, %a, %zero : f32
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %v = tensor.extract %r[] : tensor<f32>
  return %v : f32
}

func.func @max(%x: tensor<?xi64>) -> i64 {
  %low = arith.constant -9223372036854775808 : i64
  %e = tensor.empty() : tensor<i64>
  %init = linalg.fill ins(%low : i64) outs(%e : tensor<i64>) -> tensor<i64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<?xi64>) outs(%init : tensor<i64>) {
  ^bb0(%a: i64, %acc: i64):
    %s = arith.maxsi %a, %acc : i64
    linalg.yield %s : i64
  } -> tensor<i64>
  %v = tensor.extract %r[] : tensor<i64>
  return %v : i64
}

func.func @count(%m: tensor<?xi1>) -> i64 {
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<i64>
  %init = linalg.fill ins(%c0 : i64) outs(%e : tensor<i64>) -> tensor<i64>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%m : tensor<?xi1>) outs(%init : tensor<i64>) {
  ^bb0(%a: i1, %acc: i64):
    %w = arith.extui %a : i1 to i64
    %s = arith.addi %acc, %w : i64
    linalg.yield %s : i64
  } -> tensor<i64>
  %v = tensor.extract %r[] : tensor<i64>
  return %v : i64
}

func.func @empty_sum(%x: tensor<?xf32>) -> f32 {
  %seven = arith.constant 7.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%seven : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<?xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %v = tensor.extract %r[] : tensor<f32>
  return %v : f32
}

func.func @weighted(%x: tensor<?xf32>) -> f32 {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<?xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %i = linalg.index 0 : index
    %i64 = arith.index_cast %i : index to i64
    %w = arith.sitofp %i64 : i64 to f32
    %p = arith.mulf %a, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %v = tensor.extract %r[] : tensor<f32>
  return %v : f32
}

func.func @main() {
  %x = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]> : tensor<10xf32>
  %m = arith.constant dense<[true, false, true, false, true, false, true, false, true, false]> : tensor<10xi1>
  %c = arith.constant dense<[true, true, false, false, false, false, true, false, false, true]> : tensor<10xi1>
  %i = arith.constant dense<[-5, -9, -2, -7, -3, -11, -4, -6, -8, -10]> : tensor<10xi64>
  %none = arith.constant dense<> : tensor<0xf32>
  %xd = tensor.cast %x : tensor<10xf32> to tensor<?xf32>
  %md = tensor.cast %m : tensor<10xi1> to tensor<?xi1>
  %cd = tensor.cast %c : tensor<10xi1> to tensor<?xi1>
  %id = tensor.cast %i : tensor<10xi64> to tensor<?xi64>
  %nd = tensor.cast %none : tensor<0xf32> to tensor<?xf32>
  %s = call @masked_sum(%xd, %md) : (tensor<?xf32>, tensor<?xi1>) -> f32
  vector.print %s : f32
  %mx = call @max(%id) : (tensor<?xi64>) -> i64
  vector.print %mx : i64
  %n = call @count(%cd) : (tensor<?xi1>) -> i64
  vector.print %n : i64
  %z = call @empty_sum(%nd) : (tensor<?xf32>) -> f32
  vector.print %z : f32
  %w = call @weighted(%xd) : (tensor<?xf32>) -> f32
  vector.print %w : f32
  return
}
