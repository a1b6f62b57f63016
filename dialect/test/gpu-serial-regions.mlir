// RUN: staticify-mlir-opt %s -split-input-file -verify-diagnostics --staticify-gpu-serial-regions | FileCheck %s

// A rank-0 result computed from device memory: the load, the arithmetic and
// the store go into one one-thread kernel; the host's size arithmetic and
// the parallel loop stay where they are.
// CHECK-LABEL: func.func @scalar_chain
// CHECK: %[[N:.*]] = arith.addi
// CHECK: scf.parallel
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE:.*]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]])
// CHECK-NEXT: memref.load %arg0[]
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: memref.store
// CHECK-NEXT: gpu.terminator
func.func @scalar_chain(%sum: memref<f32>, %out: memref<f32>, %v: memref<?xf32>, %n: index) {
  %half = arith.constant 0.5 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = arith.addi %n, %c1 : index
  scf.parallel (%i) = (%c0) to (%m) step (%c1) {
    memref.store %half, %v[%i] : memref<?xf32>
  }
  %x = memref.load %sum[] : memref<f32>
  %y = arith.mulf %x, %half : f32
  memref.store %y, %out[] : memref<f32>
  return
}

// -----

// The seed is host memory (staticify.host): its load stays on the host and
// nothing is wrapped. A memref.alloca is host memory too.
// CHECK-LABEL: func.func @host_memory
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @host_memory(%seed: memref<i64> {staticify.host}, %v: memref<?xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.load %seed[] : memref<i64>
  %a = memref.alloca() : memref<i64>
  memref.store %s, %a[] : memref<i64>
  %n = memref.dim %v, %c0 : memref<?xi64>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %s, %v[%i] : memref<?xi64>
  }
  return
}

// -----

// A serial loop over device memory (a scan) runs whole in one thread, with
// the store of its result.
// CHECK-LABEL: func.func @serial_loop
// CHECK: gpu.launch
// CHECK-NEXT: scf.for
// CHECK: memref.store %{{.*}}, %arg1[]
// CHECK-NEXT: gpu.terminator
func.func @serial_loop(%v: memref<?xi64>, %total: memref<i64>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0 : i64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (i64) {
    %e = memref.load %v[%i] : memref<?xi64>
    %s = arith.addi %acc, %e : i64
    memref.store %s, %v[%i] : memref<?xi64>
    scf.yield %s : i64
  }
  memref.store %r, %total[] : memref<i64>
  return
}

// -----

// A copy between device buffers becomes a parallel loop (then mapped to
// threads like the others).
// CHECK-LABEL: func.func @copy
// CHECK-NOT: memref.copy
// CHECK: scf.parallel
// CHECK: memref.load %arg0
// CHECK: memref.store %{{.*}}, %arg1
func.func @copy(%a: memref<?xf32>, %b: memref<?xf32>) {
  memref.copy %a, %b : memref<?xf32> to memref<?xf32>
  return
}

// -----

// Must not lower: a branch on a value read from device memory is a sync.
func.func @branch_on_device(%flag: memref<i1>, %out: memref<f32>) {
  %f = memref.load %flag[] : memref<i1>
  %one = arith.constant 1.0 : f32
  // expected-error @+1 {{a value read from device memory decides scf.if}}
  scf.if %f {
    memref.store %one, %out[] : memref<f32>
  }
  return
}

// -----

// Must not lower: a size read from device memory (an allocation's size).
func.func @size_from_device(%count: memref<i64>) {
  %c = memref.load %count[] : memref<i64>
  %n = arith.index_cast %c : i64 to index
  // expected-error @+1 {{a value read from device memory decides memref.alloc}}
  %buf = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

// Must not lower: the shape function runs on the host and may read sizes
// only.
func.func @f_shape(%x: memref<?xf32>, %sizes: memref<?xi64> {staticify.host}) attributes {staticify.host_only} {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{the shape function reads device memory}}
  %v = memref.load %x[%c0] : memref<?xf32>
  return
}

// -----

// A parallel loop writing another allocation between a load and the store
// that uses it: the load and the store move past it into one kernel.
// CHECK-LABEL: func.func @independent_write
// CHECK: scf.parallel
// CHECK: gpu.launch
// CHECK-NEXT: memref.load %[[A:.*]][]
// CHECK-NEXT: memref.store
func.func @independent_write(%out: memref<f32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<f32>
  %b = memref.alloc(%n) : memref<?xf32>
  %x = memref.load %a[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %b[%i] : memref<?xf32>
  }
  memref.store %x, %out[] : memref<f32>
  return
}

// -----

// The shape buffer of a memref.reshape (here of two) is read on the host:
// it becomes a memref.alloca, and its store and load stay there.
// CHECK-LABEL: func.func @reshape_shape
// CHECK: %[[SHAPE:.*]] = memref.alloca() : memref<1xindex>
// CHECK-NOT: gpu.launch
// CHECK: memref.reshape %arg0(%[[SHAPE]])
func.func @reshape_shape(%x: memref<?x?xf32>, %n: index) -> index {
  %c0 = arith.constant 0 : index
  %shape = memref.alloc() : memref<1xindex>
  memref.store %n, %shape[%c0] : memref<1xindex>
  %flat = memref.reshape %x(%shape) : (memref<?x?xf32>, memref<1xindex>) -> memref<?xf32>
  %again = memref.reshape %x(%shape) : (memref<?x?xf32>, memref<1xindex>) -> memref<?xf32>
  %m = memref.load %shape[%c0] : memref<1xindex>
  return %m : index
}

// -----

// Must not group: a device write between a load and the store that uses it,
// to a buffer that may be the one loaded (two arguments may alias): moving
// the load past it could read the new value.
func.func @write_between(%a: memref<f32>, %b: memref<?xf32>, %out: memref<f32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %x = memref.load %a[] : memref<f32>
  // expected-error @+1 {{cannot be grouped into one kernel}}
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %b[%i] : memref<?xf32>
  }
  memref.store %x, %out[] : memref<f32>
  return
}

// -----

// A host loop (over a size) around a parallel loop reads nothing on the
// host: left as it is (each iteration launches the parallel loop).
// CHECK-LABEL: func.func @host_loop_around_kernel
// CHECK-NOT: gpu.launch
// CHECK: scf.for
// CHECK-NEXT: scf.parallel
func.func @host_loop_around_kernel(%x: memref<?x?xf32>, %acc: memref<?xf32>, %rows: index, %cols: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %r = %c0 to %rows step %c1 {
    scf.parallel (%c) = (%c0) to (%cols) step (%c1) {
      %v = memref.load %x[%r, %c] : memref<?x?xf32>
      %a = memref.load %acc[%c] : memref<?xf32>
      %s = arith.addf %a, %v : f32
      memref.store %s, %acc[%c] : memref<?xf32>
    }
  }
  return
}

// -----

// Must not lower: a constant tensor that bufferization placed in a host
// global, read by a parallel loop (the GPU would read a host address).
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @host_global(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t = memref.get_global @table : memref<4xf32>
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    // expected-error @+1 {{device code reads host memory}}
    %v = memref.load %t[%i] : memref<4xf32>
    memref.store %v, %out[%i] : memref<4xf32>
  }
  return
}

// -----

// Must not group: a write through a branch's result (which may be the very
// buffer loaded) between the load and the store that uses it.
func.func @write_through_select(%a: memref<f32>, %b: memref<f32>, %c: i1, %out: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  %x = memref.load %a[] : memref<f32>
  %either = arith.select %c, %a, %b : memref<f32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{cannot be grouped into one kernel}}
  scf.parallel (%i) = (%c0) to (%c1) step (%c1) {
    memref.store %zero, %either[] : memref<f32>
  }
  memref.store %x, %out[] : memref<f32>
  return
}
