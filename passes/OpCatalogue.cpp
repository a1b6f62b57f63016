//===- OpCatalogue.cpp - Questions about a node, answered from the op table ===//

#include "passes/OpCatalogue.h"

#include "passes/GraphUtils.h"

#include <algorithm>
#include <unordered_set>

namespace staticify {

using c10::Symbol;
using torch::jit::Node;
using torch::jit::Value;

namespace {

// Schema argument names that only carry values: a data-derived scalar there
// changes what a result holds, never its shape.
const char *const kValueArguments[] = {
    "other",  "alpha", "value", "fill_value",    "min",  "max", "exponent",
    "scalar", "beta",  "eps",   "rounding_mode", "s",    "t",   "data",
    "a",      "b",     "low",   "high",          "mean", "std", "p",
    // Quantization parameters (fake_quantize_per_tensor_affine): values.
    "scale",  "zero_point"};

bool hasTensorInput(const Node *node, size_t index) {
  return node->inputs().size() > index && isTensor(node->input(index));
}

} // namespace

std::optional<std::string> inputName(const Node *node, size_t index) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || index >= schema->arguments().size())
    return std::nullopt;
  return schema->arguments()[index].name();
}

OpRole opRole(const Node *node) {
  const OpInfo *info = opInfo(node);
  if (!info)
    return OpRole::Other;
  OpRole role = info->role;
  // Overloads decide (the table keys `where(cond)` apart from `where(c, a,
  // b)`); beyond them, arguments: `repeat_interleave` is a root only with
  // tensor repeats and no `output_size`, a sync read only reads a tensor.
  if (role == OpRole::DynamicShapeRoot && info->has(kRootWithTensorRepeats)) {
    // By name: `repeat_interleave(repeats)` takes them first, the self
    // overloads second.
    bool tensorRepeats = false;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      std::optional<std::string> name = inputName(node, i);
      if (name == std::string("repeats"))
        tensorRepeats = hasTensorInput(node, i);
      if (name == std::string("output_size") && !node->input(i)->mustBeNone())
        return OpRole::Other;
    }
    return tensorRepeats ? role : OpRole::Other;
  }
  if (role == OpRole::SyncRead) {
    // Conversions read their one argument; formatting reads any of them.
    bool formats = info->has(kFormats);
    bool readsTensor = false;
    for (size_t i = 0; i < node->inputs().size(); ++i)
      readsTensor |= (formats || i == 0) && hasTensorInput(node, i);
    return readsTensor ? role : OpRole::Other;
  }
  if (role == OpRole::ShapeRead && !hasTensorInput(node, 0))
    return OpRole::Other;
  return role;
}

std::string dynamicShapeReason(const Node *node) {
  const OpInfo *info = opInfo(node);
  if (!info || !info->reason)
    return "has a data-dependent shape";
  return info->reason;
}

bool inputAffectsShape(const Node *node, size_t index) {
  if (node->kind() == c10::prim::NumToTensor)
    return false;
  // A list's length is a size unless the list is built element by element
  // (`torch.tensor([n, m])` has two elements whatever n and m are).
  const torch::jit::Value *in = node->input(index);
  if (in->type()->kind() == c10::TypeKind::ListType &&
      in->node()->kind() != c10::prim::ListConstruct)
    return true;
  std::optional<std::string> name = inputName(node, index);
  if (!name)
    return true;
  if (node->kind() == c10::aten::select && *name == "index")
    return false;
  for (const char *valueArg : kValueArguments)
    if (*name == valueArg)
      return false;
  return true;
}

size_t countTensorInputs(const Node *node) {
  size_t n = 0;
  for (const torch::jit::Value *in : node->inputs())
    n += in->type()->kind() == c10::TypeKind::TensorType;
  return n;
}

bool mutatesFirstInput(const Node *node) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema || schema->arguments().empty())
    return false;
  const c10::AliasInfo *alias = schema->arguments()[0].alias_info();
  return alias && alias->isWrite();
}

bool writesThrough(const c10::AliasInfo &alias) {
  if (alias.isWrite())
    return true;
  for (const c10::AliasInfo &inner : alias.containedTypes())
    if (writesThrough(inner))
      return true;
  return false;
}

bool writesAnything(const Node *node) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema)
    return false;
  for (const c10::Argument &arg : schema->arguments())
    if (arg.alias_info() && writesThrough(*arg.alias_info()))
      return true;
  return false;
}

int64_t lossReduction(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op || !op->has(kReducedLoss))
    return 0;
  const torch::jit::Value *reduction = namedInput(node, "reduction");
  std::optional<int64_t> r = reduction ? constantInt(reduction) : std::nullopt;
  return r ? *r : -1; // -1: not known before the program runs
}

bool opElementwise(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && op->has(kElementwise) &&
         (!op->has(kReducedLoss) || lossReduction(node) == 0);
}

/// Whether \p size, a list of sizes, holds no negative one whatever the
/// data: another tensor's sizes (`x.new_zeros(x.shape)`), constants >= 0
/// (`new_zeros(())`), a list of those and single sizes (`[x.size(0), 4]`),
/// and such lists joined or sliced.
/// Whether the int \p v is >= 0 by construction: a constant >= 0, one of a
/// tensor's sizes (`x.size(1)`, `x.shape[1]`), a numel or a length.
static bool nonNegativeSize(const Value *v) {
  if (std::optional<int64_t> c = constantInt(v))
    return *c >= 0;
  c10::Symbol op = v->node()->kind();
  bool ofSizes = op == c10::aten::__getitem__ &&
                 v->node()->input(0)->node()->kind() == c10::aten::size;
  return op == c10::aten::size || op == c10::aten::len || ofSizes ||
         op == c10::Symbol::aten("numel");
}

/// Whether every element of tensor \p t is >= 0: a mask (an op whose rule
/// makes bool), a result of an op with kNonNegativeValues, their sums, and
/// views, moves and expansions of those (`int(mask.sum())`, the count
/// masked-reduce reads).
static bool nonNegativeElements(const Value *t, int depth = 0) {
  const Node *n = t->node();
  const OpInfo *op = opInfo(n);
  if (depth > 8 || !op)
    return false;
  if (op->dtype == DTypeRule::Bool || op->has(kNonNegativeValues))
    return true;
  c10::Symbol k = n->kind();
  bool keepsValues = k == c10::aten::sum || k == c10::aten::reshape ||
                     k == c10::aten::view || k == c10::aten::expand_as ||
                     k == c10::aten::expand || k == c10::aten::to ||
                     k == c10::aten::detach;
  // A cast may wrap (a count of 200 as int8): moves only.
  if (k == c10::aten::to)
    if (const Value *dtype = namedInput(n, "dtype"); !dtype || !dtype->mustBeNone())
      return false;
  return keepsValues && !n->inputs().empty() && isTensor(n->input(0)) &&
         nonNegativeElements(n->input(0), depth + 1);
}

std::optional<int64_t> sizeLowerBound(const Value *v, int depth) {
  if (std::optional<int64_t> c = constantInt(v))
    return c;
  if (nonNegativeSize(v))
    return 0;
  const Node *n = v->node();
  if (n->kind() == c10::aten::Int && n->inputs().size() == 1 &&
      isTensor(n->input(0)) && nonNegativeElements(n->input(0)))
    return 0;
  if (depth > 8 || v->type()->kind() != c10::TypeKind::IntType ||
      n->inputs().size() != 2)
    return std::nullopt;
  if (n->kind() == c10::aten::add) {
    auto a = sizeLowerBound(n->input(0), depth + 1);
    auto b = sizeLowerBound(n->input(1), depth + 1);
    int64_t sum;
    if (a && b && !__builtin_add_overflow(*a, *b, &sum))
      return sum;
    return std::nullopt;
  }
  // max(a, b) is at least the larger bound known (`max(1, n - w)`).
  if (n->kind() == c10::prim::max) {
    auto a = sizeLowerBound(n->input(0), depth + 1);
    auto b = sizeLowerBound(n->input(1), depth + 1);
    if (a || b)
      return std::max(a.value_or(INT64_MIN), b.value_or(INT64_MIN));
    return std::nullopt;
  }
  if (n->kind() == c10::aten::sub) // x - c of a constant c
    if (auto a = sizeLowerBound(n->input(0), depth + 1))
      if (auto c = constantInt(n->input(1)); c) {
        int64_t difference;
        if (!__builtin_sub_overflow(*a, *c, &difference))
          return difference;
      }
  return std::nullopt;
}

std::optional<IntDraw> intDraw(const Node *node) {
  if (node->kind() != c10::aten::randint || node->outputs().size() != 1)
    return std::nullopt;
  const Value *generator = namedInput(node, "generator");
  const Value *layout = namedInput(node, "layout");
  const Value *pin = namedInput(node, "pin_memory");
  Value *size = namedInput(node, "size");
  Value *high = namedInput(node, "high");
  const Value *low = namedInput(node, "low");
  std::optional<int64_t> lo = low ? constantInt(low) : 0;
  if ((generator && !generator->mustBeNone()) || !layout ||
      !layout->mustBeNone() || (pin && !pin->mustBeNone() &&
                                constantBool(pin) != false) ||
      !size || !high || !lo || !nonNegativeSizes(size))
    return std::nullopt;
  Value *device = namedInput(node, "device");
  auto readAsNumber = [](const torch::jit::Use &use) {
    const OpInfo *op = opInfo(use.user);
    return (op && op->has(kHostConversion)) ||
           use.user->kind() == c10::Symbol::fromQualString("aten::item");
  };
  const auto &uses = node->output()->uses();
  if ((!device || device->mustBeNone()) &&
      !std::all_of(uses.begin(), uses.end(), readAsNumber))
    return std::nullopt;
  size_t at = 0;
  while (node->input(at) != high)
    ++at;
  return IntDraw{at, *lo, size, namedInput(node, "dtype"), device};
}

bool nonNegativeSizes(const Value *size, int depth) {
  const Node *n = size->node();
  if (n->kind() == c10::aten::size && n->inputs().size() == 1)
    return true;
  // A copy of such a list (`list(x.size())`).
  if (depth < 8 && n->kind() == c10::aten::list && n->inputs().size() == 1)
    return nonNegativeSizes(n->input(0), depth + 1);
  // Lists joined or sliced (`[1] + x.size()[1:]`): of sizes >= 0.
  if (depth < 8 && size->type()->kind() == c10::TypeKind::ListType &&
      (n->kind() == c10::aten::add || n->kind() == c10::aten::slice))
    return n->kind() == c10::aten::slice
               ? nonNegativeSizes(n->input(0), depth + 1)
               : nonNegativeSizes(n->input(0), depth + 1) &&
                     nonNegativeSizes(n->input(1), depth + 1);
  if (auto list = constantIntList(size))
    return std::all_of(list->begin(), list->end(),
                       [](int64_t c) { return c >= 0; });
  if (n->kind() != c10::prim::ListConstruct)
    return false;
  return std::all_of(n->inputs().begin(), n->inputs().end(), nonNegativeSize);
}

/// Whether \p v is computed from tensors' shapes alone: sizes, numels,
/// ranks and lengths, the constants -1, 0, 1 and None, and list and integer
/// arithmetic on them (`[m.numel()] + x.size()[m.dim():]`, `m.size() + [1] *
/// k`). A reshape to such sizes raises on shapes only, as broadcasting does.
static bool fromShapesAlone(const Value *v, int depth = 0) {
  const Node *n = v->node();
  const std::string op = n->kind().toQualString();
  if (op == "aten::size" || op == "aten::numel" || op == "aten::dim")
    return true;
  if (n->kind() == c10::prim::Constant) {
    if (v->mustBeNone())
      return true;
    std::vector<int64_t> values;
    if (std::optional<int64_t> c = constantInt(v))
      values = {*c};
    else if (auto list = constantIntList(v))
      values = *list;
    else
      return false;
    return std::all_of(values.begin(), values.end(),
                       [](int64_t c) { return c >= -1 && c <= 1; });
  }
  if (depth > 12 || !(op == "aten::len" || op == "prim::ListConstruct" ||
                      op == "aten::add" || op == "aten::sub" ||
                      op == "aten::mul" || op == "aten::slice" ||
                      op == "aten::__getitem__"))
    return false;
  return std::all_of(n->inputs().begin(), n->inputs().end(),
                     [&](const Value *in) { return fromShapesAlone(in, depth + 1); });
}

bool neverRaisesOnValues(const Node *node) {
  if (node->kind() == c10::prim::Constant)
    return true;
  const OpInfo *info = opInfo(node);
  if (!info)
    return false;
  // A divisor that is a non-zero constant: `torch.div(step, 2, rounding_mode=
  // "floor")`, `x % 8`.
  if (info->has(kRaisesOnZeroDivisor) && node->inputs().size() >= 2 &&
      isTensor(node->input(0))) {
    auto d = torch::jit::toIValue(node->input(1));
    if (d && ((d->isInt() && d->toInt() != 0) ||
              (d->isDouble() && d->toDouble() != 0.0)))
      return true;
  }
  // arange(n), arange(s, n) and arange(s, n, step) of an end n provably at
  // least the constant start s (`arange(x.size(d))`, `arange(0, nnz)`,
  // torchmetrics' `arange(1, len(target) + 1)`) and a constant step > 0:
  // never a range of the wrong sign, no raise.
  if (node->kind() == c10::aten::arange && node->inputs().size() >= 5 &&
      node->inputs().size() <= 7) {
    size_t bounds = node->inputs().size() - 4; // end; start, end; + step
    std::optional<int64_t> start = bounds == 1 ? 0 : constantInt(node->input(0));
    std::optional<int64_t> step = bounds == 3 ? constantInt(node->input(2)) : 1;
    std::optional<int64_t> end = sizeLowerBound(node->input(bounds == 1 ? 0 : 1));
    if (start && end && *end >= *start && step && *step > 0)
      return true;
  }
  if (info->has(kMayRaise))
    return false;
  // A reshape (or view) to sizes computed from shapes alone: mask-store's
  // `m.reshape(m.size() + [1] * k)`, masked-reduce's rows of a selection.
  if ((node->kind() == c10::aten::reshape || node->kind() == c10::aten::view) &&
      node->inputs().size() == 2 && fromShapesAlone(node->input(1)))
    return true;
  // An expand to sizes computed from shapes alone (ultralytics'
  // `(fg_mask.unsqueeze(1) > 1).expand(-1, n_max_boxes, -1)` of
  // `n_max_boxes = overlaps.shape[1]`): whether it fits is a host fact.
  if (node->kind() == c10::aten::expand && node->inputs().size() >= 2 &&
      fromShapesAlone(node->input(1)))
    return true;
  // torch.tensor(x) of one number or of a flat list of numbers
  // (`torch.tensor([1.0])`; a list of lists may be ragged), not requiring
  // gradients (which an integer dtype refuses).
  if (node->kind() == c10::aten::tensor && node->inputs().size() == 4 &&
      constantBool(node->input(3)) == false) {
    auto number = [](const c10::TypePtr &t) {
      c10::TypeKind k = t->kind();
      return k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType ||
             k == c10::TypeKind::BoolType;
    };
    const c10::TypePtr &data = node->input(0)->type();
    auto list = data->cast<c10::ListType>();
    if (number(data) || (list && number(list->getElementType())))
      return true;
  }
  // Every size of a tensor (`x.size()`, `x.shape`); one size, `x.size(d)`,
  // raises for a d past the rank.
  if (node->kind() == c10::aten::size && node->inputs().size() == 1)
    return true;
  // A tensor made with another's sizes (`x.new_zeros(x.shape)`): every size
  // is valid, and so is every option a constant or another tensor's
  // metadata gives. Random draws of a size alike (`torch.randn(x.shape,
  // dtype=x.dtype, device=x.device)`, diffusers' noise), on the default
  // generator (a generator the program passes is not a constant).
  bool randomOfSize = info->has(kRandom) && info->has(kBuildsOnHost) &&
                      node->kind() != c10::aten::randint;
  if (info->has(kMakesSized) || randomOfSize) {
    const Value *size = namedInput(node, "size");
    const c10::FunctionSchema *schema = node->maybeSchema();
    if (size && schema && nonNegativeSizes(size)) {
      bool plain = true;
      for (size_t i = 0; i < node->inputs().size() && plain; ++i) {
        const Value *in = node->input(i);
        const std::string &arg = schema->arguments()[i].name();
        c10::Symbol from = in->node()->kind();
        plain = in == size || isTensor(in) || arg == "fill_value" ||
                from == c10::prim::Constant || from == c10::prim::dtype ||
                from == c10::prim::device || from == c10::prim::layout;
      }
      if (plain)
        return true;
    }
  }
  if (info->has(kDivision))
    return node->inputs().size() == 2 &&
           node->input(0)->type()->kind() == c10::TypeKind::TensorType;
  if (info->has(kRaisesOnNegativeExponent)) {
    const Value *e = node->inputs().size() == 2 ? node->input(1) : nullptr;
    if (!e || e->node()->kind() != c10::prim::Constant)
      return false;
    if (e->type()->kind() == c10::TypeKind::FloatType)
      return true;
    auto i = constantInt(e);
    return i && *i >= 0;
  }
  switch (opRole(node)) {
  case OpRole::Plumbing:
  case OpRole::MetadataRead:
  case OpRole::LeadingPreserving:
  case OpRole::Reduction:
    return true;
  default:
    // Host scalar arithmetic and comparisons (int64 arithmetic wraps),
    // conversions, copies.
    return info->has(kNeverRaises);
  }
}

bool readsOneTensor(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op || node->inputs().empty() || !isTensor(node->input(0)))
    return false;
  bool read = opRole(node) == OpRole::SyncRead && !op->has(kFormats);
  return read && std::none_of(node->inputs().begin() + 1, node->inputs().end(),
                              [](const Value *in) {
                                return carriesTensor(in->type());
                              });
}

bool replaysExactly(const Node *node) {
  static const std::unordered_set<c10::Symbol> exact = [] {
    std::unordered_set<c10::Symbol> ops;
    for (const char *op :
         {"aten::select", "aten::slice", "aten::narrow", "aten::unsqueeze",
          "aten::squeeze", "aten::view", "aten::reshape", "aten::flatten",
          "aten::add", "aten::sub", "aten::mul", "aten::neg", "aten::abs",
          "aten::ceil", "aten::floor", "aten::trunc", "aten::round",
          "aten::clamp", "aten::maximum", "aten::minimum", "aten::eq",
          "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
          "aten::logical_not", "aten::logical_and", "aten::logical_or",
          "aten::any", "aten::all"})
      ops.insert(c10::Symbol::fromQualString(op));
    return ops;
  }();
  if (!exact.count(node->kind()) || !opInfo(node) || writesAnything(node) ||
      node->outputs().size() != 1 || !isTensor(node->output()) ||
      node->inputs().empty() || !isTensor(node->input(0)))
    return false;
  // a + alpha * b rounds once only with alpha 1 (a device may fuse it).
  if (node->kind() == c10::aten::add || node->kind() == c10::aten::sub) {
    const Value *alpha = namedInput(node, "alpha");
    return !alpha || constantInt(alpha) == 1;
  }
  // round(x, decimals) scales by a power of ten first.
  if (node->kind() == c10::aten::round)
    return node->inputs().size() == 1;
  return true;
}

const std::vector<int64_t> &exactReplayDTypes() {
  static const std::vector<int64_t> dtypes = {
      static_cast<int64_t>(c10::ScalarType::Byte),
      static_cast<int64_t>(c10::ScalarType::Char),
      static_cast<int64_t>(c10::ScalarType::Short),
      static_cast<int64_t>(c10::ScalarType::Int),
      static_cast<int64_t>(c10::ScalarType::Long),
      static_cast<int64_t>(c10::ScalarType::Float),
      static_cast<int64_t>(c10::ScalarType::Double),
      static_cast<int64_t>(c10::ScalarType::Bool)};
  return dtypes;
}

} // namespace staticify
