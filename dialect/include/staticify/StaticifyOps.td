//===- StaticifyOps.td - staticify operations --------------*- tablegen -*-===//

#ifndef STATICIFY_OPS_TD
#define STATICIFY_OPS_TD

include "staticify/StaticifyDialect.td"
include "mlir/Interfaces/InferIntRangeInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ValueBoundsOpInterface.td"

def Staticify_BoundOp : Staticify_Op<"bound", [
    Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<InferIntRangeInterface, ["inferResultRanges"]>,
    DeclareOpInterfaceMethods<ValueBoundsOpInterface, ["populateBoundsForIndexValue"]>]> {
  let summary = "states that a host integer lies in [0, upper]";
  let description = [{
    The result is the input; the op states that it lies in `[0, upper]`. The
    producer guarantees it (staticify emits it where the TorchScript program
    bounds the value, as `min(n, 500)` bounds a sample's size); a value
    outside the range is undefined behaviour, as for `llvm.assume`.

    Integer range analysis and `ValueBoundsOpInterface` use the range, so a
    comparison against the bound folds and a buffer sized by the value gets a
    constant upper bound. `staticify-strip-bounds` removes the op once those
    analyses have run.

    ```mlir
    %k = staticify.bound %n max 500 : index
    ```
  }];
  let arguments = (ins AnySignlessIntegerOrIndex:$input, I64Attr:$upper);
  let results = (outs AnySignlessIntegerOrIndex:$result);
  let assemblyFormat = "$input `max` $upper attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

#endif // STATICIFY_OPS_TD
