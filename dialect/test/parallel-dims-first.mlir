// RUN: staticify-mlir-opt %s -split-input-file --staticify-parallel-dims-first | FileCheck %s

// A column sum: the reduction over rows moves inside, the columns become the
// outer (parallel) loop; each output element is still summed row by row.
// CHECK: #[[$IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK: #[[$OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @column_sum
// CHECK: linalg.generic {indexing_maps = [#[[$IN]], #[[$OUT]]], iterator_types = ["parallel", "reduction"]}
func.func @column_sum(%x: memref<?x?xf32>, %out: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<?x?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// An elementwise op on a matrix: the columns (innermost, contiguous) become
// the first loop, which the GPU mapping gives to threads x.
// CHECK: #[[$T:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-LABEL: func.func @elementwise
// CHECK: linalg.generic {indexing_maps = [#[[$T]], #[[$T]]], iterator_types = ["parallel", "parallel"]}
func.func @elementwise(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  return
}

// -----

// Must not touch: a row sum (one parallel dimension, first already) and a
// vector op.
// CHECK-LABEL: func.func @already_ordered
// CHECK: indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction"]
// CHECK: iterator_types = ["parallel"]
func.func @already_ordered(%x: memref<?x?xf32>, %rows: memref<?xf32>, %v: memref<?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%rows : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]}
      outs(%v : memref<?xf32>) {
  ^bb0(%o: f32):
    linalg.yield %o : f32
  }
  return
}
