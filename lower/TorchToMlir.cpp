//===- TorchToMlir.cpp - A TorchScript graph as MLIR functions on tensors -===//
//
// An abstract evaluation of the graph: each TorchScript value becomes a
// `Sym` (a tensor with its dtype and per-dimension sizes, a host scalar, a
// list, a device...). Host scalars known while building are constants and
// decide branches and loops; the others are index arithmetic. Tensors are
// linalg/tensor ops. Size checks the graph implies (two operands of an
// elementwise op have equal sizes, a reshape keeps the element count) are
// collected as i1 values: the shape function reports whether they all hold,
// and the kernel assumes they do.
//
// The graph is evaluated twice, once into each function; canonicalization
// then removes from the shape function the tensor computations it does not
// need.
//
//===----------------------------------------------------------------------===//
#include "lower/TorchToMlir.h"

#include "passes/GraphUtils.h"
#include "passes/Analysis.h"

#include <torch/csrc/jit/ir/ir.h>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "staticify/StaticifyDialect.h"

#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <variant>

namespace staticify::lower {

using c10::ScalarType;
using mlir::ImplicitLocOpBuilder;
using mlir::OpFoldResult;
using mlir::Type;
using mlir::Value;
using torch::jit::Block;
using torch::jit::Node;
namespace arith = mlir::arith;
namespace linalg = mlir::linalg;
namespace math = mlir::math;
namespace tensor = mlir::tensor;

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

namespace {
const std::pair<const char *, ScalarType> kDtypes[] = {
    {"f16", ScalarType::Half},  {"bf16", ScalarType::BFloat16},
    {"f32", ScalarType::Float}, {"f64", ScalarType::Double},
    {"i8", ScalarType::Char},   {"i16", ScalarType::Short},
    {"i32", ScalarType::Int},   {"i64", ScalarType::Long},
    {"b8", ScalarType::Bool}};
} // namespace

std::string dtypeName(ScalarType dtype) {
  for (const auto &[name, t] : kDtypes)
    if (t == dtype)
      return name;
  return "";
}

std::vector<TensorSignature> parseSignature(const std::string &text) {
  std::vector<TensorSignature> out;
  size_t pos = 0;
  auto skipSpaces = [&] {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t'))
      ++pos;
  };
  auto fail = [&](const std::string &what) -> std::invalid_argument {
    return std::invalid_argument("input types '" + text + "': " + what +
                                 " at character " + std::to_string(pos + 1) +
                                 " (expected e.g. 'f32[?], i64[?,4]')");
  };
  while (true) {
    skipSpaces();
    size_t start = pos;
    while (pos < text.size() && std::isalnum(static_cast<unsigned char>(text[pos])))
      ++pos;
    std::string name = text.substr(start, pos - start);
    std::optional<ScalarType> dtype;
    for (const auto &[n, t] : kDtypes)
      if (name == n)
        dtype = t;
    if (!dtype)
      throw fail("unknown dtype '" + name + "' (f16 bf16 f32 f64 i8 i16 i32 i64 b8)");
    if (pos >= text.size() || text[pos] != '[')
      throw fail("'[' expected");
    ++pos;
    TensorSignature sig{*dtype, {}};
    skipSpaces();
    while (pos < text.size() && text[pos] != ']') {
      skipSpaces();
      if (text[pos] == '?') {
        sig.sizes.push_back(-1);
        ++pos;
      } else {
        size_t digits = pos;
        while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
          ++pos;
        if (digits == pos || pos - digits > 12)
          throw fail("a size ('?' or a number) expected");
        sig.sizes.push_back(std::stoll(text.substr(digits, pos - digits)));
      }
      skipSpaces();
      if (pos < text.size() && text[pos] == ',')
        ++pos;
      else if (pos >= text.size() || text[pos] != ']')
        throw fail("',' or ']' expected");
    }
    if (pos >= text.size())
      throw fail("']' expected");
    ++pos;
    if (sig.sizes.size() > 8)
      throw fail("rank over 8");
    out.push_back(std::move(sig));
    skipSpaces();
    if (pos == text.size())
      return out;
    if (text[pos] != ',')
      throw fail("',' expected between inputs");
    ++pos;
  }
}

std::string formatSignature(const std::vector<TensorSignature> &signature) {
  std::ostringstream s;
  for (size_t i = 0; i < signature.size(); ++i) {
    s << (i ? ", " : "") << dtypeName(signature[i].dtype) << "[";
    for (size_t d = 0; d < signature[i].sizes.size(); ++d) {
      int64_t n = signature[i].sizes[d];
      s << (d ? "," : "");
      if (n < 0)
        s << "?";
      else
        s << n;
    }
    s << "]";
  }
  return s.str();
}

//===----------------------------------------------------------------------===//
// Values of the abstract evaluation
//===----------------------------------------------------------------------===//

namespace {

/// A host scalar: a constant, or an SSA value (index for ints, f64 for
/// floats, i1 for bools).
struct Host {
  enum Kind { Int, Float, Bool } kind = Int;
  Value value;
  std::optional<int64_t> i;
  std::optional<double> f;

  static Host constInt(int64_t v) { return {Int, {}, v, {}}; }
  static Host constFloat(double v) { return {Float, {}, {}, v}; }
  static Host constBool(bool v) { return {Bool, {}, v, {}}; }
  bool isConstant() const { return !value; }
};

struct Tensor {
  Value value; // a ranked tensor
  ScalarType dtype;
  std::vector<Host> sizes; // Int hosts
  size_t rank() const { return sizes.size(); }
};

struct None {};
struct Device {};
struct Str {
  std::string text;
};
using HostList = std::vector<Host>;
using TensorList = std::vector<Tensor>;
struct Tuple;
using Sym = std::variant<None, Host, Tensor, HostList, TensorList, Device, Str,
                         std::shared_ptr<Tuple>>;
struct Tuple {
  std::vector<Sym> elements;
};

/// Why the bridge stops: an op or a case it does not support.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool isFloating(ScalarType t) { return c10::isFloatingType(t); }
bool isIntegral(ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/false); }

Type elementType(mlir::MLIRContext *ctx, ScalarType t) {
  mlir::Builder b(ctx);
  switch (t) {
  case ScalarType::Half: return b.getF16Type();
  case ScalarType::BFloat16: return b.getBF16Type();
  case ScalarType::Float: return b.getF32Type();
  case ScalarType::Double: return b.getF64Type();
  case ScalarType::Char: return b.getI8Type();
  case ScalarType::Short: return b.getI16Type();
  case ScalarType::Int: return b.getI32Type();
  case ScalarType::Long: return b.getI64Type();
  case ScalarType::Bool: return b.getI1Type();
  default:
    throw Unsupported(std::string("dtype ") + c10::toString(t) +
                      " is not supported by the bridge");
  }
}

/// PyTorch's type promotion (c10's ResultTypeState): tensors with
/// dimensions outrank zero-dimensional ones, which outrank host scalars;
/// a lower group changes the result only by a higher category (bool <
/// integer < floating).
class Promotion {
public:
  void tensor(const Tensor &t) { merge(t.rank() ? dim : zero, t.dtype); }
  void host(const Host &h) {
    merge(wrapped, h.kind == Host::Float  ? ScalarType::Float
                   : h.kind == Host::Int ? ScalarType::Long
                                         : ScalarType::Bool);
  }
  ScalarType result() const {
    return combine(dim, combine(zero, wrapped));
  }

private:
  static void merge(std::optional<ScalarType> &slot, ScalarType t) {
    slot = slot ? c10::promoteTypes(*slot, t) : t;
  }
  static ScalarType combine(std::optional<ScalarType> higher,
                            std::optional<ScalarType> lower) {
    if (!higher)
      return lower ? *lower : ScalarType::Undefined;
    if (!lower || *lower == ScalarType::Undefined)
      return *higher;
    if (isFloating(*higher))
      return *higher;
    if (*higher == ScalarType::Bool || isFloating(*lower))
      return c10::promoteTypes(*higher, *lower);
    return *higher;
  }
  std::optional<ScalarType> dim, zero, wrapped;
};

/// The op and its source line, as reasons name them ("aten::cumsum at
/// model.py:12").
std::string where(Node *node) {
  std::string out = node->kind().toQualString();
  if (auto loc = locationOf(node)) {
    std::string file = loc->file.substr(loc->file.rfind('/') + 1);
    out += " at " + file + ":" + std::to_string(loc->line);
  }
  return out;
}

/// An operand of an elementwise op: a tensor or a host scalar.
using Operand = std::variant<Tensor, Host>;

class Evaluator {
public:
  Evaluator(ImplicitLocOpBuilder &b, bool hasSelf, mlir::ModuleOp module)
      : b(b), hasSelf(hasSelf), module(module) {}

  /// Evaluates \p graph with its tensor inputs bound to \p inputs; returns
  /// the graph's outputs.
  std::vector<Sym> run(const torch::jit::Graph &graph,
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

  /// Every size check made at the top level, and-ed (true if none).
  Value allChecks() { return conjunction(checks.back()); }
  Value allValueChecks() { return conjunction(valueChecks.back()); }
  void setSeed(Value v) { seed = v; }
  bool usesRandom() const { return randomOps > 0; }

  Value index(const Host &h) { return materialize(h, Host::Int); }

private:
  //===--------------------------------------------------------------------===//
  // Environment
  //===--------------------------------------------------------------------===//

  const Sym &get(const torch::jit::Value *v) {
    auto it = env.find(v);
    if (it == env.end())
      throw Unsupported("value %" + v->debugName() + " (" +
                        v->node()->kind().toQualString() +
                        ") is not supported by the bridge");
    return it->second;
  }
  template <typename T> const T &as(torch::jit::Value *v, const char *what) {
    const Sym &s = get(v);
    if (auto *p = std::get_if<T>(&s))
      return *p;
    throw Unsupported(std::string("expected ") + what + " for %" + v->debugName());
  }
  const Tensor &tensorOf(torch::jit::Value *v) { return as<Tensor>(v, "a tensor"); }
  const Host &hostOf(torch::jit::Value *v) { return as<Host>(v, "a host scalar"); }
  bool isNone(torch::jit::Value *v) { return std::holds_alternative<None>(get(v)); }
  int64_t constInt(torch::jit::Value *v, const char *what) {
    const Host &h = hostOf(v);
    if (h.kind != Host::Int || !h.i || h.value)
      throw Unsupported(std::string(what) + " must be known when compiling");
    return *h.i;
  }
  std::optional<ScalarType> dtypeArg(torch::jit::Value *v) {
    if (isNone(v))
      return std::nullopt;
    return static_cast<ScalarType>(constInt(v, "a dtype"));
  }

  //===--------------------------------------------------------------------===//
  // Host scalars
  //===--------------------------------------------------------------------===//

  Value materialize(const Host &h, Host::Kind as) {
    Value v = h.value;
    if (!v) {
      if (h.kind == Host::Float)
        v = arith::ConstantFloatOp::create(b, b.getF64Type(), llvm::APFloat(*h.f));
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
      return h.kind == Host::Bool ? Value(arith::UIToFPOp::create(b, b.getF64Type(), v))
                                  : Value(arith::SIToFPOp::create(b, b.getF64Type(), v));
    }
    throw Unsupported("a host scalar of an unexpected kind");
  }

  Host dynamicInt(Value v) { return Host{Host::Int, v, {}, {}}; }

  /// Host integer arithmetic, folded when both sides are constants.
  Host intOp(const std::string &op, const Host &x, const Host &y) {
    if (x.isConstant() && y.isConstant() && x.kind == Host::Int && y.kind == Host::Int) {
      int64_t a = *x.i, c = *y.i;
      if (op == "add") return Host::constInt(a + c);
      if (op == "sub") return Host::constInt(a - c);
      if (op == "mul") return Host::constInt(a * c);
      if (op == "min") return Host::constInt(std::min(a, c));
      if (op == "max") return Host::constInt(std::max(a, c));
      if (op == "floordiv" && c != 0) {
        int64_t q = a / c;
        return Host::constInt((a % c != 0 && ((a < 0) != (c < 0))) ? q - 1 : q);
      }
    }
    Value a = index(x), c = index(y);
    if (op == "add") return dynamicInt(arith::AddIOp::create(b, a, c));
    if (op == "sub") return dynamicInt(arith::SubIOp::create(b, a, c));
    if (op == "mul") return dynamicInt(arith::MulIOp::create(b, a, c));
    if (op == "min") return dynamicInt(arith::MinSIOp::create(b, a, c));
    if (op == "max") return dynamicInt(arith::MaxSIOp::create(b, a, c));
    if (op == "floordiv") {
      check(arith::CmpIOp::create(b, arith::CmpIPredicate::ne, c,
                                  arith::ConstantIndexOp::create(b, 0)));
      return dynamicInt(arith::FloorDivSIOp::create(b, a, c));
    }
    throw Unsupported("host integer op " + op);
  }

  Host compare(const std::string &op, const Host &x, const Host &y) {
    bool floats = x.kind == Host::Float || y.kind == Host::Float;
    if (x.isConstant() && y.isConstant()) {
      double a = x.f ? *x.f : double(*x.i), c = y.f ? *y.f : double(*y.i);
      bool r = op == "eq" ? a == c : op == "ne" ? a != c : op == "lt" ? a < c
             : op == "le" ? a <= c : op == "gt" ? a > c : a >= c;
      return Host::constBool(r);
    }
    if (floats) {
      using P = arith::CmpFPredicate;
      P p = op == "eq" ? P::OEQ : op == "ne" ? P::UNE : op == "lt" ? P::OLT
          : op == "le" ? P::OLE : op == "gt" ? P::OGT : P::OGE;
      return Host{Host::Bool,
                  arith::CmpFOp::create(b, p, materialize(x, Host::Float),
                                        materialize(y, Host::Float)), {}, {}};
    }
    using P = arith::CmpIPredicate;
    P p = op == "eq" ? P::eq : op == "ne" ? P::ne : op == "lt" ? P::slt
        : op == "le" ? P::sle : op == "gt" ? P::sgt : P::sge;
    return Host{Host::Bool, arith::CmpIOp::create(b, p, index(x), index(y)), {}, {}};
  }

  void check(Value cond) { checks.back().push_back(cond); }
  void valueCheck(Value cond) { valueChecks.back().push_back(cond); }
  Value conjunction(const std::vector<Value> &conds) {
    Value ok = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
    for (Value c : conds)
      ok = arith::AndIOp::create(b, ok, c);
    return ok;
  }
  void checkEqual(const Host &x, const Host &y) {
    Host eq = compare("eq", x, y);
    if (eq.isConstant()) {
      if (!*eq.i)
        throw Unsupported("sizes " + std::to_string(*x.i) + " and " +
                          std::to_string(*y.i) + " do not match");
      return;
    }
    check(eq.value);
  }

  //===--------------------------------------------------------------------===//
  // Scalars inside kernels
  //===--------------------------------------------------------------------===//

  Value convert(mlir::OpBuilder &ob, mlir::Location loc, Value v, ScalarType from,
                ScalarType to) {
    if (from == to)
      return v;
    Type target = elementType(ob.getContext(), to);
    if (to == ScalarType::Bool) {
      if (isFloating(from)) {
        Value zero = arith::ConstantOp::create(ob, loc, ob.getFloatAttr(v.getType(), 0.0));
        return arith::CmpFOp::create(ob, loc, arith::CmpFPredicate::UNE, v, zero);
      }
      Value zero = arith::ConstantOp::create(ob, loc, ob.getIntegerAttr(v.getType(), 0));
      return arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::ne, v, zero);
    }
    if (isFloating(from) && isFloating(to))
      return c10::elementSize(to) > c10::elementSize(from) ||
                     (from == ScalarType::Half && to == ScalarType::BFloat16)
                 ? Value(arith::ExtFOp::create(ob, loc, target, v))
                 : Value(arith::TruncFOp::create(ob, loc, target, v));
    if (isFloating(to))
      return from == ScalarType::Bool ? Value(arith::UIToFPOp::create(ob, loc, target, v))
                                      : Value(arith::SIToFPOp::create(ob, loc, target, v));
    if (isFloating(from))
      return arith::FPToSIOp::create(ob, loc, target, v);
    unsigned fw = v.getType().getIntOrFloatBitWidth(), tw = target.getIntOrFloatBitWidth();
    if (tw > fw)
      return from == ScalarType::Bool ? Value(arith::ExtUIOp::create(ob, loc, target, v))
                                      : Value(arith::ExtSIOp::create(ob, loc, target, v));
    return arith::TruncIOp::create(ob, loc, target, v);
  }

  /// A host scalar as an element of dtype \p to (the conversion is emitted
  /// where the caller's builder points).
  Value hostElement(mlir::OpBuilder &ob, mlir::Location loc, const Host &h, ScalarType to) {
    Type t = elementType(ob.getContext(), to);
    if (h.isConstant()) {
      if (isFloating(to))
        return arith::ConstantOp::create(ob, loc, ob.getFloatAttr(t, h.f ? *h.f : double(*h.i)));
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

  //===--------------------------------------------------------------------===//
  // Tensors
  //===--------------------------------------------------------------------===//

  std::vector<OpFoldResult> foldResults(const std::vector<Host> &sizes) {
    std::vector<OpFoldResult> out;
    for (const Host &s : sizes)
      out.push_back(s.isConstant() ? OpFoldResult(b.getIndexAttr(*s.i))
                                   : OpFoldResult(s.value));
    return out;
  }
  mlir::RankedTensorType tensorType(const std::vector<Host> &sizes, ScalarType dtype) {
    llvm::SmallVector<int64_t> shape;
    for (const Host &s : sizes)
      shape.push_back(s.isConstant() ? *s.i : mlir::ShapedType::kDynamic);
    return mlir::RankedTensorType::get(shape, elementType(b.getContext(), dtype));
  }
  Value empty(const std::vector<Host> &sizes, ScalarType dtype) {
    return tensor::EmptyOp::create(b, foldResults(sizes),
                                   elementType(b.getContext(), dtype));
  }
  Tensor filled(const std::vector<Host> &sizes, ScalarType dtype, const Host &value) {
    Value init = empty(sizes, dtype);
    Value v = hostElement(b, b.getLoc(), value, dtype);
    Value out = linalg::FillOp::create(b, mlir::ValueRange{v}, mlir::ValueRange{init})
                    .getResult(0);
    return {out, dtype, sizes};
  }

  using Body = std::function<Value(mlir::OpBuilder &, mlir::Location,
                                   llvm::ArrayRef<Value>)>;

  /// out[i] = body(operands converted to \p computeAs at i), broadcasting
  /// as PyTorch does; where two sizes are dynamic, the shape function
  /// checks that they are equal (a size 1 broadcast at run time takes the
  /// TorchScript path).
  Tensor elementwise(const std::vector<Operand> &operands, ScalarType computeAs,
                     ScalarType outDtype, const Body &body) {
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
        exprs.push_back(broadcast ? b.getAffineConstantExpr(0) : b.getAffineDimExpr(j));
      }
      maps.push_back(mlir::AffineMap::get(rank, 0, exprs, b.getContext()));
      slot.push_back(static_cast<int>(inputs.size()));
      inputs.push_back(t->value);
    }
    maps.push_back(b.getMultiDimIdentityMap(rank));
    Value init = empty(out, outDtype);
    llvm::SmallVector<mlir::utils::IteratorType> iters(rank, mlir::utils::IteratorType::parallel);
    // Host scalars become elements outside the body (values defined above
    // a linalg body are usable in it).
    std::vector<Value> hostValues;
    for (const Operand &o : operands)
      hostValues.push_back(std::holds_alternative<Host>(o)
                               ? hostElement(b, b.getLoc(), std::get<Host>(o), computeAs)
                               : Value());
    auto generic = linalg::GenericOp::create(
        b, mlir::TypeRange{init.getType()}, inputs, mlir::ValueRange{init}, maps, iters,
        [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
          llvm::SmallVector<Value> xs;
          for (size_t k = 0; k < operands.size(); ++k) {
            if (slot[k] < 0)
              xs.push_back(hostValues[k]);
            else
              xs.push_back(convert(ob, loc, args[slot[k]],
                                   std::get<Tensor>(operands[k]).dtype, computeAs));
          }
          Value r = body(ob, loc, xs);
          linalg::YieldOp::create(ob, loc, r);
        });
    return {generic.getResult(0), outDtype, out};
  }

  /// Reduces \p x over \p dims with \p combine from \p identity.
  Tensor reduce(const Tensor &x, std::vector<int64_t> dims, bool keepdim,
                ScalarType accDtype, const Host &identity,
                const std::function<Value(mlir::OpBuilder &, mlir::Location, Value, Value)> &combine) {
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
        llvm::ArrayRef<mlir::AffineMap>{b.getMultiDimIdentityMap(rank),
                                        mlir::AffineMap::get(rank, 0, outExprs, b.getContext())},
        iters, [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
          Value e = convert(ob, loc, args[0], x.dtype, accDtype);
          linalg::YieldOp::create(ob, loc, combine(ob, loc, args[1], e));
        });
    Tensor out{generic.getResult(0), accDtype, outSizes};
    return keepdim ? reshape(out, keptSizes) : out;
  }

  Tensor reshape(const Tensor &x, const std::vector<Host> &sizes) {
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
    auto shapeType = mlir::RankedTensorType::get({int64_t(sizes.size())}, b.getIndexType());
    Value shape = tensor::FromElementsOp::create(b, shapeType, elems);
    Value r = tensor::ReshapeOp::create(b, tensorType(sizes, x.dtype), x.value, shape);
    return {r, x.dtype, sizes};
  }

  Host numel(const std::vector<Host> &sizes) {
    Host n = Host::constInt(1);
    for (const Host &s : sizes)
      n = intOp("mul", n, s);
    return n;
  }

  int64_t normDim(int64_t d, size_t rank) {
    int64_t r = static_cast<int64_t>(std::max<size_t>(rank, 1));
    if (d < -r || d >= r)
      throw Unsupported("dimension " + std::to_string(d) + " out of range");
    return d < 0 ? d + r : d;
  }

  //===--------------------------------------------------------------------===//
  // Nodes
  //===--------------------------------------------------------------------===//

  void evalBlock(Block *block) {
    for (Node *node : block->nodes()) {
      try {
        evalNode(node);
      } catch (const Unsupported &e) {
        // Every reason names the node it stopped at, once.
        std::string what = e.what(), at = where(node);
        if (what.rfind(node->kind().toQualString(), 0) == 0 || node->blocks().size())
          throw;
        throw Unsupported(at + ": " + what);
      }
    }
  }

  std::vector<Sym> blockOutputs(Block *block) {
    std::vector<Sym> out;
    for (torch::jit::Value *v : block->outputs())
      out.push_back(get(v));
    return out;
  }

  void evalNode(Node *node);
  void evalIf(Node *node);
  void evalLoop(Node *node);
  bool evalHostOp(Node *node);
  void evalTensorOp(Node *node);
  bool evalIndexingOrRandom(Node *node);
  Value splitmix(mlir::OpBuilder &ob, mlir::Location loc, Value z);
  Value streamSeed();
  Tensor gatherRows(Node *node, const Tensor &x, const Tensor &rowsOf, bool wrapNegative);
  Tensor binary(Node *node, const std::string &op);
  Tensor unary(Node *node, const std::string &op);

  ImplicitLocOpBuilder &b;
  bool hasSelf;
  mlir::ModuleOp module;
  std::unordered_map<const torch::jit::Value *, Sym> env;
  /// Size checks, one list per open scf.if branch (the outermost first).
  std::vector<std::vector<Value>> checks;
  /// Checks on tensor values (an index in range), made by the kernel, which
  /// reports them in its status; one list per open scf.if branch.
  std::vector<std::vector<Value>> valueChecks;
  /// The i64 seed of this call's random draws (the runtime draws it from
  /// PyTorch's default generator), and how many random ops used it.
  Value seed;
  int randomOps = 0;
};

//===----------------------------------------------------------------------===//
// Node evaluation
//===----------------------------------------------------------------------===//

/// The op's name without its namespace ("add" for aten::add).
std::string opName(Node *node) { return node->kind().toUnqualString(); }

bool hasTensorInput(Node *node) {
  for (torch::jit::Value *v : node->inputs())
    if (v->type()->kind() == c10::TypeKind::TensorType)
      return true;
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
    } else
      throw Unsupported("a constant of type " + t->str());
    return;
  }
  if (k == prim::If)
    return evalIf(node);
  if (k == prim::Loop)
    return evalLoop(node);
  // Lists, tuples and their elements are plumbing whatever they hold.
  bool plumbing = k == prim::ListConstruct || k == prim::ListUnpack ||
                  k == prim::TupleConstruct || k == prim::TupleUnpack ||
                  k == aten::__getitem__ || k == aten::len || k == prim::unchecked_cast;
  if ((plumbing || !hasTensorInput(node)) && evalHostOp(node))
    return;
  evalTensorOp(node);
}

bool Evaluator::evalHostOp(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  std::string op = opName(node);
  auto in = node->inputs();
  torch::jit::Value *out = node->outputs().size() == 1 ? node->output() : nullptr;
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
    env[out] = intOp("floordiv", intOp("add", span, Host::constInt(s - 1)), step);
    return true;
  }
  if (k == aten::__derive_index) {
    env[out] = intOp("add", hostOf(in[1]), intOp("mul", hostOf(in[0]), hostOf(in[2])));
    return true;
  }
  // Host scalar arithmetic and comparisons.
  static const std::map<std::string, std::string> compares = {
      {"eq", "eq"}, {"ne", "ne"}, {"lt", "lt"}, {"le", "le"}, {"gt", "gt"}, {"ge", "ge"}};
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
  if ((k == aten::add || k == aten::sub || k == aten::mul || k == aten::floordiv) &&
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
                    isAnd ? Value(arith::AndIOp::create(b, a, c)) : Value(arith::OrIOp::create(b, a, c)),
                    {}, {}};
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

/// Unary elementwise ops on floating tensors (an integer input is
/// converted to the default float dtype, as PyTorch does).
const std::map<std::string, std::function<Value(mlir::OpBuilder &, mlir::Location, Value)>> &
floatUnaries() {
  static const std::map<std::string, std::function<Value(mlir::OpBuilder &, mlir::Location, Value)>>
      ops = {
          {"exp", [](auto &ob, auto loc, Value x) { return math::ExpOp::create(ob, loc, x); }},
          {"log", [](auto &ob, auto loc, Value x) { return math::LogOp::create(ob, loc, x); }},
          {"log1p", [](auto &ob, auto loc, Value x) { return math::Log1pOp::create(ob, loc, x); }},
          {"expm1", [](auto &ob, auto loc, Value x) { return math::ExpM1Op::create(ob, loc, x); }},
          {"sqrt", [](auto &ob, auto loc, Value x) { return math::SqrtOp::create(ob, loc, x); }},
          {"rsqrt", [](auto &ob, auto loc, Value x) { return math::RsqrtOp::create(ob, loc, x); }},
          {"tanh", [](auto &ob, auto loc, Value x) { return math::TanhOp::create(ob, loc, x); }},
          {"sin", [](auto &ob, auto loc, Value x) { return math::SinOp::create(ob, loc, x); }},
          {"cos", [](auto &ob, auto loc, Value x) { return math::CosOp::create(ob, loc, x); }},
          {"sigmoid",
           [](auto &ob, auto loc, Value x) {
             Value one = arith::ConstantOp::create(ob, loc, ob.getFloatAttr(x.getType(), 1.0));
             Value e = math::ExpOp::create(ob, loc, arith::NegFOp::create(ob, loc, x));
             return arith::DivFOp::create(ob, loc, one, arith::AddFOp::create(ob, loc, one, e));
           }},
          {"reciprocal",
           [](auto &ob, auto loc, Value x) {
             Value one = arith::ConstantOp::create(ob, loc, ob.getFloatAttr(x.getType(), 1.0));
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
    return elementwise({x}, t, t, [fn](auto &ob, auto loc, auto xs) { return fn(ob, loc, xs[0]); });
  }
  bool fl = isFloating(x.dtype);
  if (op == "neg") {
    if (x.dtype == ScalarType::Bool)
      throw Unsupported("neg of a bool tensor raises in PyTorch");
    return elementwise({x}, x.dtype, x.dtype, [fl](auto &ob, auto loc, auto xs) -> Value {
      if (fl)
        return arith::NegFOp::create(ob, loc, xs[0]);
      Value zero = arith::ConstantOp::create(ob, loc, ob.getIntegerAttr(xs[0].getType(), 0));
      return arith::SubIOp::create(ob, loc, zero, xs[0]);
    });
  }
  if (op == "abs")
    return elementwise({x}, x.dtype, x.dtype, [fl](auto &ob, auto loc, auto xs) -> Value {
      return fl ? Value(math::AbsFOp::create(ob, loc, xs[0])) : Value(math::AbsIOp::create(ob, loc, xs[0]));
    });
  if (op == "relu" && x.dtype != ScalarType::Bool)
    return elementwise({x}, x.dtype, x.dtype, [fl](auto &ob, auto loc, auto xs) -> Value {
      if (fl) {
        // PyTorch's relu keeps NaN: max(x, 0) with x first, NaN-propagating.
        Value zero = arith::ConstantOp::create(ob, loc, ob.getFloatAttr(xs[0].getType(), 0.0));
        return arith::MaximumFOp::create(ob, loc, xs[0], zero);
      }
      Value zero = arith::ConstantOp::create(ob, loc, ob.getIntegerAttr(xs[0].getType(), 0));
      return arith::MaxSIOp::create(ob, loc, xs[0], zero);
    });
  if ((op == "floor" || op == "ceil" || op == "round" || op == "trunc")) {
    if (!fl)
      return x;
    return elementwise({x}, x.dtype, x.dtype, [op](auto &ob, auto loc, auto xs) -> Value {
      if (op == "floor") return math::FloorOp::create(ob, loc, xs[0]);
      if (op == "ceil") return math::CeilOp::create(ob, loc, xs[0]);
      if (op == "trunc") return math::TruncOp::create(ob, loc, xs[0]);
      return math::RoundEvenOp::create(ob, loc, xs[0]); // torch.round: half to even
    });
  }
  if (op == "logical_not" || (op == "bitwise_not" && x.dtype == ScalarType::Bool))
    return elementwise({x}, ScalarType::Bool, ScalarType::Bool, [](auto &ob, auto loc, auto xs) -> Value {
      Value one = arith::ConstantIntOp::create(ob, loc, ob.getI1Type(), 1);
      return arith::XOrIOp::create(ob, loc, xs[0], one);
    });
  throw Unsupported(where(node) + ": not supported by the bridge");
}

Tensor Evaluator::binary(Node *node, const std::string &op) {
  auto in = node->inputs();
  auto operand = [&](torch::jit::Value *v) -> Operand {
    const Sym &s = get(v);
    if (auto *t = std::get_if<Tensor>(&s))
      return *t;
    return std::get<Host>(s);
  };
  Operand x = operand(in[0]), y = operand(in[1]);
  Promotion p;
  for (const Operand *o : {&x, &y}) {
    if (auto *t = std::get_if<Tensor>(o))
      p.tensor(*t);
    else
      p.host(std::get<Host>(*o));
  }
  ScalarType common = p.result();
  bool fl = isFloating(common);
  bool boolean = common == ScalarType::Bool;
  using B = std::function<Value(mlir::OpBuilder &, mlir::Location, llvm::ArrayRef<Value>)>;
  static const std::map<std::string, std::pair<arith::CmpFPredicate, arith::CmpIPredicate>> cmps = {
      {"eq", {arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq}},
      {"ne", {arith::CmpFPredicate::UNE, arith::CmpIPredicate::ne}},
      {"lt", {arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt}},
      {"le", {arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle}},
      {"gt", {arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt}},
      {"ge", {arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge}}};
  if (auto it = cmps.find(op); it != cmps.end()) {
    auto [fp, ip] = it->second;
    if (boolean) // bools compare as unsigned 0/1
      ip = ip == arith::CmpIPredicate::slt ? arith::CmpIPredicate::ult
         : ip == arith::CmpIPredicate::sle ? arith::CmpIPredicate::ule
         : ip == arith::CmpIPredicate::sgt ? arith::CmpIPredicate::ugt
         : ip == arith::CmpIPredicate::sge ? arith::CmpIPredicate::uge : ip;
    return elementwise({x, y}, common, ScalarType::Bool,
                       [fl, fp, ip](auto &ob, auto loc, auto xs) -> Value {
                         return fl ? Value(arith::CmpFOp::create(ob, loc, fp, xs[0], xs[1]))
                                   : Value(arith::CmpIOp::create(ob, loc, ip, xs[0], xs[1]));
                       });
  }
  if (op == "logical_and" || op == "logical_or" || op == "logical_xor")
    return elementwise({x, y}, ScalarType::Bool, ScalarType::Bool, [op](auto &ob, auto loc, auto xs) -> Value {
      if (op == "logical_and") return arith::AndIOp::create(ob, loc, xs[0], xs[1]);
      if (op == "logical_or") return arith::OrIOp::create(ob, loc, xs[0], xs[1]);
      return arith::XOrIOp::create(ob, loc, xs[0], xs[1]);
    });
  if (op == "__and__" || op == "__or__" || op == "bitwise_and" || op == "bitwise_or" ||
      op == "__xor__" || op == "bitwise_xor") {
    if (fl)
      throw Unsupported(where(node) + ": a bitwise op on floats raises in PyTorch");
    return elementwise({x, y}, common, common, [op](auto &ob, auto loc, auto xs) -> Value {
      if (op.find("and") != std::string::npos) return arith::AndIOp::create(ob, loc, xs[0], xs[1]);
      if (op.find("xor") != std::string::npos) return arith::XOrIOp::create(ob, loc, xs[0], xs[1]);
      return arith::OrIOp::create(ob, loc, xs[0], xs[1]);
    });
  }
  if (op == "maximum" || op == "minimum") {
    bool max = op == "maximum";
    return elementwise({x, y}, common, common, [fl, boolean, max](auto &ob, auto loc, auto xs) -> Value {
      if (fl)
        return max ? Value(arith::MaximumFOp::create(ob, loc, xs[0], xs[1]))
                   : Value(arith::MinimumFOp::create(ob, loc, xs[0], xs[1]));
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
    return elementwise({x, y}, common, common, [op, fl, boolean](auto &ob, auto loc, auto xs) -> Value {
      if (op == "mul")
        return fl ? Value(arith::MulFOp::create(ob, loc, xs[0], xs[1]))
             : boolean ? Value(arith::AndIOp::create(ob, loc, xs[0], xs[1]))
                       : Value(arith::MulIOp::create(ob, loc, xs[0], xs[1]));
      if (op == "add")
        return fl ? Value(arith::AddFOp::create(ob, loc, xs[0], xs[1]))
                  : Value(arith::AddIOp::create(ob, loc, xs[0], xs[1]));
      return fl ? Value(arith::SubFOp::create(ob, loc, xs[0], xs[1]))
                : Value(arith::SubIOp::create(ob, loc, xs[0], xs[1]));
    });
  }
  if (op == "div") {
    std::string mode;
    if (in.size() > 2 && !isNone(in[2]))
      mode = as<Str>(in[2], "a rounding mode").text;
    if (mode.empty()) { // true division: integers become the default float
      ScalarType t = fl ? common : ScalarType::Float;
      return elementwise({x, y}, t, t, [](auto &ob, auto loc, auto xs) -> Value {
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
    return elementwise({x, y}, common, common, [fl, floor](auto &ob, auto loc, auto xs) -> Value {
      if (fl) {
        Value q = arith::DivFOp::create(ob, loc, xs[0], xs[1]);
        return floor ? Value(math::FloorOp::create(ob, loc, q)) : Value(math::TruncOp::create(ob, loc, q));
      }
      return floor ? Value(arith::FloorDivSIOp::create(ob, loc, xs[0], xs[1]))
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
  torch::jit::Value *out = node->outputs().size() == 1 ? node->output() : nullptr;
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
    return set(x.sizes.at(normDim(constInt(in[1], "a size's dimension"), x.rank())));
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
      "add", "sub", "rsub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge",
      "logical_and", "logical_or", "logical_xor", "__and__", "__or__", "__xor__",
      "bitwise_and", "bitwise_or", "bitwise_xor", "maximum", "minimum"};
  if (binaries.count(op) && in.size() >= 2 &&
      (in[1]->type()->kind() == TypeKind::TensorType ||
       in[1]->type()->isSubtypeOf(*NumberType::get()) ||
       in[1]->type()->kind() == TypeKind::BoolType))
    return set(binary(node, op));
  if (k == aten::where && in.size() == 3) {
    const Tensor &c = tensorOf(in[0]);
    auto operand = [&](torch::jit::Value *v) -> Operand {
      const Sym &s = get(v);
      if (auto *t = std::get_if<Tensor>(&s))
        return *t;
      return std::get<Host>(s);
    };
    Operand x = operand(in[1]), y = operand(in[2]);
    Promotion p;
    for (const Operand *o : {&x, &y}) {
      if (auto *t = std::get_if<Tensor>(o))
        p.tensor(*t);
      else
        p.host(std::get<Host>(*o));
    }
    ScalarType t = p.result();
    // The condition is converted to the common dtype with the others and
    // back: compute on the three, with the condition as bool.
    Tensor cb = c;
    if (c.dtype != ScalarType::Bool)
      throw Unsupported(where(node) + ": a condition that is not bool");
    // elementwise converts every operand to one dtype: select in the body
    // with the condition converted back to i1.
    return set(elementwise({cb, x, y}, t, t, [t, this](auto &ob, auto loc, auto xs) -> Value {
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
    Promotion p;
    p.tensor(x);
    for (const std::optional<Host> &h : {lo, hi})
      if (h)
        p.host(*h);
    ScalarType t = p.result();
    bool fl = isFloating(t);
    std::vector<Operand> ops{x};
    if (lo)
      ops.push_back(*lo);
    if (hi)
      ops.push_back(*hi);
    bool hasLo = lo.has_value();
    return set(elementwise(ops, t, t, [fl, hasLo](auto &ob, auto loc, auto xs) -> Value {
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
    Operand v = std::holds_alternative<Tensor>(get(in[2])) ? Operand(tensorOf(in[2]))
                                                           : Operand(hostOf(in[2]));
    if (auto *vt = std::get_if<Tensor>(&v); vt && vt->rank() != 0)
      throw Unsupported(where(node) + ": a fill value with dimensions");
    ScalarType t = x.dtype;
    Tensor mb = m;
    return set(elementwise({x, mb, v}, t, t, [t, this](auto &ob, auto loc, auto xs) -> Value {
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
    return set(elementwise({x}, from, to, [from, to, this](auto &ob, auto loc, auto xs) {
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
  if (k == aten::flatten) {
    const Tensor &x = tensorOf(in[0]);
    int64_t r = x.rank();
    int64_t lo = normDim(constInt(in[1], "start_dim"), r), hi = normDim(constInt(in[2], "end_dim"), r);
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
  // Reductions.
  if (k == aten::sum || k == aten::mean || k == aten::amax || k == aten::amin ||
      ((k == aten::max || k == aten::min || k == aten::any || k == aten::all) && in.size() == 1)) {
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
              throw Unsupported(where(node) + ": a reduced dimension not known when compiling");
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
    if (k == aten::max || k == aten::min || k == aten::amax || k == aten::amin) {
      bool max = k == aten::max || k == aten::amax;
      bool fl = isFloating(x.dtype);
      if (!full)
        for (int64_t d : dims)
          if (!x.sizes[d].isConstant() || *x.sizes[d].i == 0)
            check(materialize(compare("gt", x.sizes[d], Host::constInt(0)), Host::Bool));
      if (full)
        check(materialize(compare("gt", numel(x.sizes), Host::constInt(0)), Host::Bool));
      Host identity = fl ? Host::constFloat(max ? -INFINITY : INFINITY)
                     : x.dtype == ScalarType::Bool ? Host::constBool(!max)
                     : Host::constInt(max ? std::numeric_limits<int64_t>::min()
                                          : std::numeric_limits<int64_t>::max());
      if (!fl && x.dtype != ScalarType::Bool && x.dtype != ScalarType::Long)
        throw Unsupported(where(node) + ": max/min of a narrow integer dtype");
      ScalarType t = x.dtype;
      return set(reduce(x, dims, keepdim, t, identity, [fl, max, t](auto &ob, auto loc, Value a, Value e) -> Value {
        if (fl)
          return max ? Value(arith::MaximumFOp::create(ob, loc, a, e)) : Value(arith::MinimumFOp::create(ob, loc, a, e));
        if (t == ScalarType::Bool)
          return max ? Value(arith::OrIOp::create(ob, loc, a, e)) : Value(arith::AndIOp::create(ob, loc, a, e));
        return max ? Value(arith::MaxSIOp::create(ob, loc, a, e)) : Value(arith::MinSIOp::create(ob, loc, a, e));
      }));
    }
    if (k == aten::any || k == aten::all) {
      bool any = k == aten::any;
      return set(reduce(x, dims, keepdim, ScalarType::Bool, Host::constBool(!any),
                        [any](auto &ob, auto loc, Value a, Value e) -> Value {
                          return any ? Value(arith::OrIOp::create(ob, loc, a, e)) : Value(arith::AndIOp::create(ob, loc, a, e));
                        }));
    }
    ScalarType acc = dtype ? *dtype : isFloating(x.dtype) ? x.dtype : ScalarType::Long;
    if (k == aten::mean && !isFloating(acc))
      throw Unsupported(where(node) + ": mean of an integer tensor raises in PyTorch");
    bool fl = isFloating(acc);
    Tensor sum = reduce(x, dims, keepdim, acc, fl ? Host::constFloat(0) : Host::constInt(0),
                        [fl](auto &ob, auto loc, Value a, Value e) -> Value {
                          return fl ? Value(arith::AddFOp::create(ob, loc, a, e)) : Value(arith::AddIOp::create(ob, loc, a, e));
                        });
    if (k == aten::sum)
      return set(sum);
    Host count = Host::constInt(1);
    for (int64_t d : dims)
      count = intOp("mul", count, x.sizes[d]);
    return set(elementwise({sum, count}, acc, acc, [](auto &ob, auto loc, auto xs) -> Value {
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
    ScalarType dflt = v.kind == Host::Float ? ScalarType::Float
                    : v.kind == Host::Bool ? ScalarType::Bool : ScalarType::Long;
    return set(filled(sizes, factoryDtype(in[2], dflt), v));
  }
  if (k == aten::zeros_like || k == aten::ones_like || k == aten::full_like) {
    const Tensor &x = tensorOf(in[0]);
    bool full = k == aten::full_like;
    Host v = full ? hostOf(in[1]) : Host::constInt(k == aten::ones_like ? 1 : 0);
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
  if (k == aten::arange && in.size() == 5) { // arange(end, dtype, layout, device, pin)
    const Host &end = hostOf(in[0]);
    if (end.kind != Host::Int)
      throw Unsupported(where(node) + ": arange of a float end");
    ScalarType t = factoryDtype(in[1], ScalarType::Long);
    Host n = intOp("max", end, Host::constInt(0));
    Value init = empty({n}, t);
    auto generic = linalg::GenericOp::create(
        b, mlir::TypeRange{init.getType()}, mlir::ValueRange{}, mlir::ValueRange{init},
        ::llvm::ArrayRef<mlir::AffineMap>{b.getMultiDimIdentityMap(1)},
        ::llvm::ArrayRef<mlir::utils::IteratorType>{mlir::utils::IteratorType::parallel},
        [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange) {
          Value i = linalg::IndexOp::create(ob, loc, 0);
          Value i64 = arith::IndexCastOp::create(ob, loc, ob.getI64Type(), i);
          linalg::YieldOp::create(ob, loc, convert(ob, loc, i64, ScalarType::Long, t));
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
      offsets.push_back(j == size_t(d) ? foldResults({lo})[0] : OpFoldResult(b.getIndexAttr(0)));
      sizes.push_back(foldResults({outSizes[j]})[0]);
      strides.push_back(b.getIndexAttr(1));
    }
    Value r = tensor::ExtractSliceOp::create(b, tensorType(outSizes, x.dtype), x.value,
                                             offsets, sizes, strides);
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
        throw Unsupported(where(node) + ": cat of tensors of different dtypes or ranks");
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
        offsets.push_back(j == size_t(d) ? foldResults({offset})[0] : OpFoldResult(b.getIndexAttr(0)));
        sizes.push_back(foldResults({t.sizes[j]})[0]);
        strides.push_back(b.getIndexAttr(1));
      }
      acc = tensor::InsertSliceOp::create(b, t.value, acc, offsets, sizes, strides);
      offset = intOp("add", offset, t.sizes[d]);
    }
    return set(Tensor{acc, first.dtype, outSizes});
  }
  if (in.size() == 1)
    return set(unary(node, op));
  throw Unsupported(where(node) + ": not supported by the bridge");
}

/// SplitMix64's output function on an i64.
Value Evaluator::splitmix(mlir::OpBuilder &ob, mlir::Location loc, Value z) {
  auto c = [&](uint64_t v) -> Value {
    return arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value v, int64_t bits) -> Value {
    return arith::XOrIOp::create(ob, loc, v, arith::ShRUIOp::create(ob, loc, v, c(bits)));
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
  Value salt = arith::ConstantOp::create(
      b, b.getI64IntegerAttr(static_cast<int64_t>(0xD1B54A32D192ED03ull * uint64_t(op))));
  return splitmix(b, b.getLoc(), arith::AddIOp::create(b, seed, salt));
}

/// x[index] along dim 0: the rows of x an index vector names. An index out
/// of range (PyTorch raises) makes the kernel's status false, so the
/// TorchScript runs and raises; the read itself is clamped, never out of
/// bounds.
Tensor Evaluator::gatherRows(Node *node, const Tensor &x, const Tensor &rowsOf, bool wrapNegative) {
  if (rowsOf.rank() != 1 || (rowsOf.dtype != ScalarType::Long && rowsOf.dtype != ScalarType::Int))
    throw Unsupported(where(node) + ": an index that is not a vector of integers");
  if (x.rank() < 1)
    throw Unsupported(where(node) + ": indexing a 0-d tensor");
  const Host &n = x.sizes[0];
  // Reading a row of an empty tensor cannot be made safe by clamping.
  Host noRows = compare("eq", rowsOf.sizes[0], Host::constInt(0));
  Host someRows = compare("gt", n, Host::constInt(0));
  check(materialize(Host{Host::Bool,
                         arith::OrIOp::create(b, materialize(noRows, Host::Bool),
                                              materialize(someRows, Host::Bool)),
                         {}, {}},
                    Host::Bool));
  Value rows = index(n);
  Value rows64 = arith::IndexCastOp::create(b, b.getI64Type(), rows);
  ScalarType it = rowsOf.dtype;
  Tensor inRange = elementwise({rowsOf}, ScalarType::Long, ScalarType::Bool,
                               [&](auto &ob, auto loc, auto xs) -> Value {
                                 Value zero = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
                                 Value lo = wrapNegative ? Value(arith::SubIOp::create(ob, loc, zero, rows64)) : zero;
                                 Value ge = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::sge, xs[0], lo);
                                 Value lt = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt, xs[0], rows64);
                                 return arith::AndIOp::create(ob, loc, ge, lt);
                               });
  Tensor all = reduce(inRange, {0}, false, ScalarType::Bool, Host::constBool(true),
                      [](auto &ob, auto loc, Value a, Value e) -> Value {
                        return arith::AndIOp::create(ob, loc, a, e);
                      });
  valueCheck(tensor::ExtractOp::create(b, all.value, mlir::ValueRange{}));
  std::vector<Host> outSizes{rowsOf.sizes[0]};
  outSizes.insert(outSizes.end(), x.sizes.begin() + 1, x.sizes.end());
  size_t rank = outSizes.size();
  Value init = empty(outSizes, x.dtype);
  ::llvm::SmallVector<mlir::AffineMap> maps{
      mlir::AffineMap::get(rank, 0, {b.getAffineDimExpr(0)}, b.getContext()),
      b.getMultiDimIdentityMap(rank)};
  ::llvm::SmallVector<mlir::utils::IteratorType> iters(rank, mlir::utils::IteratorType::parallel);
  Value source = x.value;
  auto generic = linalg::GenericOp::create(
      b, mlir::TypeRange{init.getType()}, mlir::ValueRange{rowsOf.value}, mlir::ValueRange{init},
      maps, iters, [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange args) {
        Value i = convert(ob, loc, args[0], it, ScalarType::Long);
        if (wrapNegative) {
          Value zero = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
          Value neg = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt, i, zero);
          i = arith::SelectOp::create(ob, loc, neg, arith::AddIOp::create(ob, loc, i, rows64), i);
        }
        Value zero = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
        Value one = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(1));
        Value last = arith::SubIOp::create(ob, loc, rows64, one);
        i = arith::MinSIOp::create(ob, loc, arith::MaxSIOp::create(ob, loc, i, zero), last);
        ::llvm::SmallVector<Value> at{arith::IndexCastOp::create(ob, loc, ob.getIndexType(), i)};
        for (size_t d = 1; d < rank; ++d)
          at.push_back(linalg::IndexOp::create(ob, loc, d));
        linalg::YieldOp::create(ob, loc, tensor::ExtractOp::create(ob, loc, source, at).getResult());
      });
  return {generic.getResult(0), x.dtype, outSizes};
}

bool Evaluator::evalIndexingOrRandom(Node *node) {
  using namespace c10;
  Symbol k = node->kind();
  auto in = node->inputs();
  auto factoryDtype = [&](torch::jit::Value *v, ScalarType dflt) {
    std::optional<ScalarType> t = dtypeArg(v);
    return t ? *t : dflt;
  };
  if (k == aten::append) {
    // In place on the list's value: only on a list this graph built, whose
    // other uses read it (the evaluation order is the program's).
    torch::jit::Value *list = in[0];
    if (list->node()->kind() != prim::ListConstruct)
      throw Unsupported(where(node) + ": appending to a list the graph did not build");
    Sym &s = env.at(list);
    if (auto *l = std::get_if<TensorList>(&s))
      l->push_back(tensorOf(in[1]));
    else if (auto *h = std::get_if<HostList>(&s))
      h->push_back(hostOf(in[1]));
    else
      throw Unsupported(where(node) + ": appending to a value that is not a list");
    env[node->output()] = env.at(list);
    return true;
  }
  if (k == aten::new_full) {
    const Tensor &x = tensorOf(in[0]);
    env[node->output()] = filled(as<HostList>(in[1], "a list of sizes"),
                                 factoryDtype(in[3], x.dtype), hostOf(in[2]));
    return true;
  }
  if (k == aten::index_select) {
    if (constInt(in[1], "index_select's dimension") != 0)
      throw Unsupported(where(node) + ": index_select along a dimension other than 0");
    env[node->output()] = gatherRows(node, tensorOf(in[0]), tensorOf(in[2]), /*wrap=*/false);
    return true;
  }
  if (k == aten::index) {
    const TensorList *l = std::get_if<TensorList>(&get(in[1]));
    if (!l || l->size() != 1 || (*l)[0].dtype == ScalarType::Bool)
      throw Unsupported(where(node) + ": indexing other than by one integer vector");
    env[node->output()] = gatherRows(node, tensorOf(in[0]), (*l)[0], /*wrap=*/true);
    return true;
  }
  if (k == aten::rand && in.size() == 5) { // rand(size, dtype, layout, device, pin)
    const HostList &sizes = as<HostList>(in[0], "a list of sizes");
    ScalarType t = factoryDtype(in[1], ScalarType::Float);
    if (t != ScalarType::Float && t != ScalarType::Double)
      throw Unsupported(where(node) + ": rand of a dtype other than f32 or f64");
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
    ::llvm::SmallVector<mlir::utils::IteratorType> iters(rank, mlir::utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, mlir::TypeRange{init.getType()}, mlir::ValueRange{}, mlir::ValueRange{init},
        ::llvm::ArrayRef<mlir::AffineMap>{b.getMultiDimIdentityMap(rank)}, iters,
        [&](mlir::OpBuilder &ob, mlir::Location loc, mlir::ValueRange) {
          Value linear = arith::ConstantIndexOp::create(ob, loc, 0);
          for (size_t d = 0; d < rank; ++d)
            linear = arith::AddIOp::create(
                ob, loc, linear,
                arith::MulIOp::create(ob, loc, linalg::IndexOp::create(ob, loc, d), strides[d]));
          Value i64 = arith::IndexCastOp::create(ob, loc, ob.getI64Type(), linear);
          Value gamma = arith::ConstantOp::create(
              ob, loc, ob.getI64IntegerAttr(static_cast<int64_t>(0x9E3779B97F4A7C15ull)));
          Value one = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(1));
          Value counter = arith::MulIOp::create(ob, loc, arith::AddIOp::create(ob, loc, i64, one), gamma);
          Value z = splitmix(ob, loc, arith::AddIOp::create(ob, loc, stream, counter));
          // The top 24 (53) bits as a float in [0, 1), as PyTorch draws.
          bool single = t == ScalarType::Float;
          Value bits = arith::ShRUIOp::create(
              ob, loc, z, arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(single ? 40 : 11)));
          Type ft = single ? Type(ob.getF32Type()) : Type(ob.getF64Type());
          Value f = arith::SIToFPOp::create(ob, loc, ft, bits);
          Value scale = arith::ConstantOp::create(
              ob, loc, ob.getFloatAttr(ft, single ? 1.0 / 16777216.0 : 1.0 / 9007199254740992.0));
          linalg::YieldOp::create(ob, loc, arith::MulFOp::create(ob, loc, f, scale).getResult());
        });
    env[node->output()] = Tensor{generic.getResult(0), t, sizes};
    return true;
  }
  if (k == aten::randperm && in.size() == 5) { // randperm(n, dtype, layout, device, pin)
    const Host &n = hostOf(in[0]);
    check(materialize(compare("ge", n, Host::constInt(0)), Host::Bool));
    ScalarType t = factoryDtype(in[1], ScalarType::Long);
    auto tt = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, b.getI64Type());
    Value perm = staticify::mlir_dialect::RandPermOp::create(b, tt, index(n), streamSeed());
    Tensor out{perm, ScalarType::Long, {n}};
    if (t != ScalarType::Long)
      out = elementwise({out}, ScalarType::Long, t, [this, t](auto &ob, auto loc, auto xs) {
        return convert(ob, loc, xs[0], ScalarType::Long, t);
      });
    env[node->output()] = out;
    return true;
  }
  if (k == aten::topk) {
    const Tensor &x = tensorOf(in[0]);
    if (x.rank() != 1 || (x.dtype != ScalarType::Float && x.dtype != ScalarType::Double))
      throw Unsupported(where(node) + ": topk other than of an f32 or f64 vector");
    if (normDim(constInt(in[2], "topk's dimension"), 1) != 0)
      throw Unsupported(where(node) + ": topk along another dimension");
    const Host &kk = hostOf(in[1]);
    bool largest = *hostOf(in[3]).i;
    check(materialize(compare("ge", kk, Host::constInt(0)), Host::Bool));
    check(materialize(compare("le", kk, x.sizes[0]), Host::Bool));
    Type et = elementType(b.getContext(), x.dtype);
    auto vt = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, et);
    auto it = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, b.getI64Type());
    auto topk = staticify::mlir_dialect::TopKOp::create(b, vt, it, x.value, index(kk),
                                                         b.getBoolAttr(largest));
    env[node->output(0)] = Tensor{topk.getValues(), x.dtype, {kk}};
    env[node->output(1)] = Tensor{topk.getIndices(), ScalarType::Long, {kk}};
    return true;
  }
  if (k == aten::cumsum) {
    const Tensor &x = tensorOf(in[0]);
    if (x.rank() != 1 || normDim(constInt(in[1], "cumsum's dimension"), 1) != 0)
      throw Unsupported(where(node) + ": cumsum other than of a vector");
    std::optional<ScalarType> dt = dtypeArg(in[2]);
    ScalarType acc = dt ? *dt : isFloating(x.dtype) ? x.dtype : ScalarType::Long;
    bool fl = isFloating(acc);
    Value init = empty(x.sizes, acc);
    Value zero = hostElement(b, b.getLoc(), fl ? Host::constFloat(0) : Host::constInt(0), acc);
    Value source = x.value;
    ScalarType from = x.dtype;
    auto loop = mlir::scf::ForOp::create(
        b, arith::ConstantIndexOp::create(b, 0), index(x.sizes[0]),
        arith::ConstantIndexOp::create(b, 1), mlir::ValueRange{zero, init},
        [&](mlir::OpBuilder &ob, mlir::Location loc, Value i, mlir::ValueRange carried) {
          Value e = convert(ob, loc, tensor::ExtractOp::create(ob, loc, source, mlir::ValueRange{i}),
                            from, acc);
          Value sum = fl ? Value(arith::AddFOp::create(ob, loc, carried[0], e))
                         : Value(arith::AddIOp::create(ob, loc, carried[0], e));
          Value t = tensor::InsertOp::create(ob, loc, sum, carried[1], mlir::ValueRange{i});
          mlir::scf::YieldOp::create(ob, loc, mlir::ValueRange{sum, t});
        });
    env[node->output()] = Tensor{loop.getResult(1), acc, x.sizes};
    return true;
  }
  if (k == aten::scatter && in.size() == 4 &&
      in[3]->type()->kind() == TypeKind::TensorType) { // scatter.src
    const Tensor &x = tensorOf(in[0]), &idx = tensorOf(in[2]), &src = tensorOf(in[3]);
    if (x.rank() != 1 || idx.rank() != 1 || src.rank() != 1 ||
        normDim(constInt(in[1], "scatter's dimension"), 1) != 0 || idx.dtype != ScalarType::Long)
      throw Unsupported(where(node) + ": scatter other than of vectors along 0");
    if (src.dtype != x.dtype)
      throw Unsupported(where(node) + ": scatter of another dtype raises in PyTorch");
    check(materialize(compare("le", idx.sizes[0], src.sizes[0]), Host::Bool));
    Host noWrites = compare("eq", idx.sizes[0], Host::constInt(0));
    Host someRows = compare("gt", x.sizes[0], Host::constInt(0));
    check(arith::OrIOp::create(b, materialize(noWrites, Host::Bool), materialize(someRows, Host::Bool)));
    Value n64 = arith::IndexCastOp::create(b, b.getI64Type(), index(x.sizes[0]));
    Value source = src.value, indices = idx.value;
    Value ok = arith::ConstantIntOp::create(b, b.getI1Type(), 1);
    auto loop = mlir::scf::ForOp::create(
        b, arith::ConstantIndexOp::create(b, 0), index(idx.sizes[0]),
        arith::ConstantIndexOp::create(b, 1), mlir::ValueRange{ok, x.value},
        [&](mlir::OpBuilder &ob, mlir::Location loc, Value i, mlir::ValueRange carried) {
          Value j = tensor::ExtractOp::create(ob, loc, indices, mlir::ValueRange{i});
          Value zero = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
          Value one = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(1));
          Value inRange = arith::AndIOp::create(
              ob, loc, arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::sge, j, zero),
              arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt, j, n64));
          Value safe = arith::MinSIOp::create(ob, loc, arith::MaxSIOp::create(ob, loc, j, zero),
                                              arith::SubIOp::create(ob, loc, n64, one));
          Value at = arith::IndexCastOp::create(ob, loc, ob.getIndexType(), safe);
          Value v = tensor::ExtractOp::create(ob, loc, source, mlir::ValueRange{i});
          Value t = tensor::InsertOp::create(ob, loc, v, carried[1], mlir::ValueRange{at});
          mlir::scf::YieldOp::create(
              ob, loc, mlir::ValueRange{arith::AndIOp::create(ob, loc, carried[0], inRange), t});
        });
    valueCheck(loop.getResult(0));
    env[node->output()] = Tensor{loop.getResult(1), x.dtype, x.sizes};
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
  auto ifOp = mlir::scf::IfOp::create(b, mlir::TypeRange{}, cond.value, /*withElse=*/true);
  std::vector<std::vector<Sym>> branchOuts;
  std::vector<Value> branchOk, branchValuesOk;
  for (int which = 0; which < 2; ++which) {
    mlir::Block &block = which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
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
        throw Unsupported(where(node) + ": an if whose branches give tensors of different dtypes or ranks");
      ::llvm::SmallVector<int64_t> shape;
      for (size_t d = 0; d < a->rank(); ++d)
        shape.push_back(a->sizes[d].isConstant() && c->sizes[d].isConstant() &&
                                *a->sizes[d].i == *c->sizes[d].i
                            ? *a->sizes[d].i
                            : mlir::ShapedType::kDynamic);
      auto type = mlir::RankedTensorType::get(shape, elementType(b.getContext(), a->dtype));
      types.push_back(type);
      for (int which = 0; which < 2; ++which) {
        const Tensor &t = which ? *c : *a;
        mlir::OpBuilder::InsertionGuard guard(b);
        mlir::Block &block = which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
        b.setInsertionPoint(block.getTerminator());
        yields[which].push_back(t.value.getType() == type
                                    ? t.value
                                    : Value(tensor::CastOp::create(b, type, t.value)));
      }
    } else if (auto *h = std::get_if<Host>(&t0)) {
      auto *h1 = std::get_if<Host>(&t1);
      if (!h1 || h1->kind != h->kind)
        throw Unsupported(where(node) + ": an if whose branches give host values of different kinds");
      types.push_back(h->kind == Host::Float ? b.getF64Type()
                      : h->kind == Host::Bool ? b.getI1Type()
                                              : Type(b.getIndexType()));
      for (int which = 0; which < 2; ++which) {
        mlir::OpBuilder::InsertionGuard guard(b);
        mlir::Block &block = which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
        b.setInsertionPoint(block.getTerminator());
        yields[which].push_back(materialize(which ? *h1 : *h, h->kind));
      }
    } else if (std::holds_alternative<None>(t0) && std::holds_alternative<None>(t1)) {
      types.push_back(Type());
    } else {
      throw Unsupported(where(node) + ": an if whose branches give lists or other values");
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
        mlir::Block &block = which ? ifOp.getElseRegion().front() : ifOp.getThenRegion().front();
        b.setInsertionPoint(block.getTerminator());
        yields[which].push_back(index(std::get<Tensor>(branchOuts[which][i]).sizes[d]));
      }
    }
  }
  ::llvm::SmallVector<Type> resultTypes;
  for (Type t : types)
    if (t)
      resultTypes.push_back(t);
  resultTypes.push_back(b.getI1Type());
  resultTypes.push_back(b.getI1Type());
  for (size_t i = 0; i < dimResults; ++i)
    resultTypes.push_back(b.getIndexType());
  auto result = mlir::scf::IfOp::create(b, resultTypes, cond.value, /*withElse=*/true);
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
        sizes.push_back(type.isDynamicDim(d) ? dynamicInt(result.getResult(dimAt++))
                                             : Host::constInt(type.getDimSize(d)));
      env[node->output(i)] = Tensor{v, a->dtype, sizes};
    } else {
      env[node->output(i)] = Host{std::get<Host>(branchOuts[0][i]).kind, v, {}, {}};
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
    throw Unsupported(where(node) + ": a loop whose trip count is not known when compiling");
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
      throw Unsupported(where(node) + ": a loop whose condition is not known when compiling");
    go = *c->i;
    carried.assign(outs.begin() + 1, outs.end());
  }
  for (size_t i = 0; i < carried.size(); ++i)
    env[node->output(i)] = carried[i];
}

} // namespace

//===----------------------------------------------------------------------===//
// The two functions
//===----------------------------------------------------------------------===//

namespace {

mlir::MemRefType memrefType(mlir::MLIRContext *ctx, const TensorSignature &sig) {
  llvm::SmallVector<int64_t> shape;
  for (int64_t n : sig.sizes)
    shape.push_back(n < 0 ? mlir::ShapedType::kDynamic : n);
  return mlir::MemRefType::get(shape, elementType(ctx, sig.dtype));
}

/// The graph's results as a flat list of tensors (a tuple of tensors is
/// flattened), or throws.
std::vector<Tensor> resultTensors(const std::vector<Sym> &outputs) {
  std::vector<Tensor> out;
  for (const Sym &s : outputs) {
    if (auto *t = std::get_if<Tensor>(&s)) {
      out.push_back(*t);
    } else if (auto *tu = std::get_if<std::shared_ptr<Tuple>>(&s)) {
      for (const Sym &e : (*tu)->elements) {
        auto *t = std::get_if<Tensor>(&e);
        if (!t)
          throw Unsupported("a result that is not a tensor");
        out.push_back(*t);
      }
    } else {
      throw Unsupported("a result that is not a tensor");
    }
  }
  return out;
}

} // namespace

BridgeResult buildFunctions(const torch::jit::Graph &graph, bool hasSelf,
                            const std::vector<TensorSignature> &signature,
                            const std::string &name, mlir::ModuleOp module) {
  mlir::MLIRContext *ctx = module.getContext();
  BridgeResult result;
  mlir::Location loc = mlir::NameLoc::get(mlir::StringAttr::get(ctx, name));
  ImplicitLocOpBuilder b(loc, ctx);
  llvm::SmallVector<Type> inputTypes;
  try {
    for (const TensorSignature &sig : signature)
      inputTypes.push_back(memrefType(ctx, sig));
  } catch (const Unsupported &e) {
    result.unsupported = e.what();
    return result;
  }
  // Evaluates the graph at the builder's point, on the function's first
  // signature.size() arguments; the next is the seed of random draws.
  auto evaluate = [&](mlir::func::FuncOp fn, Evaluator &ev) {
    ev.setSeed(mlir::memref::LoadOp::create(b, fn.getArgument(signature.size()),
                                            mlir::ValueRange{}));
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < signature.size(); ++i) {
      Value m = fn.getArgument(i);
      auto mt = mlir::cast<mlir::MemRefType>(m.getType());
      auto tt = mlir::RankedTensorType::get(mt.getShape(), mt.getElementType());
      Value t = mlir::bufferization::ToTensorOp::create(b, tt, m, /*restrict=*/true);
      Tensor x{t, signature[i].dtype, {}};
      for (int64_t d = 0; d < mt.getRank(); ++d)
        x.sizes.push_back(mt.isDynamicDim(d)
                              ? Host{Host::Int, Value(tensor::DimOp::create(b, t, d)), {}, {}}
                              : Host::constInt(mt.getDimSize(d)));
      inputs.push_back(std::move(x));
    }
    return resultTensors(ev.run(graph, inputs));
  };
  auto attachBody = [&](mlir::func::FuncOp fn) {
    fn->setAttr("llvm.emit_c_interface", mlir::UnitAttr::get(ctx));
    b.setInsertionPointToStart(fn.addEntryBlock());
  };
  mlir::OpBuilder mb(ctx);
  mb.setInsertionPointToEnd(module.getBody());
  // The seed and the kernel's status: rank-0 i64 buffers.
  auto scalarType = mlir::MemRefType::get({}, b.getI64Type());
  try {
    // The shape function, first: it also tells the result signature.
    size_t resultDims = 0;
    std::vector<Tensor> results;
    {
      // Sized after the evaluation; built with a placeholder then retyped.
      auto sizesType = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getI64Type());
      llvm::SmallVector<Type> args(inputTypes);
      args.push_back(scalarType);
      args.push_back(sizesType);
      auto fn = mlir::func::FuncOp::create(mb, loc, name + "_shape",
                                           mlir::FunctionType::get(ctx, args, {}));
      attachBody(fn);
      Evaluator ev(b, hasSelf, module);
      results = evaluate(fn, ev);
      Value sizes = fn.getArguments().back();
      auto store = [&](Value v) {
        Value i64 = v.getType().isIndex()
                        ? Value(arith::IndexCastOp::create(b, b.getI64Type(), v))
                        : Value(arith::ExtUIOp::create(b, b.getI64Type(), v));
        mlir::memref::StoreOp::create(b, i64, sizes,
                                      mlir::ValueRange{arith::ConstantIndexOp::create(b, resultDims++)});
      };
      store(ev.allChecks());
      for (const Tensor &t : results)
        for (const Host &h : t.sizes)
          store(ev.index(h));
      mlir::func::ReturnOp::create(b);
    }
    for (const Tensor &t : results)
      result.results.push_back({t.dtype, std::vector<int64_t>(t.rank(), -1)});
    {
      llvm::SmallVector<Type> args(inputTypes);
      args.push_back(scalarType);
      for (const TensorSignature &r : result.results)
        args.push_back(memrefType(ctx, r));
      args.push_back(scalarType);
      auto fn = mlir::func::FuncOp::create(mb, loc, name, mlir::FunctionType::get(ctx, args, {}));
      attachBody(fn);
      Evaluator ev(b, hasSelf, module);
      std::vector<Tensor> outs = evaluate(fn, ev);
      result.random = ev.usesRandom();
      for (size_t i = 0; i < outs.size(); ++i) {
        Value dest = fn.getArgument(signature.size() + 1 + i);
        auto destType = mlir::cast<mlir::MemRefType>(dest.getType());
        auto tt = mlir::RankedTensorType::get(destType.getShape(), destType.getElementType());
        Value v = outs[i].value.getType() == tt ? outs[i].value
                                                : Value(tensor::CastOp::create(b, tt, outs[i].value));
        mlir::bufferization::MaterializeInDestinationOp::create(
            b, mlir::TypeRange{}, v, dest, /*restrict=*/true, /*writable=*/true);
      }
      // The status: 1 if every check on values held (an index in range),
      // else 0 and the caller runs the TorchScript.
      Value status = arith::ExtUIOp::create(b, b.getI64Type(), ev.allValueChecks());
      mlir::memref::StoreOp::create(b, status, fn.getArguments().back(), mlir::ValueRange{});
      mlir::func::ReturnOp::create(b);
    }
  } catch (const Unsupported &e) {
    result.unsupported = e.what();
    result.results.clear();
  }
  return result;
}

} // namespace staticify::lower
