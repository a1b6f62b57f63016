// The chunked scan (chunk 4: chunks of 4, 4 and 2 elements for n = 10)
// computes what the serial one does, on the CPU.
// RUN: staticify-mlir-opt %s \
// RUN:   --pass-pipeline="builtin.module(staticify-lower-scans{chunk=4}, one-shot-bufferize{bufferize-function-boundaries=1}, scf-forall-to-parallel, convert-linalg-to-loops, convert-scf-to-cf, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-to-llvm, reconcile-unrealized-casts)" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   --shared-libs=%mlir_lib_dir/libmlir_c_runner_utils.so,%mlir_lib_dir/libmlir_runner_utils.so \
// RUN: | FileCheck %s
// RUN: staticify-mlir-opt %s \
// RUN:   --pass-pipeline="builtin.module(staticify-lower-scans, one-shot-bufferize{bufferize-function-boundaries=1}, convert-linalg-to-loops, convert-scf-to-cf, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-to-llvm, reconcile-unrealized-casts)" \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   --shared-libs=%mlir_lib_dir/libmlir_c_runner_utils.so,%mlir_lib_dir/libmlir_runner_utils.so \
// RUN: | FileCheck %s

// CHECK: 1
// CHECK-NEXT: 3
// CHECK-NEXT: 6
// CHECK-NEXT: 10
// CHECK-NEXT: 15
// CHECK-NEXT: 21
// CHECK-NEXT: 28
// CHECK-NEXT: 36
// CHECK-NEXT: 45
// CHECK-NEXT: 55
// A scan of exactly one chunk (n = 4), of floats:
// CHECK-NEXT: 0.5
// CHECK-NEXT: -1
// CHECK-NEXT: 1
// CHECK-NEXT: 5
// An empty scan prints nothing; then:
// CHECK-NEXT: done

func.func @scan_i64(%x: tensor<?xi64>) -> tensor<?xi64> {
  %s = staticify.cumsum %x : tensor<?xi64>
  return %s : tensor<?xi64>
}

func.func @scan_f32(%x: tensor<?xf32>) -> tensor<?xf32> {
  %s = staticify.cumsum %x : tensor<?xf32>
  return %s : tensor<?xf32>
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

func.func @print_f32(%t: tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %t, %c0 : tensor<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %v = tensor.extract %t[%i] : tensor<?xf32>
    vector.print %v : f32
  }
  return
}

func.func @main() {
  %x = arith.constant dense<[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]> : tensor<10xi64>
  %xd = tensor.cast %x : tensor<10xi64> to tensor<?xi64>
  %s = call @scan_i64(%xd) : (tensor<?xi64>) -> tensor<?xi64>
  call @print_i64(%s) : (tensor<?xi64>) -> ()
  %f = arith.constant dense<[0.5, -1.5, 2.0, 4.0]> : tensor<4xf32>
  %fd = tensor.cast %f : tensor<4xf32> to tensor<?xf32>
  %fs = call @scan_f32(%fd) : (tensor<?xf32>) -> tensor<?xf32>
  call @print_f32(%fs) : (tensor<?xf32>) -> ()
  %e = arith.constant dense<> : tensor<0xi64>
  %ed = tensor.cast %e : tensor<0xi64> to tensor<?xi64>
  %es = call @scan_i64(%ed) : (tensor<?xi64>) -> tensor<?xi64>
  call @print_i64(%es) : (tensor<?xi64>) -> ()
  vector.print str "done\n"
  return
}
