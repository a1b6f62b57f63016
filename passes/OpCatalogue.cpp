//===- OpCatalogue.cpp - The op tables behind analysis and rewrites
//--------===//

#include "passes/OpCatalogue.h"

#include "passes/GraphUtils.h"

#include <unordered_map>
#include <unordered_set>

namespace staticify {

using c10::Symbol;
using torch::jit::Node;

namespace {

struct Entry {
  const char *op;
  OpRole role;
  const char *reason = nullptr; // for DynamicShapeRoot
};

// clang-format off
const Entry kEntries[] = {
    // DESIGN §3: ops whose result shape depends on data.
    {"aten::nonzero", OpRole::DynamicShapeRoot, "returns one row per nonzero element"},
    {"aten::argwhere", OpRole::DynamicShapeRoot, "returns one row per nonzero element"},
    {"aten::nonzero_numpy", OpRole::DynamicShapeRoot, "returns the indices of the nonzero elements"},
    {"aten::where", OpRole::DynamicShapeRoot, "returns the indices of the true elements"},
    {"aten::masked_select", OpRole::DynamicShapeRoot, "returns one element per true mask element"},
    {"aten::_unique", OpRole::DynamicShapeRoot, "returns one element per distinct value"},
    {"aten::_unique2", OpRole::DynamicShapeRoot, "returns one element per distinct value"},
    {"aten::unique_dim", OpRole::DynamicShapeRoot, "returns one slice per distinct slice"},
    {"aten::unique_consecutive", OpRole::DynamicShapeRoot, "returns one element per run of equal values"},
    {"aten::unique_dim_consecutive", OpRole::DynamicShapeRoot, "returns one slice per run of equal slices"},
    {"aten::bincount", OpRole::DynamicShapeRoot, "returns max(input) + 1 bins"},
    {"aten::repeat_interleave", OpRole::DynamicShapeRoot, "with tensor repeats returns sum(repeats) elements"},
    {"aten::index", OpRole::DynamicShapeRoot, "with a boolean mask keeps one element per true mask element"},
    {"aten::index_put_", OpRole::DynamicShapeRoot, "with a boolean mask computes the mask's nonzero indices (a host sync)"},
    {"aten::index_put", OpRole::DynamicShapeRoot, "with a boolean mask computes the mask's nonzero indices (a host sync)"},
    {"aten::_index_put_impl_", OpRole::DynamicShapeRoot, "with a boolean mask computes the mask's nonzero indices (a host sync)"},
    {"torchvision::nms", OpRole::DynamicShapeRoot, "keeps a data-dependent number of boxes"},

    // Host-device synchronizations: a tensor value read on the host.
    {"aten::item", OpRole::SyncRead}, {"aten::_local_scalar_dense", OpRole::SyncRead},
    {"aten::Int", OpRole::SyncRead}, {"aten::Float", OpRole::SyncRead},
    {"aten::Bool", OpRole::SyncRead}, {"aten::Complex", OpRole::SyncRead},
    {"aten::IntImplicit", OpRole::SyncRead}, {"aten::FloatImplicit", OpRole::SyncRead},
    {"aten::BoolImplicit", OpRole::SyncRead}, {"aten::ScalarImplicit", OpRole::SyncRead},
    {"aten::ComplexImplicit", OpRole::SyncRead},
    {"aten::tolist", OpRole::SyncRead}, {"prim::tolist", OpRole::SyncRead},
    {"aten::is_nonzero", OpRole::SyncRead}, {"aten::equal", OpRole::SyncRead},
    {"aten::allclose", OpRole::SyncRead},
    // Formatting a tensor reads its values (str(t), f"{t}", print(t)).
    {"aten::str", OpRole::SyncRead}, {"aten::format", OpRole::SyncRead},
    {"prim::Print", OpRole::SyncRead}, {"aten::warn", OpRole::SyncRead},

    {"aten::numel", OpRole::ShapeRead}, {"aten::size", OpRole::ShapeRead},
    {"aten::sym_size", OpRole::ShapeRead}, {"aten::sym_numel", OpRole::ShapeRead},
    {"aten::len", OpRole::ShapeRead},

    {"aten::dim", OpRole::MetadataRead}, {"prim::device", OpRole::MetadataRead},
    {"prim::dtype", OpRole::MetadataRead}, {"prim::layout", OpRole::MetadataRead},
    {"prim::requires_grad", OpRole::MetadataRead}, {"prim::is_cuda", OpRole::MetadataRead},
    {"aten::is_floating_point", OpRole::MetadataRead}, {"aten::is_complex", OpRole::MetadataRead},
    {"aten::__is__", OpRole::MetadataRead}, {"aten::__isnot__", OpRole::MetadataRead},

    {"prim::ListConstruct", OpRole::Plumbing}, {"prim::ListUnpack", OpRole::Plumbing},
    {"prim::TupleConstruct", OpRole::Plumbing}, {"prim::TupleUnpack", OpRole::Plumbing},
    {"prim::TupleIndex", OpRole::Plumbing}, {"aten::__getitem__", OpRole::Plumbing},
    {"prim::unchecked_cast", OpRole::Plumbing}, {"aten::append", OpRole::Plumbing},
    {"prim::DictConstruct", OpRole::Plumbing}, {"aten::_set_item", OpRole::Plumbing},
    {"prim::Uninitialized", OpRole::Plumbing}, {"prim::GetAttr", OpRole::Plumbing},

    {"aten::sum", OpRole::Reduction}, {"aten::mean", OpRole::Reduction},
    {"aten::amax", OpRole::Reduction}, {"aten::amin", OpRole::Reduction},
    {"aten::max", OpRole::Reduction}, {"aten::min", OpRole::Reduction},
    {"aten::prod", OpRole::Reduction}, {"aten::any", OpRole::Reduction},
    {"aten::all", OpRole::Reduction}, {"aten::count_nonzero", OpRole::Reduction},
    {"aten::norm", OpRole::Reduction}, {"aten::std", OpRole::Reduction},
    {"aten::var", OpRole::Reduction}, {"aten::median", OpRole::Reduction},
    {"aten::nansum", OpRole::Reduction}, {"aten::logsumexp", OpRole::Reduction},
    {"aten::linalg_vector_norm", OpRole::Reduction},
};
// clang-format on

// Elementwise ops, casts and dimension-0 slicing: a leading data-dependent
// dimension stays leading when every tensor operand shares it.
const char *const kLeadingPreserving[] = {
    "aten::add",         "aten::sub",         "aten::mul",
    "aten::div",         "aten::neg",         "aten::abs",
    "aten::exp",         "aten::log",         "aten::sqrt",
    "aten::pow",         "aten::sigmoid",     "aten::relu",
    "aten::tanh",        "aten::clamp",       "aten::floor",
    "aten::ceil",        "aten::round",       "aten::sign",
    "aten::remainder",   "aten::fmod",        "aten::eq",
    "aten::ne",          "aten::lt",          "aten::le",
    "aten::gt",          "aten::ge",          "aten::logical_and",
    "aten::logical_or",  "aten::logical_xor", "aten::logical_not",
    "aten::__and__",     "aten::__or__",      "aten::__xor__",
    "aten::bitwise_and", "aten::bitwise_or",  "aten::bitwise_not",
    "aten::minimum",     "aten::maximum",     "aten::where",
    "aten::masked_fill", "aten::to",          "aten::type_as",
    "aten::contiguous",  "aten::clone",       "aten::detach",
    "aten::float",       "aten::long",        "aten::int",
    "aten::bool",        "aten::zeros_like",  "aten::ones_like",
    "aten::empty_like",  "aten::full_like",   "aten::rand_like",
    "aten::randn_like",  "aten::cat",         "aten::slice",
    "aten::narrow",      "aten::randperm",    "aten::arange",
    "aten::isnan",       "aten::isinf",       "aten::isfinite",
    "aten::reciprocal"};

// Schema argument names that only carry values: a data-derived scalar there
// changes what a result holds, never its shape.
const char *const kValueArguments[] = {
    "other",  "alpha", "value", "fill_value",    "min",  "max", "exponent",
    "scalar", "beta",  "eps",   "rounding_mode", "s",    "t",   "data",
    "a",      "b",     "low",   "high",          "mean", "std", "p"};

const std::unordered_map<Symbol, const Entry *> &entryTable() {
  static const auto table = [] {
    std::unordered_map<Symbol, const Entry *> t;
    for (const Entry &e : kEntries)
      t.emplace(Symbol::fromQualString(e.op), &e);
    return t;
  }();
  return table;
}

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
  auto it = entryTable().find(node->kind());
  if (it == entryTable().end()) {
    static const std::unordered_set<Symbol> leading = [] {
      std::unordered_set<Symbol> s;
      for (const char *op : kLeadingPreserving)
        s.insert(Symbol::fromQualString(op));
      return s;
    }();
    return leading.count(node->kind()) ? OpRole::LeadingPreserving
                                       : OpRole::Other;
  }
  OpRole role = it->second->role;
  const std::string op = node->kind().toQualString();
  // Overloads decide: `where(cond)` is a root, `where(cond, a, b)` is
  // elementwise; `repeat_interleave` is a root only with tensor repeats and no
  // `output_size`; `index`/`index_put_` only with a mask (the analysis checks
  // the dtype); a sync read only reads a tensor.
  if (op == "aten::where")
    return node->inputs().size() == 1 ? role : OpRole::LeadingPreserving;
  if (op == "aten::repeat_interleave") {
    bool tensorRepeats = node->inputs().size() == 1 || hasTensorInput(node, 1);
    if (!tensorRepeats)
      return OpRole::Other;
    for (size_t i = 0; i < node->inputs().size(); ++i)
      if (inputName(node, i) == std::string("output_size") &&
          !node->input(i)->mustBeNone())
        return OpRole::Other;
    return role;
  }
  if (role == OpRole::SyncRead) {
    // Conversions read their one argument; formatting reads any of them.
    bool formats = op == "aten::str" || op == "aten::format" ||
                   op == "prim::Print" || op == "aten::warn";
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
  auto it = entryTable().find(node->kind());
  if (it == entryTable().end() || !it->second->reason)
    return "has a data-dependent shape";
  return it->second->reason;
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

bool neverRaisesOnValues(const Node *node) {
  const std::string op = node->kind().toQualString();
  static const std::unordered_set<std::string> raising = {
      "aten::remainder",    "aten::fmod",     "aten::pow",
      "aten::floor_divide", "aten::floordiv", "aten::__rshift__",
      "aten::__lshift__",   "aten::narrow",   "aten::cat",
      "aten::randperm",     "aten::arange"};
  if (raising.count(op))
    return false;
  if (op == "aten::div")
    // Tensor true division never raises; with a rounding mode, or on host
    // ints (ZeroDivisionError), it may.
    return node->inputs().size() == 2 &&
           node->input(0)->type()->kind() == c10::TypeKind::TensorType;
  if (node->kind() == c10::prim::Constant)
    return true;
  switch (opRole(node)) {
  case OpRole::Plumbing:
  case OpRole::MetadataRead:
    return true;
  case OpRole::LeadingPreserving:
    return !(op == "aten::where" && node->inputs().size() == 1);
  case OpRole::Reduction: {
    // max/min of an empty tensor raise; sums, means and norms do not.
    static const std::unordered_set<std::string> safe = {
        "aten::sum",           "aten::nansum", "aten::mean",
        "aten::prod",          "aten::any",    "aten::all",
        "aten::count_nonzero", "aten::norm",   "aten::linalg_vector_norm",
        "aten::logsumexp"};
    return safe.count(op) != 0;
  }
  default:
    break;
  }
  // Host scalar arithmetic and comparisons (int64 arithmetic wraps).
  static const std::unordered_set<std::string> hostSafe = {
      "prim::min",         "prim::max",           "aten::neg",
      "aten::__not__",     "aten::Float",         "aten::Bool",
      "prim::NumToTensor", "aten::scalar_tensor", "aten::masked_fill",
      "aten::clone",       "aten::contiguous",    "aten::detach",
      "aten::to",          "aten::type_as",       "aten::expand_as",
      "aten::zeros_like",  "aten::ones_like"};
  return hostSafe.count(op) != 0;
}

} // namespace staticify
