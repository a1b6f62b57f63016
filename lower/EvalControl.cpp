//===- EvalControl.cpp - nodes, host ops, branches and loops ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

/// Whether an input is a tensor, by what the evaluation made of it (a
/// `Tensor?` input holding one is a tensor).
bool Evaluator::hasTensorInput(Node *node) {
  for (torch::jit::Value *v : node->inputs()) {
    auto it = env.find(v);
    if (it != env.end() ? std::holds_alternative<Tensor>(it->second)
                        : v->type()->kind() == c10::TypeKind::TensorType)
      return true;
  }
  return false;
}

void Evaluator::evalNode(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  if (k == prim::Constant) {
    torch::jit::Value *v = node->output();
    TypePtr t = v->type();
    if (t->kind() == TypeKind::NoneType)
      env[v] = None{};
    else if (t->kind() == TypeKind::IntType)
      env[v] = Host::constInt(node->i(attr::value));
    else if (t->kind() == TypeKind::FloatType)
      env[v] = Host::constFloat(node->f(attr::value));
    else if (t->kind() == TypeKind::BoolType)
      env[v] = Host::constBool(node->i(attr::value));
    else if (t->kind() == TypeKind::StringType)
      env[v] = Str{node->s(attr::value)};
    else if (t->kind() == TypeKind::DeviceObjType)
      env[v] = Device{};
    else if (t->isSubtypeOf(*ListType::ofInts())) {
      HostList l;
      for (int64_t i : node->ival(attr::value).toIntVector())
        l.push_back(Host::constInt(i));
      env[v] = l;
    } else if (!v->hasUses()) {
      return; // a function left by inlining, say: nothing reads it
    } else {
      throw Unsupported("a constant of type " + t->str());
    }
    return;
  }
  if (k == prim::If)
    return evalIf(node);
  if (k == prim::Loop)
    return evalLoop(node);
  // Lists, tuples and their elements are plumbing whatever they hold.
  bool plumbing = k == prim::ListConstruct || k == prim::ListUnpack ||
                  k == prim::TupleConstruct || k == prim::TupleUnpack ||
                  k == aten::__getitem__ || k == aten::len ||
                  k == prim::unchecked_cast || k == aten::__is__ ||
                  k == aten::__isnot__;
  if ((plumbing || !hasTensorInput(node)) && evalHostOp(node))
    return;
  evalTensorOp(node);
}

bool Evaluator::evalHostOp(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  std::string op = opName(node);
  auto in = node->inputs();
  torch::jit::Value *out =
      node->outputs().size() == 1 ? node->output() : nullptr;
  if (k == prim::ListConstruct) {
    // A list of tensors (Tensor[] or Tensor?[] with none absent) or of host
    // scalars.
    bool tensors = out->type()->isSubtypeOf(*ListType::ofTensors());
    for (torch::jit::Value *v : in)
      tensors = tensors || std::holds_alternative<Tensor>(get(v));
    if (tensors) {
      TensorList l;
      for (torch::jit::Value *v : in)
        l.push_back(tensorOf(v));
      env[out] = l;
    } else {
      HostList l;
      for (torch::jit::Value *v : in)
        l.push_back(hostOf(v));
      env[out] = l;
    }
    return true;
  }
  if (k == prim::ListUnpack || k == prim::TupleUnpack) {
    const Sym &s = get(in[0]);
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      if (auto *l = std::get_if<HostList>(&s))
        env[node->output(i)] = l->at(i);
      else if (auto *t = std::get_if<TensorList>(&s))
        env[node->output(i)] = t->at(i);
      else if (auto *tu = std::get_if<std::shared_ptr<Tuple>>(&s))
        env[node->output(i)] = (*tu)->elements.at(i);
      else
        throw Unsupported("unpacking a value that is not a list or tuple");
    }
    return true;
  }
  if (k == prim::TupleConstruct) {
    auto t = std::make_shared<Tuple>();
    for (torch::jit::Value *v : in)
      t->elements.push_back(get(v));
    env[out] = t;
    return true;
  }
  if (k == prim::device) {
    env[out] = Device{};
    return true;
  }
  if (k == prim::unchecked_cast || k == aten::detach) {
    env[out] = get(in[0]);
    return true;
  }
  if (k == aten::__is__ || k == aten::__isnot__) {
    bool none0 = isNone(in[0]), none1 = isNone(in[1]);
    if (!(none0 && none1) && !(none0 || none1))
      throw Unsupported("'is' between values that are not None");
    bool same = none0 && none1;
    env[out] = Host::constBool(k == aten::__is__ ? same : !same);
    return true;
  }
  if (k == aten::len) {
    const Sym &s = get(in[0]);
    if (auto *l = std::get_if<HostList>(&s))
      env[out] = Host::constInt(l->size());
    else if (auto *t = std::get_if<TensorList>(&s))
      env[out] = Host::constInt(t->size());
    else
      throw Unsupported("len of a value that is not a list");
    return true;
  }
  if (k == aten::__getitem__) {
    int64_t i = constInt(in[1], "a list index");
    const Sym &s = get(in[0]);
    auto pick = [&](auto &list) {
      int64_t n = static_cast<int64_t>(list.size());
      if (i < -n || i >= n)
        throw Unsupported("list index out of range");
      env[out] = list[i < 0 ? i + n : i];
    };
    if (auto *l = std::get_if<HostList>(&s))
      pick(*l);
    else if (auto *t = std::get_if<TensorList>(&s))
      pick(*t);
    else
      throw Unsupported("indexing a value that is not a list");
    return true;
  }
  if (out && out->type()->kind() == TypeKind::ListType) {
    // List arithmetic on shapes: slice, concatenation, repetition.
    if (k == aten::slice) {
      const HostList &l = as<HostList>(in[0], "a list");
      int64_t n = static_cast<int64_t>(l.size());
      auto bound = [&](torch::jit::Value *v, int64_t dflt) {
        if (isNone(v))
          return dflt;
        int64_t x = constInt(v, "a list slice bound");
        x = x < 0 ? x + n : x;
        return std::clamp<int64_t>(x, 0, n);
      };
      int64_t lo = bound(in[1], 0), hi = bound(in[2], n),
              step = constInt(in[3], "a list slice step");
      if (step < 1)
        throw Unsupported("a list slice step below 1");
      HostList r;
      for (int64_t i = lo; i < hi; i += step)
        r.push_back(l[i]);
      env[out] = r;
      return true;
    }
    if (k == aten::add) {
      HostList r = as<HostList>(in[0], "a list");
      const HostList &t = as<HostList>(in[1], "a list");
      r.insert(r.end(), t.begin(), t.end());
      env[out] = r;
      return true;
    }
    if (k == aten::mul) {
      const HostList &l = as<HostList>(in[0], "a list");
      HostList r;
      for (int64_t i = 0, n = constInt(in[1], "a list repetition"); i < n; ++i)
        r.insert(r.end(), l.begin(), l.end());
      env[out] = r;
      return true;
    }
    return false;
  }
  if (k == aten::__range_length) {
    Host lo = hostOf(in[0]), hi = hostOf(in[1]), step = hostOf(in[2]);
    int64_t s = constInt(in[2], "a range step");
    if (s <= 0)
      throw Unsupported("a range with a step below 1");
    Host span = intOp("max", intOp("sub", hi, lo), Host::constInt(0));
    env[out] =
        intOp("floordiv", intOp("add", span, Host::constInt(s - 1)), step);
    return true;
  }
  if (k == aten::__derive_index) {
    env[out] =
        intOp("add", hostOf(in[1]), intOp("mul", hostOf(in[0]), hostOf(in[2])));
    return true;
  }
  // Host scalar arithmetic and comparisons.
  static const std::map<std::string, std::string> compares = {
      {"eq", "eq"}, {"ne", "ne"}, {"lt", "lt"},
      {"le", "le"}, {"gt", "gt"}, {"ge", "ge"}};
  if ((op == "eq" || op == "ne") && in.size() == 2) {
    // Strings (a reduction mode) and devices (all on the CPU here) compare
    // when compiling.
    const Sym &x = get(in[0]), &y = get(in[1]);
    std::optional<bool> same;
    if (auto *a = std::get_if<Str>(&x))
      if (auto *c = std::get_if<Str>(&y))
        same = a->text == c->text;
    if (std::holds_alternative<Device>(x) && std::holds_alternative<Device>(y))
      same = true;
    if (same) {
      env[out] = Host::constBool(op == "eq" ? *same : !*same);
      return true;
    }
  }
  if (compares.count(op) && in.size() == 2) {
    env[out] = compare(op, hostOf(in[0]), hostOf(in[1]));
    return true;
  }
  if ((k == prim::min || k == prim::max) && in.size() == 2) {
    const Host &x = hostOf(in[0]), &y = hostOf(in[1]);
    if (x.kind != Host::Int || y.kind != Host::Int)
      throw Unsupported("min/max of host floats");
    env[out] = intOp(k == prim::min ? "min" : "max", x, y);
    return true;
  }
  if ((k == aten::add || k == aten::sub || k == aten::mul ||
       k == aten::floordiv) &&
      in.size() == 2) {
    const Host &x = hostOf(in[0]), &y = hostOf(in[1]);
    if (x.kind == Host::Int && y.kind == Host::Int) {
      env[out] = intOp(op, x, y);
      return true;
    }
    throw Unsupported("host float arithmetic");
  }
  if (k == aten::neg && in.size() == 1 && hostOf(in[0]).kind == Host::Int) {
    env[out] = intOp("sub", Host::constInt(0), hostOf(in[0]));
    return true;
  }
  if ((k == aten::__and__ || k == aten::__or__) && in.size() == 2) {
    const Host &x = hostOf(in[0]), &y = hostOf(in[1]);
    if (x.kind != Host::Bool || y.kind != Host::Bool)
      throw Unsupported("host bitwise op on integers");
    bool isAnd = k == aten::__and__;
    if (x.isConstant() && y.isConstant()) {
      env[out] = Host::constBool(isAnd ? (*x.i && *y.i) : (*x.i || *y.i));
      return true;
    }
    Value a = materialize(x, Host::Bool), c = materialize(y, Host::Bool);
    env[out] = Host{Host::Bool,
                    isAnd ? Value(arith::AndIOp::create(b, a, c))
                          : Value(arith::OrIOp::create(b, a, c)),
                    {},
                    {}};
    return true;
  }
  if (k == aten::__not__) {
    const Host &x = hostOf(in[0]);
    if (x.isConstant()) {
      env[out] = Host::constBool(!*x.i);
      return true;
    }
    Value one = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
    env[out] = Host{Host::Bool, arith::XOrIOp::create(b, x.value, one), {}, {}};
    return true;
  }
  return false;
}

void Evaluator::evalIf(Node *node) {
  const Host &cond = hostOf(node->input(0));
  Block *thenBlock = node->blocks()[0], *elseBlock = node->blocks()[1];
  auto bindOutputs = [&](Block *taken) {
    evalBlock(taken);
    std::vector<Sym> outs = blockOutputs(taken);
    for (size_t i = 0; i < outs.size(); ++i)
      env[node->output(i)] = outs[i];
  };
  if (cond.isConstant())
    return bindOutputs(*cond.i ? thenBlock : elseBlock);
  // A branch that only raises: the other one runs, when the condition says
  // so; otherwise the TorchScript runs and raises.
  bool thenRaises = onlyRaises(thenBlock), elseRaises = onlyRaises(elseBlock);
  if (thenRaises != elseRaises) {
    Value c = cond.value;
    if (thenRaises) {
      Value one = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
      c = arith::XOrIOp::create(b, c, one);
    }
    check(c);
    return bindOutputs(thenRaises ? elseBlock : thenBlock);
  }
  // Both branches: an scf.if yielding each result (tensors of the same dtype
  // and rank, host scalars of the same kind) and its branch's size checks.
  auto ifOp = mlir::scf::IfOp::create(b, mlir::TypeRange{}, cond.value,
                                      /*withElse=*/true);
  std::vector<std::vector<Sym>> branchOuts;
  std::vector<Value> branchOk, branchValuesOk;
  for (int which = 0; which < 2; ++which) {
    mlir::Block &block =
        which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(block.getTerminator());
    checks.emplace_back();
    valueChecks.emplace_back();
    evalBlock(which ? elseBlock : thenBlock);
    branchOuts.push_back(blockOutputs(which ? elseBlock : thenBlock));
    branchOk.push_back(allChecks());
    branchValuesOk.push_back(allValueChecks());
    checks.pop_back();
    valueChecks.pop_back();
  }
  // Result types: a tensor's static sizes where both branches agree.
  std::vector<Type> types;
  std::vector<std::vector<Value>> yields(2);
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const Sym &t0 = branchOuts[0][i], &t1 = branchOuts[1][i];
    if (auto *a = std::get_if<Tensor>(&t0)) {
      auto *c = std::get_if<Tensor>(&t1);
      if (!c || c->dtype != a->dtype || c->rank() != a->rank())
        throw Unsupported(
            where(node) +
            ": an if whose branches give tensors of different dtypes or ranks");
      ::llvm::SmallVector<int64_t> shape;
      for (size_t d = 0; d < a->rank(); ++d)
        shape.push_back(a->sizes[d].isConstant() && c->sizes[d].isConstant() &&
                                *a->sizes[d].i == *c->sizes[d].i
                            ? *a->sizes[d].i
                            : mlir::ShapedType::kDynamic);
      auto type = mlir::RankedTensorType::get(
          shape, elementType(b.getContext(), a->dtype));
      types.push_back(type);
      for (int which = 0; which < 2; ++which) {
        const Tensor &t = which ? *c : *a;
        mlir::OpBuilder::InsertionGuard guard(b);
        mlir::Block &block =
            which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
        b.setInsertionPoint(block.getTerminator());
        yields[which].push_back(
            t.value.getType() == type
                ? t.value
                : Value(tensor::CastOp::create(b, type, t.value)));
      }
    } else if (auto *h = std::get_if<Host>(&t0)) {
      auto *h1 = std::get_if<Host>(&t1);
      if (!h1 || h1->kind != h->kind)
        throw Unsupported(
            where(node) +
            ": an if whose branches give host values of different kinds");
      types.push_back(h->kind == Host::Float  ? b.getF64Type()
                      : h->kind == Host::Bool ? b.getI1Type()
                                              : Type(b.getIndexType()));
      for (int which = 0; which < 2; ++which) {
        mlir::OpBuilder::InsertionGuard guard(b);
        mlir::Block &block =
            which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
        b.setInsertionPoint(block.getTerminator());
        yields[which].push_back(materialize(which ? *h1 : *h, h->kind));
      }
    } else if (std::holds_alternative<None>(t0) &&
               std::holds_alternative<None>(t1)) {
      types.push_back(Type());
    } else {
      throw Unsupported(where(node) +
                        ": an if whose branches give lists or other values");
    }
  }
  for (int which = 0; which < 2; ++which) {
    yields[which].push_back(branchOk[which]);
    yields[which].push_back(branchValuesOk[which]);
  }
  // The dynamic sizes of tensor results, yielded as index values: the shape
  // function needs them, not the tensors (canonicalization then drops the
  // tensors' computation from it).
  size_t dimResults = 0;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    auto type = mlir::dyn_cast_or_null<mlir::RankedTensorType>(types[i]);
    if (!type)
      continue;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!type.isDynamicDim(d))
        continue;
      ++dimResults;
      for (int which = 0; which < 2; ++which) {
        mlir::OpBuilder::InsertionGuard guard(b);
        mlir::Block &block =
            which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
        b.setInsertionPoint(block.getTerminator());
        yields[which].push_back(
            index(std::get<Tensor>(branchOuts[which][i]).sizes[d]));
      }
    }
  }
  ::llvm::SmallVector<Type> resultTypes;
  for (Type t : types)
    if (t)
      resultTypes.push_back(t);
  resultTypes.push_back(b.getI1Type());
  resultTypes.push_back(mlir::RankedTensorType::get({}, b.getI1Type()));
  for (size_t i = 0; i < dimResults; ++i)
    resultTypes.push_back(b.getIndexType());
  auto result =
      mlir::scf::IfOp::create(b, resultTypes, cond.value, /*withElse=*/true);
  for (int which = 0; which < 2; ++which) {
    mlir::Region &from = which ? ifOp.getElseRegion() : ifOp.getThenRegion();
    mlir::Region &to = which ? result.getElseRegion() : result.getThenRegion();
    to.takeBody(from);
    mlir::Operation *oldYield = to.front().getTerminator();
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(oldYield);
    mlir::scf::YieldOp::create(b, yields[which]);
    oldYield->erase();
  }
  ifOp.erase();
  size_t r = 0, dimAt = result.getNumResults() - dimResults;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    if (!types[i]) {
      env[node->output(i)] = None{};
      continue;
    }
    Value v = result.getResult(r++);
    if (auto *a = std::get_if<Tensor>(&branchOuts[0][i])) {
      auto type = mlir::cast<mlir::RankedTensorType>(v.getType());
      std::vector<Host> sizes;
      for (int64_t d = 0; d < type.getRank(); ++d)
        sizes.push_back(type.isDynamicDim(d)
                            ? dynamicInt(result.getResult(dimAt++))
                            : Host::constInt(type.getDimSize(d)));
      env[node->output(i)] = Tensor{v, a->dtype, sizes};
    } else {
      env[node->output(i)] =
          Host{std::get<Host>(branchOuts[0][i]).kind, v, {}, {}};
    }
  }
  size_t checksAt = result.getNumResults() - dimResults - 2;
  check(result.getResult(checksAt));
  valueCheck(result.getResult(checksAt + 1));
}

void Evaluator::evalLoop(Node *node) {
  // Loops over a shape (a rank, a list's length) have a trip count known
  // when compiling: unrolled.
  const Host &trip = hostOf(node->input(0));
  const Host &cond = hostOf(node->input(1));
  if (!trip.isConstant() || !cond.isConstant())
    throw Unsupported(where(node) +
                      ": a loop whose trip count is not known when compiling");
  if (*trip.i > 4096)
    throw Unsupported(where(node) + ": a loop of over 4096 iterations");
  Block *body = node->blocks()[0];
  std::vector<Sym> carried;
  for (size_t i = 2; i < node->inputs().size(); ++i)
    carried.push_back(get(node->input(i)));
  bool go = *cond.i;
  for (int64_t it = 0; go && it < *trip.i; ++it) {
    env[body->inputs()[0]] = Host::constInt(it);
    for (size_t i = 0; i < carried.size(); ++i)
      env[body->inputs()[i + 1]] = carried[i];
    evalBlock(body);
    std::vector<Sym> outs = blockOutputs(body);
    const Host *c = std::get_if<Host>(&outs[0]);
    if (!c || !c->isConstant())
      throw Unsupported(where(node) +
                        ": a loop whose condition is not known when compiling");
    go = *c->i;
    carried.assign(outs.begin() + 1, outs.end());
  }
  for (size_t i = 0; i < carried.size(); ++i)
    env[node->output(i)] = carried[i];
}

} // namespace staticify::lower::bridge
