//===- EvalControl.cpp - nodes, constants, branches and loops ===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

void Evaluator::evalNode(Node *node) {
  const auto &table = lowerings();
  std::string key = operatorKey(node);
  auto it = table.find(key);
  if (it != table.end())
    return (this->*(it->second))(node);
  // Name the overload where the bridge lowers others of the op.
  std::string op = node->kind().toQualString();
  auto other = table.lower_bound(op);
  if (other != table.end() && other->first.rfind(op, 0) == 0 && key != op)
    throw Unsupported(where(node) + ": overload " + key +
                      " is not supported by the bridge");
  throw Unsupported(where(node) + ": not supported by the bridge");
}

void Evaluator::lowerConstant(Node *node) {
  using namespace c10;
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
  } else if (v->hasUses()) {
    // (A function left by inlining, say, that nothing reads, is skipped.)
    throw Unsupported("a constant of type " + t->str());
  }
}

void Evaluator::lowerIf(Node *node) {
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
  lowerIfBothBranches(node, cond.value);
}

/// Both branches: an scf.if yielding each result (tensors of the same dtype
/// and rank, host scalars of the same kind) and its branch's size checks.
void Evaluator::lowerIfBothBranches(Node *node, Value cond) {
  Block *thenBlock = node->blocks()[0], *elseBlock = node->blocks()[1];
  auto ifOp = mlir::scf::IfOp::create(b, mlir::TypeRange{}, cond,
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
      mlir::scf::IfOp::create(b, resultTypes, cond, /*withElse=*/true);
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

void Evaluator::lowerLoop(Node *node) {
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
