//===- EvalCore.cpp - host scalars, elementwise ops, reductions, shapes ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

std::vector<Sym> Evaluator::run(const torch::jit::Graph &graph,
                                const std::vector<Tensor> &inputs) {
  auto in = graph.inputs();
  size_t first = hasSelf ? 1 : 0;
  if (in.size() - first != inputs.size())
    throw Unsupported("the signature has " + std::to_string(inputs.size()) +
                      " inputs, the method " +
                      std::to_string(in.size() - first));
  for (size_t i = 0; i < inputs.size(); ++i)
    env[in[first + i]] = inputs[i];
  checks.emplace_back();
  valueChecks.emplace_back();
  // Read only: libtorch's Graph has no const accessors for its blocks.
  evalBlock(const_cast<torch::jit::Graph &>(graph).block());
  std::vector<Sym> out;
  for (const torch::jit::Value *v : graph.outputs())
    out.push_back(get(v));
  return out;
}

const Sym &Evaluator::get(const torch::jit::Value *v) {
  auto it = env.find(v);
  if (it == env.end())
    throw Unsupported("value %" + v->debugName() + " (" +
                      v->node()->kind().toQualString() +
                      ") is not supported by the bridge");
  return it->second;
}

Value Evaluator::materialize(const Host &h, Host::Kind as) {
  Value v = h.value;
  if (!v) {
    if (h.kind == Host::Float)
      v = arith::ConstantFloatOp::create(b, b.getF64Type(),
                                         llvm::APFloat(*h.f));
    else if (h.kind == Host::Bool)
      v = arith::ConstantIntOp::create(b, b.getI1Type(), *h.i);
    else
      v = arith::ConstantIndexOp::create(b, *h.i);
  }
  if (h.kind == as)
    return v;
  if (as == Host::Int && h.kind == Host::Bool)
    return arith::IndexCastUIOp::create(b, b.getIndexType(), v);
  if (as == Host::Float) {
    if (h.kind == Host::Int)
      v = arith::IndexCastOp::create(b, b.getI64Type(), v);
    return h.kind == Host::Bool
               ? Value(arith::UIToFPOp::create(b, b.getF64Type(), v))
               : Value(arith::SIToFPOp::create(b, b.getF64Type(), v));
  }
  throw Unsupported("a host scalar of an unexpected kind");
}

Host Evaluator::intOp(const std::string &op, const Host &x, const Host &y) {
  if (x.isConstant() && y.isConstant() && x.kind == Host::Int &&
      y.kind == Host::Int) {
    int64_t a = *x.i, c = *y.i;
    if (op == "add")
      return Host::constInt(a + c);
    if (op == "sub")
      return Host::constInt(a - c);
    if (op == "mul")
      return Host::constInt(a * c);
    if (op == "min")
      return Host::constInt(std::min(a, c));
    if (op == "max")
      return Host::constInt(std::max(a, c));
    if (op == "floordiv" && c != 0) {
      int64_t q = a / c;
      return Host::constInt((a % c != 0 && ((a < 0) != (c < 0))) ? q - 1 : q);
    }
  }
  Value a = index(x), c = index(y);
  if (op == "add")
    return dynamicInt(arith::AddIOp::create(b, a, c));
  if (op == "sub")
    return dynamicInt(arith::SubIOp::create(b, a, c));
  if (op == "mul")
    return dynamicInt(arith::MulIOp::create(b, a, c));
  if (op == "min")
    return dynamicInt(arith::MinSIOp::create(b, a, c));
  if (op == "max")
    return dynamicInt(arith::MaxSIOp::create(b, a, c));
  if (op == "floordiv") {
    check(arith::CmpIOp::create(b, arith::CmpIPredicate::ne, c,
                                arith::ConstantIndexOp::create(b, 0)));
    return dynamicInt(arith::FloorDivSIOp::create(b, a, c));
  }
  throw Unsupported("host integer op " + op);
}

Host Evaluator::compare(const std::string &op, const Host &x, const Host &y) {
  bool floats = x.kind == Host::Float || y.kind == Host::Float;
  if (x.isConstant() && y.isConstant()) {
    double a = x.f ? *x.f : double(*x.i), c = y.f ? *y.f : double(*y.i);
    bool r = op == "eq"   ? a == c
             : op == "ne" ? a != c
             : op == "lt" ? a < c
             : op == "le" ? a <= c
             : op == "gt" ? a > c
                          : a >= c;
    return Host::constBool(r);
  }
  auto [fp, ip] = *comparison(op);
  if (floats)
    return Host{Host::Bool,
                arith::CmpFOp::create(b, fp, materialize(x, Host::Float),
                                      materialize(y, Host::Float)),
                {},
                {}};
  return Host{
      Host::Bool, arith::CmpIOp::create(b, ip, index(x), index(y)), {}, {}};
}

Value Evaluator::conjunction(const std::vector<Value> &conds) {
  Value ok = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
  for (Value c : conds)
    ok = arith::AndIOp::create(b, ok, c);
  return ok;
}

void Evaluator::checkEqual(const Host &x, const Host &y) {
  Host eq = compare("eq", x, y);
  if (eq.isConstant()) {
    if (!*eq.i)
      throw Unsupported("sizes " + std::to_string(*x.i) + " and " +
                        std::to_string(*y.i) + " do not match");
    return;
  }
  check(eq.value);
}

Value Evaluator::convert(mlir::OpBuilder &ob, mlir::Location loc, Value v,
                         ScalarType from, ScalarType to) {
  if (from == to)
    return v;
  Type target = elementType(ob.getContext(), to);
  if (to == ScalarType::Bool) {
    if (isFloating(from)) {
      Value zero =
          arith::ConstantOp::create(ob, loc, ob.getFloatAttr(v.getType(), 0.0));
      return arith::CmpFOp::create(ob, loc, arith::CmpFPredicate::UNE, v, zero);
    }
    Value zero =
        arith::ConstantOp::create(ob, loc, ob.getIntegerAttr(v.getType(), 0));
    return arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ne, v, zero);
  }
  if (isFloating(from) && isFloating(to))
    return c10::elementSize(to) > c10::elementSize(from) ||
                   (from == ScalarType::Half && to == ScalarType::BFloat16)
               ? Value(arith::ExtFOp::create(ob, loc, target, v))
               : Value(arith::TruncFOp::create(ob, loc, target, v));
  if (isFloating(to))
    return from == ScalarType::Bool
               ? Value(arith::UIToFPOp::create(ob, loc, target, v))
               : Value(arith::SIToFPOp::create(ob, loc, target, v));
  if (isFloating(from))
    return arith::FPToSIOp::create(ob, loc, target, v);
  unsigned fw = v.getType().getIntOrFloatBitWidth(),
           tw = target.getIntOrFloatBitWidth();
  if (tw > fw)
    return from == ScalarType::Bool
               ? Value(arith::ExtUIOp::create(ob, loc, target, v))
               : Value(arith::ExtSIOp::create(ob, loc, target, v));
  return arith::TruncIOp::create(ob, loc, target, v);
}

Value Evaluator::hostElement(mlir::OpBuilder &ob, mlir::Location loc,
                             const Host &h, ScalarType to) {
  Type t = elementType(ob.getContext(), to);
  if (h.isConstant()) {
    if (isFloating(to))
      return arith::ConstantOp::create(
          ob, loc, ob.getFloatAttr(t, h.f ? *h.f : double(*h.i)));
    int64_t v = h.f ? int64_t(*h.f) : *h.i;
    if (to == ScalarType::Bool)
      v = h.f ? *h.f != 0 : v != 0;
    return arith::ConstantOp::create(ob, loc, ob.getIntegerAttr(t, v));
  }
  if (h.kind == Host::Float)
    return convert(ob, loc, h.value, ScalarType::Double, to);
  if (h.kind == Host::Bool)
    return convert(ob, loc, h.value, ScalarType::Bool, to);
  Value i64 = arith::IndexCastOp::create(ob, loc, ob.getI64Type(), h.value);
  return convert(ob, loc, i64, ScalarType::Long, to);
}

std::vector<OpFoldResult>
Evaluator::foldResults(const std::vector<Host> &sizes) {
  std::vector<OpFoldResult> out;
  for (const Host &s : sizes)
    out.push_back(s.isConstant() ? OpFoldResult(b.getIndexAttr(*s.i))
                                 : OpFoldResult(s.value));
  return out;
}

mlir::RankedTensorType Evaluator::tensorType(const std::vector<Host> &sizes,
                                             ScalarType dtype) {
  llvm::SmallVector<int64_t> shape;
  for (const Host &s : sizes)
    shape.push_back(s.isConstant() ? *s.i : mlir::ShapedType::kDynamic);
  return mlir::RankedTensorType::get(shape, elementType(b.getContext(), dtype));
}

Value Evaluator::empty(const std::vector<Host> &sizes, ScalarType dtype) {
  return tensor::EmptyOp::create(b, foldResults(sizes),
                                 elementType(b.getContext(), dtype));
}

Tensor Evaluator::filled(const std::vector<Host> &sizes, ScalarType dtype,
                         const Host &value) {
  Value init = empty(sizes, dtype);
  Value v = hostElement(b, b.getLoc(), value, dtype);
  Value out =
      linalg::FillOp::create(b, mlir::ValueRange{v}, mlir::ValueRange{init})
          .getResult(0);
  return {out, dtype, sizes};
}

std::vector<Host>
Evaluator::broadcastSizes(const std::vector<Operand> &operands) {
  size_t rank = 0;
  for (const Operand &o : operands)
    if (auto *t = std::get_if<Tensor>(&o))
      rank = std::max(rank, t->rank());
  std::vector<Host> out(rank, Host::constInt(1));
  std::vector<bool> chosen(rank, false);
  for (const Operand &o : operands) {
    auto *t = std::get_if<Tensor>(&o);
    if (!t)
      continue;
    for (size_t d = 0; d < t->rank(); ++d) {
      size_t j = rank - t->rank() + d;
      const Host &s = t->sizes[d];
      if (s.isConstant() && *s.i == 1)
        continue;
      if (!chosen[j]) {
        out[j] = s;
        chosen[j] = true;
      } else {
        checkEqual(out[j], s);
        if (!s.isConstant() && out[j].isConstant())
          continue;
        if (s.isConstant())
          out[j] = s;
      }
    }
  }
  return out;
}

Tensor Evaluator::elementwise(const std::vector<Operand> &operands,
                              ScalarType computeAs, ScalarType outDtype,
                              const Body &body) {
  std::vector<Host> out = broadcastSizes(operands);
  size_t rank = out.size();
  llvm::SmallVector<Value> inputs;
  llvm::SmallVector<mlir::AffineMap> maps;
  std::vector<int> slot; // operand -> input index, or -1 for a host scalar
  for (const Operand &o : operands) {
    auto *t = std::get_if<Tensor>(&o);
    if (!t) {
      slot.push_back(-1);
      continue;
    }
    llvm::SmallVector<mlir::AffineExpr> exprs;
    for (size_t d = 0; d < t->rank(); ++d) {
      size_t j = rank - t->rank() + d;
      bool broadcast = t->sizes[d].isConstant() && *t->sizes[d].i == 1 &&
                       !(out[j].isConstant() && *out[j].i == 1);
      exprs.push_back(broadcast ? b.getAffineConstantExpr(0)
                                : b.getAffineDimExpr(j));
    }
    maps.push_back(mlir::AffineMap::get(rank, 0, exprs, b.getContext()));
    slot.push_back(static_cast<int>(inputs.size()));
    inputs.push_back(t->value);
  }
  maps.push_back(b.getMultiDimIdentityMap(rank));
  Value init = empty(out, outDtype);
  llvm::SmallVector<mlir::utils::IteratorType> iters(
      rank, mlir::utils::IteratorType::parallel);
  // Host scalars become elements outside the body (values defined above
  // a linalg body are usable in it).
  std::vector<Value> hostValues;
  for (const Operand &o : operands)
    hostValues.push_back(
        std::holds_alternative<Host>(o)
            ? hostElement(b, b.getLoc(), std::get<Host>(o), computeAs)
            : Value());
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.getType()}, inputs, mlir::ValueRange{init}, maps,
      iters,
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        llvm::SmallVector<Value> xs;
        for (size_t k = 0; k < operands.size(); ++k) {
          if (slot[k] < 0)
            xs.push_back(hostValues[k]);
          else
            xs.push_back(convert(ob, loc, args[slot[k]],
                                 std::get<Tensor>(operands[k]).dtype,
                                 computeAs));
        }
        Value r = body(ob, loc, xs);
        linalg::YieldOp::create(ob, loc, r);
      });
  return {generic.getResult(0), outDtype, out};
}

Tensor Evaluator::reduce(
    const Tensor &x, std::vector<int64_t> dims, bool keepdim,
    ScalarType accDtype, const Host &identity,
    const std::function<Value(mlir::OpBuilder &, mlir::Location, Value, Value)>
        &combine) {
  size_t rank = x.rank();
  std::vector<bool> reduced(rank, dims.empty());
  for (int64_t d : dims)
    reduced[d] = true;
  std::vector<Host> outSizes, keptSizes;
  llvm::SmallVector<mlir::AffineExpr> outExprs;
  llvm::SmallVector<mlir::utils::IteratorType> iters;
  for (size_t d = 0; d < rank; ++d) {
    iters.push_back(reduced[d] ? mlir::utils::IteratorType::reduction
                               : mlir::utils::IteratorType::parallel);
    if (!reduced[d]) {
      outSizes.push_back(x.sizes[d]);
      outExprs.push_back(b.getAffineDimExpr(d));
    }
    keptSizes.push_back(reduced[d] ? Host::constInt(1) : x.sizes[d]);
  }
  Tensor init = filled(outSizes, accDtype, identity);
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.value.getType()}, mlir::ValueRange{x.value},
      mlir::ValueRange{init.value},
      llvm::ArrayRef<mlir::AffineMap>{
          b.getMultiDimIdentityMap(rank),
          mlir::AffineMap::get(rank, 0, outExprs, b.getContext())},
      iters,
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        Value e = convert(ob, loc, args[0], x.dtype, accDtype);
        linalg::YieldOp::create(ob, loc, combine(ob, loc, args[1], e));
      });
  // A float sum may be reassociated, as PyTorch's own vectorized and
  // cascaded sums are: LLVM then keeps several partial sums in vector
  // registers instead of one sequential chain (results differ within
  // summation-order rounding; the tests compare with that tolerance).
  generic.getRegion().walk([](arith::AddFOp add) {
    add.setFastmath(arith::FastMathFlags::reassoc);
  });
  Tensor out{generic.getResult(0), accDtype, outSizes};
  return keepdim ? reshape(out, keptSizes) : out;
}

Tensor Evaluator::reshape(const Tensor &x, const std::vector<Host> &sizes) {
  // Callers pass sizes with x's element count (view/reshape check it): a
  // vector stays the vector it is (no copy into a fresh buffer).
  if (sizes.size() == 1 && x.rank() == 1)
    return x;
  if (sizes.size() == x.rank()) {
    bool same = true;
    for (size_t d = 0; d < sizes.size(); ++d)
      same = same && sizes[d].isConstant() == x.sizes[d].isConstant() &&
             (sizes[d].isConstant() ? *sizes[d].i == *x.sizes[d].i
                                    : sizes[d].value == x.sizes[d].value);
    if (same)
      return x;
  }
  llvm::SmallVector<Value> elems;
  for (const Host &s : sizes)
    elems.push_back(index(s));
  auto shapeType =
      mlir::RankedTensorType::get({int64_t(sizes.size())}, b.getIndexType());
  Value shape = tensor::FromElementsOp::create(b, shapeType, elems);
  Value r =
      tensor::ReshapeOp::create(b, tensorType(sizes, x.dtype), x.value, shape);
  return {r, x.dtype, sizes};
}

Host Evaluator::numel(const std::vector<Host> &sizes) {
  Host n = Host::constInt(1);
  for (const Host &s : sizes)
    n = intOp("mul", n, s);
  return n;
}

int64_t Evaluator::normDim(int64_t d, size_t rank) {
  int64_t r = static_cast<int64_t>(std::max<size_t>(rank, 1));
  if (d < -r || d >= r)
    throw Unsupported("dimension " + std::to_string(d) + " out of range");
  return d < 0 ? d + r : d;
}

void Evaluator::evalBlock(Block *block) {
  for (Node *node : block->nodes()) {
    try {
      evalNode(node);
    } catch (const Unsupported &e) {
      // Every reason names the node it stopped at, once.
      std::string what = e.what(), at = where(node);
      if (what.rfind(node->kind().toQualString(), 0) == 0 ||
          node->blocks().size())
        throw;
      throw Unsupported(at + ": " + what);
    }
  }
}

std::vector<Sym> Evaluator::blockOutputs(Block *block) {
  std::vector<Sym> out;
  for (torch::jit::Value *v : block->outputs())
    out.push_back(get(v));
  return out;
}

std::pair<Tensor, Tensor> Evaluator::reduceWithIndex(const Tensor &x,
                                                     int64_t dim, bool keepdim,
                                                     bool max) {
  // An empty reduced dimension raises in PyTorch.
  check(
      materialize(compare("gt", x.sizes[dim], Host::constInt(0)), Host::Bool));
  size_t rank = x.rank();
  std::vector<Host> outSizes, keptSizes;
  ::llvm::SmallVector<mlir::AffineExpr> outExprs;
  ::llvm::SmallVector<mlir::utils::IteratorType> iters;
  for (size_t d = 0; d < rank; ++d) {
    bool reduced = int64_t(d) == dim;
    iters.push_back(reduced ? mlir::utils::IteratorType::reduction
                            : mlir::utils::IteratorType::parallel);
    if (!reduced) {
      outSizes.push_back(x.sizes[d]);
      outExprs.push_back(b.getAffineDimExpr(d));
    }
    keptSizes.push_back(reduced ? Host::constInt(1) : x.sizes[d]);
  }
  bool fl = isFloating(x.dtype);
  if (!fl && x.dtype != ScalarType::Long && x.dtype != ScalarType::Bool)
    throw Unsupported("max/min with indices of a narrow integer dtype");
  Host identity = extremeIdentity(x.dtype, max);
  Tensor values = filled(outSizes, x.dtype, identity);
  // -1: no element seen yet (the first always replaces it).
  Tensor indices = filled(outSizes, ScalarType::Long, Host::constInt(-1));
  auto outMap = mlir::AffineMap::get(rank, 0, outExprs, b.getContext());
  ScalarType dtype = x.dtype;
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{values.value.getType(), indices.value.getType()},
      mlir::ValueRange{x.value}, mlir::ValueRange{values.value, indices.value},
      ::llvm::ArrayRef<mlir::AffineMap>{b.getMultiDimIdentityMap(rank), outMap,
                                        outMap},
      iters,
      [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        Value e = args[0], acc = args[1], at = args[2];
        Value i = arith::IndexCastOp::create(
            ob, loc, ob.getI64Type(), linalg::IndexOp::create(ob, loc, dim));
        Value none = arith::CmpIOp::create(
            ob, loc, arith::CmpIPredicate::slt, at,
            arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0)));
        Value better;
        if (fl) {
          // Strictly better than a non-NaN, or the first NaN (which stays).
          Value strict = arith::CmpFOp::create(ob, loc,
                                               max ? arith::CmpFPredicate::OGT
                                                   : arith::CmpFPredicate::OLT,
                                               e, acc);
          Value eNan =
              arith::CmpFOp::create(ob, loc, arith::CmpFPredicate::UNO, e, e);
          Value accNan = arith::CmpFOp::create(
              ob, loc, arith::CmpFPredicate::UNO, acc, acc);
          Value one = arith::ConstantIntOp::create(ob, loc, ob.getI1Type(), 1);
          Value accNotNan = arith::XOrIOp::create(ob, loc, accNan, one);
          better = arith::AndIOp::create(
              ob, loc, arith::OrIOp::create(ob, loc, strict, eNan), accNotNan);
        } else {
          auto p = dtype == ScalarType::Bool
                       ? (max ? arith::CmpIPredicate::ugt
                              : arith::CmpIPredicate::ult)
                       : (max ? arith::CmpIPredicate::sgt
                              : arith::CmpIPredicate::slt);
          better = arith::CmpIOp::create(ob, loc, p, e, acc);
        }
        better = arith::OrIOp::create(ob, loc, better, none);
        Value v = arith::SelectOp::create(ob, loc, better, e, acc);
        Value j = arith::SelectOp::create(ob, loc, better, i, at);
        linalg::YieldOp::create(ob, loc, mlir::ValueRange{v, j});
      });
  Tensor v{generic.getResult(0), x.dtype, outSizes};
  Tensor ix{generic.getResult(1), ScalarType::Long, outSizes};
  if (keepdim)
    return {reshape(v, keptSizes), reshape(ix, keptSizes)};
  return {v, ix};
}

Tensor Evaluator::broadcastTo(const Tensor &x, const std::vector<Host> &sizes) {
  if (sizes.size() < x.rank())
    throw Unsupported("expanding to fewer dimensions");
  for (const Host &s : sizes)
    if (s.isConstant() && *s.i < 0)
      throw Unsupported("expand with a negative size");
  // The target as a tensor operand (its contents are never read).
  Tensor shape{empty(sizes, x.dtype), x.dtype, sizes};
  ScalarType t = x.dtype;
  return elementwise({x, shape}, t, t,
                     [](auto &, auto, auto xs) -> Value { return xs[0]; });
}

std::optional<std::pair<arith::CmpFPredicate, arith::CmpIPredicate>>
Evaluator::comparison(const std::string &op) {
  // Floats: ordered, except ne (NaN != x holds, as in PyTorch).
  static const std::map<std::string,
                        std::pair<arith::CmpFPredicate, arith::CmpIPredicate>>
      predicates = {
          {"eq", {arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq}},
          {"ne", {arith::CmpFPredicate::UNE, arith::CmpIPredicate::ne}},
          {"lt", {arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt}},
          {"le", {arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle}},
          {"gt", {arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt}},
          {"ge", {arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge}}};
  auto it = predicates.find(op);
  if (it == predicates.end())
    return std::nullopt;
  return it->second;
}

Host Evaluator::extremeIdentity(ScalarType dtype, bool max) {
  if (isFloating(dtype))
    return Host::constFloat(max ? -INFINITY : INFINITY);
  if (dtype == ScalarType::Bool)
    return Host::constBool(!max);
  return Host::constInt(max ? std::numeric_limits<int64_t>::min()
                            : std::numeric_limits<int64_t>::max());
}

} // namespace staticify::lower::bridge
