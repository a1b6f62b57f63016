//===- EvalTensor.cpp - tensor ops ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

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

Tensor Evaluator::unary(Node *node, const std::string &op) {
  const Tensor &x = tensorOf(node->input(0));
  auto &floats = floatUnaries();
  if (auto it = floats.find(op); it != floats.end()) {
    ScalarType t = isFloating(x.dtype) ? x.dtype : ScalarType::Float;
    auto fn = it->second;
    return elementwise({x}, t, t, [fn](auto &ob, auto loc, auto xs) {
      return fn(ob, loc, xs[0]);
    });
  }
  bool fl = isFloating(x.dtype);
  if (op == "neg") {
    if (x.dtype == ScalarType::Bool)
      throw Unsupported("neg of a bool tensor raises in PyTorch");
    return elementwise({x}, x.dtype, x.dtype,
                       [fl](auto &ob, auto loc, auto xs) -> Value {
                         if (fl)
                           return arith::NegFOp::create(ob, loc, xs[0]);
                         Value zero = arith::ConstantOp::create(
                             ob, loc, ob.getIntegerAttr(xs[0].getType(), 0));
                         return arith::SubIOp::create(ob, loc, zero, xs[0]);
                       });
  }
  if (op == "abs")
    return elementwise(
        {x}, x.dtype, x.dtype, [fl](auto &ob, auto loc, auto xs) -> Value {
          return fl ? Value(math::AbsFOp::create(ob, loc, xs[0]))
                    : Value(math::AbsIOp::create(ob, loc, xs[0]));
        });
  if (op == "relu" && x.dtype != ScalarType::Bool)
    return elementwise(
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
        });
  if ((op == "floor" || op == "ceil" || op == "round" || op == "trunc")) {
    if (!fl)
      return x;
    return elementwise({x}, x.dtype, x.dtype,
                       [op](auto &ob, auto loc, auto xs) -> Value {
                         if (op == "floor")
                           return math::FloorOp::create(ob, loc, xs[0]);
                         if (op == "ceil")
                           return math::CeilOp::create(ob, loc, xs[0]);
                         if (op == "trunc")
                           return math::TruncOp::create(ob, loc, xs[0]);
                         return math::RoundEvenOp::create(
                             ob, loc, xs[0]); // torch.round: half to even
                       });
  }
  if (op == "logical_not" ||
      (op == "bitwise_not" && x.dtype == ScalarType::Bool))
    return elementwise({x}, ScalarType::Bool, ScalarType::Bool,
                       [](auto &ob, auto loc, auto xs) -> Value {
                         Value one = arith::ConstantIntOp::create(
                             ob, loc, ob.getI1Type(), 1);
                         return arith::XOrIOp::create(ob, loc, xs[0], one);
                       });
  throw Unsupported(where(node) + ": not supported by the bridge");
}

Tensor Evaluator::binary(Node *node, const std::string &op) {
  auto in = node->inputs();
  Operand x = operandOf(in[0]), y = operandOf(in[1]);
  ScalarType common = promoted({x, y});
  bool fl = isFloating(common);
  bool boolean = common == ScalarType::Bool;
  if (auto predicates = comparison(op)) {
    auto [fp, ip] = *predicates;
    if (boolean) // bools compare as unsigned 0/1
      ip = ip == arith::CmpIPredicate::slt   ? arith::CmpIPredicate::ult
           : ip == arith::CmpIPredicate::sle ? arith::CmpIPredicate::ule
           : ip == arith::CmpIPredicate::sgt ? arith::CmpIPredicate::ugt
           : ip == arith::CmpIPredicate::sge ? arith::CmpIPredicate::uge
                                             : ip;
    return elementwise(
        {x, y}, common, ScalarType::Bool,
        [fl, fp, ip](auto &ob, auto loc, auto xs) -> Value {
          return fl ? Value(arith::CmpFOp::create(ob, loc, fp, xs[0], xs[1]))
                    : Value(arith::CmpIOp::create(ob, loc, ip, xs[0], xs[1]));
        });
  }
  if (op == "logical_and" || op == "logical_or" || op == "logical_xor")
    return elementwise({x, y}, ScalarType::Bool, ScalarType::Bool,
                       [op](auto &ob, auto loc, auto xs) -> Value {
                         if (op == "logical_and")
                           return arith::AndIOp::create(ob, loc, xs[0], xs[1]);
                         if (op == "logical_or")
                           return arith::OrIOp::create(ob, loc, xs[0], xs[1]);
                         return arith::XOrIOp::create(ob, loc, xs[0], xs[1]);
                       });
  if (op == "__and__" || op == "__or__" || op == "bitwise_and" ||
      op == "bitwise_or" || op == "__xor__" || op == "bitwise_xor") {
    if (fl)
      throw Unsupported(where(node) +
                        ": a bitwise op on floats raises in PyTorch");
    return elementwise({x, y}, common, common,
                       [op](auto &ob, auto loc, auto xs) -> Value {
                         if (op.find("and") != std::string::npos)
                           return arith::AndIOp::create(ob, loc, xs[0], xs[1]);
                         if (op.find("xor") != std::string::npos)
                           return arith::XOrIOp::create(ob, loc, xs[0], xs[1]);
                         return arith::OrIOp::create(ob, loc, xs[0], xs[1]);
                       });
  }
  if (op == "maximum" || op == "minimum") {
    bool max = op == "maximum";
    return elementwise(
        {x, y}, common, common,
        [fl, boolean, max](auto &ob, auto loc, auto xs) -> Value {
          if (fl)
            return max ? Value(arith::MaximumFOp::create(ob, loc, xs[0], xs[1]))
                       : Value(
                             arith::MinimumFOp::create(ob, loc, xs[0], xs[1]));
          if (boolean)
            return max ? Value(arith::OrIOp::create(ob, loc, xs[0], xs[1]))
                       : Value(arith::AndIOp::create(ob, loc, xs[0], xs[1]));
          return max ? Value(arith::MaxSIOp::create(ob, loc, xs[0], xs[1]))
                     : Value(arith::MinSIOp::create(ob, loc, xs[0], xs[1]));
        });
  }
  if (op == "add" || op == "sub" || op == "rsub" || op == "mul") {
    if (boolean && op != "mul")
      throw Unsupported(where(node) + ": add/sub of bools");
    if (op != "mul" && in.size() > 2) {
      const Host &alpha = hostOf(in[2]);
      if (!alpha.isConstant() || alpha.kind != Host::Int || *alpha.i != 1)
        throw Unsupported(where(node) + ": alpha other than 1");
    }
    if (op == "rsub")
      std::swap(x, y);
    return elementwise(
        {x, y}, common, common,
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
        });
  }
  if (op == "remainder" || op == "fmod") {
    // PyTorch's kernels: fmod, then for remainder the divisor's sign.
    if (boolean)
      throw Unsupported(where(node) + ": remainder of bools");
    if (!fl) { // integer division by zero raises: only by a host scalar
      const Host *d = std::get_if<Host>(&y);
      if (!d || d->kind != Host::Int)
        throw Unsupported(where(node) + ": integer remainder by a tensor");
      Host nz = compare("ne", *d, Host::constInt(0));
      if (nz.isConstant() && !*nz.i)
        throw Unsupported(where(node) + ": integer remainder by zero");
      if (!nz.isConstant())
        check(nz.value);
    }
    bool python = op == "remainder";
    return elementwise(
        {x, y}, common, common,
        [fl, python](auto &ob, auto loc, auto xs) -> Value {
          Value r = fl ? Value(arith::RemFOp::create(ob, loc, xs[0], xs[1]))
                       : Value(arith::RemSIOp::create(ob, loc, xs[0], xs[1]));
          if (!python)
            return r;
          Value zero = fl ? Value(arith::ConstantOp::create(
                                ob, loc, ob.getFloatAttr(r.getType(), 0.0)))
                          : Value(arith::ConstantOp::create(
                                ob, loc, ob.getIntegerAttr(r.getType(), 0)));
          auto lt = [&](Value a) -> Value {
            return fl ? Value(arith::CmpFOp::create(
                            ob, loc, arith::CmpFPredicate::OLT, a, zero))
                      : Value(arith::CmpIOp::create(
                            ob, loc, arith::CmpIPredicate::slt, a, zero));
          };
          Value nonzero = fl ? Value(arith::CmpFOp::create(
                                   ob, loc, arith::CmpFPredicate::UNE, r, zero))
                             : Value(arith::CmpIOp::create(
                                   ob, loc, arith::CmpIPredicate::ne, r, zero));
          Value signs = arith::XOrIOp::create(ob, loc, lt(r), lt(xs[1]));
          Value adjust = arith::AndIOp::create(ob, loc, nonzero, signs);
          Value shifted = fl ? Value(arith::AddFOp::create(ob, loc, r, xs[1]))
                             : Value(arith::AddIOp::create(ob, loc, r, xs[1]));
          return arith::SelectOp::create(ob, loc, adjust, shifted, r);
        });
  }
  if (op == "div") {
    std::string mode;
    if (in.size() > 2 && !isNone(in[2]))
      mode = as<Str>(in[2], "a rounding mode").text;
    if (mode.empty()) { // true division: integers become the default float
      ScalarType t = fl ? common : ScalarType::Float;
      return elementwise({x, y}, t, t,
                         [](auto &ob, auto loc, auto xs) -> Value {
                           return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
                         });
    }
    if (!fl) {
      // Integer division by zero raises in PyTorch: only by a host scalar,
      // which the shape function checks.
      const Host *d = std::get_if<Host>(&y);
      if (!d || d->kind != Host::Int)
        throw Unsupported(where(node) + ": integer division by a tensor");
      Host nz = compare("ne", *d, Host::constInt(0));
      if (nz.isConstant() && !*nz.i)
        throw Unsupported(where(node) + ": integer division by zero");
      if (!nz.isConstant())
        check(nz.value);
    }
    bool floor = mode == "floor";
    if (!floor && mode != "trunc")
      throw Unsupported(where(node) + ": rounding mode '" + mode + "'");
    return elementwise(
        {x, y}, common, common,
        [fl, floor](auto &ob, auto loc, auto xs) -> Value {
          if (fl) {
            Value q = arith::DivFOp::create(ob, loc, xs[0], xs[1]);
            return floor ? Value(math::FloorOp::create(ob, loc, q))
                         : Value(math::TruncOp::create(ob, loc, q));
          }
          return floor
                     ? Value(arith::FloorDivSIOp::create(ob, loc, xs[0], xs[1]))
                     : Value(arith::DivSIOp::create(ob, loc, xs[0], xs[1]));
        });
  }
  throw Unsupported(where(node) + ": not supported by the bridge");
}

void Evaluator::evalTensorOp(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  std::string op = opName(node);
  auto in = node->inputs();
  torch::jit::Value *out =
      node->outputs().size() == 1 ? node->output() : nullptr;
  if (evalIndexingOrRandom(node))
    return;
  if (!out)
    throw Unsupported(where(node) + ": not supported by the bridge");
  auto set = [&](Sym s) { env[out] = std::move(s); };
  // Metadata of tensors: host values.
  if (k == aten::size) {
    const Tensor &x = tensorOf(in[0]);
    if (in.size() == 1)
      return set(HostList(x.sizes));
    return set(
        x.sizes.at(normDim(constInt(in[1], "a size's dimension"), x.rank())));
  }
  if (k == aten::dim)
    return set(Host::constInt(tensorOf(in[0]).rank()));
  if (k == Symbol::fromQualString("aten::numel"))
    return set(numel(tensorOf(in[0]).sizes));
  if (k == prim::dtype)
    return set(Host::constInt(static_cast<int64_t>(tensorOf(in[0]).dtype)));
  if (k == prim::device)
    return set(Device{});
  if (k == aten::contiguous || k == aten::clone || k == aten::detach)
    return set(tensorOf(in[0]));
  static const std::set<std::string> binaries = {
      "add",     "sub",         "rsub",        "mul",         "div",
      "eq",      "ne",          "lt",          "le",          "gt",
      "ge",      "logical_and", "logical_or",  "logical_xor", "__and__",
      "__or__",  "__xor__",     "bitwise_and", "bitwise_or",  "bitwise_xor",
      "maximum", "minimum",     "remainder",   "fmod"};
  if (binaries.count(op) && in.size() >= 2 &&
      (in[1]->type()->kind() == TypeKind::TensorType ||
       in[1]->type()->isSubtypeOf(*NumberType::get()) ||
       in[1]->type()->kind() == TypeKind::BoolType))
    return set(binary(node, op));
  if (k == aten::where && in.size() == 3) {
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
    return set(elementwise(
        {cb, x, y}, t, t, [t, this](auto &ob, auto loc, auto xs) -> Value {
          Value cond = convert(ob, loc, xs[0], t, ScalarType::Bool);
          return arith::SelectOp::create(ob, loc, cond, xs[1], xs[2]);
        }));
  }
  if (k == aten::clamp || k == aten::clamp_min || k == aten::clamp_max) {
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
    return set(elementwise(
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
  if (k == aten::masked_fill) {
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
    return set(elementwise(
        {x, mb, v}, t, t, [t, this](auto &ob, auto loc, auto xs) -> Value {
          Value cond = convert(ob, loc, xs[1], t, ScalarType::Bool);
          return arith::SelectOp::create(ob, loc, cond, xs[2], xs[0]);
        }));
  }
  if (k == aten::to || k == aten::type_as) {
    const Tensor &x = tensorOf(in[0]);
    std::optional<ScalarType> dtype;
    if (k == aten::type_as || in[1]->type()->kind() == TypeKind::TensorType)
      dtype = tensorOf(in[1]).dtype;
    else if (in[1]->type()->kind() == TypeKind::DeviceObjType ||
             std::holds_alternative<Device>(get(in[1])) || isNone(in[1]))
      dtype = in.size() > 2 ? dtypeArg(in[2]) : std::nullopt;
    else
      dtype = dtypeArg(in[1]);
    if (!dtype || *dtype == x.dtype)
      return set(x);
    ScalarType from = x.dtype, to = *dtype;
    return set(elementwise({x}, from, to,
                           [from, to, this](auto &ob, auto loc, auto xs) {
                             return convert(ob, loc, xs[0], from, to);
                           }));
  }
  if (k == aten::view || k == aten::reshape) {
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
    return set(reshape(x, sizes));
  }
  if (evalShapeOrComposite(node))
    return;
  if (k == aten::flatten) {
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
    return set(reshape(x, sizes));
  }
  if (k == aten::unsqueeze) {
    const Tensor &x = tensorOf(in[0]);
    int64_t d = normDim(constInt(in[1], "a dimension"), x.rank() + 1);
    std::vector<Host> sizes = x.sizes;
    sizes.insert(sizes.begin() + d, Host::constInt(1));
    return set(reshape(x, sizes));
  }
  // Reductions. count_nonzero(x) of a bool x is its sum.
  bool countOfBools = k == aten::count_nonzero && in.size() == 2 &&
                      isNone(in[1]) &&
                      tensorOf(in[0]).dtype == ScalarType::Bool;
  if (k == aten::sum || k == aten::mean || k == aten::amax || k == aten::amin ||
      countOfBools ||
      ((k == aten::max || k == aten::min || k == aten::any || k == aten::all) &&
       in.size() == 1)) {
    const Tensor &x = tensorOf(in[0]);
    std::vector<int64_t> dims;
    bool keepdim = false;
    std::optional<ScalarType> dtype;
    bool full = in.size() <= 2;
    if (full) {
      if (in.size() == 2)
        dtype = dtypeArg(in[1]);
    } else {
      if (!isNone(in[1])) {
        const Sym &s = get(in[1]);
        if (auto *l = std::get_if<HostList>(&s)) {
          for (const Host &h : *l) {
            if (!h.isConstant())
              throw Unsupported(
                  where(node) +
                  ": a reduced dimension not known when compiling");
            dims.push_back(normDim(*h.i, x.rank()));
          }
        } else {
          dims.push_back(normDim(constInt(in[1], "a dimension"), x.rank()));
        }
      }
      keepdim = *hostOf(in[2]).i;
      if (in.size() > 3)
        dtype = dtypeArg(in[3]);
    }
    if (dims.empty())
      for (size_t d = 0; d < x.rank(); ++d)
        dims.push_back(d);
    if (k == aten::max || k == aten::min || k == aten::amax ||
        k == aten::amin) {
      bool max = k == aten::max || k == aten::amax;
      bool fl = isFloating(x.dtype);
      if (!full)
        for (int64_t d : dims)
          if (!x.sizes[d].isConstant() || *x.sizes[d].i == 0)
            check(materialize(compare("gt", x.sizes[d], Host::constInt(0)),
                              Host::Bool));
      if (full)
        check(materialize(compare("gt", numel(x.sizes), Host::constInt(0)),
                          Host::Bool));
      if (!fl && x.dtype != ScalarType::Bool && x.dtype != ScalarType::Long)
        throw Unsupported(where(node) + ": max/min of a narrow integer dtype");
      Host identity = extremeIdentity(x.dtype, max);
      ScalarType t = x.dtype;
      return set(reduce(
          x, dims, keepdim, t, identity,
          [fl, max, t](auto &ob, auto loc, Value a, Value e) -> Value {
            if (fl)
              return max ? Value(arith::MaximumFOp::create(ob, loc, a, e))
                         : Value(arith::MinimumFOp::create(ob, loc, a, e));
            if (t == ScalarType::Bool)
              return max ? Value(arith::OrIOp::create(ob, loc, a, e))
                         : Value(arith::AndIOp::create(ob, loc, a, e));
            return max ? Value(arith::MaxSIOp::create(ob, loc, a, e))
                       : Value(arith::MinSIOp::create(ob, loc, a, e));
          }));
    }
    if (k == aten::any || k == aten::all) {
      bool any = k == aten::any;
      return set(
          reduce(x, dims, keepdim, ScalarType::Bool, Host::constBool(!any),
                 [any](auto &ob, auto loc, Value a, Value e) -> Value {
                   return any ? Value(arith::OrIOp::create(ob, loc, a, e))
                              : Value(arith::AndIOp::create(ob, loc, a, e));
                 }));
    }
    ScalarType acc = dtype                 ? *dtype
                     : isFloating(x.dtype) ? x.dtype
                                           : ScalarType::Long;
    if (k == aten::mean && !isFloating(acc))
      throw Unsupported(where(node) +
                        ": mean of an integer tensor raises in PyTorch");
    bool fl = isFloating(acc);
    Tensor sum = reduce(
        x, dims, keepdim, acc, fl ? Host::constFloat(0) : Host::constInt(0),
        [fl](auto &ob, auto loc, Value a, Value e) -> Value {
          return fl ? Value(arith::AddFOp::create(ob, loc, a, e))
                    : Value(arith::AddIOp::create(ob, loc, a, e));
        });
    if (k == aten::sum || countOfBools)
      return set(sum);
    Host count = Host::constInt(1);
    for (int64_t d : dims)
      count = intOp("mul", count, x.sizes[d]);
    return set(elementwise(
        {sum, count}, acc, acc, [](auto &ob, auto loc, auto xs) -> Value {
          return arith::DivFOp::create(ob, loc, xs[0], xs[1]);
        }));
  }
  // Factories.
  auto factoryDtype = [&](torch::jit::Value *v, ScalarType dflt) {
    std::optional<ScalarType> t = dtypeArg(v);
    return t ? *t : dflt;
  };
  if (k == aten::zeros || k == aten::ones || k == aten::empty) {
    const HostList &sizes = as<HostList>(in[0], "a list of sizes");
    ScalarType t = factoryDtype(in[1], ScalarType::Float);
    // empty() may hold anything: zeros are one such content.
    return set(filled(sizes, t, Host::constInt(k == aten::ones ? 1 : 0)));
  }
  if (k == aten::full) {
    const HostList &sizes = as<HostList>(in[0], "a list of sizes");
    const Host &v = hostOf(in[1]);
    ScalarType dflt = v.kind == Host::Float  ? ScalarType::Float
                      : v.kind == Host::Bool ? ScalarType::Bool
                                             : ScalarType::Long;
    return set(filled(sizes, factoryDtype(in[2], dflt), v));
  }
  if (k == aten::zeros_like || k == aten::ones_like || k == aten::full_like) {
    const Tensor &x = tensorOf(in[0]);
    bool full = k == aten::full_like;
    Host v =
        full ? hostOf(in[1]) : Host::constInt(k == aten::ones_like ? 1 : 0);
    return set(filled(x.sizes, factoryDtype(in[full ? 2 : 1], x.dtype), v));
  }
  if (k == aten::new_zeros || k == aten::new_ones || k == aten::new_empty) {
    const Tensor &x = tensorOf(in[0]);
    const HostList &sizes = as<HostList>(in[1], "a list of sizes");
    return set(filled(sizes, factoryDtype(in[2], x.dtype),
                      Host::constInt(k == aten::new_ones ? 1 : 0)));
  }
  if (k == aten::scalar_tensor) {
    const Host &v = hostOf(in[0]);
    return set(filled({}, factoryDtype(in[1], ScalarType::Float), v));
  }
  if (k == aten::arange &&
      in.size() == 5) { // arange(end, dtype, layout, device, pin)
    const Host &end = hostOf(in[0]);
    if (end.kind != Host::Int)
      throw Unsupported(where(node) + ": arange of a float end");
    ScalarType t = factoryDtype(in[1], ScalarType::Long);
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
    return set(Tensor{generic.getResult(0), t, {n}});
  }
  // Slices and concatenation.
  if (k == aten::slice && in.size() == 5) {
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
    return set(Tensor{r, x.dtype, outSizes});
  }
  if (k == aten::cat) {
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
    return set(Tensor{acc, first.dtype, outSizes});
  }
  if (in.size() == 1)
    return set(unary(node, op));
  throw Unsupported(where(node) + ": not supported by the bridge");
}

/// Shape ops (select, stack, expand) and composites of elementwise ops and
/// reductions (softmax, log_softmax, argmax, max/min along a dimension,
/// isnan).
bool Evaluator::evalShapeOrComposite(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  auto set = [&](size_t i, Sym s) { env[node->output(i)] = std::move(s); };
  if (k == aten::is_floating_point) {
    set(0, Host::constBool(isFloating(tensorOf(in[0]).dtype)));
    return true;
  }
  if (k == Symbol::fromQualString("aten::promote_types")) {
    auto a = static_cast<ScalarType>(constInt(in[0], "a dtype"));
    auto c = static_cast<ScalarType>(constInt(in[1], "a dtype"));
    set(0, Host::constInt(static_cast<int64_t>(c10::promoteTypes(a, c))));
    return true;
  }
  if (k == aten::squeeze && in.size() == 2) {
    // squeeze(x, d) drops d only where its size is 1: the rank must be
    // known, so the shape function requires that size to be 1.
    const Tensor &x = tensorOf(in[0]);
    if (x.rank() == 0) {
      set(0, x);
      return true;
    }
    int64_t d = normDim(constInt(in[1], "squeeze's dimension"), x.rank());
    const Host &s = x.sizes[d];
    if (s.isConstant() && *s.i != 1) {
      set(0, x);
      return true;
    }
    checkEqual(s, Host::constInt(1));
    std::vector<Host> sizes = x.sizes;
    sizes.erase(sizes.begin() + d);
    set(0, reshape(x, sizes));
    return true;
  }
  if (k == aten::gather && in.size() == 4) {
    set(0, gatherAlong(node, tensorOf(in[0]),
                       normDim(constInt(in[1], "gather's dimension"),
                               tensorOf(in[0]).rank()),
                       tensorOf(in[2])));
    return true;
  }
  if (k == Symbol::fromQualString("aten::one_hot")) {
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
    set(0, Tensor{generic.getResult(0), ScalarType::Long, sizes});
    return true;
  }
  if (k == Symbol::fromQualString("aten::nll_loss_nd") ||
      k == Symbol::fromQualString("aten::cross_entropy_loss")) {
    set(0, nllLoss(node));
    return true;
  }
  if (k == aten::isnan || k == aten::isinf || k == aten::isfinite) {
    const Tensor &x = tensorOf(in[0]);
    if (!isFloating(x.dtype)) { // integers: never NaN or infinite
      set(0, filled(x.sizes, ScalarType::Bool,
                    Host::constBool(k == aten::isfinite)));
      return true;
    }
    bool nan = k == aten::isnan, inf = k == aten::isinf;
    set(0, elementwise(
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
    return true;
  }
  if (k == aten::select && in.size() == 3) {
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
    set(0, Tensor{r, x.dtype, outSizes});
    return true;
  }
  if (k == aten::stack) {
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
    set(0, Tensor{acc, xs[0].dtype, outSizes});
    return true;
  }
  if (k == aten::expand_as || k == aten::expand) {
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
    set(0, broadcastTo(x, sizes));
    return true;
  }
  if ((k == aten::max || k == aten::min) && node->outputs().size() == 2) {
    const Tensor &x = tensorOf(in[0]);
    int64_t d = normDim(constInt(in[1], "a dimension"), x.rank());
    auto [v, i] = reduceWithIndex(x, d, *hostOf(in[2]).i, k == aten::max);
    set(0, v);
    set(1, i);
    return true;
  }
  if (k == aten::argmax || k == aten::argmin) {
    Tensor x = tensorOf(in[0]);
    bool keepdim = *hostOf(in[2]).i;
    int64_t d = 0;
    if (isNone(in[1])) { // over all elements, flattened
      x = reshape(x, {numel(x.sizes)});
      keepdim = false;
    } else {
      d = normDim(constInt(in[1], "a dimension"), x.rank());
    }
    set(0, reduceWithIndex(x, d, keepdim, k == aten::argmax).second);
    return true;
  }
  if (k == aten::log_softmax || k == aten::softmax) {
    const Tensor &x = tensorOf(in[0]);
    int64_t d = normDim(constInt(in[1], "a dimension"), x.rank());
    std::optional<ScalarType> dt =
        in.size() > 2 ? dtypeArg(in[2]) : std::nullopt;
    ScalarType t = dt ? *dt : x.dtype;
    if (!isFloating(t))
      throw Unsupported(where(node) + ": softmax of an integer tensor raises");
    set(0, softmax(x, d, t, k == aten::log_softmax));
    return true;
  }
  return false;
}

} // namespace staticify::lower::bridge
