//===- Passes.td - staticify dialect passes ----------------*- tablegen -*-===//

#ifndef STATICIFY_PASSES_TD
#define STATICIFY_PASSES_TD

include "mlir/Pass/PassBase.td"

def StaticifyStripBounds : Pass<"staticify-strip-bounds"> {
  let summary = "Replace each staticify.bound by its input";
  let description = [{
    Run after the analyses that use the bounds (`int-range-optimizations`,
    bufferization's value-bounds queries) and before conversion to LLVM,
    which has no pattern for `staticify.bound`.

    Before:
    ```mlir
    %k = staticify.bound %n max 500 : index
    %e = tensor.empty(%k) : tensor<?xf32>
    ```
    After:
    ```mlir
    %e = tensor.empty(%n) : tensor<?xf32>
    ```
  }];
}

def StaticifyLowerToUkernels : Pass<"staticify-lower-to-ukernels", "mlir::ModuleOp"> {
  let summary = "Turn staticify.topk and staticify.randperm into ukernel calls";
  let description = [{
    Each op becomes buffers and a call to the hand-written kernel of its
    element type (`staticify_topk_f32`, `staticify_topk_f64`,
    `staticify_randperm_i64`; lower/ukernels/cpu.c), declared in the module
    with `llvm.emit_c_interface`. Runs on tensors, before bufferization: the
    input is read through `bufferization.to_buffer read_only`, the results
    are fresh buffers (`memref.alloc`, freed by the deallocation pipeline)
    returned as `bufferization.to_tensor restrict writable`.

    Before:
    ```mlir
    %v, %i = staticify.topk %keys, %k {largest = true}
        : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
    ```
    After:
    ```mlir
    %kb = bufferization.to_buffer %keys read_only : ...
    %vb = memref.alloc(%k) : memref<?xf32>
    %ib = memref.alloc(%k) : memref<?xi64>
    call @staticify_topk_f32(%kb, %vb, %ib, %true) : ...
    %v = bufferization.to_tensor %vb restrict writable : ...
    %i = bufferization.to_tensor %ib restrict writable : ...
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
                           "mlir::func::FuncDialect", "mlir::memref::MemRefDialect"];
}

def StaticifyParallelDimsFirst : Pass<"staticify-parallel-dims-first"> {
  let summary = "Order each linalg.generic's loops: parallel dimensions (innermost first), then reductions";
  let description = [{
    `convert-linalg-to-parallel-loops` makes an `scf.parallel` of the
    parallel dimensions that precede the first reduction dimension only:
    a column sum (`iterator_types = ["reduction", "parallel"]`) becomes a
    host loop over rows around a parallel loop over columns, which on a GPU
    is one launch per row. Interchanged (`linalg::interchangeGenericOp`), it
    is one parallel loop over columns, each iteration summing its column.
    The parallel dimensions are also put innermost first: the GPU mapping
    gives the first loop to threads x (adjacent threads, adjacent elements)
    and the next ones to the grid's y and z. Only the order of the loops
    changes, not what each output element is computed from (the reduction
    order of every element is kept). Run `linalg-generalize-named-ops` first
    for fills and copies.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def StaticifySplitReductions : Pass<"staticify-split-reductions"> {
  let summary = "Split a reduction of a whole vector into parallel chunks and a second phase";
  let description = [{
    For the GPU: a `linalg.generic` reducing a vector to a scalar with a
    known combiner (add, mul, min, max, and, or, xor on integers or floats)
    becomes (1) a parallel loop over `m = ceil(n / chunk)` partial results,
    partial `i` combining elements `i, i + m, i + 2m, ...` (adjacent threads
    read adjacent elements), each starting from the combiner's identity, and
    (2) the reduction of the partials into the original initial value, itself
    split once more. The order of combination is fixed (the result is
    deterministic) but is not the sequential one: like PyTorch's own CUDA
    reductions, a float sum may differ in its last bits. A body whose
    accumulator is used other than by one combiner, or a reduction of more
    than one dimension, is left alone (it runs serially).
  }];
  let options = [Option<"chunk", "chunk", "int64_t", "1024",
                        "elements each partial result combines">];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def StaticifyLowerScans : Pass<"staticify-lower-scans"> {
  let summary = "Lower staticify.cumsum to a serial loop, or to a chunked parallel scan";
  let description = [{
    On tensors, before bufferization. With `chunk=0` (the CPU pipeline) a
    cumsum is one `scf.for` carrying the running sum. With `chunk=N` (the
    CUDA pipeline) it is three steps for `m = ceil(n / N)` chunks:
    an `scf.forall` over the chunks, each scanning its `N` elements in place
    into the result and writing its total; a serial exclusive scan of the
    `m` totals (on a GPU, one thread over `n / N` elements); and an
    elementwise `linalg.generic` adding each chunk's offset.
  }];
  let options = [Option<"chunk", "chunk", "int64_t", "0",
                        "elements per chunk; 0: one serial loop">];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
                           "mlir::scf::SCFDialect", "mlir::tensor::TensorDialect"];
}

def StaticifyLowerScatters : Pass<"staticify-lower-scatters"> {
  let summary = "Lower staticify.scatter to a serial loop, or to two parallel passes";
  let description = [{
    On tensors, before bufferization. Without `parallel` (the CPU pipeline) a
    scatter is one `scf.for` inserting `src[i]` at `indices[i]` in order. With
    `parallel` (the CUDA pipeline, where a serial loop runs in one thread):
    a buffer of winners filled with -1, an `scf.parallel` over `i` taking the
    atomic maximum of `i` at its target, and an `scf.parallel` over `i` in
    which each winner writes `src[i]` into a copy of `dest` (the copy itself
    an `scf.parallel`). The result is the serial loop's, the last write
    winning, whatever order the threads run in.
  }];
  let options = [Option<"parallel", "parallel", "bool", "false",
                        "two parallel passes instead of one serial loop">];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::bufferization::BufferizationDialect",
                           "mlir::memref::MemRefDialect", "mlir::scf::SCFDialect",
                           "mlir::tensor::TensorDialect"];
}

def StaticifyGpuSerialRegions : Pass<"staticify-gpu-serial-regions", "mlir::ModuleOp"> {
  let summary = "Put the host code that touches device memory into one-thread kernels";
  let description = [{
    Runs on buffers, after `convert-linalg-to-parallel-loops` and before the
    parallel loops are mapped to the GPU. In a function that runs on the
    host and launches kernels, every buffer is device memory except the
    function arguments marked `staticify.host` (the seed, the shape
    function's sizes) and `memref.alloca`s. What is left outside a
    `scf.parallel` and reads or writes device memory (a rank-0 reduction
    lowered to a serial loop, a serial scatter, the store of the status) is
    grouped with the pure scalar code that uses it, into `gpu.launch`es of
    one thread, at the position of the group's last op.

    The pass fails, naming the op, when a value read from device memory
    would decide something on the host (an `scf.if`, a size, a loop bound,
    a call's operand): that would be a host-device sync; and when device
    code would read host memory (a constant tensor in a `memref.global`).
    Moving a group's loads past other ops uses the buffers' roots: an
    allocation is only itself, any other root (an argument, a branch's
    result, a global) may be any other. A function marked
    `staticify.host_only` (the shape function) must not touch device memory
    at all.

    Before:
    ```mlir
    %v = memref.load %sum[] : memref<f32>
    %s = arith.mulf %v, %half : f32
    memref.store %s, %out[] : memref<f32>
    ```
    After:
    ```mlir
    gpu.launch blocks(...) in (%c1, %c1, %c1) threads(...) in (%c1, %c1, %c1) {
      %v = memref.load %sum[] : memref<f32>
      %s = arith.mulf %v, %half : f32
      memref.store %s, %out[] : memref<f32>
      gpu.terminator
    }
    ```
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect"];
}

def StaticifyGpuLaunchToRuntime : Pass<"staticify-gpu-launch-to-runtime", "mlir::ModuleOp"> {
  let summary = "Launch outlined kernels through staticify's runtime, on the caller's stream";
  let description = [{
    Runs after `gpu-kernel-outlining`. Moves every kernel into one
    `gpu.module @staticify_kernels` (one binary per architecture), lists
    their names in the module attribute `staticify.cuda_kernels`, and turns
    each `gpu.launch_func` into a call to
    `staticify_cuda_launch(kernel, grid x/y/z, block x/y/z, shared bytes,
    params)`, where `params` holds one 8-byte slot per kernel parameter in
    the order `convert-gpu-to-nvvm` gives them (a buffer as its aligned
    pointer twice, offset, sizes and strides; a scalar zero-extended).
    The runtime launches with `cuLaunchKernel` on PyTorch's current stream
    and never synchronizes: MLIR's own host lowering (`gpu-to-llvm`)
    creates a stream and waits on it after every launch.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect"];
}

#endif // STATICIFY_PASSES_TD
