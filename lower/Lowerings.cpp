//===- Lowerings.cpp - The bridge's table: one lowering per operator ===//
//
// Each operator the bridge lowers, by its qualified schema name — the
// overload, not the argument count, says which form a node is
// (`aten::add.Tensor` and `aten::add.int` are different operators) — and
// the Evaluator member that lowers it. A node whose operator is not here
// stops the lowering, named with its line. OpInfoTest-style, the unit tests
// check that every key names an operator PyTorch has.
//
//===----------------------------------------------------------------------===//
#include "lower/Evaluator.h"

namespace staticify::lower::bridge {

std::string Evaluator::operatorKey(const Node *node) {
  if (const c10::FunctionSchema *schema = node->maybeSchema()) {
    const std::string &overload = schema->overload_name();
    return schema->name() + (overload.empty() ? "" : "." + overload);
  }
  return node->kind().toQualString();
}

namespace {

/// The keys of aten ops \p names, each with each overload suffix.
std::vector<std::string> each(std::initializer_list<const char *> names,
                              std::initializer_list<const char *> overloads) {
  std::vector<std::string> keys;
  for (const char *n : names)
    for (const char *o : overloads)
      keys.push_back(std::string("aten::") + n + o);
  return keys;
}

} // namespace

void Evaluator::LoweringTable::add(std::initializer_list<const char *> keys,
                                   Lowering fn) {
  add(std::vector<std::string>(keys.begin(), keys.end()), fn);
}

void Evaluator::LoweringTable::add(const std::vector<std::string> &keys,
                                   Lowering fn) {
  for (const std::string &key : keys)
    if (!entries.emplace(key, fn).second)
      throw std::logic_error("two lowerings for " + key);
}

/// Constants, control flow, lists, tuples and host scalars.
void Evaluator::addHostLowerings(LoweringTable &t) {
  // Constants and control flow (EvalControl.cpp).
  t.add({"prim::Constant"}, &Evaluator::lowerConstant);
  t.add({"prim::If"}, &Evaluator::lowerIf);
  t.add({"prim::Loop"}, &Evaluator::lowerLoop);

  // Lists, tuples and host scalars (EvalHost.cpp).
  t.add({"prim::ListConstruct"}, &Evaluator::lowerListConstruct);
  t.add({"prim::ListUnpack", "prim::TupleUnpack"}, &Evaluator::lowerUnpack);
  t.add({"prim::TupleConstruct"}, &Evaluator::lowerTupleConstruct);
  t.add({"prim::device"}, &Evaluator::lowerDevice);
  t.add({"prim::unchecked_cast", "aten::detach", "aten::contiguous",
       "aten::clone"},
      &Evaluator::lowerSame);
  t.add({"aten::__is__", "aten::__isnot__"}, &Evaluator::lowerIs);
  t.add({"aten::len.t"}, &Evaluator::lowerLen);
  t.add({"aten::__getitem__.t"}, &Evaluator::lowerGetItem);
  t.add({"aten::slice.t"}, &Evaluator::lowerListSlice);
  t.add({"aten::add.t"}, &Evaluator::lowerListAdd);
  t.add({"aten::mul.left_t"}, &Evaluator::lowerListMul);
  t.add({"aten::__range_length"}, &Evaluator::lowerRangeLength);
  t.add({"aten::__derive_index"}, &Evaluator::lowerDeriveIndex);
  t.add({"aten::eq.str", "aten::ne.str", "aten::eq.device", "aten::ne.device"},
      &Evaluator::lowerKnownEquality);
  t.add(each({"eq", "ne", "lt", "le", "gt", "ge"},
              {"", ".int", ".float", ".int_float", ".float_int"}),
         &Evaluator::lowerHostCompare);
  t.add({"aten::eq.bool", "aten::ne.bool"}, &Evaluator::lowerHostCompare);
  t.add({"aten::eq.int_list", "aten::ne.int_list"},
      &Evaluator::lowerListEquality);
  t.add({"aten::format"}, &Evaluator::lowerFormat);
  t.add({"aten::warn"}, &Evaluator::lowerWarn);
  t.add({"prim::min.int", "prim::max.int"}, &Evaluator::lowerHostMinMax);
  t.add(each({"add", "sub", "mul", "floordiv"}, {".int"}),
         &Evaluator::lowerHostArith);
  t.add({"aten::neg.int"}, &Evaluator::lowerHostNeg);
  t.add({"aten::__and__.bool", "aten::__or__.bool"},
      &Evaluator::lowerHostLogic);
  t.add({"aten::__not__"}, &Evaluator::lowerNot);
  t.add({"aten::Int.Tensor", "aten::Float.Tensor", "aten::Bool.Tensor"},
      &Evaluator::lowerTensorToHost);
  t.add({"aten::is_complex"}, &Evaluator::lowerIsComplex);
  t.add({"prim::is_cuda"}, &Evaluator::lowerIsCuda);
  t.add({"aten::result_type.Tensor", "aten::result_type.Scalar",
       "aten::result_type.Scalar_Tensor"},
      &Evaluator::lowerResultType);
  t.add({"aten::promote_types"}, &Evaluator::lowerPromoteTypes);
}

/// Metadata, elementwise ops and casts.
void Evaluator::addTensorLowerings(LoweringTable &t) {
  // Metadata, elementwise ops and casts (EvalTensor.cpp).
  t.add({"aten::size", "aten::size.int"}, &Evaluator::lowerSize);
  t.add({"aten::dim"}, &Evaluator::lowerDim);
  t.add({"aten::numel"}, &Evaluator::lowerNumel);
  t.add({"prim::dtype"}, &Evaluator::lowerDType);
  t.add({"aten::is_floating_point"}, &Evaluator::lowerIsFloatingPoint);
  t.add(each({"exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sin",
               "cos", "sigmoid", "reciprocal", "neg", "abs", "relu", "floor",
               "ceil", "round", "trunc", "logical_not", "bitwise_not"},
              {""}),
         &Evaluator::lowerUnary);
  t.add(each({"eq", "ne", "lt", "le", "gt", "ge"}, {".Tensor", ".Scalar"}),
         &Evaluator::lowerCompare);
  t.add({"aten::logical_and", "aten::logical_or", "aten::logical_xor"},
      &Evaluator::lowerLogical);
  t.add(each({"__and__", "__or__", "__xor__", "bitwise_and", "bitwise_or",
               "bitwise_xor"},
              {".Tensor", ".Scalar"}),
         &Evaluator::lowerBitwise);
  t.add({"aten::maximum", "aten::minimum", "aten::max.other",
       "aten::min.other"},
      &Evaluator::lowerExtremum);
  t.add(each({"add", "sub", "rsub", "mul"}, {".Tensor", ".Scalar"}),
         &Evaluator::lowerArith);
  t.add(each({"remainder", "fmod"}, {".Tensor", ".Scalar"}),
         &Evaluator::lowerRemainder);
  t.add(each({"div"}, {".Tensor", ".Scalar", ".Tensor_mode", ".Scalar_mode"}),
         &Evaluator::lowerDiv);
  t.add(each({"where"}, {".self", ".ScalarOther", ".ScalarSelf", ".Scalar"}),
         &Evaluator::lowerWhere);
  t.add({"aten::clamp", "aten::clamp_min", "aten::clamp_max"},
      &Evaluator::lowerClamp);
  t.add({"aten::masked_fill.Scalar", "aten::masked_fill.Tensor"},
      &Evaluator::lowerMaskedFill);
  t.add(each({"to"}, {".dtype", ".device", ".other", ".prim_dtype",
                       ".prim_Device"}),
         &Evaluator::lowerTo);
  t.add({"aten::type_as"}, &Evaluator::lowerTo);
  t.add({"aten::isnan", "aten::isinf", "aten::isfinite"},
      &Evaluator::lowerIsNan);
}

/// Views, concatenation and factories.
void Evaluator::addShapeLowerings(LoweringTable &t) {
  // Views, concatenation and factories (EvalShapes.cpp).
  t.add({"aten::view", "aten::reshape"}, &Evaluator::lowerView);
  t.add({"aten::flatten.using_ints"}, &Evaluator::lowerFlatten);
  t.add({"aten::unsqueeze"}, &Evaluator::lowerUnsqueeze);
  t.add({"aten::squeeze.dim"}, &Evaluator::lowerSqueeze);
  t.add({"aten::slice.Tensor"}, &Evaluator::lowerSlice);
  t.add({"aten::narrow"}, &Evaluator::lowerNarrow);
  t.add({"aten::select.int"}, &Evaluator::lowerSelect);
  t.add({"aten::cat"}, &Evaluator::lowerCat);
  t.add({"aten::stack"}, &Evaluator::lowerStack);
  t.add({"aten::expand", "aten::expand_as"}, &Evaluator::lowerExpand);
  t.add({"aten::broadcast_tensors"}, &Evaluator::lowerBroadcastTensors);
  t.add({"aten::zeros", "aten::ones", "aten::empty.memory_format"},
      &Evaluator::lowerFilled);
  t.add({"aten::full"}, &Evaluator::lowerFull);
  t.add({"aten::zeros_like", "aten::ones_like", "aten::full_like"},
      &Evaluator::lowerFilledLike);
  t.add({"aten::new_zeros", "aten::new_ones", "aten::new_empty"},
      &Evaluator::lowerNewFilled);
  t.add({"aten::new_full"}, &Evaluator::lowerNewFull);
  t.add({"aten::scalar_tensor"}, &Evaluator::lowerScalarTensor);
  t.add({"aten::tensor.float", "aten::tensor.int", "aten::tensor.bool"},
      &Evaluator::lowerTensorOfScalar);
  t.add({"aten::arange"}, &Evaluator::lowerArange);
}

/// Reductions, layers, gathers, scatters, random draws, orders.
void Evaluator::addReductionAndIndexingLowerings(LoweringTable &t) {
  // Reductions and their composites (EvalReduce.cpp).
  t.add({"aten::sum", "aten::sum.dim_IntList", "aten::mean", "aten::mean.dim",
       "aten::count_nonzero"},
      &Evaluator::lowerSumMean);
  t.add({"aten::max", "aten::min", "aten::amax", "aten::amin"},
      &Evaluator::lowerExtremeReduce);
  t.add({"aten::any", "aten::all", "aten::any.dim", "aten::all.dim"},
      &Evaluator::lowerAnyAll);
  t.add({"aten::max.dim", "aten::min.dim"}, &Evaluator::lowerMaxDim);
  t.add({"aten::argmax", "aten::argmin"}, &Evaluator::lowerArgExtreme);
  t.add({"aten::softmax.int", "aten::log_softmax.int"},
      &Evaluator::lowerSoftmax);
  t.add({"aten::nll_loss_nd", "aten::cross_entropy_loss"},
      &Evaluator::lowerNllLoss);
  t.add({"aten::one_hot"}, &Evaluator::lowerOneHot);
  t.add({"aten::linear"}, &Evaluator::lowerLinear);
  t.add({"aten::layer_norm"}, &Evaluator::lowerLayerNorm);
  t.add({"aten::dropout"}, &Evaluator::lowerDropout);
  t.add({"aten::binary_cross_entropy_with_logits"},
      &Evaluator::lowerBceWithLogits);

  // Gathers, scatters, random draws, orders (EvalIndexing.cpp).
  t.add({"aten::append.t"}, &Evaluator::lowerAppend);
  t.add({"aten::index_select"}, &Evaluator::lowerIndexSelect);
  t.add({"aten::index.Tensor", "aten::index.Tensor_hacked_twin"},
      &Evaluator::lowerIndex);
  t.add({"aten::gather"}, &Evaluator::lowerGather);
  t.add({"aten::rand"}, &Evaluator::lowerRand);
  t.add({"aten::randperm"}, &Evaluator::lowerRandperm);
  t.add({"aten::topk"}, &Evaluator::lowerTopk);
  t.add({"aten::sort", "aten::sort.stable"}, &Evaluator::lowerSort);
  t.add({"aten::cumsum"}, &Evaluator::lowerCumsum);
  t.add({"aten::scatter.src"}, &Evaluator::lowerScatter);
}

const std::map<std::string, Evaluator::Lowering> &Evaluator::lowerings() {
  static const std::map<std::string, Lowering> table = [] {
    LoweringTable t;
    addHostLowerings(t);
    addTensorLowerings(t);
    addShapeLowerings(t);
    addReductionAndIndexingLowerings(t);
    return t.entries;
  }();
  return table;
}

} // namespace staticify::lower::bridge

namespace staticify::lower {

std::vector<std::string> loweredOperators() {
  std::vector<std::string> keys;
  for (const auto &[key, fn] : bridge::Evaluator::lowerings())
    keys.push_back(key);
  return keys;
}

std::string loweringKey(const torch::jit::Node *node) {
  return bridge::Evaluator::operatorKey(node);
}

} // namespace staticify::lower
