// RUN: staticify-mlir-opt %s -split-input-file --staticify-lower-scans | FileCheck %s --check-prefix=SERIAL
// RUN: staticify-mlir-opt %s -split-input-file --staticify-lower-scans=chunk=1024 | FileCheck %s --check-prefix=CHUNKED

// The CPU's scan: one loop carrying the running sum.
// SERIAL-LABEL: func.func @scan
// SERIAL-NOT: staticify.cumsum
// SERIAL: scf.for {{.*}} iter_args(%{{.*}} = %c0_i64, %{{.*}} = %{{.*}}) -> (i64, tensor<?xi64>)
// SERIAL: tensor.extract %arg0
// SERIAL: arith.addi
// SERIAL: tensor.insert
// SERIAL-NOT: scf.forall
// The GPU's: chunks scanned in parallel (each writing its total), an
// exclusive scan of the totals, then each element plus its chunk's offset.
// CHUNKED-LABEL: func.func @scan
// CHUNKED: %[[M:.*]] = arith.ceildivui %{{.*}}, %c1024
// CHUNKED: scf.forall (%{{.*}}) in (%[[M]]) shared_outs
// CHUNKED: scf.for
// CHUNKED: tensor.parallel_insert_slice
// CHUNKED: tensor.parallel_insert_slice
// CHUNKED: scf.for %{{.*}} = %{{.*}} to %[[M]]
// CHUNKED: linalg.generic {{.*}} iterator_types = ["parallel"]
// CHUNKED: arith.divui %{{.*}}, %c1024
func.func @scan(%x: tensor<?xi64>) -> tensor<?xi64> {
  %s = staticify.cumsum %x : tensor<?xi64>
  return %s : tensor<?xi64>
}

// -----

// Must not touch: a function without a scan.
// SERIAL-LABEL: func.func @no_scan
// SERIAL-NEXT: return %arg0
// CHUNKED-LABEL: func.func @no_scan
// CHUNKED-NEXT: return %arg0
func.func @no_scan(%x: tensor<?xi64>) -> tensor<?xi64> {
  return %x : tensor<?xi64>
}
