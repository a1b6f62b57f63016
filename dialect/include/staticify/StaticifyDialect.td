//===- StaticifyDialect.td - the staticify dialect ---------*- tablegen -*-===//
//
// What upstream MLIR lacks for staticify's static programs: a host integer
// whose value is not known when compiling but whose range is (the count of a
// bounded tensor is at most its padded size). Ops here carry that fact to
// MLIR's range analyses; everything else a lowered region does is upstream
// dialects (arith, math, tensor, linalg).
//
//===----------------------------------------------------------------------===//

#ifndef STATICIFY_DIALECT_TD
#define STATICIFY_DIALECT_TD

include "mlir/IR/OpBase.td"

def Staticify_Dialect : Dialect {
  let name = "staticify";
  let summary = "Bounded values of staticify's static programs";
  let description = [{
    staticify rewrites a PyTorch program whose shapes depend on tensor data
    into one whose shapes are fixed on the host: a selection becomes a tensor
    padded to a bound that the host knows, with a count on the device. The
    dialect states such bounds so that `IntegerRangeAnalysis` and
    `ValueBoundsOpInterface` can use them (fold comparisons against the bound,
    size buffers by it).
  }];
  let cppNamespace = "::staticify::mlir_dialect";
}

class Staticify_Op<string mnemonic, list<Trait> traits = []>
    : Op<Staticify_Dialect, mnemonic, traits>;

#endif // STATICIFY_DIALECT_TD
