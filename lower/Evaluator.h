//===- Evaluator.h - The bridge's abstract evaluation (internal) -----*- C++
//-*-===//
//
// Private to lower/: the values of the abstract evaluation of a TorchScript
// graph (TorchToMlir.h) and the evaluator that builds MLIR while walking it.
// Each operator has one lowering, a member found through the table in
// Lowerings.cpp by the operator's qualified schema name. The helpers live in
// EvalCore.cpp (host scalars, elementwise ops, reductions, shapes); the
// lowerings by family: EvalControl.cpp (constants, branches, loops),
// EvalHost.cpp (lists, tuples, host scalars), EvalTensor.cpp (metadata,
// elementwise ops, casts), EvalShapes.cpp (views, concatenation,
// factories), EvalReduce.cpp (reductions, losses, layers), EvalIndexing.cpp
// (gathers, scatters, random draws, orders).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "lower/TorchToMlir.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"

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

namespace staticify::lower::bridge {

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
// Values of the abstract evaluation
//===----------------------------------------------------------------------===//

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
/// A string: known when compiling, or a message built at run time (only
/// ever raised).
struct Str {
  std::string text;
  bool known = true;
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

inline bool isFloating(ScalarType t) { return c10::isFloatingType(t); }

inline Type elementType(mlir::MLIRContext *ctx, ScalarType t) {
  mlir::Builder b(ctx);
  switch (t) {
  case ScalarType::Half:
    return b.getF16Type();
  case ScalarType::BFloat16:
    return b.getBF16Type();
  case ScalarType::Float:
    return b.getF32Type();
  case ScalarType::Double:
    return b.getF64Type();
  case ScalarType::Char:
    return b.getI8Type();
  case ScalarType::Short:
    return b.getI16Type();
  case ScalarType::Int:
    return b.getI32Type();
  case ScalarType::Long:
    return b.getI64Type();
  case ScalarType::Bool:
    return b.getI1Type();
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
    merge(wrapped, h.kind == Host::Float ? ScalarType::Float
                   : h.kind == Host::Int ? ScalarType::Long
                                         : ScalarType::Bool);
  }
  ScalarType result() const { return combine(dim, combine(zero, wrapped)); }

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
inline std::string where(Node *node) {
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
  Evaluator(ImplicitLocOpBuilder &b, bool hasSelf, mlir::ModuleOp module,
            bool cuda)
      : b(b), hasSelf(hasSelf), cuda(cuda), module(module) {}

  /// Evaluates \p graph with its tensor inputs bound to \p inputs; returns
  /// the graph's outputs.
  std::vector<Sym> run(const torch::jit::Graph &graph,
                       const std::vector<Tensor> &inputs);

  /// Every size check made at the top level, and-ed (true if none).
  Value allChecks() { return conjunction(checks.back()); }
  /// Every value check at the top level, and-ed: a rank-0 tensor<i1>. Value
  /// checks stay tensors end to end (never host scalars), so on a GPU they
  /// are computed, combined and stored on the device without a host read.
  Value allValueChecks();
  /// allValueChecks() as the kernel's status: a rank-0 tensor<i64>, 1 if
  /// every check held.
  Value valueStatus();
  void setSeed(Value v) { seed = v; }
  bool usesRandom() const { return randomOps > 0; }

  Value index(const Host &h) { return materialize(h, Host::Int); }

private:
  //===--------------------------------------------------------------------===//
  // Environment
  //===--------------------------------------------------------------------===//

  const Sym &get(const torch::jit::Value *v);
  template <typename T> const T &as(torch::jit::Value *v, const char *what) {
    const Sym &s = get(v);
    if (auto *p = std::get_if<T>(&s))
      return *p;
    throw Unsupported(std::string("expected ") + what + " for %" +
                      v->debugName());
  }
  /// The float and integer predicates of a comparison op ("lt"), or none.
  static std::optional<std::pair<arith::CmpFPredicate, arith::CmpIPredicate>>
  comparison(const std::string &op);
  /// The identity of a max (or min) reduction of \p dtype.
  static Host extremeIdentity(ScalarType dtype, bool max);
  /// A tensor or host scalar operand of an elementwise op.
  Operand operandOf(torch::jit::Value *v) {
    const Sym &s = get(v);
    if (auto *t = std::get_if<Tensor>(&s))
      return *t;
    return hostOf(v);
  }
  /// PyTorch's result dtype for \p operands (Promotion).
  static ScalarType promoted(const std::vector<Operand> &operands) {
    Promotion p;
    for (const Operand &o : operands) {
      if (auto *t = std::get_if<Tensor>(&o))
        p.tensor(*t);
      else
        p.host(std::get<Host>(o));
    }
    return p.result();
  }
  const Tensor &tensorOf(torch::jit::Value *v) {
    return as<Tensor>(v, "a tensor");
  }
  const Host &hostOf(torch::jit::Value *v) {
    return as<Host>(v, "a host scalar");
  }
  bool isNone(torch::jit::Value *v) {
    return std::holds_alternative<None>(get(v));
  }
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
  /// A factory's dtype argument \p v, or \p dflt where it is None.
  ScalarType dtypeOr(torch::jit::Value *v, ScalarType dflt) {
    std::optional<ScalarType> t = dtypeArg(v);
    return t ? *t : dflt;
  }

  //===--------------------------------------------------------------------===//
  // Host scalars
  //===--------------------------------------------------------------------===//

  Value materialize(const Host &h, Host::Kind as);

  Host dynamicInt(Value v) { return Host{Host::Int, v, {}, {}}; }

  /// Host integer arithmetic, folded when both sides are constants.
  Host intOp(const std::string &op, const Host &x, const Host &y);

  Host compare(const std::string &op, const Host &x, const Host &y);

  void check(Value cond) { checks.back().push_back(cond); }
  /// Records a check on values: \p cond is a rank-0 tensor<i1> or an i1.
  void valueCheck(Value cond);
  Value conjunction(const std::vector<Value> &conds);
  void checkEqual(const Host &x, const Host &y);

  //===--------------------------------------------------------------------===//
  // Scalars inside kernels
  //===--------------------------------------------------------------------===//

  Value convert(mlir::OpBuilder &ob, mlir::Location loc, Value v,
                ScalarType from, ScalarType to);

  /// A host scalar as an element of dtype \p to (the conversion is emitted
  /// where the caller's builder points).
  Value hostElement(mlir::OpBuilder &ob, mlir::Location loc, const Host &h,
                    ScalarType to);

  //===--------------------------------------------------------------------===//
  // Tensors
  //===--------------------------------------------------------------------===//

  std::vector<OpFoldResult> foldResults(const std::vector<Host> &sizes);
  mlir::RankedTensorType tensorType(const std::vector<Host> &sizes,
                                    ScalarType dtype);
  Value empty(const std::vector<Host> &sizes, ScalarType dtype);
  Tensor filled(const std::vector<Host> &sizes, ScalarType dtype,
                const Host &value);

  using Body = std::function<Value(mlir::OpBuilder &, mlir::Location,
                                   llvm::ArrayRef<Value>)>;

  /// The sizes \p operands broadcast to, as PyTorch broadcasts; where two
  /// sizes are dynamic, the shape function checks that they are equal.
  std::vector<Host> broadcastSizes(const std::vector<Operand> &operands);

  /// out[i] = body(operands converted to \p computeAs at i), broadcasting
  /// as PyTorch does; where two sizes are dynamic, the shape function
  /// checks that they are equal (a size 1 broadcast at run time takes the
  /// TorchScript path).
  Tensor elementwise(const std::vector<Operand> &operands, ScalarType computeAs,
                     ScalarType outDtype, const Body &body);

  /// Reduces \p x over \p dims with \p combine from \p identity.
  Tensor reduce(const Tensor &x, std::vector<int64_t> dims, bool keepdim,
                ScalarType accDtype, const Host &identity,
                const std::function<Value(mlir::OpBuilder &, mlir::Location,
                                          Value, Value)> &combine);

  Tensor reshape(const Tensor &x, const std::vector<Host> &sizes);

  /// max/min along \p dim with the index of the first extreme (NaN counts
  /// as the extreme, as in PyTorch): (values, indices).
  std::pair<Tensor, Tensor> reduceWithIndex(const Tensor &x, int64_t dim,
                                            bool keepdim, bool max);

  /// \p x broadcast to \p sizes (PyTorch's expand: a size-1 dimension
  /// repeats; others must match, which the shape function checks).
  Tensor broadcastTo(const Tensor &x, const std::vector<Host> &sizes);

  Host numel(const std::vector<Host> &sizes);

  int64_t normDim(int64_t d, size_t rank);

  //===--------------------------------------------------------------------===//
  // Nodes
  //===--------------------------------------------------------------------===//

  void evalBlock(Block *block);

  std::vector<Sym> blockOutputs(Block *block);

  /// Evaluates \p node with its operator's lowering (lowerings()).
  void evalNode(Node *node);
  /// Binds output \p i of \p node to \p s.
  void bind(Node *node, Sym s, size_t i = 0) {
    env[node->output(i)] = std::move(s);
  }
  /// x.gather(dim, index): out[i] = x[i with index[i] at dim]; an index out
  /// of range fails the kernel's status (PyTorch raises).
  Tensor gatherAlong(Node *node, const Tensor &x, int64_t dim,
                     const Tensor &index);
  /// The shape function requires \p reads == 0 or \p extent > 0: a read
  /// at a clamped index is in bounds only in a non-empty extent.
  void requireReadable(const Host &reads, const Host &extent);
  /// An i64 index clamped to [0, n64 - 1], as an index: a read that cannot
  /// leave the buffer (whether it was in range is a value check).
  static Value clampIndex(mlir::OpBuilder &ob, mlir::Location loc, Value i,
                          Value n64);
  /// Whether every element of a bool tensor holds: a rank-0 tensor<i1>.
  Value allTrue(const Tensor &cond);
  /// Whether every element of an integer tensor lies in [lo, hi): an i1.
  Value allInRange(const Tensor &x, const Host &lo, const Host &hi);
  /// nll_loss_nd and cross_entropy_loss (no class weights, no label
  /// smoothing): the mean, sum or each of -logp[n, target[n]] over the
  /// targets other than ignore_index.
  Tensor nllLoss(Node *node);
  /// Integer division by zero raises in PyTorch: an integer divisor must be
  /// a host scalar, which the shape function requires to be non-zero.
  void requireNonZeroDivisor(Node *node, const Operand &divisor);
  /// softmax or log_softmax of \p x along \p dim, computed in dtype \p t.
  Tensor softmax(const Tensor &x, int64_t dim, ScalarType t, bool log);
  /// The \p k largest (or smallest) elements of vector \p x along \p dim
  /// in order, ties to the lower index: (values, indices).
  std::pair<Tensor, Tensor> vectorTopk(Node *node, const Tensor &x,
                                       torch::jit::Value *dim, const Host &k,
                                       bool largest);
  Value splitmix(mlir::OpBuilder &ob, mlir::Location loc, Value z);
  Value streamSeed();
  Tensor gatherRows(Node *node, const Tensor &x, const Tensor &rowsOf,
                    bool wrapNegative);
  /// The dims a reduction's `dim` argument \p v names in \p x (every dim
  /// when none or an empty list).
  std::vector<int64_t> reducedDims(Node *node, torch::jit::Value *v,
                                   const Tensor &x);
  /// An `if` whose condition is known only at run time: an scf.if yielding
  /// each result, its branch's checks and its tensors' dynamic sizes.
  void lowerIfBothBranches(Node *node, Value cond);
  /// The elementwise conversion of \p x to dtype \p to (x itself when it
  /// has that dtype).
  Tensor converted(const Tensor &x, ScalarType to);
  /// not x of a host bool.
  Host logicalNot(const Host &x);

  //===--------------------------------------------------------------------===//
  // Lowerings: one per operator (Lowerings.cpp maps each qualified schema
  // name, "aten::add.Tensor", to one of these). Each binds the node's
  // outputs or throws Unsupported naming the case.
  //===--------------------------------------------------------------------===//

public:
  using Lowering = void (Evaluator::*)(Node *);
  /// Qualified schema name ("aten::sum.dim_IntList"; the symbol for nodes
  /// without a schema: "prim::ListConstruct") -> its lowering.
  static const std::map<std::string, Lowering> &lowerings();
  /// The key of \p node in lowerings().
  static std::string operatorKey(const Node *node);

private:
  struct LoweringTable {
    std::map<std::string, Lowering> entries;
    void add(std::initializer_list<const char *> keys, Lowering fn);
    void add(const std::vector<std::string> &keys, Lowering fn);
  };
  static void addHostLowerings(LoweringTable &t);
  static void addTensorLowerings(LoweringTable &t);
  static void addShapeLowerings(LoweringTable &t);
  static void addReductionAndIndexingLowerings(LoweringTable &t);

  // EvalControl.cpp: constants and control flow.
  void lowerConstant(Node *node);
  void lowerIf(Node *node);
  void lowerLoop(Node *node);
  // EvalHost.cpp: lists, tuples and host scalars.
  void lowerListConstruct(Node *node);
  void lowerUnpack(Node *node);
  void lowerTupleConstruct(Node *node);
  void lowerDevice(Node *node);
  void lowerSame(Node *node);
  void lowerIs(Node *node);
  void lowerLen(Node *node);
  void lowerGetItem(Node *node);
  void lowerListSlice(Node *node);
  void lowerListAdd(Node *node);
  void lowerListMul(Node *node);
  void lowerRangeLength(Node *node);
  void lowerDeriveIndex(Node *node);
  void lowerKnownEquality(Node *node);
  void lowerHostCompare(Node *node);
  void lowerListEquality(Node *node);
  void lowerFormat(Node *node);
  void lowerWarn(Node *node);
  void lowerHostMinMax(Node *node);
  void lowerHostArith(Node *node);
  void lowerHostNeg(Node *node);
  void lowerHostLogic(Node *node);
  void lowerNot(Node *node);
  void lowerTensorToHost(Node *node);
  void lowerIsComplex(Node *node);
  void lowerIsCuda(Node *node);
  void lowerResultType(Node *node);
  void lowerPromoteTypes(Node *node);
  // EvalTensor.cpp: metadata, elementwise ops and casts.
  void lowerSize(Node *node);
  void lowerDim(Node *node);
  void lowerNumel(Node *node);
  void lowerDType(Node *node);
  void lowerIsFloatingPoint(Node *node);
  void lowerUnary(Node *node);
  void lowerCompare(Node *node);
  void lowerLogical(Node *node);
  void lowerBitwise(Node *node);
  void lowerExtremum(Node *node);
  void lowerArith(Node *node);
  void lowerRemainder(Node *node);
  void lowerDiv(Node *node);
  void lowerWhere(Node *node);
  void lowerClamp(Node *node);
  void lowerMaskedFill(Node *node);
  void lowerTo(Node *node);
  void lowerIsNan(Node *node);
  // EvalShapes.cpp: views, concatenation and factories.
  void lowerView(Node *node);
  void lowerFlatten(Node *node);
  void lowerUnsqueeze(Node *node);
  void lowerSqueeze(Node *node);
  void lowerSlice(Node *node);
  void lowerNarrow(Node *node);
  /// Binds \p node to rows [lo, lo + len) of \p x along \p d.
  void bindSlice(Node *node, const Tensor &x, int64_t d, const Host &lo,
                 const Host &len);
  void lowerSelect(Node *node);
  void lowerCat(Node *node);
  void lowerStack(Node *node);
  void lowerExpand(Node *node);
  void lowerBroadcastTensors(Node *node);
  void lowerFilled(Node *node);
  void lowerFull(Node *node);
  void lowerFilledLike(Node *node);
  void lowerNewFilled(Node *node);
  void lowerNewFull(Node *node);
  void lowerScalarTensor(Node *node);
  void lowerTensorOfScalar(Node *node);
  void lowerArange(Node *node);
  // EvalReduce.cpp: reductions and their composites.
  void lowerSumMean(Node *node);
  void lowerExtremeReduce(Node *node);
  void lowerAnyAll(Node *node);
  void lowerMaxDim(Node *node);
  void lowerArgExtreme(Node *node);
  void lowerSoftmax(Node *node);
  void lowerNllLoss(Node *node);
  void lowerOneHot(Node *node);
  void lowerLinear(Node *node);
  void lowerLayerNorm(Node *node);
  void lowerDropout(Node *node);
  void lowerBceWithLogits(Node *node);
  // EvalIndexing.cpp: gathers, scatters, random draws, orders.
  void lowerAppend(Node *node);
  void lowerIndexSelect(Node *node);
  void lowerIndex(Node *node);
  void lowerGather(Node *node);
  void lowerRand(Node *node);
  void lowerRandperm(Node *node);
  void lowerTopk(Node *node);
  void lowerSort(Node *node);
  void lowerCumsum(Node *node);
  void lowerScatter(Node *node);

  ImplicitLocOpBuilder &b;
  bool hasSelf;
  /// Whether the kernel runs on a GPU (KernelDevice).
  bool cuda;
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

/// The overload of \p node's operator ("dim_IntList" for
/// aten::sum.dim_IntList; "" for aten::sum); nodes the bridge lowers by
/// schema have one.
inline const std::string &overloadOf(const Node *node) {
  return node->schema().overload_name();
}

/// The op's name without its namespace ("add" for aten::add).
inline std::string opName(Node *node) { return node->kind().toUnqualString(); }

} // namespace staticify::lower::bridge
