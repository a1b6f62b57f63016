//===- EvalTensor.cpp - metadata, elementwise ops and casts ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

void Evaluator::lowerSize(Node *node) {
  const Tensor &x = tensorOf(node->input(0));
  if (node->inputs().size() == 1)
    return bind(node, HostList(x.sizes));
  bind(node, x.sizes.at(normDim(constInt(node->input(1), "a size's dimension"),
                                x.rank())));
}

void Evaluator::lowerDim(Node *node) {
  bind(node, Host::constInt(tensorOf(node->input(0)).rank()));
}

void Evaluator::lowerNumel(Node *node) {
  bind(node, numel(tensorOf(node->input(0)).sizes));
}

void Evaluator::lowerDType(Node *node) {
  bind(node,
       Host::constInt(static_cast<int64_t>(tensorOf(node->input(0)).dtype)));
}

void Evaluator::lowerIsFloatingPoint(Node *node) {
  bind(node, Host::constBool(isFloating(tensorOf(node->input(0)).dtype)));
}

Tensor Evaluator::converted(const Tensor &x, ScalarType to) {
  if (x.dtype == to)
    return x;
  ScalarType from = x.dtype;
  return elementwise({x}, from, to, [from, to, this](auto &ob, auto loc, auto xs) {
    return convert(ob, loc, xs[0], from, to);
  });
}

/// Unary elementwise ops on floating tensors (an integer input is
/// converted to the default float dtype, as PyTorch does).
static const std::map<
    std::string, std::function<Value(mlir::OpBuilder &, mlir::Location, Value)>>
    &floatUnaries() {
  static const std::map<
      std::string,
      std::function<Value(mlir::OpBuilder &, mlir::Location, Value)>>
      ops = {
          {"exp", [](auto &ob, auto loc,
                     Value x) { return math::ExpOp::create(ob, loc, x); }},
          {"log", [](auto &ob, auto loc,
                     Value x) { return math::LogOp::create(ob, loc, x); }},
          {"log1p", [](auto &ob, auto loc,
                       Value x) { return math::Log1pOp::create(ob, loc, x); }},
          {"expm1", [](auto &ob, auto loc,
                       Value x) { return math::ExpM1Op::create(ob, loc, x); }},
          {"sqrt", [](auto &ob, auto loc,
                      Value x) { return math::SqrtOp::create(ob, loc, x); }},
          {"rsqrt", [](auto &ob, auto loc,
                       Value x) { return math::RsqrtOp::create(ob, loc, x); }},
          {"tanh", [](auto &ob, auto loc,
                      Value x) { return math::TanhOp::create(ob, loc, x); }},
          {"sin", [](auto &ob, auto loc,
                     Value x) { return math::SinOp::create(ob, loc, x); }},
          {"cos", [](auto &ob, auto loc,
                     Value x) { return math::CosOp::create(ob, loc, x); }},
          {"sigmoid",
           [](auto &ob, auto loc, Value x) {
             Value one = arith::ConstantOp::create(
                 ob, loc, ob.getFloatAttr(x.getType(), 1.0));
             Value e = math::ExpOp::create(ob, loc,
                                           arith::NegFOp::create(ob, loc, x));
             return arith::DivFOp::create(
                 ob, loc, one, arith::AddFOp::create(ob, loc, one, e));
           }},
          {"reciprocal",
           [](auto &ob, auto loc, Value x) {
             Value one = arith::ConstantOp::create(
                 ob, loc, ob.getFloatAttr(x.getType(), 1.0));
             return arith::DivFOp::create(ob, loc, one, x);
           }},
      };
  return ops;
}

void Evaluator::lowerUnary(Node *node) {
  std::string op = opName(node);
  const Tensor &x = tensorOf(node->input(0));
  auto &floats = floatUnaries();
  if (auto it = floats.find(op); it != floats.end()) {
    ScalarType t = isFloating(x.dtype) ? x.dtype : ScalarType::Float;
    auto fn = it->second;
    return bind(node, elementwise({x}, t, t, [fn](auto &ob, auto loc, auto xs) {
      return fn(ob, loc, xs[0]);
    }));
  }
  bool fl = isFloating(x.dtype);
  if (op == "neg") {
    if (x.dtype == ScalarType::Bool)
      throw Unsupported("neg of a bool tensor raises in PyTorch");
    return bind(node, elementwise({x}, x.dtype, x.dtype,
                       [fl](auto &ob, auto loc, auto xs) -> Value {
                         if (fl)
                           return arith::NegFOp::create(ob, loc, xs[0]);
                         Value zero = arith::ConstantOp::create(
                             ob, loc, ob.getIntegerAttr(xs[0].getType(), 0));
                         return arith::SubIOp::create(ob, loc, zero, xs[0]);
                       }));
  }
  if (op == "abs")
    return bind(node, elementwise(
        {x}, x.dtype, x.dtype, [fl](auto &ob, auto loc, auto xs) -> Value {
          return fl ? Value(math::AbsFOp::create(ob, loc, xs[0]))
                    : Value(math::AbsIOp::create(ob, loc, xs[0]));
        }));
  if (op == "relu" && x.dtype != ScalarType::Bool)
    return bind(node, elementwise(
        {x}, x.dtype, x.dtype, [fl](auto &ob, auto loc, auto xs) -> Value {
          if (fl) {
            // PyTorch's relu keeps NaN: max(x, 0) with x first,
            // NaN-propagating.
            Value zero = arith::ConstantOp::create(
                ob, loc, ob.getFloatAttr(xs[0].getType(), 0.0));
            return arith::MaximumFOp::create(ob, loc, xs[0], zero);
          }
          Value zero = arith::ConstantOp::create(
              ob, loc, ob.getIntegerAttr(xs[0].getType(), 0));
          return arith::MaxSIOp::create(ob, loc, xs[0], zero);
        }));
  if ((op == "floor" || op == "ceil" || op == "round" || op == "trunc")) {
    if (!fl)
      return bind(node, x);
    return bind(node, elementwise({x}, x.dtype, x.dtype,
                       [op](auto &ob, auto loc, auto xs) -> Value {
                         if (op == "floor")
                           return math::FloorOp::create(ob, loc, xs[0]);
                         if (op == "ceil")
                           return math::CeilOp::create(ob, loc, xs[0]);
                         if (op == "trunc")
                           return math::TruncOp::create(ob, loc, xs[0]);
                         return math::RoundEvenOp::create(
                             ob, loc, xs[0]); // torch.round: half to even
                       }));
  }
  if (op == "logical_not" ||
      (op == "bitwise_not" && x.dtype == ScalarType::Bool))
    return bind(node, elementwise({x}, ScalarType::Bool, ScalarType::Bool,
                       [](auto &ob, auto loc, auto xs) -> Value {
                         Value one = arith::ConstantIntOp::create(
                             ob, loc, ob.getI1Type(), 1);
                         return arith::XOrIOp::create(ob, loc, xs[0], one);
                       }));
  throw Unsupported(where(node) + ": not supported by the bridge");
}

/// The two operands of a binary elementwise op and PyTorch's result dtype.
struct Binary {
  Operand x, y;
  ScalarType common;
  bool fl, boolean;
};

static Binary binaryOperands(Operand x, Operand y, ScalarType common) {
  return {std::move(x), std::move(y), common, isFloating(common),
          common == ScalarType::Bool};
}

void Evaluator::lowerCompare(Node *node) {
  Operand x = operandOf(node->input(0)), y = operandOf(node->input(1));
  ScalarType common = promoted({x, y});
  bool fl = isFloating(common);
  auto [fp, ip] = *comparison(opName(node));
  if (common == ScalarType::Bool) // bools compare as unsigned 0/1
    ip = ip == arith::CmpIPredicate::slt   ? arith::CmpIPredicate::ult
         : ip == arith::CmpIPredicate::sle ? arith::CmpIPredicate::ule
         : ip == arith::CmpIPredicate::sgt ? arith::CmpIPredicate::ugt
         : ip == arith::CmpIPredicate::sge ? arith::CmpIPredicate::uge
                                           : ip;
  bind(node, elementwise(
                 {x, y}, common, ScalarType::Bool,
                 [fl, fp, ip](auto &ob, auto loc, auto xs) -> Value {
                   return fl ? Value(arith::CmpFOp::create(ob, loc, fp, xs[0],
                                                           xs[1]))
                             : Value(arith::CmpIOp::create(ob, loc, ip, xs[0],
                                                           xs[1]));
                 }));
}

void Evaluator::lowerLogical(Node *node) {
  std::string op = opName(node);
  bind(node, elementwise({operandOf(node->input(0)), operandOf(node->input(1))},
                         ScalarType::Bool, ScalarType::Bool,
                         [op](auto &ob, auto loc, auto xs) -> Value {
                           if (op == "logical_and")
                             return arith::AndIOp::create(ob, loc, xs[0],
                                                          xs[1]);
                           if (op == "logical_or")
                             return arith::OrIOp::create(ob, loc, xs[0], xs[1]);
                           return arith::XOrIOp::create(ob, loc, xs[0], xs[1]);
                         }));
}

/// &, |, ^ and bitwise_and/or/xor of integer or bool tensors.
void Evaluator::lowerBitwise(Node *node) {
  std::string op = opName(node);
  Operand x = operandOf(node->input(0)), y = operandOf(node->input(1));
  ScalarType common = promoted({x, y});
  if (isFloating(common))
    throw Unsupported(where(node) +
                      ": a bitwise op on floats raises in PyTorch");
  bind(node, elementwise({x, y}, common, common,
                         [op](auto &ob, auto loc, auto xs) -> Value {
                           if (op.find("and") != std::string::npos)
                             return arith::AndIOp::create(ob, loc, xs[0],
                                                          xs[1]);
                           if (op.find("xor") != std::string::npos)
                             return arith::XOrIOp::create(ob, loc, xs[0],
                                                          xs[1]);
                           return arith::OrIOp::create(ob, loc, xs[0], xs[1]);
                         }));
}

/// maximum/minimum, and max/min of two tensors (the same op).
void Evaluator::lowerExtremum(Node *node) {
  Operand x = operandOf(node->input(0)), y = operandOf(node->input(1));
  Binary o = binaryOperands(x, y, promoted({x, y}));
  bool max = node->kind() == c10::aten::maximum ||
             node->kind() == c10::aten::max;
  bool fl = o.fl, boolean = o.boolean;
  bind(node,
       elementwise(
           {o.x, o.y}, o.common, o.common,
           [fl, boolean, max](auto &ob, auto loc, auto xs) -> Value {
             if (fl)
               return max ? Value(
                                arith::MaximumFOp::create(ob, loc, xs[0], xs[1]))
                          : Value(arith::MinimumFOp::create(ob, loc, xs[0],
                                                            xs[1]));
             if (boolean)
               return max ? Value(arith::OrIOp::create(ob, loc, xs[0], xs[1]))
                          : Value(arith::AndIOp::create(ob, loc, xs[0], xs[1]));
             return max ? Value(arith::MaxSIOp::create(ob, loc, xs[0], xs[1]))
                        : Value(arith::MinSIOp::create(ob, loc, xs[0], xs[1]));
           }));
}

/// add, sub, rsub (alpha 1) and mul.
void Evaluator::lowerArith(Node *node) {
  std::string op = opName(node);
  auto in = node->inputs();
  Operand x = operandOf(in[0]), y = operandOf(in[1]);
  Binary o = binaryOperands(x, y, promoted({x, y}));
  if (o.boolean && op != "mul")
    throw Unsupported(where(node) + ": add/sub of bools");
  if (op != "mul") {
    const Host &alpha = hostOf(in[2]);
    if (!alpha.isConstant() || alpha.kind != Host::Int || *alpha.i != 1)
      throw Unsupported(where(node) + ": alpha other than 1");
  }
  if (op == "rsub")
    std::swap(o.x, o.y);
  bool fl = o.fl, boolean = o.boolean;
  bind(node,
       elementwise(
           {o.x, o.y}, o.common, o.common,
           [op, fl, boolean](auto &ob, auto loc, auto xs) -> Value {
             if (op == "mul")
               return fl ? Value(arith::MulFOp::create(ob, loc, xs[0], xs[1]))
                      : boolean
                          ? Value(arith::AndIOp::create(ob, loc, xs[0], xs[1]))
                          : Value(arith::MulIOp::create(ob, loc, xs[0], xs[1]));
             if (op == "add")
               return fl ? Value(arith::AddFOp::create(ob, loc, xs[0], xs[1]))
                         : Value(arith::AddIOp::create(ob, loc, xs[0], xs[1]));
             return fl ? Value(arith::SubFOp::create(ob, loc, xs[0], xs[1]))
                       : Value(arith::SubIOp::create(ob, loc, xs[0], xs[1]));
           }));
}

/// Integer division by zero raises in PyTorch: an integer divisor must be a
/// host scalar, which the shape function requires to be non-zero.
void Evaluator::requireNonZeroDivisor(Node *node, const Operand &y) {
  const Host *d = std::get_if<Host>(&y);
  if (!d || d->kind != Host::Int)
    throw Unsupported(where(node) + ": integer division by a tensor");
  Host nz = compare("ne", *d, Host::constInt(0));
  if (nz.isConstant() && !*nz.i)
    throw Unsupported(where(node) + ": integer division by zero");
  if (!nz.isConstant())
    check(nz.value);
}

/// remainder and fmod: PyTorch's kernels (fmod, then for remainder the
/// divisor's sign).
void Evaluator::lowerRemainder(Node *node) {
  Operand x = operandOf(node->input(0)), y = operandOf(node->input(1));
  Binary o = binaryOperands(x, y, promoted({x, y}));
  if (o.boolean)
    throw Unsupported(where(node) + ": remainder of bools");
  if (!o.fl)
    requireNonZeroDivisor(node, y);
  bool fl = o.fl, python = opName(node) == "remainder";
  bind(node, elementwise(
                 {x, y}, o.common, o.common,
                 [fl, python](auto &ob, auto loc, auto xs) -> Value {
                   Value r =
                       fl ? Value(arith::RemFOp::create(ob, loc, xs[0], xs[1]))
                          : Value(arith::RemSIOp::create(ob, loc, xs[0], xs[1]));
                   if (!python)
                     return r;
                   Value zero =
                       fl ? Value(arith::ConstantOp::create(
                                ob, loc, ob.getFloatAttr(r.getType(), 0.0)))
                          : Value(arith::ConstantOp::create(
                                ob, loc, ob.getIntegerAttr(r.getType(), 0)));
                   auto lt = [&](Value a) -> Value {
                     return fl ? Value(arith::CmpFOp::create(
                                     ob, loc, arith::CmpFPredicate::OLT, a, zero))
                               : Value(arith::CmpIOp::create(
                                     ob, loc, arith::CmpIPredicate::slt, a,
                                     zero));
                   };
                   Value nonzero =
                       fl ? Value(arith::CmpFOp::create(
                                ob, loc, arith::CmpFPredicate::UNE, r, zero))
                          : Value(arith::CmpIOp::create(
                                ob, loc, arith::CmpIPredicate::ne, r, zero));
                   Value signs = arith::XOrIOp::create(ob, loc, lt(r), lt(xs[1]));
                   Value adjust = arith::AndIOp::create(ob, loc, nonzero, signs);
                   Value shifted =
                       fl ? Value(arith::AddFOp::create(ob, loc, r, xs[1]))
                          : Value(arith::AddIOp::create(ob, loc, r, xs[1]));
                   return arith::SelectOp::create(ob, loc, adjust, shifted, r);
                 }));
}

/// div: true division (integers become the default float), or rounded
/// toward -inf ("floor") or zero ("trunc").
void Evaluator::lowerDiv(Node *node) {
  auto in = node->inputs();
  Operand x = operandOf(in[0]), y = operandOf(in[1]);
  Binary o = binaryOperands(x, y, promoted({x, y}));
  std::string mode;
  if (overloadOf(node).find("_mode") != std::string::npos && !isNone(in[2])) {
    const Str &m = as<Str>(in[2], "a rounding mode");
    if (!m.known)
      throw Unsupported(where(node) + ": a rounding mode built at run time");
    mode = m.text;
  }
  if (mode.empty()) {
    ScalarType t = o.fl ? o.common : ScalarType::Float;
    return bind(node, elementwise({x, y}, t, t,
                                  [](auto &ob, auto loc, auto xs) -> Value {
                                    return arith::DivFOp::create(ob, loc, xs[0],
                                                                 xs[1]);
                                  }));
  }
  if (!o.fl)
    requireNonZeroDivisor(node, y);
  bool floor = mode == "floor", fl = o.fl;
  if (!floor && mode != "trunc")
    throw Unsupported(where(node) + ": rounding mode '" + mode + "'");
  bind(node,
       elementwise(
           {x, y}, o.common, o.common,
           [fl, floor](auto &ob, auto loc, auto xs) -> Value {
             if (fl) {
               Value q = arith::DivFOp::create(ob, loc, xs[0], xs[1]);
               return floor ? Value(math::FloorOp::create(ob, loc, q))
                            : Value(math::TruncOp::create(ob, loc, q));
             }
             return floor ? Value(arith::FloorDivSIOp::create(ob, loc, xs[0],
                                                              xs[1]))
                          : Value(arith::DivSIOp::create(ob, loc, xs[0], xs[1]));
           }));
}

void Evaluator::lowerWhere(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &c = tensorOf(in[0]);
  Operand x = operandOf(in[1]), y = operandOf(in[2]);
  ScalarType t = promoted({x, y});
  // The condition is converted to the common dtype with the others and
  // back: compute on the three, with the condition as bool.
  Tensor cb = c;
  if (c.dtype != ScalarType::Bool)
    throw Unsupported(where(node) + ": a condition that is not bool");
  // elementwise converts every operand to one dtype: select in the body
  // with the condition converted back to i1.
  return bind(node, elementwise(
      {cb, x, y}, t, t, [t, this](auto &ob, auto loc, auto xs) -> Value {
        Value cond = convert(ob, loc, xs[0], t, ScalarType::Bool);
        return arith::SelectOp::create(ob, loc, cond, xs[1], xs[2]);
      }));
}

void Evaluator::lowerClamp(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  // clamp(x, min, max) with host bounds: max then min, NaN kept as PyTorch
  // keeps it; the result's dtype promotes with the bounds.
  const Tensor &x = tensorOf(in[0]);
  std::optional<Host> lo, hi;
  if (k == aten::clamp_max)
    hi = hostOf(in[1]);
  else if (!isNone(in[1]))
    lo = hostOf(in[1]);
  if (k == aten::clamp && !isNone(in[2]))
    hi = hostOf(in[2]);
  if (x.dtype == ScalarType::Bool)
    throw Unsupported(where(node) + ": clamp of a bool tensor");
  std::vector<Operand> bounds{x};
  for (const std::optional<Host> &h : {lo, hi})
    if (h)
      bounds.push_back(*h);
  ScalarType t = promoted(bounds);
  bool fl = isFloating(t);
  std::vector<Operand> ops{x};
  if (lo)
    ops.push_back(*lo);
  if (hi)
    ops.push_back(*hi);
  bool hasLo = lo.has_value();
  return bind(node, elementwise(
      ops, t, t, [fl, hasLo](auto &ob, auto loc, auto xs) -> Value {
        Value v = xs[0];
        size_t next = 1;
        if (hasLo)
          v = fl ? Value(arith::MaximumFOp::create(ob, loc, v, xs[next]))
                 : Value(arith::MaxSIOp::create(ob, loc, v, xs[next]));
        if (hasLo)
          ++next;
        if (next < xs.size())
          v = fl ? Value(arith::MinimumFOp::create(ob, loc, v, xs[next]))
                 : Value(arith::MinSIOp::create(ob, loc, v, xs[next]));
        return v;
      }));
}

void Evaluator::lowerMaskedFill(Node *node) {
  using namespace c10;
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]), &m = tensorOf(in[1]);
  if (m.dtype != ScalarType::Bool)
    throw Unsupported(where(node) + ": a mask that is not bool");
  Operand v = std::holds_alternative<Tensor>(get(in[2]))
                  ? Operand(tensorOf(in[2]))
                  : Operand(hostOf(in[2]));
  if (auto *vt = std::get_if<Tensor>(&v); vt && vt->rank() != 0)
    throw Unsupported(where(node) + ": a fill value with dimensions");
  ScalarType t = x.dtype;
  Tensor mb = m;
  return bind(node, elementwise(
      {x, mb, v}, t, t, [t, this](auto &ob, auto loc, auto xs) -> Value {
        Value cond = convert(ob, loc, xs[1], t, ScalarType::Bool);
        return arith::SelectOp::create(ob, loc, cond, xs[2], xs[0]);
      }));
}

void Evaluator::lowerTo(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  // to.other and type_as take another tensor's dtype; to.device and
  // to.prim_Device a dtype after the device; to.dtype and to.prim_dtype
  // one first.
  const std::string &overload = overloadOf(node);
  std::optional<ScalarType> dtype;
  if (k == aten::type_as || overload == "other")
    dtype = tensorOf(in[1]).dtype;
  else if (overload == "device" || overload == "prim_Device")
    dtype = dtypeArg(in[2]);
  else
    dtype = dtypeArg(in[1]);
  if (!dtype || *dtype == x.dtype)
    return bind(node, x);
  bind(node, converted(x, *dtype));
}

void Evaluator::lowerIsNan(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  const Tensor &x = tensorOf(in[0]);
  if (!isFloating(x.dtype)) { // integers: never NaN or infinite
    return bind(node, filled(x.sizes, ScalarType::Bool,
                             Host::constBool(k == aten::isfinite)));
  }
  bool nan = k == aten::isnan, inf = k == aten::isinf;
  bind(node, elementwise(
             {x}, x.dtype, ScalarType::Bool,
             [nan, inf](auto &ob, auto loc, auto xs) -> Value {
               if (nan)
                 return arith::CmpFOp::create(
                     ob, loc, arith::CmpFPredicate::UNO, xs[0], xs[0]);
               Value a = math::AbsFOp::create(ob, loc, xs[0]);
               Value limit = arith::ConstantOp::create(
                   ob, loc, ob.getFloatAttr(xs[0].getType(), INFINITY));
               return arith::CmpFOp::create(ob, loc,
                                            inf ? arith::CmpFPredicate::OEQ
                                                : arith::CmpFPredicate::OLT,
                                            a, limit);
             }));
}

} // namespace staticify::lower::bridge
