//===- EvalShapes.cpp - views, concatenation and factories ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

void Evaluator::lowerView(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  HostList sizes = as<HostList>(in[1], "a list of sizes");
  int inferred = -1;
  Host known = Host::constInt(1);
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d].isConstant() && *sizes[d].i == -1) {
      if (inferred >= 0)
        throw Unsupported(where(node) + ": two inferred sizes");
      inferred = static_cast<int>(d);
    } else {
      if (sizes[d].isConstant() && *sizes[d].i < 0)
        throw Unsupported(where(node) + ": a negative size");
      known = intOp("mul", known, sizes[d]);
    }
  }
  Host total = numel(x.sizes);
  if (inferred >= 0) {
    // numel must be a multiple of the others (and the others non-zero).
    check(materialize(compare("ne", known, Host::constInt(0)), Host::Bool));
    sizes[inferred] = intOp("floordiv", total, known);
    known = intOp("mul", known, sizes[inferred]);
  }
  checkEqual(known, total);
  return bind(node, reshape(x, sizes));
}

void Evaluator::lowerFlatten(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t r = x.rank();
  int64_t lo = normDim(constInt(in[1], "start_dim"), r),
          hi = normDim(constInt(in[2], "end_dim"), r);
  std::vector<Host> sizes(x.sizes.begin(), x.sizes.begin() + lo);
  Host n = Host::constInt(1);
  for (int64_t d = lo; d <= hi && d < r; ++d)
    n = intOp("mul", n, x.sizes[d]);
  sizes.push_back(n);
  for (int64_t d = hi + 1; d < r; ++d)
    sizes.push_back(x.sizes[d]);
  return bind(node, reshape(x, sizes));
}

void Evaluator::lowerUnsqueeze(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t d = normDim(constInt(in[1], "a dimension"), x.rank() + 1);
  std::vector<Host> sizes = x.sizes;
  sizes.insert(sizes.begin() + d, Host::constInt(1));
  return bind(node, reshape(x, sizes));
}

void Evaluator::lowerSqueeze(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  // squeeze(x, d) drops d only where its size is 1: the rank must be
  // known, so the shape function requires that size to be 1.
  const Tensor &x = tensorOf(in[0]);
  if (x.rank() == 0)
    return bind(node, x);
  int64_t d = normDim(constInt(in[1], "squeeze's dimension"), x.rank());
  const Host &s = x.sizes[d];
  if (s.isConstant() && *s.i != 1)
    return bind(node, x);
  checkEqual(s, Host::constInt(1));
  std::vector<Host> sizes = x.sizes;
  sizes.erase(sizes.begin() + d);
  bind(node, reshape(x, sizes));
}

void Evaluator::lowerSlice(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t d = normDim(constInt(in[1], "a slice's dimension"), x.rank());
  if (constInt(in[4], "a slice step") != 1)
    throw Unsupported(where(node) + ": a slice step other than 1");
  const Host &n = x.sizes[d];
  // Python's bounds: negative from the end, clamped to [0, n].
  auto clampBound = [&](torch::jit::Value *v, const Host &dflt) -> Host {
    if (isNone(v))
      return dflt;
    const Host &h = hostOf(v);
    if (h.isConstant() && *h.i >= 0)
      return intOp("min", h, n);
    if (h.isConstant())
      return intOp("max", intOp("add", h, n), Host::constInt(0));
    Value neg = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, h.value,
                                      arith::ConstantIndexOp::create(b, 0));
    Value wrapped = arith::AddIOp::create(b, h.value, index(n));
    Value v2 = arith::SelectOp::create(b, neg, wrapped, h.value);
    return intOp("min", intOp("max", dynamicInt(v2), Host::constInt(0)), n);
  };
  Host lo = clampBound(in[2], Host::constInt(0)), hi = clampBound(in[3], n);
  Host len = intOp("max", intOp("sub", hi, lo), Host::constInt(0));
  bindSlice(node, x, d, lo, len);
}

void Evaluator::lowerNarrow(Node *node) {
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t d = normDim(constInt(in[1], "narrow's dimension"), x.rank());
  // narrow raises for a range out of bounds: its start (negative from the
  // end) and length are exact.
  const Host &start = hostOf(in[2]);
  if (!start.isConstant())
    throw Unsupported(where(node) + ": narrow from a start computed at run time");
  Host lo = *start.i >= 0 ? start
                          : intOp("add", start, x.sizes[d]);
  bindSlice(node, x, d, lo, hostOf(in[3]));
}

void Evaluator::bindSlice(Node *node, const Tensor &x, int64_t d, const Host &lo,
                          const Host &len) {
  std::vector<OpFoldResult> offsets, sizes, strides;
  std::vector<Host> outSizes = x.sizes;
  outSizes[d] = len;
  for (size_t j = 0; j < x.rank(); ++j) {
    offsets.push_back(j == size_t(d) ? foldResults({lo})[0]
                                     : OpFoldResult(b.getIndexAttr(0)));
    sizes.push_back(foldResults({outSizes[j]})[0]);
    strides.push_back(b.getIndexAttr(1));
  }
  Value r = tensor::ExtractSliceOp::create(b, tensorType(outSizes, x.dtype),
                                           x.value, offsets, sizes, strides);
  return bind(node, Tensor{r, x.dtype, outSizes});
}

void Evaluator::lowerSelect(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  int64_t d = normDim(constInt(in[1], "select's dimension"), x.rank());
  const Host &n = x.sizes[d];
  Host i = hostOf(in[2]);
  // -n <= i < n, as PyTorch requires; negative from the end.
  check(materialize(compare("lt", i, n), Host::Bool));
  check(materialize(compare("ge", i, intOp("sub", Host::constInt(0), n)),
                    Host::Bool));
  Host at = i;
  if (i.isConstant() && *i.i < 0) {
    at = intOp("add", i, n);
  } else if (!i.isConstant()) {
    Value neg = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, i.value,
                                      arith::ConstantIndexOp::create(b, 0));
    at = dynamicInt(arith::SelectOp::create(
        b, neg, arith::AddIOp::create(b, i.value, index(n)), i.value));
  }
  std::vector<OpFoldResult> offsets, sizes, strides;
  std::vector<Host> outSizes;
  for (size_t j = 0; j < x.rank(); ++j) {
    bool picked = int64_t(j) == d;
    offsets.push_back(picked ? foldResults({at})[0]
                             : OpFoldResult(b.getIndexAttr(0)));
    sizes.push_back(picked ? OpFoldResult(b.getIndexAttr(1))
                           : foldResults({x.sizes[j]})[0]);
    strides.push_back(b.getIndexAttr(1));
    if (!picked)
      outSizes.push_back(x.sizes[j]);
  }
  Value r = tensor::ExtractSliceOp::create(b, tensorType(outSizes, x.dtype),
                                           x.value, offsets, sizes, strides);
  bind(node, Tensor{r, x.dtype, outSizes});
}

void Evaluator::lowerCat(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const TensorList &xs = as<TensorList>(in[0], "a list of tensors");
  if (xs.empty())
    throw Unsupported(where(node) + ": cat of no tensors raises");
  const Tensor &first = xs[0];
  int64_t d = normDim(constInt(in[1], "cat's dimension"), first.rank());
  std::vector<Host> outSizes = first.sizes;
  outSizes[d] = Host::constInt(0);
  for (const Tensor &t : xs) {
    if (t.dtype != first.dtype || t.rank() != first.rank())
      throw Unsupported(where(node) +
                        ": cat of tensors of different dtypes or ranks");
    for (size_t j = 0; j < t.rank(); ++j)
      if (j != size_t(d))
        checkEqual(first.sizes[j], t.sizes[j]);
    outSizes[d] = intOp("add", outSizes[d], t.sizes[d]);
  }
  Value acc = empty(outSizes, first.dtype);
  Host offset = Host::constInt(0);
  for (const Tensor &t : xs) {
    std::vector<OpFoldResult> offsets, sizes, strides;
    for (size_t j = 0; j < t.rank(); ++j) {
      offsets.push_back(j == size_t(d) ? foldResults({offset})[0]
                                       : OpFoldResult(b.getIndexAttr(0)));
      sizes.push_back(foldResults({t.sizes[j]})[0]);
      strides.push_back(b.getIndexAttr(1));
    }
    acc = tensor::InsertSliceOp::create(b, t.value, acc, offsets, sizes,
                                        strides);
    offset = intOp("add", offset, t.sizes[d]);
  }
  return bind(node, Tensor{acc, first.dtype, outSizes});
}

void Evaluator::lowerStack(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const TensorList &xs = as<TensorList>(in[0], "a list of tensors");
  if (xs.empty())
    throw Unsupported(where(node) + ": stack of no tensors raises");
  int64_t d = normDim(constInt(in[1], "stack's dimension"), xs[0].rank() + 1);
  // stack = cat of each with a new dimension of size 1 at d.
  TensorList parts;
  for (const Tensor &t : xs) {
    if (t.dtype != xs[0].dtype || t.rank() != xs[0].rank())
      throw Unsupported(where(node) +
                        ": stack of tensors of different dtypes or ranks");
    for (size_t j = 0; j < t.rank(); ++j)
      checkEqual(xs[0].sizes[j], t.sizes[j]);
    std::vector<Host> s = t.sizes;
    s.insert(s.begin() + d, Host::constInt(1));
    parts.push_back(reshape(t, s));
  }
  std::vector<Host> outSizes = parts[0].sizes;
  outSizes[d] = Host::constInt(static_cast<int64_t>(parts.size()));
  Value acc = empty(outSizes, xs[0].dtype);
  for (size_t p = 0; p < parts.size(); ++p) {
    std::vector<OpFoldResult> offsets, sizes, strides;
    for (size_t j = 0; j < outSizes.size(); ++j) {
      offsets.push_back(b.getIndexAttr(int64_t(j) == d ? int64_t(p) : 0));
      sizes.push_back(foldResults({parts[p].sizes[j]})[0]);
      strides.push_back(b.getIndexAttr(1));
    }
    acc = tensor::InsertSliceOp::create(b, parts[p].value, acc, offsets,
                                        sizes, strides);
  }
  bind(node, Tensor{acc, xs[0].dtype, outSizes});
}

void Evaluator::lowerExpand(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  std::vector<Host> sizes = k == aten::expand_as
                                ? tensorOf(in[1]).sizes
                                : as<HostList>(in[1], "a list of sizes");
  if (sizes.size() < x.rank())
    throw Unsupported(where(node) + ": expanding to fewer dimensions raises");
  // expand(-1) keeps the input's size there.
  size_t lead = sizes.size() - x.rank();
  for (size_t j = lead; j < sizes.size(); ++j)
    if (sizes[j].isConstant() && *sizes[j].i == -1)
      sizes[j] = x.sizes[j - lead];
  bind(node, broadcastTo(x, sizes));
}

void Evaluator::lowerBroadcastTensors(Node *node) {
  const TensorList &xs = as<TensorList>(node->input(0), "a list of tensors");
  std::vector<Host> sizes =
      broadcastSizes(std::vector<Operand>(xs.begin(), xs.end()));
  TensorList out;
  for (const Tensor &x : xs)
    out.push_back(broadcastTo(x, sizes));
  bind(node, out);
}

void Evaluator::lowerFilled(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const HostList &sizes = as<HostList>(in[0], "a list of sizes");
  ScalarType t = dtypeOr(in[1], ScalarType::Float);
  // empty() may hold anything: zeros are one such content.
  return bind(node, filled(sizes, t, Host::constInt(k == aten::ones ? 1 : 0)));
}

void Evaluator::lowerFull(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const HostList &sizes = as<HostList>(in[0], "a list of sizes");
  const Host &v = hostOf(in[1]);
  ScalarType dflt = v.kind == Host::Float  ? ScalarType::Float
                    : v.kind == Host::Bool ? ScalarType::Bool
                                           : ScalarType::Long;
  return bind(node, filled(sizes, dtypeOr(in[2], dflt), v));
}

void Evaluator::lowerFilledLike(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  bool full = k == aten::full_like;
  Host v =
      full ? hostOf(in[1]) : Host::constInt(k == aten::ones_like ? 1 : 0);
  return bind(node, filled(x.sizes, dtypeOr(in[full ? 2 : 1], x.dtype), v));
}

void Evaluator::lowerNewFilled(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  const HostList &sizes = as<HostList>(in[1], "a list of sizes");
  return bind(node, filled(sizes, dtypeOr(in[2], x.dtype),
                    Host::constInt(k == aten::new_ones ? 1 : 0)));
}

void Evaluator::lowerScalarTensor(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Host &v = hostOf(in[0]);
  return bind(node, filled({}, dtypeOr(in[1], ScalarType::Float), v));
}

/// torch.tensor(v) of a host scalar: a 0-d tensor, f32 for a float, i64
/// for an int, bool for a bool, unless dtype says.
void Evaluator::lowerTensorOfScalar(Node *node) {
  auto in = node->inputs();
  const Host &v = hostOf(in[0]);
  const Host &grad = hostOf(in[3]);
  if (!grad.isConstant() || *grad.i)
    throw Unsupported(where(node) + ": a tensor that requires grad");
  ScalarType dflt = v.kind == Host::Float  ? ScalarType::Float
                    : v.kind == Host::Bool ? ScalarType::Bool
                                           : ScalarType::Long;
  bind(node, filled({}, dtypeOr(in[1], dflt), v));
}

void Evaluator::lowerArange(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Host &end = hostOf(in[0]);
  if (end.kind != Host::Int)
    throw Unsupported(where(node) + ": arange of a float end");
  ScalarType t = dtypeOr(in[1], ScalarType::Long);
  Host n = intOp("max", end, Host::constInt(0));
  Value init = empty({n}, t);
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.getType()}, mlir::ValueRange{},
      mlir::ValueRange{init},
      ::llvm::ArrayRef<mlir::AffineMap>{b.getMultiDimIdentityMap(1)},
      ::llvm::ArrayRef<mlir::utils::IteratorType>{
          mlir::utils::IteratorType::parallel},
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange) {
        Value i = linalg::IndexOp::create(ob, loc, 0);
        Value i64 = arith::IndexCastOp::create(ob, loc, ob.getI64Type(), i);
        linalg::YieldOp::create(ob, loc,
                                convert(ob, loc, i64, ScalarType::Long, t));
      });
  return bind(node, Tensor{generic.getResult(0), t, {n}});
}

void Evaluator::lowerNewFull(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  bind(node, filled(as<HostList>(in[1], "a list of sizes"),
                               dtypeOr(in[3], x.dtype), hostOf(in[2])));
}

} // namespace staticify::lower::bridge
