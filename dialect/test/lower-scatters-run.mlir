// The parallel scatter (two passes: atomic max of the writer, the winners'
// writes) computes what the serial one does, repeated and out-of-range
// indices included, on the CPU (its scf.parallel loops run as loops here).
// RUN: staticify-mlir-opt %s \
// RUN:   --pass-pipeline="builtin.module(staticify-lower-scatters{parallel=1}, one-shot-bufferize{bufferize-function-boundaries=1}, convert-linalg-to-loops, convert-scf-to-cf, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-to-llvm, reconcile-unrealized-casts)" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   --shared-libs=%mlir_lib_dir/libmlir_c_runner_utils.so,%mlir_lib_dir/libmlir_runner_utils.so \
// RUN: | FileCheck %s
// RUN: staticify-mlir-opt %s \
// RUN:   --pass-pipeline="builtin.module(staticify-lower-scatters, one-shot-bufferize{bufferize-function-boundaries=1}, convert-linalg-to-loops, convert-scf-to-cf, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-to-llvm, reconcile-unrealized-casts)" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   --shared-libs=%mlir_lib_dir/libmlir_c_runner_utils.so,%mlir_lib_dir/libmlir_runner_utils.so \
// RUN: | FileCheck %s

// dest = [0, 0, 0, 0, 0], indices = [3, 1, 3, 0, 1, 3], src = [10 .. 15]:
// position 0 <- 13, 1 <- 14 (last of 11, 14), 2 untouched, 3 <- 15 (last of
// 10, 12, 15), 4 untouched.
// CHECK: 13
// CHECK-NEXT: 14
// CHECK-NEXT: 0
// CHECK-NEXT: 15
// CHECK-NEXT: 0
// Fewer indices than src elements: only the first two are written; an index
// past the end is clamped to the last position (the producer's range check
// discards such a result).
// CHECK-NEXT: 7
// CHECK-NEXT: -1
// CHECK-NEXT: 5
// No indices: dest unchanged.
// CHECK-NEXT: -1
// CHECK-NEXT: -1
// CHECK-NEXT: -1
// CHECK-NEXT: done

func.func @scatter(%d: tensor<?xi64>, %i: tensor<?xi64>, %s: tensor<?xi64>) -> tensor<?xi64> {
  %r = staticify.scatter %d, %i, %s : tensor<?xi64>, tensor<?xi64>, tensor<?xi64>
  return %r : tensor<?xi64>
}

func.func @print_i64(%t: tensor<?xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %t, %c0 : tensor<?xi64>
  scf.for %i = %c0 to %n step %c1 {
    %v = tensor.extract %t[%i] : tensor<?xi64>
    vector.print %v : i64
  }
  return
}

func.func @main() {
  %d = arith.constant dense<0> : tensor<5xi64>
  %i = arith.constant dense<[3, 1, 3, 0, 1, 3]> : tensor<6xi64>
  %s = arith.constant dense<[10, 11, 12, 13, 14, 15]> : tensor<6xi64>
  %dd = tensor.cast %d : tensor<5xi64> to tensor<?xi64>
  %id = tensor.cast %i : tensor<6xi64> to tensor<?xi64>
  %sd = tensor.cast %s : tensor<6xi64> to tensor<?xi64>
  %r = call @scatter(%dd, %id, %sd) : (tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  call @print_i64(%r) : (tensor<?xi64>) -> ()

  %d2 = arith.constant dense<-1> : tensor<3xi64>
  %i2 = arith.constant dense<[9, 0]> : tensor<2xi64>
  %s2 = arith.constant dense<[5, 7, 8]> : tensor<3xi64>
  %d2d = tensor.cast %d2 : tensor<3xi64> to tensor<?xi64>
  %i2d = tensor.cast %i2 : tensor<2xi64> to tensor<?xi64>
  %s2d = tensor.cast %s2 : tensor<3xi64> to tensor<?xi64>
  %r2 = call @scatter(%d2d, %i2d, %s2d) : (tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  call @print_i64(%r2) : (tensor<?xi64>) -> ()

  %e = arith.constant dense<> : tensor<0xi64>
  %ed = tensor.cast %e : tensor<0xi64> to tensor<?xi64>
  %r3 = call @scatter(%d2d, %ed, %s2d) : (tensor<?xi64>, tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  call @print_i64(%r3) : (tensor<?xi64>) -> ()
  vector.print str "done\n"
  return
}
