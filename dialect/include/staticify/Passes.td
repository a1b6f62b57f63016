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

#endif // STATICIFY_PASSES_TD
