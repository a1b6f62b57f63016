// RUN: staticify-mlir-opt %s -split-input-file --staticify-lower-scatters | FileCheck %s --check-prefix=SERIAL
// RUN: staticify-mlir-opt %s -split-input-file --staticify-lower-scatters=parallel=1 | FileCheck %s --check-prefix=PARALLEL

// The CPU's scatter: one loop inserting in order.
// SERIAL-LABEL: func.func @scatter
// SERIAL-NOT: staticify.scatter
// SERIAL: scf.for {{.*}} iter_args(%{{.*}} = %arg0) -> (tensor<?xf32>)
// SERIAL: tensor.extract %arg1
// SERIAL: arith.maxsi
// SERIAL: arith.minsi
// SERIAL: tensor.extract %arg2
// SERIAL: tensor.insert
// SERIAL-NOT: scf.parallel
// The GPU's: winners filled with -1 beside a copy of dest, the atomic
// maximum of i at each target, then each winner's write.
// PARALLEL-LABEL: func.func @scatter
// PARALLEL-NOT: staticify.scatter
// PARALLEL: %[[W:.*]] = memref.alloc(%{{.*}}) : memref<?xi64>
// PARALLEL: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// PARALLEL: scf.parallel
// PARALLEL: memref.store %c-1_i64, %[[W]]
// PARALLEL: tensor.extract %arg0
// PARALLEL: memref.store %{{.*}}, %[[OUT]]
// PARALLEL: scf.parallel
// PARALLEL: memref.atomic_rmw maxs %{{.*}}, %[[W]]
// PARALLEL: scf.parallel
// PARALLEL: memref.load %[[W]]
// PARALLEL: arith.cmpi eq
// PARALLEL: scf.if
// PARALLEL: tensor.extract %arg2
// PARALLEL: memref.store %{{.*}}, %[[OUT]]
// PARALLEL: bufferization.to_tensor %[[OUT]] restrict writable
// PARALLEL-NOT: scf.for
func.func @scatter(%d: tensor<?xf32>, %i: tensor<?xi64>, %s: tensor<?xf32>) -> tensor<?xf32> {
  %r = staticify.scatter %d, %i, %s : tensor<?xf32>, tensor<?xi64>, tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// Must not touch: a function without a scatter.
// SERIAL-LABEL: func.func @no_scatter
// SERIAL-NEXT: return %arg0
// PARALLEL-LABEL: func.func @no_scatter
// PARALLEL-NEXT: return %arg0
func.func @no_scatter(%x: tensor<?xi64>) -> tensor<?xi64> {
  return %x : tensor<?xi64>
}
