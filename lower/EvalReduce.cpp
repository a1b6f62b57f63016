//===- EvalReduce.cpp - reductions and their composites ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

std::vector<int64_t> Evaluator::reducedDims(Node *node, torch::jit::Value *v,
                                            const Tensor &x) {
  std::vector<int64_t> dims;
  if (v && !isNone(v)) {
    const Sym &s = get(v);
    if (auto *l = std::get_if<HostList>(&s)) {
      for (const Host &h : *l) {
        if (!h.isConstant())
          throw Unsupported(where(node) +
                            ": a reduced dimension not known when compiling");
        dims.push_back(normDim(*h.i, x.rank()));
      }
    } else {
      dims.push_back(normDim(constInt(v, "a dimension"), x.rank()));
    }
  }
  if (dims.empty())
    for (size_t d = 0; d < x.rank(); ++d)
      dims.push_back(d);
  return dims;
}

/// sum and mean, in full (x, dtype) or along dims (x, dims, keepdim,
/// dtype); count_nonzero(x) of a bool x is its sum.
void Evaluator::lowerSumMean(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  bool count = node->kind() == aten::count_nonzero;
  if (count && (!isNone(in[1]) || x.dtype != ScalarType::Bool))
    throw Unsupported(where(node) +
                      ": count_nonzero other than of a bool tensor in full");
  bool full = count || overloadOf(node).empty();
  std::vector<int64_t> dims = reducedDims(node, full ? nullptr : in[1], x);
  bool keepdim = !full && *hostOf(in[2]).i;
  std::optional<ScalarType> dtype;
  if (!count)
    dtype = dtypeArg(in[full ? 1 : 3]);
  ScalarType acc = dtype                 ? *dtype
                   : isFloating(x.dtype) ? x.dtype
                                         : ScalarType::Long;
  bool mean = node->kind() == aten::mean;
  if (mean && !isFloating(acc))
    throw Unsupported(where(node) +
                      ": mean of an integer tensor raises in PyTorch");
  bool fl = isFloating(acc);
  Tensor sum = reduce(
      x, dims, keepdim, acc, fl ? Host::constFloat(0) : Host::constInt(0),
      [fl](auto &ob, auto loc, Value a, Value e) -> Value {
        return fl ? Value(arith::AddFOp::create(ob, loc, a, e))
                  : Value(arith::AddIOp::create(ob, loc, a, e));
      });
  if (!mean)
    return bind(node, sum);
  Host n = Host::constInt(1);
  for (int64_t d : dims)
    n = intOp("mul", n, x.sizes[d]);
  bind(node, elementwise({sum, n}, acc, acc,
                         [](auto &ob, auto loc, auto xs) -> Value {
                           return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
                         }));
}

/// max(x) and min(x) in full, amax/amin along dims: PyTorch raises on an
/// empty reduction, so the shape function requires it non-empty.
void Evaluator::lowerExtremeReduce(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  bool full = k == aten::max || k == aten::min;
  std::vector<int64_t> dims = reducedDims(node, full ? nullptr : in[1], x);
  bool keepdim = !full && *hostOf(in[2]).i;
  bool max = k == aten::max || k == aten::amax;
  bool fl = isFloating(x.dtype);
  if (full)
    check(materialize(compare("gt", numel(x.sizes), Host::constInt(0)),
                      Host::Bool));
  else
    for (int64_t d : dims)
      if (!x.sizes[d].isConstant() || *x.sizes[d].i == 0)
        check(materialize(compare("gt", x.sizes[d], Host::constInt(0)),
                          Host::Bool));
  if (!fl && x.dtype != ScalarType::Bool && x.dtype != ScalarType::Long)
    throw Unsupported(where(node) + ": max/min of a narrow integer dtype");
  ScalarType t = x.dtype;
  bind(node, reduce(x, dims, keepdim, t, extremeIdentity(x.dtype, max),
                    [fl, max, t](auto &ob, auto loc, Value a, Value e) -> Value {
                      if (fl)
                        return max
                                   ? Value(arith::MaximumFOp::create(ob, loc, a, e))
                                   : Value(arith::MinimumFOp::create(ob, loc, a, e));
                      if (t == ScalarType::Bool)
                        return max ? Value(arith::OrIOp::create(ob, loc, a, e))
                                   : Value(arith::AndIOp::create(ob, loc, a, e));
                      return max ? Value(arith::MaxSIOp::create(ob, loc, a, e))
                                 : Value(arith::MinSIOp::create(ob, loc, a, e));
                    }));
}

/// any/all in full (x) or along one dim (x, dim, keepdim).
void Evaluator::lowerAnyAll(Node *node) {
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  bool full = overloadOf(node).empty();
  std::vector<int64_t> dims = reducedDims(node, full ? nullptr : in[1], x);
  bool keepdim = !full && *hostOf(in[2]).i;
  bool any = node->kind() == c10::aten::any;
  bind(node,
       reduce(x, dims, keepdim, ScalarType::Bool, Host::constBool(!any),
              [any](auto &ob, auto loc, Value a, Value e) -> Value {
                return any ? Value(arith::OrIOp::create(ob, loc, a, e))
                           : Value(arith::AndIOp::create(ob, loc, a, e));
              }));
}

void Evaluator::lowerMaxDim(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t d = normDim(constInt(in[1], "a dimension"), x.rank());
  auto [v, i] = reduceWithIndex(x, d, *hostOf(in[2]).i, k == aten::max);
  bind(node, v);
  bind(node, i, 1);
}

void Evaluator::lowerArgExtreme(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  Tensor x = tensorOf(in[0]);
  bool keepdim = *hostOf(in[2]).i;
  int64_t d = 0;
  if (isNone(in[1])) { // over all elements, flattened
    x = reshape(x, {numel(x.sizes)});
    keepdim = false;
  } else {
    d = normDim(constInt(in[1], "a dimension"), x.rank());
  }
  bind(node, reduceWithIndex(x, d, keepdim, k == aten::argmax).second);
}

void Evaluator::lowerSoftmax(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t d = normDim(constInt(in[1], "a dimension"), x.rank());
  std::optional<ScalarType> dt =
      dtypeArg(in[2]);
  ScalarType t = dt ? *dt : x.dtype;
  if (!isFloating(t))
    throw Unsupported(where(node) + ": softmax of an integer tensor raises");
  bind(node, softmax(x, d, t, k == aten::log_softmax));
}

void Evaluator::lowerOneHot(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t classes = constInt(in[1], "one_hot's num_classes");
  if (classes < 0)
    throw Unsupported(where(node) +
                      ": one_hot with num_classes from the data");
  if (x.dtype != ScalarType::Long)
    throw Unsupported(where(node) +
                      ": one_hot of a tensor that is not int64 raises");
  valueCheck(allInRange(x, Host::constInt(0), Host::constInt(classes)));
  std::vector<Host> sizes = x.sizes;
  sizes.push_back(Host::constInt(classes));
  Tensor grid{empty(sizes, ScalarType::Long), ScalarType::Long, sizes};
  std::vector<Host> kept = x.sizes;
  kept.push_back(Host::constInt(1));
  Tensor column = reshape(x, kept);
  size_t last = sizes.size() - 1;
  // out[..., c] = (x[...] == c)
  Value init = grid.value;
  ::llvm::SmallVector<mlir::AffineExpr> exprs;
  for (size_t j = 0; j < last; ++j)
    exprs.push_back(b.getAffineDimExpr(j));
  exprs.push_back(b.getAffineConstantExpr(0));
  size_t rank = sizes.size();
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.getType()}, mlir::ValueRange{column.value},
      mlir::ValueRange{init},
      ::llvm::ArrayRef<mlir::AffineMap>{
          mlir::AffineMap::get(rank, 0, exprs, b.getContext()),
          b.getMultiDimIdentityMap(rank)},
      ::llvm::SmallVector<mlir::utils::IteratorType>(
          rank, mlir::utils::IteratorType::parallel),
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        Value c = arith::IndexCastOp::create(
            ob, loc, ob.getI64Type(), linalg::IndexOp::create(ob, loc, last));
        Value eq = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::eq,
                                         args[0], c);
        linalg::YieldOp::create(
            ob, loc,
            arith::ExtUIOp::create(ob, loc, ob.getI64Type(), eq).getResult());
      });
  bind(node, Tensor{generic.getResult(0), ScalarType::Long, sizes});
}

void Evaluator::lowerNllLoss(Node *node) { bind(node, nllLoss(node)); }

Tensor Evaluator::softmax(const Tensor &x, int64_t d, ScalarType t, bool log) {
  ScalarType from = x.dtype;
  Tensor xt =
      from == t ? x : elementwise({x}, from, t, [](auto &, auto, auto xs) {
        return xs[0]; // converted to t on the way in
      });
  // max, x - max, exp, sum; then (x - max) - log(sum) or exp / sum. A row
  // of -inf gives NaN, as in PyTorch.
  Tensor m = reduce(xt, {d}, true, t, Host::constFloat(-INFINITY),
                    [](auto &ob, auto loc, Value a, Value e) -> Value {
                      return arith::MaximumFOp::create(ob, loc, a, e);
                    });
  Tensor shifted =
      elementwise({xt, m}, t, t, [](auto &ob, auto loc, auto xs) -> Value {
        return arith::SubFOp::create(ob, loc, xs[0], xs[1]);
      });
  Tensor e =
      elementwise({shifted}, t, t, [](auto &ob, auto loc, auto xs) -> Value {
        return math::ExpOp::create(ob, loc, xs[0]);
      });
  Tensor sum = reduce(e, {d}, true, t, Host::constFloat(0),
                      [](auto &ob, auto loc, Value a, Value v) -> Value {
                        return arith::AddFOp::create(ob, loc, a, v);
                      });
  if (log)
    return elementwise(
        {shifted, sum}, t, t, [](auto &ob, auto loc, auto xs) -> Value {
          return arith::SubFOp::create(ob, loc, xs[0],
                                       math::LogOp::create(ob, loc, xs[1]));
        });
  return elementwise({e, sum}, t, t, [](auto &ob, auto loc, auto xs) -> Value {
    return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
  });
}

Tensor Evaluator::nllLoss(Node *node) {
  auto in = node->inputs();
  bool crossEntropy =
      node->kind().toUnqualString() == std::string("cross_entropy_loss");
  Tensor x = tensorOf(in[0]);
  const Tensor &target = tensorOf(in[1]);
  if (!isNone(in[2]))
    throw Unsupported(where(node) + ": class weights");
  int64_t reduction = constInt(in[3], "the reduction");
  const Host &ignore = hostOf(in[4]);
  if (crossEntropy) {
    const Host &smoothing = hostOf(in[5]);
    if (!smoothing.isConstant() ||
        (smoothing.f ? *smoothing.f : double(*smoothing.i)) != 0)
      throw Unsupported(where(node) + ": label smoothing");
  }
  if (!isFloating(x.dtype) || target.dtype != ScalarType::Long)
    throw Unsupported(where(node) +
                      ": a loss of other than float scores and int64 classes");
  if (x.rank() < 1 || target.rank() + 1 != x.rank())
    throw Unsupported(where(node) + ": scores and targets of these ranks");
  int64_t c = x.rank() == 1 ? 0 : 1;
  for (size_t d = 0, j = 0; d < x.rank(); ++d)
    if (int64_t(d) != c)
      checkEqual(x.sizes[d], target.sizes[j++]);
  ScalarType t = x.dtype;
  Tensor logp = crossEntropy ? softmax(x, c, t, /*log=*/true) : x;
  const Host &classes = x.sizes[c];
  // A target is a class or ignore_index; anything else raises in PyTorch.
  Value ignore64 = arith::IndexCastOp::create(b, b.getI64Type(), index(ignore));
  Value classes64 =
      arith::IndexCastOp::create(b, b.getI64Type(), index(classes));
  Tensor valid = elementwise(
      {target}, ScalarType::Long, ScalarType::Bool,
      [&](auto &ob, auto loc, auto xs) -> Value {
        Value zero =
            arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
        Value isClass = arith::AndIOp::create(
            ob, loc,
            arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::sge, xs[0],
                                  zero),
            arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt, xs[0],
                                  classes64));
        Value ignored = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::eq,
                                              xs[0], ignore64);
        return arith::OrIOp::create(ob, loc, isClass, ignored);
      });
  valueCheck(allTrue(valid));
  // A read along an empty class dimension is unsafe (and raises).
  requireReadable(numel(target.sizes), classes);
  size_t rank = target.rank();
  Value source = logp.value;
  Tensor losses = elementwise(
      {target}, ScalarType::Long, t, [&](auto &ob, auto loc, auto xs) -> Value {
        Value kept = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ne,
                                           xs[0], ignore64);
        Value cls = clampIndex(ob, loc, xs[0], classes64);
        ::llvm::SmallVector<Value> at;
        for (size_t d = 0, j = 0; d < rank + 1; ++d)
          at.push_back(int64_t(d) == c
                           ? cls
                           : Value(linalg::IndexOp::create(ob, loc, j++)));
        Value v = tensor::ExtractOp::create(ob, loc, source, at);
        Value zero = arith::ConstantOp::create(
            ob, loc, ob.getFloatAttr(v.getType(), 0.0));
        return arith::SelectOp::create(ob, loc, kept,
                                       arith::NegFOp::create(ob, loc, v), zero);
      });
  std::vector<int64_t> all;
  for (size_t d = 0; d < target.rank(); ++d)
    all.push_back(d);
  if (reduction == 0)
    return losses;
  auto add = [](auto &ob, auto loc, Value a, Value e) -> Value {
    return arith::AddFOp::create(ob, loc, a, e);
  };
  Tensor sum = reduce(losses, all, false, t, Host::constFloat(0), add);
  if (reduction == 2)
    return sum;
  if (reduction != 1)
    throw Unsupported(where(node) + ": reduction mode " +
                      std::to_string(reduction));
  // The mean over the targets kept (0/0: NaN, as in PyTorch).
  Tensor kept = elementwise(
      {target}, ScalarType::Long, t, [&](auto &ob, auto loc, auto xs) -> Value {
        Value k = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ne,
                                        xs[0], ignore64);
        Type ft = elementType(ob.getContext(), t);
        return arith::UIToFPOp::create(ob, loc, ft, k);
      });
  Tensor count = reduce(kept, all, false, t, Host::constFloat(0), add);
  return elementwise({sum, count}, t, t,
                     [](auto &ob, auto loc, auto xs) -> Value {
                       return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
                     });
}

/// linear(x, w, b) = x[..., k] w[o, k] summed over k, plus b[o]: one
/// contraction over the rows of x (its leading dimensions flattened), the
/// sum started from the bias.
void Evaluator::lowerLinear(Node *node) {
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]), &w = tensorOf(in[1]);
  if ((x.dtype != ScalarType::Float && x.dtype != ScalarType::Double) ||
      w.dtype != x.dtype || w.rank() != 2 || x.rank() == 0)
    throw Unsupported(where(node) +
                      ": linear other than of f32 or f64 with a 2-D weight");
  checkEqual(x.sizes.back(), w.sizes[1]);
  std::vector<Host> lead(x.sizes.begin(), x.sizes.end() - 1);
  Host rows = numel(lead);
  Tensor x2 = reshape(x, {rows, x.sizes.back()});
  std::vector<Host> outSizes{rows, w.sizes[0]};
  Tensor acc = filled(outSizes, x.dtype, Host::constFloat(0));
  if (!isNone(in[2])) {
    const Tensor &bias = tensorOf(in[2]);
    if (bias.dtype != x.dtype || bias.rank() > 1)
      throw Unsupported(where(node) + ": a bias of another dtype or rank");
    acc = broadcastTo(bias, outSizes);
  }
  auto map = [&](std::initializer_list<unsigned> dims) {
    llvm::SmallVector<mlir::AffineExpr> exprs;
    for (unsigned d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return mlir::AffineMap::get(3, 0, exprs, b.getContext());
  };
  // (n, o, k): out[n, o] += x[n, k] * w[o, k].
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{acc.value.getType()}, mlir::ValueRange{x2.value, w.value},
      mlir::ValueRange{acc.value},
      llvm::ArrayRef<mlir::AffineMap>{map({0, 2}), map({1, 2}), map({0, 1})},
      llvm::ArrayRef<mlir::utils::IteratorType>{
          mlir::utils::IteratorType::parallel,
          mlir::utils::IteratorType::parallel,
          mlir::utils::IteratorType::reduction},
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        Value p = arith::MulFOp::create(ob, loc, args[0], args[1]);
        auto sum = arith::AddFOp::create(ob, loc, args[2], p);
        sum.setFastmath(arith::FastMathFlags::reassoc);
        linalg::YieldOp::create(ob, loc, sum.getResult());
      });
  lead.push_back(w.sizes[0]);
  bind(node, reshape(Tensor{generic.getResult(0), x.dtype, outSizes}, lead));
}

/// layer_norm(x, shape, weight, bias, eps): over the last len(shape)
/// dimensions, (x - mean) / sqrt(var + eps) (the biased variance), then
/// times weight plus bias.
void Evaluator::lowerLayerNorm(Node *node) {
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  const HostList &shape = as<HostList>(in[1], "a normalized shape");
  if (!isFloating(x.dtype) || shape.empty() || shape.size() > x.rank())
    throw Unsupported(where(node) + ": layer_norm other than of floats");
  ScalarType t = x.dtype;
  std::vector<int64_t> dims;
  Host n = Host::constInt(1);
  for (size_t j = 0; j < shape.size(); ++j) {
    int64_t d = x.rank() - shape.size() + j;
    checkEqual(x.sizes[d], shape[j]);
    dims.push_back(d);
    n = intOp("mul", n, x.sizes[d]);
  }
  auto add = [](auto &ob, auto loc, Value a, Value e) -> Value {
    return arith::AddFOp::create(ob, loc, a, e);
  };
  auto divide = [](auto &ob, auto loc, auto xs) -> Value {
    return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
  };
  Tensor mean = elementwise(
      {reduce(x, dims, true, t, Host::constFloat(0), add), n}, t, t, divide);
  Tensor centered = elementwise({x, mean}, t, t, [](auto &ob, auto loc, auto xs) {
    return arith::SubFOp::create(ob, loc, xs[0], xs[1]).getResult();
  });
  Tensor squares = elementwise({centered}, t, t, [](auto &ob, auto loc, auto xs) {
    return arith::MulFOp::create(ob, loc, xs[0], xs[0]).getResult();
  });
  Tensor var = elementwise(
      {reduce(squares, dims, true, t, Host::constFloat(0), add), n}, t, t,
      divide);
  Tensor y = elementwise(
      {centered, var, hostOf(in[4])}, t, t,
      [](auto &ob, auto loc, auto xs) -> Value {
        Value v = arith::AddFOp::create(ob, loc, xs[1], xs[2]);
        return arith::MulFOp::create(ob, loc, xs[0],
                                     math::RsqrtOp::create(ob, loc, v));
      });
  for (int arg : {2, 3}) {
    if (isNone(in[arg]))
      continue;
    bool scale = arg == 2;
    y = elementwise({y, tensorOf(in[arg])}, t, t,
                    [scale](auto &ob, auto loc, auto xs) -> Value {
                      if (scale)
                        return arith::MulFOp::create(ob, loc, xs[0], xs[1]);
                      return arith::AddFOp::create(ob, loc, xs[0], xs[1]);
                    });
  }
  bind(node, y);
}

/// binary_cross_entropy_with_logits(x, t) without weights: PyTorch's
/// stable form (1 - t) x + m + log(exp(-m) + exp(-x - m)), m = max(-x, 0);
/// each, their mean or their sum.
void Evaluator::lowerBceWithLogits(Node *node) {
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]), &t = tensorOf(in[1]);
  if (!isNone(in[2]) || !isNone(in[3]))
    throw Unsupported(where(node) + ": with weights");
  if (!isFloating(x.dtype) || t.dtype != x.dtype)
    throw Unsupported(where(node) + ": of other than floats of one dtype");
  int64_t reduction = constInt(in[4], "the reduction");
  ScalarType dt = x.dtype;
  Tensor losses = elementwise(
      {x, t}, dt, dt, [](auto &ob, auto loc, auto xs) -> Value {
        Value zero = arith::ConstantOp::create(
            ob, loc, ob.getFloatAttr(xs[0].getType(), 0.0));
        Value one = arith::ConstantOp::create(
            ob, loc, ob.getFloatAttr(xs[0].getType(), 1.0));
        Value negX = arith::NegFOp::create(ob, loc, xs[0]);
        Value m = arith::MaximumFOp::create(ob, loc, negX, zero);
        Value e1 = math::ExpOp::create(ob, loc,
                                       arith::NegFOp::create(ob, loc, m));
        Value e2 = math::ExpOp::create(
            ob, loc, arith::SubFOp::create(ob, loc, negX, m));
        Value log = math::LogOp::create(
            ob, loc, arith::AddFOp::create(ob, loc, e1, e2));
        Value linear = arith::MulFOp::create(
            ob, loc, arith::SubFOp::create(ob, loc, one, xs[1]), xs[0]);
        return arith::AddFOp::create(
            ob, loc, arith::AddFOp::create(ob, loc, linear, m), log);
      });
  if (reduction == 0)
    return bind(node, losses);
  if (reduction != 1 && reduction != 2)
    throw Unsupported(where(node) + ": an unknown reduction");
  std::vector<int64_t> all;
  for (size_t d = 0; d < losses.rank(); ++d)
    all.push_back(d);
  Tensor sum = reduce(losses, all, false, dt, Host::constFloat(0),
                      [](auto &ob, auto loc, Value a, Value e) -> Value {
                        return arith::AddFOp::create(ob, loc, a, e);
                      });
  if (reduction == 2)
    return bind(node, sum);
  bind(node, elementwise({sum, numel(losses.sizes)}, dt, dt,
                         [](auto &ob, auto loc, auto xs) -> Value {
                           return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
                         }));
}

/// dropout(x, p, train) in evaluation: x.
void Evaluator::lowerDropout(Node *node) {
  const Host &train = hostOf(node->input(2));
  if (!train.isConstant() || *train.i)
    throw Unsupported(where(node) + ": dropout while training");
  bind(node, tensorOf(node->input(0)));
}

} // namespace staticify::lower::bridge
