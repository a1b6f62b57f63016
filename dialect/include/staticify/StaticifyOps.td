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

def Staticify_TopKOp : Staticify_Op<"topk", [Pure]> {
  let summary = "the k first elements of a vector in order, and their indices";
  let description = [{
    `torch.topk` of a vector: the `k` largest keys (smallest with `largest =
    false`) in order, NaN largest, ties by the lower index; `k` at most the
    keys' size. Keys are f32, f64 or i64 (the CUDA runtime takes f32 and
    f64). Linalg has no selection: `staticify-lower-to-ukernels` turns the
    op into a call to a hand-written kernel (a radix select and sort; a
    heap of the k best where k is a few keys of many).

    ```mlir
    %values, %indices = staticify.topk %keys, %k {largest = true}
        : tensor<?xf32> -> tensor<?xf32>, tensor<?xi64>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, F64, I64]>:$keys, Index:$k, BoolAttr:$largest);
  let results = (outs RankedTensorOf<[F32, F64, I64]>:$values, RankedTensorOf<[I64]>:$indices);
  let assemblyFormat = [{
    $keys `,` $k attr-dict `:` type($keys) `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def Staticify_RandPermOp : Staticify_Op<"randperm", [Pure]> {
  let summary = "a uniformly random permutation of 0..n-1, drawn from a seed";
  let description = [{
    `torch.randperm(n)`: a permutation of `0..n-1`, each equally likely (for
    a given seed, always the same one: the op is a function of `n` and
    `seed`). Lowered by `staticify-lower-to-ukernels` to a Fisher-Yates
    shuffle.

    ```mlir
    %perm = staticify.randperm %n, %seed : tensor<?xi64>
    ```
  }];
  let arguments = (ins Index:$n, I64:$seed);
  let results = (outs 1DTensorOf<[I64]>:$result);
  let assemblyFormat = "$n `,` $seed attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Staticify_CumSumOp : Staticify_Op<"cumsum", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "the inclusive prefix sum of a vector";
  let description = [{
    `torch.cumsum(x, 0)` of a vector already in the accumulation dtype:
    element `i` is `x[0] + ... + x[i]`. `staticify-lower-scans` lowers it to
    a serial loop (the CPU's order: sequential, as PyTorch's CPU cumsum) or,
    with a chunk size, to a chunked scan for the GPU: a scan of each chunk
    in parallel, a scan of the chunks' totals, and an elementwise add (a
    float sum in another order, as PyTorch's own CUDA cumsum).

    ```mlir
    %s = staticify.cumsum %x : tensor<?xi64>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnySignlessInteger, AnyFloat]>:$input);
  let results = (outs 1DTensorOf<[AnySignlessInteger, AnyFloat]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Staticify_ScatterOp : Staticify_Op<"scatter", [Pure, AllTypesMatch<["dest", "result"]>]> {
  let summary = "a vector with src's elements written at their indices, the last one winning";
  let description = [{
    `dest.scatter(0, indices, src)` of vectors: the result is `dest` with
    `src[i]` written at `indices[i]` for `i` in order, so where an index
    repeats the last write wins (PyTorch's CPU order; its CUDA scatter picks
    any). `indices` has at most as many elements as `src`; an index outside
    `[0, size(dest))` is clamped into it (the producer checks the range and
    discards the result if one is outside). `staticify-lower-scatters` lowers
    it to a serial loop (the CPU) or, in parallel, to two passes for the GPU:
    each target's winner (the largest `i` that writes it, by atomic max),
    then the winners' writes.

    ```mlir
    %r = staticify.scatter %dest, %indices, %src : tensor<?xf32>, tensor<?xi64>, tensor<?xf32>
    ```
  }];
  let arguments = (ins 1DTensorOf<[AnySignlessInteger, AnyFloat]>:$dest,
                       1DTensorOf<[I64]>:$indices,
                       1DTensorOf<[AnySignlessInteger, AnyFloat]>:$src);
  let results = (outs 1DTensorOf<[AnySignlessInteger, AnyFloat]>:$result);
  let assemblyFormat = "$dest `,` $indices `,` $src attr-dict `:` type($dest) `,` type($indices) `,` type($src)";
  let hasVerifier = 1;
}

#endif // STATICIFY_OPS_TD
