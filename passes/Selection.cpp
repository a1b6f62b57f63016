//===- Selection.cpp - `x[mask]` and its static row view ------------------===//

#include "passes/Selection.h"

#include "passes/Containers.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <torch/csrc/jit/ir/constants.h>

#include <unordered_set>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static bool isMaskDType(DTypeKind k) {
  return k == DTypeKind::Bool || k == DTypeKind::Byte;
}

std::optional<Selection> matchSelection(Value *v,
                                        const AnalysisResult &analysis) {
  Node *node = v->node();
  Selection sel;
  sel.node = node;
  if (node->kind() == c10::aten::masked_select) {
    sel.base = node->input(0);
    sel.mask = node->input(1);
    sel.broadcasts = true;
  } else if (node->kind() == c10::aten::index) {
    Node *list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1)
      return std::nullopt;
    sel.base = node->input(0);
    sel.mask = list->input(0);
  } else {
    return std::nullopt;
  }
  DTypeKind dtype = analysis.info(sel.mask).dtype;
  if (!isMaskDType(dtype))
    return std::nullopt;
  sel.isByteMask = dtype == DTypeKind::Byte;
  return sel;
}

static Value *boolMask(Graph &graph, const Selection &sel, const Node *anchor) {
  if (!sel.isByteMask)
    return sel.mask;
  return emit(graph, "aten::ne", {sel.mask, 0}, anchor); // uint8 masks: != 0
}

RowView emitRowView(Graph &graph, const Selection &sel, const Node *anchor,
                    const AnalysisResult *analysis) {
  Value *base = sel.base;
  Value *mask = boolMask(graph, sel, anchor);
  if (sel.broadcasts) {
    // masked_select(x, m) == broadcast(x)[broadcast(m)], a 1-D result.
    Value *list =
        graph
            .insertNode(graph.createList(c10::TensorType::get(), {base, mask}))
            ->output();
    Value *both = emit(graph, "aten::broadcast_tensors", {list}, anchor);
    Node *unpack = graph.insertNode(graph.createListUnpack(both, 2));
    base = unpack->output(0);
    mask = unpack->output(1);
  } else if (bool vector = knownRank(base, analysis) == 1;
             provablySameShape(mask, base) ||
             (vector && knownRank(mask, analysis) == 1)) {
    // A mask of the base's own elements (`x[x > t]`), or a vector selected
    // by a vector (its own length, or x[m] raises): the elements as rows and
    // the mask beside them, reshaped to [-1] where not vectors already; no
    // size read (of a bounded x, its count; unique_consecutive's values,
    // none that bound could follow).
    auto elements = [&](Value *t) {
      if (vector)
        return t;
      Value *all = graph
                       .insertNode(graph.createList(c10::IntType::get(),
                                                    {graph.insertConstant(-1)}))
                       ->output();
      return emit(graph, "aten::reshape", {t, all}, anchor);
    };
    return {elements(base),
            emit(graph, "aten::to",
                 {elements(mask), emit(graph, "prim::device", {base}, anchor)},
                 anchor)};
  }
  Value *n = emit(graph, "aten::numel", {mask}, anchor);
  Value *head =
      graph.insertNode(graph.createList(c10::IntType::get(), {n}))->output();
  Value *maskRank = emit(graph, "aten::dim", {mask}, anchor);
  Value *baseSizes = emit(graph, "aten::size", {base}, anchor);
  Value *rest = emit(graph, "aten::slice", {baseSizes, maskRank}, anchor);
  Value *rowsShape = emit(graph, "aten::add", {head, rest}, anchor);
  Value *rows = emit(graph, "aten::reshape", {base, rowsShape}, anchor);
  // The mask as x's leading sizes first: that reshape raises where x[m]
  // would (a mask of another length), also when x has no elements (the rows'
  // reshape of nothing to nothing would not).
  Value *lead = emit(graph, "aten::slice", {baseSizes, 0, maskRank}, anchor);
  mask = emit(graph, "aten::reshape", {mask, lead}, anchor);
  // x[m] also accepts a mask on another device (a CPU mask for CUDA data).
  mask = emit(graph, "aten::to",
              {mask, emit(graph, "prim::device", {base}, anchor)}, anchor);
  Value *restRank = emit(graph, "aten::len", {rest}, anchor);
  Value *one = graph
                   .insertNode(graph.createList(c10::IntType::get(),
                                                {graph.insertConstant(1)}))
                   ->output();
  Value *ones = emit(graph, "aten::mul", {one, restRank}, anchor);
  Value *keepShape = emit(graph, "aten::add", {head, ones}, anchor);
  Value *keep = emit(graph, "aten::reshape", {mask, keepShape}, anchor);
  return {rows, keep};
}

Value *emitSelect(Graph &graph, Value *base, Value *mask, const Node *anchor) {
  Value *list =
      graph.insertNode(graph.createList(c10::OptionalType::ofTensor(), {mask}))
          ->output();
  return emit(graph, "aten::index", {base, list}, anchor);
}

Value *emitMaskLike(Graph &graph, const Selection &sel, Value *like,
                    const Node *anchor) {
  Value *mask = emit(graph, "aten::to",
                     {boolMask(graph, sel, anchor),
                      emit(graph, "prim::device", {like}, anchor)},
                     anchor);
  Value *extra = emit(graph, "aten::sub",
                      {emit(graph, "aten::dim", {like}, anchor),
                       emit(graph, "aten::dim", {mask}, anchor)},
                      anchor);
  Value *one = graph
                   .insertNode(graph.createList(c10::IntType::get(),
                                                {graph.insertConstant(1)}))
                   ->output();
  Value *ones = emit(graph, "aten::mul", {one, extra}, anchor);
  Value *shape =
      emit(graph, "aten::add",
           {emit(graph, "aten::size", {mask}, anchor), ones}, anchor);
  return emit(graph, "aten::reshape", {mask, shape}, anchor);
}

//===----------------------------------------------------------------------===//
// Rank facts
//===----------------------------------------------------------------------===//

static bool isNumber(const Value *v) {
  c10::TypeKind k = v->type()->kind();
  return k == c10::TypeKind::IntType || k == c10::TypeKind::FloatType ||
         k == c10::TypeKind::BoolType || k == c10::TypeKind::NumberType;
}

Value *rowIndicesOf(const Value *v) {
  const Node *get = v->node();
  if (get->kind() != c10::aten::__getitem__ || constantInt(get->input(1)) != 0)
    return nullptr;
  const Node *where = get->input(0)->node();
  if (where->kind() != c10::aten::where || where->inputs().size() != 1)
    return nullptr;
  return where->input(0);
}

/// Whether an op changes \p v's shape in place (`squeeze_`, `resize_`).
static bool reshapedInPlace(const Value *v) {
  return std::any_of(v->uses().begin(), v->uses().end(),
                     [](const torch::jit::Use &use) {
                       const OpInfo *op = opInfo(use.user);
                       return op && op->has(kReshapesInPlace);
                     });
}

/// Joins \p r into \p rank: one known rank, or none.
static bool joinRank(std::optional<int64_t> &rank, std::optional<int64_t> r,
                     bool &first) {
  if (!r || (!first && rank != r))
    return false;
  rank = r;
  first = false;
  return true;
}

/// The one rank of the tensors container \p c holds (a list or dict of
/// tensors, or of such lists), where the graph fixes it (heldTensors): a
/// split's parts have its input's rank, unbind's one less. torchvision's
/// detectors keep their per-level outputs this way
/// (`head_outputs[k].split(...)`, `[br[index] for br in box_regression]`).
/// With \p key, of a dict of tensors only the entries under it.
static std::optional<int64_t> innerRank(const Value *c,
                                        const AnalysisResult *analysis,
                                        int depth,
                                        const std::string *key = nullptr) {
  // Stores may feed on what the container holds (`xs.append(xs[0] * 2)`)
  // and the rank and 0-d questions call each other: a container asked
  // again while it is being answered is unknown, and so is one past a
  // depth that no program needs (an archive is untrusted).
  thread_local std::unordered_set<const Value *> asking;
  if (depth > 32 || asking.size() > 16 || !asking.insert(c).second)
    return std::nullopt;
  struct Done {
    const Value *c;
    ~Done() { asking.erase(c); }
  } done{c};
  std::optional<HeldTensors> held = heldTensors(c, key);
  if (!held || !held->produced.empty() ||
      std::any_of(held->stored.begin(), held->stored.end(), reshapedInPlace) ||
      std::any_of(held->reads.begin(), held->reads.end(), reshapedInPlace))
    return std::nullopt;
  std::optional<int64_t> rank;
  bool first = true;
  for (const Value *t : held->stored)
    if (!joinRank(rank, knownRank(t, analysis, depth + 1), first))
      return std::nullopt;
  for (const Node *part : held->parts) {
    std::optional<int64_t> r = knownRank(part->input(0), analysis, depth + 1);
    bool unbinds = part->kind() == c10::aten::unbind;
    if (!r || (unbinds && *r < 1) ||
        !joinRank(rank, unbinds ? *r - 1 : *r, first))
      return std::nullopt;
  }
  return rank;
}

static bool provablyZeroDim(const Value *v, int depth);

bool provablyZeroDim(const Value *v) { return provablyZeroDim(v, 0); }

static bool provablyZeroDim(const Value *v, int depth) {
  const Node *node = v->node();
  const std::string op = node->kind().toQualString();
  if (op == "prim::NumToTensor" || op == "aten::scalar_tensor")
    return true;
  if (node->kind() == c10::prim::Constant) { // torch.tensor(1), folded
    std::optional<c10::IValue> iv = torch::jit::toIValue(v);
    return iv && iv->isTensor() && iv->toTensor().dim() == 0;
  }
  if (op == "aten::tensor")
    return isNumber(node->input(0));
  // An element of a vector (`int(nonzero(m).view(-1)[0])`).
  if (node->kind() == c10::aten::select && node->inputs().size() == 3)
    return knownRank(node->input(0)) == 1;
  // Read out of a container whose every tensor is (at that key).
  if (const Value *c = containerOf(v)) {
    std::optional<std::string> key = readKey(v);
    return depth < 8 && innerRank(c, nullptr, depth, key ? &*key : nullptr) == 0;
  }
  // An elementwise op of 0-d tensors and numbers (`boxes.max() + 1`).
  // Shallow: an archive may chain `t = t + t` deep, and each level doubles.
  if (const OpInfo *info = opInfo(node); info && info->has(kElementwise)) {
    if (depth >= 8)
      return false;
    if (info->has(kTypeOfSecond) && !node->inputs().empty())
      return isTensor(node->input(0)) && provablyZeroDim(node->input(0), depth + 1);
    bool anyTensor = false;
    for (const Value *in : node->inputs()) {
      if (!isTensor(in))
        continue;
      if (!provablyZeroDim(in, depth + 1))
        return false;
      anyTensor = true;
    }
    return anyTensor;
  }
  if (opRole(node) != OpRole::Reduction || !node->maybeSchema())
    return false;
  // One tensor input (max(a, b) is elementwise) and no kept dimensions.
  if (countTensorInputs(node) != 1)
    return false;
  if (Value *keepdim = namedInput(node, "keepdim"))
    if (constantBool(keepdim) != false)
      return false;
  Value *dim = namedInput(node, "dim");
  if (!dim || dim->mustBeNone())
    return true;
  auto dims = constantIntList(dim);
  return dims && dims->empty();
}

/// Ops whose result has the rank of their first input when every other
/// tensor operand is 0-d or has that same rank.
static bool isRankPreserving(const Node *node) {
  if (opRole(node) != OpRole::LeadingPreserving)
    return false;
  // Elementwise ops and `_like` ops; not those that change rank or take
  // sizes (cat, slice, arange...), nor where, whose first operand is its
  // condition.
  const OpInfo *op = opInfo(node);
  return (opElementwise(node) || op->has(kLikeInput)) &&
         !op->has(kConditionFirst);
}

/// Whether \p node's result has its first input's shape whatever its other
/// operands (OpInfo's kKeepsShape: softmax, cumsum, flip, roll).
static bool keepsFirstShape(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && op->has(kKeepsShape) && !node->inputs().empty() &&
         isTensor(node->input(0));
}

static const Value *rankRoot(const Value *v) {
  for (int depth = 0; depth < 64; ++depth) {
    const Node *node = v->node();
    if (node->kind() == c10::aten::gather) {
      v = node->input(2); // gather's result has its index's shape
      continue;
    }
    if (keepsFirstShape(node)) {
      v = node->input(0);
      continue;
    }
    if (!isRankPreserving(node) || node->inputs().empty())
      return v;
    const Value *first = node->input(0);
    if (first->type()->kind() != c10::TypeKind::TensorType)
      return v;
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      const Value *in = node->input(i);
      if (in->type()->kind() != c10::TypeKind::TensorType)
        continue;
      if (!provablyZeroDim(in) && rankRoot(in) != rankRoot(first))
        return v;
    }
    v = first;
  }
  return v;
}

/// How many dimensions \p node's result has more than its first (tensor)
/// input, where its op fixes that (OpInfo: kKeepsRank, kAddsDim, kDropsDim).
static std::optional<int64_t> rankStep(const Node *node) {
  const OpInfo *op = opInfo(node);
  if (!op || node->inputs().empty() ||
      node->input(0)->type()->kind() != c10::TypeKind::TensorType)
    return std::nullopt;
  if (op->has(kKeepsRank))
    return 0;
  if (op->has(kAddsDim))
    return 1;
  if (op->has(kDropsDim))
    return -1;
  return std::nullopt;
}

namespace {
/// The snapshot knownRank() answers from, while one is alive.
thread_local RankSnapshot *liveSnapshot = nullptr;
} // namespace

RankSnapshot::RankSnapshot(torch::jit::Graph &graph,
                           const AnalysisResult *analysis)
    : graph(graph), analysis(analysis), previous(liveSnapshot) {
  // In program order, each answer in the map before its uses ask: the
  // recursion stops at what is answered already.
  liveSnapshot = this;
  for (const Node *node : collectNodes(graph.block()))
    for (const Value *out : node->outputs())
      if (out->type()->kind() == c10::TypeKind::TensorType)
        ranks.emplace(out, knownRank(out, analysis));
}

RankSnapshot::~RankSnapshot() { liveSnapshot = previous; }

const std::unordered_map<const Value *, std::optional<int64_t>> *
RankSnapshot::live() {
  return liveSnapshot ? &liveSnapshot->ranks : nullptr;
}

void RankSnapshot::assume(const Value *v, int64_t rank) {
  RankSnapshot *s = liveSnapshot;
  if (!s)
    return;
  s->ranks[v] = rank;
  // What follows, in program order, asked about v: answered again.
  for (const Node *node : collectNodes(s->graph.block())) {
    if (!node->isAfter(v->node()))
      continue;
    for (const Value *out : node->outputs())
      if (s->ranks.count(out)) {
        s->ranks.erase(out);
        s->ranks.emplace(out, knownRank(out, s->analysis));
      }
  }
}

/// Whether the list \p list holds what its ListConstruct built: no use
/// writes it (an append, `xs[i] = v`), every user an op whose schema says so.
static bool unwrittenList(const Value *list) {
  for (const torch::jit::Use &use : list->uses()) {
    const c10::FunctionSchema *schema = use.user->maybeSchema();
    if (!schema || use.offset >= schema->arguments().size())
      return false;
    const c10::AliasInfo *alias = schema->arguments()[use.offset].alias_info();
    if (alias && alias->isWrite())
      return false;
  }
  return true;
}

/// The rank of \p v when op semantics fix it: `where(m)[i]` and `arange` are
/// 1-D, roi_align's 4-D, linear's its input's (by a matrix), `gather` has
/// its index's rank, rank-preserving ops (slice included)
/// the largest of their tensor operands' (they broadcast), per-row ops their
/// input's, unsqueeze one more, select one less, a reduction over constant
/// dims without keepdim that many fewer, x[mask] (with \p analysis) x's less
/// the mask's plus one, an if its branches' common rank, a tensor read out
/// of a list or dict, and cat and stack of a list, by what the container
/// holds (innerRank).
SizeSource sizeSource(const Value *v, int64_t dim, int depth) {
  if (depth > 16 || dim < 0)
    return {};
  // A tensor an op reshapes in place (`out=` writes `resize_as_` into
  // `c = torch.empty(0)`) has the sizes it is given, not those it was made
  // with.
  for (const torch::jit::Use &use : v->uses())
    if (use.offset == 0 && opInfo(use.user) &&
        opInfo(use.user)->has(kReshapesInPlace))
      return {};
  const Node *n = v->node();
  c10::Symbol kind = n->kind();
  // Element i of an int list: a list construct's, or a constant list's.
  auto listAt = [&](const Value *list, int64_t i) -> SizeSource {
    if (std::optional<std::vector<int64_t>> c = constantIntList(list))
      return i < static_cast<int64_t>(c->size()) ? SizeSource{nullptr, (*c)[i]}
                                                 : SizeSource{};
    const Node *l = list->node();
    if (l->kind() != c10::prim::ListConstruct || !unwrittenList(list) ||
        i >= static_cast<int64_t>(l->inputs().size()))
      return {};
    std::optional<int64_t> c = constantInt(l->input(i));
    return c ? SizeSource{nullptr, *c} : SizeSource{l->input(i), std::nullopt};
  };
  auto listLength = [](const Value *list) -> int64_t {
    if (std::optional<std::vector<int64_t>> c = constantIntList(list))
      return static_cast<int64_t>(c->size());
    return list->node()->kind() == c10::prim::ListConstruct && unwrittenList(list)
               ? static_cast<int64_t>(list->node()->inputs().size())
               : -1;
  };
  if (kind == c10::aten::ones || kind == c10::aten::zeros || kind == c10::aten::empty ||
      kind == c10::aten::full || kind == c10::aten::rand || kind == c10::aten::randn) {
    Value *size = namedInput(n, "size");
    return size && size->type()->kind() == c10::TypeKind::ListType ? listAt(size, dim)
                                                                    : SizeSource{};
  }
  if (kind == c10::aten::arange && dim == 0) {
    Value *end = namedInput(n, "end"), *start = namedInput(n, "start"),
          *step = namedInput(n, "step");
    if (!end || end->type()->kind() != c10::TypeKind::IntType ||
        (start && constantInt(start) != 0) || (step && constantInt(step) != 1))
      return {};
    std::optional<int64_t> c = constantInt(end);
    return c ? SizeSource{nullptr, *c} : SizeSource{end, std::nullopt};
  }
  std::optional<int64_t> a =
      n->inputs().size() > 1 ? constantInt(n->input(1)) : std::nullopt;
  if (kind == c10::aten::unsqueeze && a && *a >= 0) {
    if (dim == *a)
      return {nullptr, 1};
    return sizeSource(n->input(0), dim < *a ? dim : dim - 1, depth + 1);
  }
  if ((kind == c10::aten::movedim || kind == c10::aten::transpose) && a &&
      n->inputs().size() == 3) {
    std::optional<int64_t> b = constantInt(n->input(2));
    if (!b || *a < 0 || *b < 0)
      return {};
    if (kind == c10::aten::transpose)
      return sizeSource(n->input(0), dim == *a ? *b : dim == *b ? *a : dim, depth + 1);
    // movedim(x, a, b): x's dim a is b; the dims between shift by one.
    int64_t from = dim == *b                                   ? *a
                   : (*a < *b && dim >= *a && dim < *b)        ? dim + 1
                   : (*a > *b && dim > *b && dim <= *a)        ? dim - 1
                                                               : dim;
    return sizeSource(n->input(0), from, depth + 1);
  }
  if (kind == c10::aten::repeat || kind == c10::aten::expand) {
    std::optional<int64_t> rank = knownRank(n->input(0));
    int64_t len = listLength(n->input(1));
    if (!rank || len < *rank || dim >= len || dim < len - *rank)
      return {};
    SizeSource factor = listAt(n->input(1), dim);
    bool same = factor.constant && *factor.constant == (kind == c10::aten::repeat ? 1 : -1);
    return same ? sizeSource(n->input(0), dim - (len - *rank), depth + 1) : SizeSource{};
  }
  // A reshape or view to a size list: its element at dim, unless -1.
  if ((kind == c10::aten::reshape || kind == c10::aten::view) &&
      n->inputs().size() == 2 &&
      n->input(1)->type()->kind() == c10::TypeKind::ListType) {
    SizeSource s = listAt(n->input(1), dim);
    return s.constant && *s.constant < 0 ? SizeSource{} : s;
  }
  // narrow(x, d, start, length) has length rows along d (where it does not
  // raise), and a cat along d the sum of its parts' (where each is known
  // as a constant: a sum of values would be an op to emit).
  if (kind == c10::aten::narrow && n->inputs().size() == 4 && a == dim &&
      n->input(3)->type()->kind() == c10::TypeKind::IntType) {
    std::optional<int64_t> c = constantInt(n->input(3));
    return c ? SizeSource{nullptr, *c} : SizeSource{n->input(3), std::nullopt};
  }
  // The list must hold only what it was built with: one that appends
  // grow (`blocks = []`, then `blocks.append(...)` in a loop: torchaudio's
  // Emformer) has more parts than its ListConstruct.
  if (kind == c10::aten::cat && n->inputs().size() == 2 && constantInt(n->input(1)) == dim &&
      n->input(0)->node()->kind() == c10::prim::ListConstruct &&
      unwrittenList(n->input(0))) {
    int64_t sum = 0;
    for (const Value *part : n->input(0)->node()->inputs()) {
      std::optional<int64_t> c = sizeSource(part, dim, depth + 1).constant;
      if (!c)
        return {};
      sum += *c;
    }
    return {nullptr, sum};
  }
  // x[i] and index_select(x, 0, i) of a vector i: x's dims after the first.
  if (dim >= 1 && kind == c10::aten::index && n->inputs().size() == 2 &&
      n->input(1)->node()->kind() == c10::prim::ListConstruct &&
      n->input(1)->node()->inputs().size() == 1 &&
      knownRank(n->input(1)->node()->input(0)) == 1)
    return sizeSource(n->input(0), dim, depth + 1);
  if (dim >= 1 && kind == c10::aten::index_select && a == 0 &&
      knownRank(n->input(2)) == 1)
    return sizeSource(n->input(0), dim, depth + 1);
  if (opElementwise(n) && countTensorInputs(n) == 1 && isTensor(n->input(0)))
    return sizeSource(n->input(0), dim, depth + 1);
  return {};
}

bool sameHostInt(const Value *a, const Value *b) {
  if (a == b)
    return true;
  // A size read as what made it; anything else as itself.
  auto source = [](const Value *v) -> SizeSource {
    if (std::optional<int64_t> c = constantInt(v))
      return {nullptr, *c};
    const Node *n = v->node();
    if (n->kind() == c10::aten::size && n->inputs().size() == 2)
      if (std::optional<int64_t> d = constantInt(n->input(1)))
        if (SizeSource s = sizeSource(n->input(0), *d); s.value || s.constant)
          return s;
    return {v, std::nullopt};
  };
  SizeSource sa = source(a), sb = source(b);
  return sa.constant ? sb.constant == sa.constant : sa.value == sb.value;
}

const Node *whereOfCoordinate(const Value *v) {
  const Node *d = v->node();
  bool element = d->kind() == c10::prim::ListUnpack ||
                 d->kind() == c10::aten::__getitem__;
  return element && d->input(0)->node()->kind() == c10::aten::where
             ? d->input(0)->node()
             : nullptr;
}

std::optional<int64_t> knownRank(const Value *v, const AnalysisResult *analysis,
                                 int depth) {
  if (const auto *ranks = RankSnapshot::live())
    if (auto it = ranks->find(v); it != ranks->end())
      return it->second;
  if (depth > 32)
    return std::nullopt;
  // A tensor an op reshapes in place (`resize_as_`, as TorchScript writes
  // `index_select(..., out=c)` into `c = torch.empty(0)`) has the rank it
  // is given, not the one it was made with.
  for (const torch::jit::Use &use : v->uses())
    if (use.offset == 0 && opInfo(use.user) &&
        opInfo(use.user)->has(kReshapesInPlace))
      return std::nullopt;
  auto rankOf = [&](const Value *u) { return knownRank(u, analysis, depth + 1); };
  const Node *node = v->node();
  const std::string op = node->kind().toQualString();
  if (whereOfCoordinate(v))
    return 1; // `i = where(c)[0]`, `i, j = where(c)`
  if (op == "aten::arange" || op == "aten::randperm")
    return 1;
  // Roots whose shapes owe to data have ranks that do not: nonzero's
  // coordinates are [count, x.dim()], a histogram is a vector, and so are
  // the unique family's values and counts without a dim (with one, the
  // values keep self's rank); the inverse has self's shape (a vector of
  // self.size(dim) with a dim).
  if (op == "aten::nonzero" || op == "aten::argwhere")
    return 2;
  if (op == "aten::bincount" || op == "aten::histc")
    return 1;
  if (op == "aten::unique_consecutive" || op == "aten::_unique2" ||
      op == "aten::unique_dim") {
    const Value *dim = op == "aten::unique_dim" ? node->input(1)
                                                 : namedInput(node, "dim");
    bool alongDim = dim && !dim->mustBeNone();
    if (alongDim && !constantInt(dim))
      return std::nullopt;
    bool keepsSelf = v->offset() == 0 ? alongDim
                     : v->offset() == 1 ? !alongDim
                                        : false;
    return keepsSelf ? rankOf(node->input(0)) : std::optional<int64_t>(1);
  }
  // A module's tensor attribute that no method stores to: the rank
  // normalize wrote on it from the model (PassOptions::attributeFacts).
  if (node->kind() == c10::prim::GetAttr)
    if (auto tt = v->type()->cast<c10::TensorType>(); tt && tt->dim())
      return static_cast<int64_t>(*tt->dim());
  // A constant tensor (normalize folds `torch.zeros(8)`): its own rank. An
  // input's recorded type is not trusted: a trace records one example's.
  if (op == "prim::Constant")
    if (auto iv = torch::jit::toIValue(v); iv && iv->isTensor())
      return iv->toTensor().dim();
  if (op == "torchvision::roi_align") // [rois, channels, height, width]
    return 4;
  // linear(x, w): x's rank where w is a matrix (a vector weight drops x's
  // last dim): one of known rank 2, or an nn.Linear's `weight`, which its
  // constructor makes (out_features, in_features).
  if (op == "aten::linear") {
    const Value *w = node->input(1);
    const Node *get = w->node();
    auto owner = get->kind() == c10::prim::GetAttr
                     ? get->input(0)->type()->cast<c10::ClassType>()
                     : nullptr;
    std::string type = owner && owner->name() ? owner->name()->qualifiedName()
                                              : std::string();
    bool linearWeight =
        owner && get->s(c10::attr::name) == "weight" &&
        type.rfind("__torch__.torch.nn.modules.linear.", 0) == 0 &&
        type.size() >= 7 && type.compare(type.size() - 7, 7, ".Linear") == 0;
    if (linearWeight || rankOf(w) == 2)
      return rankOf(node->input(0));
    return std::nullopt;
  }
  // Read out of a container whose tensors all have one known rank (at
  // that key, of a dict of tensors read at a constant one).
  if (const Value *c = containerOf(v)) {
    std::optional<std::string> key = readKey(v);
    return innerRank(c, analysis, depth + 1, key ? &*key : nullptr);
  }
  // (a, b) = (x, y): x's rank.
  if (op == "prim::TupleUnpack" &&
      node->input(0)->node()->kind() == c10::prim::TupleConstruct)
    return rankOf(node->input(0)->node()->input(v->offset()));
  if (op == "aten::gather")
    return rankOf(node->input(2));
  if (op == "aten::scatter")
    return rankOf(node->input(0));
  // Sizes given as a list of constant length fix the rank; so do repeats
  // (`repeat` raises for fewer than the input's dims, and adds the rest).
  bool factory = op == "aten::zeros" || op == "aten::empty" ||
                 op == "aten::ones" || op == "aten::full";
  if (factory || op == "aten::reshape" || op == "aten::view" ||
      op == "aten::new_zeros" || op == "aten::new_ones" ||
      op == "aten::new_empty" || op == "aten::new_full" ||
      op == "aten::repeat") {
    const Value *sizes = node->input(factory ? 0 : 1);
    if (auto list = constantIntList(sizes))
      return static_cast<int64_t>(list->size());
    if (sizes->node()->kind() == c10::prim::ListConstruct)
      return static_cast<int64_t>(sizes->node()->inputs().size());
    return std::nullopt;
  }
  if (op == "prim::If") {
    auto a = rankOf(node->blocks()[0]->outputs()[v->offset()]);
    auto b = rankOf(node->blocks()[1]->outputs()[v->offset()]);
    return a && a == b ? a : std::nullopt;
  }
  // flatten(x, s, -1): dims s.. become one (x of a lower rank raises);
  // flatten(x, s, e) of x of a known rank r: r - (e - s) dims, s and e
  // counted from the end where negative (SAM's `masks.flatten(0, 1)` of
  // [B, M, H, W] is [B * M, H, W]).
  if (op == "aten::flatten" && node->inputs().size() == 3) {
    auto start = constantInt(node->input(1)), end = constantInt(node->input(2));
    if (start && end && *start >= 0 && *end == -1)
      return *start + 1;
    auto r = rankOf(node->input(0));
    if (!start || !end || !r)
      return std::nullopt;
    if (*r == 0)
      return 1; // a scalar flattens to a vector
    int64_t s = *start < 0 ? *start + *r : *start;
    int64_t e = *end < 0 ? *end + *r : *end;
    if (s < 0 || e >= *r || s > e)
      return std::nullopt; // it raises
    return *r - (e - s);
  }
  // cat and stack of a list of tensors of one rank (stack: one dim more).
  if (op == "aten::cat" || op == "aten::stack") {
    auto r = innerRank(node->input(0), analysis, depth + 1);
    return r ? std::optional<int64_t>(*r + (op == "aten::stack" ? 1 : 0))
             : std::nullopt;
  }
  // A number made a tensor, a 0-d constant: ops on tensors have their own
  // answers below (elementwise ops, reductions).
  if (node->inputs().empty() ||
      node->input(0)->type()->kind() != c10::TypeKind::TensorType)
    return provablyZeroDim(v) ? std::optional<int64_t>(0) : std::nullopt;
  if (op == "aten::squeeze" && node->inputs().size() == 2) {
    // squeeze(d) drops d only where its size is 1: provably so after
    // unsqueeze(d), and through gather (its index's shape) and
    // single-operand rank-preserving ops.
    auto r = rankOf(node->input(0));
    auto d = constantInt(node->input(1));
    if (!r || !d)
      return std::nullopt;
    int64_t at = *d < 0 ? *d + *r : *d;
    const Value *src = node->input(0);
    for (int hop = 0; hop < 16; ++hop) {
      const Node *def = src->node();
      if (def->kind() == c10::aten::gather) {
        src = def->input(2);
      } else if (isRankPreserving(def) && def->inputs().size() >= 1 &&
                 std::none_of(def->inputs().begin() + 1, def->inputs().end(),
                              [](const Value *in) {
                                return in->type()->kind() ==
                                           c10::TypeKind::TensorType &&
                                       !provablyZeroDim(in);
                              })) {
        src = def->input(0);
      } else {
        break;
      }
    }
    if (src->node()->kind() == c10::aten::unsqueeze)
      if (auto u = constantInt(src->node()->input(1)))
        if ((*u < 0 ? *u + *r : *u) == at)
          return *r - 1;
    return std::nullopt;
  }
  if (std::optional<int64_t> step = rankStep(node)) {
    auto r = rankOf(node->input(0));
    return r && *r + *step >= 0 ? std::optional<int64_t>(*r + *step)
                                : std::nullopt;
  }
  // Every result of a reduction has the reduced rank (max(x, d)'s values
  // and indices alike).
  if (opRole(node) == OpRole::Reduction &&
      std::all_of(node->outputs().begin(), node->outputs().end(),
                  [](const Value *out) { return isTensor(out); })) {
    const Value *dim = namedInput(node, "dim");
    const Value *keep = namedInput(node, "keepdim");
    std::optional<std::vector<int64_t>> dims;
    if (dim)
      dims = constantDims(dim);
    c10::optional<bool> keepdim;
    if (keep)
      keepdim = torch::jit::constant_as<bool>(keep);
    auto r = rankOf(node->input(0));
    if (!dim || dim->mustBeNone())
      return 0; // over everything
    if (!r || !dims || !keepdim || dims->empty())
      return std::nullopt;
    return *keepdim ? *r : *r - static_cast<int64_t>(dims->size());
  }
  if (op == "aten::index_select")
    return rankOf(node->input(0));
  if (analysis && op == "aten::index" &&
      node->input(1)->node()->kind() == c10::prim::ListConstruct &&
      node->input(1)->node()->inputs().size() == 1 &&
      (analysis->info(node->input(1)->node()->input(0)).dtype ==
           DTypeKind::Long ||
       whereOfCoordinate(node->input(1)->node()->input(0)))) {
    // x[i] with one integer index: i's dims in place of x's first.
    auto r = rankOf(node->input(0));
    auto i = rankOf(node->input(1)->node()->input(0));
    return r && i && *r >= 1 ? std::optional<int64_t>(*r - 1 + *i)
                             : std::nullopt;
  }
  if (analysis && (op == "aten::index" || op == "aten::masked_select")) {
    std::optional<Selection> sel =
        matchSelection(const_cast<Value *>(v), *analysis);
    if (!sel || sel->broadcasts)
      return sel && sel->broadcasts ? std::optional<int64_t>(1) : std::nullopt;
    // A mask of every element (`x[x > 0]`) selects elements: a vector,
    // whatever x's rank.
    if (masksEveryElement(sel->mask, sel->base))
      return 1;
    auto r = rankOf(sel->base), m = rankOf(sel->mask);
    return r && m && *m <= *r ? std::optional<int64_t>(*r - *m + 1)
                              : std::nullopt;
  }
  if (isRankPreserving(node)) {
    // Elementwise operands broadcast: the largest rank, all of them known.
    std::optional<int64_t> rank = rankOf(node->input(0));
    for (size_t i = 1; rank && i < node->inputs().size(); ++i) {
      const Value *in = node->input(i);
      if (in->type()->kind() != c10::TypeKind::TensorType || provablyZeroDim(in))
        continue;
      auto r = rankOf(in);
      rank = r ? std::optional<int64_t>(std::max(*rank, *r)) : std::nullopt;
    }
    return rank;
  }
  return std::nullopt;
}

int64_t minimumRank(const Value *v, const AnalysisResult *analysis,
                    int depth) {
  if (std::optional<int64_t> r = knownRank(v, analysis))
    return *r;
  if (depth > 16 || !isTensor(v))
    return 0;
  auto below = [&](const Value *u) { return minimumRank(u, analysis, depth + 1); };
  const Node *node = v->node();
  // A slice needs a dim (`x[:, None]` is a slice of dim 0, then an
  // unsqueeze); a selection by a mask has rows.
  if (node->kind() == c10::aten::slice)
    return std::max<int64_t>(1, below(node->input(0)));
  if (node->kind() == c10::aten::masked_select)
    return 1;
  if (analysis && node->kind() == c10::aten::index &&
      node->input(1)->node()->kind() == c10::prim::ListConstruct)
    for (const Value *i : node->input(1)->node()->inputs()) {
      DTypeKind k = i->mustBeNone() ? DTypeKind::Unknown : analysis->info(i).dtype;
      if (k == DTypeKind::Bool || k == DTypeKind::Byte)
        return 1;
    }
  if (std::optional<int64_t> step = rankStep(node))
    return std::max<int64_t>(0, below(node->input(0)) + *step);
  // A reduction over constant dims ran only on a value that has them:
  // `m.sum(-2)` of a rank of at least 2, at least 1 left without keepdim
  // (ultralytics' `fg_mask = mask_pos.sum(-2)`).
  if (opRole(node) == OpRole::Reduction && node->outputs().size() >= 1) {
    const Value *dim = namedInput(node, "dim");
    const Value *keep = namedInput(node, "keepdim");
    std::optional<std::vector<int64_t>> dims;
    if (dim && !dim->mustBeNone())
      dims = constantDims(dim);
    c10::optional<bool> keepdim;
    if (keep)
      keepdim = torch::jit::constant_as<bool>(keep);
    if (dims && !dims->empty() && keepdim) {
      int64_t needed = below(node->input(0));
      for (int64_t d : *dims)
        needed = std::max(needed, d >= 0 ? d + 1 : -d);
      return *keepdim ? needed : needed - static_cast<int64_t>(dims->size());
    }
  }
  if (isRankPreserving(node)) {
    int64_t rank = 0;
    for (const Value *in : node->inputs())
      if (isTensor(in))
        rank = std::max(rank, below(in));
    return rank;
  }
  return 0;
}

std::optional<int64_t> resolveDim(int64_t dim, const Value *of, int64_t extra,
                                  const AnalysisResult *analysis) {
  if (dim >= 0)
    return dim;
  std::optional<int64_t> rank = knownRank(of, analysis);
  if (!rank || dim + *rank + extra < 0)
    return std::nullopt;
  return dim + *rank + extra;
}

bool isUnwritten(const Selection &sel, const Aliases &aliases) {
  return !aliases.hasWriters(sel.base) && !aliases.hasWriters(sel.mask) &&
         !aliases.hasWriters(sel.node->output());
}

static const Value *shapeRoot(const Value *v, int &budget);

/// Whether shape roots \p a and \p b have one shape: the same value, or
/// rows of one tensor (select(x, d, k) and select(x, d, j): PyG's
/// edge_index[0] and edge_index[1]).
static bool rootsAgree(const Value *a, const Value *b, int &budget) {
  if (a == b)
    return true;
  const Node *na = a->node(), *nb = b->node();
  if (na->kind() != c10::aten::select || nb->kind() != c10::aten::select ||
      na->inputs().size() != 3 || nb->inputs().size() != 3)
    return false;
  std::optional<int64_t> da = constantInt(na->input(1)),
                         db = constantInt(nb->input(1));
  return da && da == db &&
         rootsAgree(shapeRoot(na->input(0), budget),
                    shapeRoot(nb->input(0), budget), budget);
}

/// Follows shape-preserving ops back to the value whose shape they keep:
/// an elementwise op whose tensor operands (0-d ones aside) all keep one
/// value's shape (`(t >= 0) & (t < 4)`: t's), and `a.expand_as(b)`, which
/// has b's shape wherever it runs. \p budget bounds the values visited (a
/// chain of `x = x * x` would otherwise be walked 2^n times).
static const Value *shapeRoot(const Value *v, int &budget) {
  while (budget-- > 0) {
    const Node *node = v->node();
    if (node->kind() == c10::aten::expand_as && node->inputs().size() == 2) {
      v = node->input(1);
      continue;
    }
    if (keepsFirstShape(node)) {
      v = node->input(0);
      continue;
    }
    // (values, indices) of max(x, d), sort, topk...: one shape.
    const OpInfo *info = opInfo(node);
    if (v->offset() == 1 && node->outputs().size() == 2 && info &&
        info->dtype == DTypeRule::LongSecond) {
      v = node->output(0);
      continue;
    }
    if (!isRankPreserving(node) || node->inputs().empty() ||
        node->input(0)->type()->kind() != c10::TypeKind::TensorType)
      return v;
    const Value *root = shapeRoot(node->input(0), budget);
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      const Value *in = node->input(i);
      if (in->type()->kind() == c10::TypeKind::TensorType &&
          !provablyZeroDim(in) &&
          !rootsAgree(shapeRoot(in, budget), root, budget))
        return v; // another tensor could broadcast the shape wider
    }
    return root;
  }
  return v;
}

static constexpr int kMaxShapeVisits = 256;

Value *shapeRoot(Value *v) {
  int budget = kMaxShapeVisits;
  // The walk only reads: the root is one of the graph's values.
  return const_cast<Value *>(shapeRoot(static_cast<const Value *>(v), budget));
}

bool provablySameShape(const Value *a, const Value *b) {
  int budgetA = kMaxShapeVisits, budgetB = kMaxShapeVisits;
  return a == b ||
         rootsAgree(shapeRoot(a, budgetA), shapeRoot(b, budgetB), budgetA);
}

bool masksEveryElement(const Value *mask, const Value *x) {
  const Node *cmp = mask->node();
  const OpInfo *op = opInfo(cmp);
  if (op && op->has(kComparison) && cmp->inputs().size() == 2 &&
      cmp->input(0) == x) {
    const Value *other = cmp->input(1);
    if (!isTensor(other) || provablyZeroDim(other))
      return true;
  }
  return provablySameShape(mask, x);
}

bool masksLeadingDims(const Value *mask, const Value *x) {
  if (masksEveryElement(mask, x))
    return true;
  int budget = kMaxShapeVisits;
  const Node *root = shapeRoot(mask, budget)->node();
  if (root->kind() != c10::aten::select || root->inputs().size() != 3 ||
      !provablySameShape(root->input(0), x))
    return false;
  std::optional<int64_t> d = constantInt(root->input(1));
  std::optional<int64_t> rank = knownRank(x);
  return d && (*d == -1 || (rank && *d == *rank - 1));
}

/// Whether \p a and \p b provably have one size at dim \p d: one shape,
/// or nonzero's coordinates of tensors of one rank (its columns, dim 1,
/// are its input's rank).
static bool provablySameSizeAt(const Value *a, const Value *b, int64_t d) {
  if (provablySameShape(a, b))
    return true;
  const Node *na = a->node(), *nb = b->node();
  return (d == 1 || d == -1) && na->kind() == c10::aten::nonzero &&
         nb->kind() == c10::aten::nonzero &&
         provablySameRank(na->input(0), nb->input(0));
}

bool provablySameRank(const Value *a, const Value *b) {
  if (a == b || rankRoot(a) == rankRoot(b))
    return true;
  // squeeze(x, d) and squeeze(y, d), x and y of one rank and one size at d
  // (`nonzero(m).squeeze(1)` of masks of one rank).
  {
    const Node *na = a->node(), *nb = b->node();
    std::optional<int64_t> d =
        na->inputs().size() == 2 ? constantInt(na->input(1)) : std::nullopt;
    if (na->kind() == c10::aten::squeeze && nb->kind() == c10::aten::squeeze &&
        d && nb->inputs().size() == 2 && constantInt(nb->input(1)) == d &&
        provablySameRank(na->input(0), nb->input(0)) &&
        provablySameSizeAt(na->input(0), nb->input(0), *d))
      return true;
  }
  // One op whose result's rank follows its input's by a fixed step
  // (select(b, 1, 0) and select(b, 1, 1)), on inputs of one rank.
  const Node *na = rankRoot(a)->node(), *nb = rankRoot(b)->node();
  if (na->kind() == nb->kind() && rankStep(na) &&
      provablySameRank(na->input(0), nb->input(0)))
    return true;
  // x[i] and y[i], one index (a mask or integers) of both, x and y of one
  // rank: one rank.
  if (na->kind() == c10::aten::index && nb->kind() == c10::aten::index) {
    const Node *la = na->input(1)->node(), *lb = nb->input(1)->node();
    if (la->kind() == c10::prim::ListConstruct &&
        lb->kind() == c10::prim::ListConstruct && la->inputs().size() == 1 &&
        lb->inputs().size() == 1 && la->input(0) == lb->input(0) &&
        provablySameRank(na->input(0), nb->input(0)))
      return true;
  }
  // Items of one unpacked unbind, split or chunk: one rank.
  if (na == nb && na->kind() == c10::prim::ListUnpack) {
    c10::Symbol from = na->input(0)->node()->kind();
    if (from == c10::aten::unbind || from == c10::aten::split ||
        from == c10::aten::chunk || from == c10::aten::split_with_sizes)
      return true;
  }
  // Broadcasting elementwise ops whose operands pair up by rank (torchvision's
  // `max(x1, x1g)` and `min(x2, x2g)`, x1 and x2 rows of one unbind): a
  // broadcast has its operands' largest rank.
  if (isRankPreserving(na) && isRankPreserving(nb) &&
      na->inputs().size() == nb->inputs().size()) {
    bool paired = true;
    for (size_t i = 0; paired && i < na->inputs().size(); ++i) {
      const Value *u = na->input(i), *v = nb->input(i);
      bool tu = isTensor(u) && !provablyZeroDim(u), tv = isTensor(v) && !provablyZeroDim(v);
      paired = tu == tv && (!tu || provablySameRank(u, v));
    }
    if (paired)
      return true;
  }
  auto ra = knownRank(a, nullptr), rb = knownRank(b, nullptr);
  return ra && ra == rb;
}

} // namespace staticify
