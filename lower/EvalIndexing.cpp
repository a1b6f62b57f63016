//===- EvalIndexing.cpp - gathers, scatters, random draws, top-k ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

void Evaluator::requireReadable(const Host &reads, const Host &extent) {
  // An index clamped into an empty extent still reads out of bounds: no
  // reads, or something to read.
  Value none = materialize(compare("eq", reads, Host::constInt(0)), Host::Bool);
  Value some =
      materialize(compare("gt", extent, Host::constInt(0)), Host::Bool);
  check(arith::OrIOp::create(b, none, some));
}

Value Evaluator::clampIndex(mlir::OpBuilder &ob, mlir::Location loc, Value i,
                            Value n64) {
  Value zero = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
  Value one = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(1));
  Value clamped =
      arith::MinSIOp::create(ob, loc, arith::MaxSIOp::create(ob, loc, i, zero),
                             arith::SubIOp::create(ob, loc, n64, one));
  return arith::IndexCastOp::create(ob, loc, ob.getIndexType(), clamped);
}

/// SplitMix64's output function on an i64.
Value Evaluator::splitmix(mlir::OpBuilder &ob, mlir::Location loc, Value z) {
  auto c = [&](uint64_t v) -> Value {
    return arith::ConstantOp::create(
        ob, loc, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value v, int64_t bits) -> Value {
    return arith::XOrIOp::create(ob, loc, v,
                                 arith::ShRUIOp::create(ob, loc, v, c(bits)));
  };
  z = arith::MulIOp::create(ob, loc, xorShift(z, 30), c(0xBF58476D1CE4E5B9ull));
  z = arith::MulIOp::create(ob, loc, xorShift(z, 27), c(0x94D049BB133111EBull));
  return xorShift(z, 31);
}

/// A seed of its own for each random op of the graph, from the call's seed.
Value Evaluator::streamSeed() {
  if (!seed)
    throw Unsupported("a random op where the bridge has no seed");
  int64_t op = ++randomOps;
  Value salt =
      arith::ConstantOp::create(b, b.getI64IntegerAttr(static_cast<int64_t>(
                                       0xD1B54A32D192ED03ull * uint64_t(op))));
  return splitmix(b, b.getLoc(), arith::AddIOp::create(b, seed, salt));
}

/// x[index] along dim 0: the rows of x an index vector names. An index out
/// of range (PyTorch raises) makes the kernel's status false, so the
/// TorchScript runs and raises; the read itself is clamped, never out of
/// bounds.
Tensor Evaluator::gatherRows(Node *node, const Tensor &x, const Tensor &rowsOf,
                             bool wrapNegative) {
  if (rowsOf.rank() != 1 ||
      (rowsOf.dtype != ScalarType::Long && rowsOf.dtype != ScalarType::Int))
    throw Unsupported(where(node) +
                      ": an index that is not a vector of integers");
  if (x.rank() < 1)
    throw Unsupported(where(node) + ": indexing a 0-d tensor");
  const Host &n = x.sizes[0];
  requireReadable(rowsOf.sizes[0], n);
  valueCheck(allInRange(rowsOf,
                        wrapNegative ? intOp("sub", Host::constInt(0), n)
                                     : Host::constInt(0),
                        n));
  Value rows64 = arith::IndexCastOp::create(b, b.getI64Type(), index(n));
  ScalarType it = rowsOf.dtype;
  std::vector<Host> outSizes{rowsOf.sizes[0]};
  outSizes.insert(outSizes.end(), x.sizes.begin() + 1, x.sizes.end());
  size_t rank = outSizes.size();
  Value init = empty(outSizes, x.dtype);
  ::llvm::SmallVector<mlir::AffineMap> maps{
      mlir::AffineMap::get(rank, 0, {b.getAffineDimExpr(0)}, b.getContext()),
      b.getMultiDimIdentityMap(rank)};
  ::llvm::SmallVector<mlir::utils::IteratorType> iters(
      rank, mlir::utils::IteratorType::parallel);
  Value source = x.value;
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.getType()}, mlir::ValueRange{rowsOf.value},
      mlir::ValueRange{init}, maps, iters,
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        Value i = convert(ob, loc, args[0], it, ScalarType::Long);
        if (wrapNegative) {
          Value zero =
              arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
          Value neg = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt,
                                            i, zero);
          i = arith::SelectOp::create(
              ob, loc, neg, arith::AddIOp::create(ob, loc, i, rows64), i);
        }
        ::llvm::SmallVector<Value> at{clampIndex(ob, loc, i, rows64)};
        for (size_t d = 1; d < rank; ++d)
          at.push_back(linalg::IndexOp::create(ob, loc, d));
        linalg::YieldOp::create(
            ob, loc,
            tensor::ExtractOp::create(ob, loc, source, at).getResult());
      });
  return {generic.getResult(0), x.dtype, outSizes};
}

void Evaluator::lowerAppend(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  // In place on the list's value: only on a list this graph built, whose
  // other uses read it (the evaluation order is the program's).
  torch::jit::Value *list = in[0];
  if (list->node()->kind() != prim::ListConstruct)
    throw Unsupported(where(node) +
                      ": appending to a list the graph did not build");
  Sym &s = env.at(list);
  if (auto *l = std::get_if<TensorList>(&s))
    l->push_back(tensorOf(in[1]));
  else if (auto *h = std::get_if<HostList>(&s))
    h->push_back(hostOf(in[1]));
  else
    throw Unsupported(where(node) +
                      ": appending to a value that is not a list");
  bind(node, env.at(list));
}

void Evaluator::lowerIndexSelect(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  if (constInt(in[1], "index_select's dimension") != 0)
    throw Unsupported(where(node) +
                      ": index_select along a dimension other than 0");
  bind(node, gatherRows(node, tensorOf(in[0]), tensorOf(in[2]), /*wrap=*/false));
}

void Evaluator::lowerIndex(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const TensorList *l = std::get_if<TensorList>(&get(in[1]));
  if (!l || l->size() != 1 || (*l)[0].dtype == ScalarType::Bool)
    throw Unsupported(where(node) +
                      ": indexing other than by one integer vector");
  bind(node, gatherRows(node, tensorOf(in[0]), (*l)[0], /*wrap=*/true));
}

void Evaluator::lowerGather(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  bind(node, gatherAlong(node, tensorOf(in[0]),
                     normDim(constInt(in[1], "gather's dimension"),
                             tensorOf(in[0]).rank()),
                     tensorOf(in[2])));
}

void Evaluator::lowerRand(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const HostList &sizes = as<HostList>(in[0], "a list of sizes");
  ScalarType t = dtypeOr(in[1], ScalarType::Float);
  if (t != ScalarType::Float && t != ScalarType::Double)
    throw Unsupported(where(node) +
                      ": rand of a dtype other than f32 or f64");
  Value stream = streamSeed();
  // Row-major strides of the result, for each element's counter.
  std::vector<Value> strides(sizes.size());
  Value stride = arith::ConstantIndexOp::create(b, 1);
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride = arith::MulIOp::create(b, stride, index(sizes[d]));
  }
  Value init = empty(sizes, t);
  size_t rank = sizes.size();
  ::llvm::SmallVector<mlir::utils::IteratorType> iters(
      rank, mlir::utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.getType()}, mlir::ValueRange{},
      mlir::ValueRange{init},
      ::llvm::ArrayRef<mlir::AffineMap>{b.getMultiDimIdentityMap(rank)},
      iters, [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange) {
        Value linear = arith::ConstantIndexOp::create(ob, loc, 0);
        for (size_t d = 0; d < rank; ++d)
          linear = arith::AddIOp::create(
              ob, loc, linear,
              arith::MulIOp::create(
                  ob, loc, linalg::IndexOp::create(ob, loc, d), strides[d]));
        Value i64 =
            arith::IndexCastOp::create(ob, loc, ob.getI64Type(), linear);
        Value gamma = arith::ConstantOp::create(
            ob, loc,
            ob.getI64IntegerAttr(
                static_cast<int64_t>(0x9E3779B97F4A7C15ull)));
        Value one =
            arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(1));
        Value counter = arith::MulIOp::create(
            ob, loc, arith::AddIOp::create(ob, loc, i64, one), gamma);
        Value z = splitmix(ob, loc,
                           arith::AddIOp::create(ob, loc, stream, counter));
        // The top 24 (53) bits as a float in [0, 1), as PyTorch draws.
        bool single = t == ScalarType::Float;
        Value bits = arith::ShRUIOp::create(
            ob, loc, z,
            arith::ConstantOp::create(
                ob, loc, ob.getI64IntegerAttr(single ? 40 : 11)));
        Type ft = single ? Type(ob.getF32Type()) : Type(ob.getF64Type());
        Value f = arith::SIToFPOp::create(ob, loc, ft, bits);
        Value scale = arith::ConstantOp::create(
            ob, loc,
            ob.getFloatAttr(ft, single ? 1.0 / 16777216.0
                                       : 1.0 / 9007199254740992.0));
        linalg::YieldOp::create(
            ob, loc, arith::MulFOp::create(ob, loc, f, scale).getResult());
      });
  bind(node, Tensor{generic.getResult(0), t, sizes});
}

void Evaluator::lowerRandperm(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Host &n = hostOf(in[0]);
  check(materialize(compare("ge", n, Host::constInt(0)), Host::Bool));
  ScalarType t = dtypeOr(in[1], ScalarType::Long);
  auto tt = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic},
                                        b.getI64Type());
  Value perm = staticify::mlir_dialect::RandPermOp::create(b, tt, index(n),
                                                           streamSeed());
  bind(node, converted(Tensor{perm, ScalarType::Long, {n}}, t));
}

std::pair<Tensor, Tensor> Evaluator::vectorTopk(Node *node, const Tensor &x,
                                                torch::jit::Value *dim,
                                                const Host &k, bool largest) {
  // f32 and f64 keys everywhere; i64 keys and rows of a matrix in CPU
  // kernels (the ukernel's radix order takes them; the GPU's is PyTorch's
  // topk, whose ties may come in another order).
  bool keys = x.dtype == ScalarType::Float || x.dtype == ScalarType::Double ||
              (x.dtype == ScalarType::Long && !cuda);
  if (!keys || x.rank() == 0 || x.rank() > (cuda ? 1 : 2))
    throw Unsupported(where(node) + ": of a " + dtypeName(x.dtype) +
                      " tensor of rank " + std::to_string(x.rank()) +
                      " (vectors, and matrices on the CPU)");
  int64_t d = normDim(constInt(dim, "a dimension"), x.rank());
  if (d != int64_t(x.rank()) - 1)
    throw Unsupported(where(node) + ": along other than the last dimension");
  const Host &n = x.sizes.back();
  check(materialize(compare("ge", k, Host::constInt(0)), Host::Bool));
  check(materialize(compare("le", k, n), Host::Bool));
  Type et = elementType(b.getContext(), x.dtype);
  auto vt = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, et);
  auto it = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic},
                                        b.getI64Type());
  Value kk = index(k);
  if (x.rank() == 1) {
    auto topk = staticify::mlir_dialect::TopKOp::create(
        b, vt, it, x.value, kk, b.getBoolAttr(largest));
    return {Tensor{topk.getValues(), x.dtype, {k}},
            Tensor{topk.getIndices(), ScalarType::Long, {k}}};
  }
  // Each row's top k, row by row.
  std::vector<Host> outSizes{x.sizes[0], k};
  Value nn = index(n), one = arith::ConstantIndexOp::create(b, 1);
  Value zero = arith::ConstantIndexOp::create(b, 0);
  auto loop = mlir::scf::ForOp::create(
      b, zero, index(x.sizes[0]), one,
      mlir::ValueRange{empty(outSizes, x.dtype),
                       empty(outSizes, ScalarType::Long)},
      [&](mlir::OpBuilder &ob, mlir::Location loc, Value r,
          mlir::ValueRange acc) {
        llvm::SmallVector<OpFoldResult> at{r, ob.getIndexAttr(0)},
            unit{ob.getIndexAttr(1), ob.getIndexAttr(1)};
        llvm::SmallVector<OpFoldResult> rowOf{ob.getIndexAttr(1), nn},
            topOf{ob.getIndexAttr(1), kk};
        Value row = tensor::ExtractSliceOp::create(ob, loc, vt, x.value, at,
                                                   rowOf, unit);
        auto topk = staticify::mlir_dialect::TopKOp::create(
            ob, loc, vt, it, row, kk, ob.getBoolAttr(largest));
        Value v = tensor::InsertSliceOp::create(ob, loc, topk.getValues(),
                                                acc[0], at, topOf, unit);
        Value i = tensor::InsertSliceOp::create(ob, loc, topk.getIndices(),
                                                acc[1], at, topOf, unit);
        mlir::scf::YieldOp::create(ob, loc, mlir::ValueRange{v, i});
      });
  return {Tensor{loop.getResult(0), x.dtype, outSizes},
          Tensor{loop.getResult(1), ScalarType::Long, outSizes}};
}

/// topk(x, k, dim, largest, sorted): always sorted (sorted=False allows any
/// order).
void Evaluator::lowerTopk(Node *node) {
  auto in = node->inputs();
  auto [values, indices] = vectorTopk(node, tensorOf(in[0]), in[2],
                                      hostOf(in[1]), *hostOf(in[3]).i);
  bind(node, values);
  bind(node, indices, 1);
}

/// sort(x, dim, descending) and sort(x, stable, dim, descending) along the
/// last dimension: the top-k of all the elements, NaN the largest, as
/// PyTorch orders them, and ties in index order (a stable sort's; PyTorch's
/// unstable sort leaves their order unspecified). In CPU kernels.
void Evaluator::lowerSort(Node *node) {
  auto in = node->inputs();
  bool stable = overloadOf(node) == "stable";
  const Tensor &x = tensorOf(in[0]);
  if (cuda)
    throw Unsupported(where(node) + ": in a GPU kernel");
  auto [values, indices] = vectorTopk(
      node, x, in[stable ? 2 : 1],
      x.rank() ? x.sizes.back() : Host::constInt(0), *hostOf(in[stable ? 3 : 2]).i);
  bind(node, values);
  bind(node, indices, 1);
}

void Evaluator::lowerCumsum(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  if (x.rank() != 1 || normDim(constInt(in[1], "cumsum's dimension"), 1) != 0)
    throw Unsupported(where(node) + ": cumsum other than of a vector");
  std::optional<ScalarType> dt = dtypeArg(in[2]);
  ScalarType acc = dt                    ? *dt
                   : isFloating(x.dtype) ? x.dtype
                                         : ScalarType::Long;
  // In the accumulation dtype, then the scan (staticify-lower-scans: a
  // serial loop on the CPU, a chunked scan on the GPU).
  Tensor wide = converted(x, acc);
  Value scanned = staticify::mlir_dialect::CumSumOp::create(
      b, wide.value.getType(), wide.value);
  bind(node, Tensor{scanned, acc, x.sizes});
}

void Evaluator::lowerScatter(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]), &idx = tensorOf(in[2]),
               &src = tensorOf(in[3]);
  if (x.rank() != 1 || idx.rank() != 1 || src.rank() != 1 ||
      normDim(constInt(in[1], "scatter's dimension"), 1) != 0 ||
      idx.dtype != ScalarType::Long)
    throw Unsupported(where(node) +
                      ": scatter other than of vectors along 0");
  if (src.dtype != x.dtype)
    throw Unsupported(where(node) +
                      ": scatter of another dtype raises in PyTorch");
  check(materialize(compare("le", idx.sizes[0], src.sizes[0]), Host::Bool));
  requireReadable(idx.sizes[0], x.sizes[0]);
  // Every index in range (a parallel reduction), then the writes in order
  // (staticify-lower-scatters: a serial loop on the CPU, two parallel
  // passes with the same result on the GPU).
  valueCheck(allInRange(idx, Host::constInt(0), x.sizes[0]));
  Value written = staticify::mlir_dialect::ScatterOp::create(
      b, x.value.getType(), x.value, idx.value, src.value);
  bind(node, Tensor{written, x.dtype, x.sizes});
}

Value Evaluator::allInRange(const Tensor &x, const Host &lo, const Host &hi) {
  Value lo64 = arith::IndexCastOp::create(b, b.getI64Type(), index(lo));
  Value hi64 = arith::IndexCastOp::create(b, b.getI64Type(), index(hi));
  Tensor in =
      elementwise({x}, ScalarType::Long, ScalarType::Bool,
                  [&](auto &ob, auto loc, auto xs) -> Value {
                    Value ge = arith::CmpIOp::create(
                        ob, loc, arith::CmpIPredicate::sge, xs[0], lo64);
                    Value lt = arith::CmpIOp::create(
                        ob, loc, arith::CmpIPredicate::slt, xs[0], hi64);
                    return arith::AndIOp::create(ob, loc, ge, lt);
                  });
  return allTrue(in);
}

Value Evaluator::allTrue(const Tensor &cond) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < cond.rank(); ++d)
    dims.push_back(d);
  Tensor all =
      reduce(cond, dims, false, ScalarType::Bool, Host::constBool(true),
             [](auto &ob, auto loc, Value a, Value e) -> Value {
               return arith::AndIOp::create(ob, loc, a, e);
             });
  return all.value;
}

Value Evaluator::valueStatus() {
  return elementwise({Tensor{allValueChecks(), ScalarType::Bool, {}}},
                     ScalarType::Bool, ScalarType::Long,
                     [](auto &ob, auto loc, auto xs) -> Value {
                       return arith::ExtUIOp::create(ob, loc, ob.getI64Type(),
                                                     xs[0]);
                     })
      .value;
}

void Evaluator::valueCheck(Value cond) {
  if (!mlir::isa<mlir::RankedTensorType>(cond.getType()))
    cond = tensor::FromElementsOp::create(
        b, mlir::RankedTensorType::get({}, b.getI1Type()),
        mlir::ValueRange{cond});
  valueChecks.back().push_back(cond);
}

Value Evaluator::allValueChecks() {
  const std::vector<Value> &conds = valueChecks.back();
  if (conds.empty())
    return arith::ConstantOp::create(
        b, mlir::DenseElementsAttr::get(
               mlir::RankedTensorType::get({}, b.getI1Type()), true));
  Tensor all{conds.front(), ScalarType::Bool, {}};
  for (size_t i = 1; i < conds.size(); ++i)
    all = elementwise({all, Tensor{conds[i], ScalarType::Bool, {}}},
                      ScalarType::Bool, ScalarType::Bool,
                      [](auto &ob, auto loc, auto xs) -> Value {
                        return arith::AndIOp::create(ob, loc, xs[0], xs[1]);
                      });
  return all.value;
}

Tensor Evaluator::gatherAlong(Node *node, const Tensor &x, int64_t dim,
                              const Tensor &idx) {
  if (idx.dtype != ScalarType::Long)
    throw Unsupported(where(node) +
                      ": gather by an index that is not int64 raises");
  if (idx.rank() != x.rank())
    throw Unsupported(where(node) +
                      ": gather by an index of another rank raises");
  // index.size(d) <= x.size(d) off dim; a read along an empty dim is unsafe.
  for (size_t d = 0; d < x.rank(); ++d)
    if (int64_t(d) != dim)
      check(materialize(compare("le", idx.sizes[d], x.sizes[d]), Host::Bool));
  requireReadable(numel(idx.sizes), x.sizes[dim]);
  valueCheck(allInRange(idx, Host::constInt(0), x.sizes[dim]));
  Value n64 =
      arith::IndexCastOp::create(b, b.getI64Type(), index(x.sizes[dim]));
  // One element per index element (elementwise over the index, whose loop
  // indices name the other coordinates).
  size_t rank = idx.rank();
  Value source = x.value;
  return elementwise({idx}, ScalarType::Long, x.dtype,
                     [&](auto &ob, auto loc, auto xs) -> Value {
                       Value i = clampIndex(ob, loc, xs[0], n64);
                       ::llvm::SmallVector<Value> at;
                       for (size_t d = 0; d < rank; ++d)
                         at.push_back(
                             int64_t(d) == dim
                                 ? i
                                 : Value(linalg::IndexOp::create(ob, loc, d)));
                       return tensor::ExtractOp::create(ob, loc, source, at);
                     });
}

} // namespace staticify::lower::bridge
