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

#endif // STATICIFY_PASSES_TD
