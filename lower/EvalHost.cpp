//===- EvalHost.cpp - lists, tuples and host scalars ===//
//
// What the graph computes on the host: shapes as lists of host integers,
// their arithmetic and comparisons (folded when known when compiling), lists
// and tuples of anything (plumbing), and the host scalars a tensor gives
// (`int(t)`: on the CPU a read of the kernel's own tensor, no sync).
//
//===----------------------------------------------------------------------===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

void Evaluator::lowerListConstruct(Node *node) {
  // A list of tensors (Tensor[] or Tensor?[] with none absent) or of host
  // scalars.
  bool tensors = node->output()->type()->isSubtypeOf(*c10::ListType::ofTensors());
  for (torch::jit::Value *v : node->inputs())
    tensors = tensors || std::holds_alternative<Tensor>(get(v));
  if (tensors) {
    TensorList l;
    for (torch::jit::Value *v : node->inputs())
      l.push_back(tensorOf(v));
    return bind(node, l);
  }
  HostList l;
  for (torch::jit::Value *v : node->inputs())
    l.push_back(hostOf(v));
  bind(node, l);
}

void Evaluator::lowerUnpack(Node *node) {
  const Sym &s = get(node->input(0));
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    if (auto *l = std::get_if<HostList>(&s))
      bind(node, l->at(i), i);
    else if (auto *t = std::get_if<TensorList>(&s))
      bind(node, t->at(i), i);
    else if (auto *tu = std::get_if<std::shared_ptr<Tuple>>(&s))
      bind(node, (*tu)->elements.at(i), i);
    else
      throw Unsupported("unpacking a value that is not a list or tuple");
  }
}

void Evaluator::lowerTupleConstruct(Node *node) {
  auto t = std::make_shared<Tuple>();
  for (torch::jit::Value *v : node->inputs())
    t->elements.push_back(get(v));
  bind(node, t);
}

void Evaluator::lowerDevice(Node *node) { bind(node, Device{}); }

/// Ops whose result is their first operand (casts of the static type, and
/// contiguous/clone/detach: the kernel's tensors are values, never aliased).
void Evaluator::lowerSame(Node *node) { bind(node, get(node->input(0))); }

void Evaluator::lowerIs(Node *node) {
  bool none0 = isNone(node->input(0)), none1 = isNone(node->input(1));
  if (!(none0 && none1) && !(none0 || none1))
    throw Unsupported("'is' between values that are not None");
  bool same = none0 && none1;
  bind(node, Host::constBool(node->kind() == c10::aten::__is__ ? same : !same));
}

void Evaluator::lowerLen(Node *node) {
  const Sym &s = get(node->input(0));
  if (auto *l = std::get_if<HostList>(&s))
    return bind(node, Host::constInt(l->size()));
  if (auto *t = std::get_if<TensorList>(&s))
    return bind(node, Host::constInt(t->size()));
  throw Unsupported("len of a value that is not a list");
}

void Evaluator::lowerGetItem(Node *node) {
  int64_t i = constInt(node->input(1), "a list index");
  const Sym &s = get(node->input(0));
  auto pick = [&](auto &list) {
    int64_t n = static_cast<int64_t>(list.size());
    if (i < -n || i >= n)
      throw Unsupported("list index out of range");
    bind(node, list[i < 0 ? i + n : i]);
  };
  if (auto *l = std::get_if<HostList>(&s))
    return pick(*l);
  if (auto *t = std::get_if<TensorList>(&s))
    return pick(*t);
  throw Unsupported("indexing a value that is not a list");
}

void Evaluator::lowerListSlice(Node *node) {
  auto in = node->inputs();
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
  bind(node, r);
}

void Evaluator::lowerListAdd(Node *node) {
  HostList r = as<HostList>(node->input(0), "a list");
  const HostList &t = as<HostList>(node->input(1), "a list");
  r.insert(r.end(), t.begin(), t.end());
  bind(node, r);
}

void Evaluator::lowerListMul(Node *node) {
  const HostList &l = as<HostList>(node->input(0), "a list");
  HostList r;
  for (int64_t i = 0, n = constInt(node->input(1), "a list repetition"); i < n;
       ++i)
    r.insert(r.end(), l.begin(), l.end());
  bind(node, r);
}

void Evaluator::lowerRangeLength(Node *node) {
  auto in = node->inputs();
  Host lo = hostOf(in[0]), hi = hostOf(in[1]), step = hostOf(in[2]);
  int64_t s = constInt(in[2], "a range step");
  if (s <= 0)
    throw Unsupported("a range with a step below 1");
  Host span = intOp("max", intOp("sub", hi, lo), Host::constInt(0));
  bind(node, intOp("floordiv", intOp("add", span, Host::constInt(s - 1)), step));
}

void Evaluator::lowerDeriveIndex(Node *node) {
  auto in = node->inputs();
  bind(node,
       intOp("add", hostOf(in[1]), intOp("mul", hostOf(in[0]), hostOf(in[2]))));
}

/// Strings (a reduction mode) and devices (one device per kernel) compare
/// when compiling.
void Evaluator::lowerKnownEquality(Node *node) {
  const Sym &x = get(node->input(0)), &y = get(node->input(1));
  bool same = true;
  if (auto *a = std::get_if<Str>(&x)) {
    const Str &c = std::get<Str>(y);
    if (!a->known || !c.known)
      throw Unsupported(where(node) + ": a string built at run time");
    same = a->text == c.text;
  }
  bind(node, Host::constBool(opName(node) == "eq" ? same : !same));
}

void Evaluator::lowerHostCompare(Node *node) {
  bind(node,
       compare(opName(node), hostOf(node->input(0)), hostOf(node->input(1))));
}

/// x == y of two lists of host integers (shapes): element by element.
void Evaluator::lowerListEquality(Node *node) {
  const HostList &x = as<HostList>(node->input(0), "a list"),
                 &y = as<HostList>(node->input(1), "a list");
  Host same = Host::constBool(x.size() == y.size());
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    Host eq = compare("eq", x[i], y[i]);
    if (eq.isConstant() && same.isConstant())
      same = Host::constBool(*eq.i && *same.i);
    else if (!(eq.isConstant() && *eq.i))
      same = Host{Host::Bool,
                  arith::AndIOp::create(b, materialize(same, Host::Bool),
                                        materialize(eq, Host::Bool)),
                  {},
                  {}};
  }
  bind(node, opName(node) == "eq" ? same : logicalNot(same));
}

/// "...".format(...): an error message (what else the bridge's graphs do
/// with strings is compare known ones, which this one is not).
void Evaluator::lowerFormat(Node *node) { bind(node, Str{"", false}); }

/// warnings.warn in a branch: the kernel cannot warn, so the shape function
/// requires the branch not taken (the TorchScript runs and warns if it
/// is).
void Evaluator::lowerWarn(Node *node) {
  if (checks.size() == 1)
    throw Unsupported(where(node) + ": a warning on every call");
  check(arith::ConstantIntOp::create(b, b.getI1Type(), 0));
}

void Evaluator::lowerHostMinMax(Node *node) {
  const Host &x = hostOf(node->input(0)), &y = hostOf(node->input(1));
  bind(node, intOp(node->kind() == c10::prim::min ? "min" : "max", x, y));
}

void Evaluator::lowerHostArith(Node *node) {
  bind(node, intOp(opName(node), hostOf(node->input(0)),
                   hostOf(node->input(1))));
}

void Evaluator::lowerHostNeg(Node *node) {
  bind(node, intOp("sub", Host::constInt(0), hostOf(node->input(0))));
}

void Evaluator::lowerHostLogic(Node *node) {
  const Host &x = hostOf(node->input(0)), &y = hostOf(node->input(1));
  bool isAnd = node->kind() == c10::aten::__and__;
  if (x.isConstant() && y.isConstant())
    return bind(node,
                Host::constBool(isAnd ? (*x.i && *y.i) : (*x.i || *y.i)));
  Value a = materialize(x, Host::Bool), c = materialize(y, Host::Bool);
  bind(node, Host{Host::Bool,
                  isAnd ? Value(arith::AndIOp::create(b, a, c))
                        : Value(arith::OrIOp::create(b, a, c)),
                  {},
                  {}});
}

Host Evaluator::logicalNot(const Host &x) {
  if (x.isConstant())
    return Host::constBool(!*x.i);
  Value one = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
  return Host{Host::Bool, arith::XOrIOp::create(b, x.value, one), {}, {}};
}

void Evaluator::lowerNot(Node *node) {
  bind(node, logicalNot(hostOf(node->input(0))));
}

/// int(t), float(t), bool(t) of a one-element tensor: its element, read in
/// the kernel (the shape function computes it too where a size depends on
/// it). PyTorch raises for more than one element: the shape function
/// requires exactly one.
void Evaluator::lowerTensorToHost(Node *node) {
  const Tensor &t = tensorOf(node->input(0));
  if (cuda)
    throw Unsupported(where(node) +
                      ": a tensor's value read on the host (on a GPU, a sync)");
  checkEqual(numel(t.sizes), Host::constInt(1));
  Value element = tensor::ExtractOp::create(b, t.value, ::llvm::SmallVector<Value>(
      t.rank(), arith::ConstantIndexOp::create(b, 0)));
  std::string op = opName(node);
  if (op == "Int") {
    // Python's int() truncates toward zero.
    Value i64 = convert(b, b.getLoc(), element, t.dtype, ScalarType::Long);
    return bind(node, dynamicInt(arith::IndexCastOp::create(
                          b, b.getIndexType(), i64)));
  }
  if (op == "Float")
    return bind(node, Host{Host::Float,
                           convert(b, b.getLoc(), element, t.dtype,
                                   ScalarType::Double),
                           {},
                           {}});
  bind(node, Host{Host::Bool,
                  convert(b, b.getLoc(), element, t.dtype, ScalarType::Bool),
                  {},
                  {}});
}

/// Known in each kernel: it runs on tensors of its device only.
void Evaluator::lowerIsCuda(Node *node) {
  tensorOf(node->input(0));
  bind(node, Host::constBool(cuda));
}

/// The bridge's dtypes are never complex.
void Evaluator::lowerIsComplex(Node *node) {
  tensorOf(node->input(0));
  bind(node, Host::constBool(false));
}

void Evaluator::lowerResultType(Node *node) {
  ScalarType t = promoted({operandOf(node->input(0)), operandOf(node->input(1))});
  bind(node, Host::constInt(static_cast<int64_t>(t)));
}

void Evaluator::lowerPromoteTypes(Node *node) {
  auto a = static_cast<ScalarType>(constInt(node->input(0), "a dtype"));
  auto c = static_cast<ScalarType>(constInt(node->input(1), "a dtype"));
  bind(node, Host::constInt(static_cast<int64_t>(c10::promoteTypes(a, c))));
}

} // namespace staticify::lower::bridge
