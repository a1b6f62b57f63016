//===- Bounded.cpp - The bounded-shape engine (DESIGN §1) -----------------===//

#include "passes/Bounded.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/LiftScalars.h"
#include "passes/MaskedReduce.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/passes/constant_propagation.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "bound";

/// Python's floor division of \p x by a positive \p d.
int64_t floorDiv(int64_t x, int64_t d) {
  return x >= 0 ? x / d : -((-x + d - 1) / d);
}

bool is(const Node *node, const char *op) {
  return node->kind() == c10::Symbol::fromQualString(op);
}

/// The integer range of a host int: a constant lower bound, and an upper
/// bound that is a host int in the graph (a constant or an expression over
/// input sizes), with its constant value when it has one.
struct Range {
  std::optional<int64_t> lo;
  Value *hi = nullptr;
  std::optional<int64_t> hiConst;
};

/// What a value of the original graph has become.
struct Rep {
  enum class Kind {
    Lifted,    // a host scalar, now `value`: a 0-d tensor on the device
    Bounded,   // a tensor with a data-dependent leading dimension
    WhereList, // where(c) / nonzero_numpy(c): its elements are bounded
    RandPerm,  // randperm(n) whose one use is [:k], made a top-k there
  } kind;
  explicit Rep(Kind kind) : kind(kind) {}
  Value *value = nullptr; // Lifted: the tensor; Bounded: padded rows;
                          // WhereList: c; RandPerm: the lifted n
  Value *count = nullptr; // Bounded: valid rows, 0-d int64
  Value *bound = nullptr; // Bounded: a host int for its rows, when cheaper
                          // than reading the padded tensor's size
  Range range;            // Lifted ints; RandPerm: n's range
  bool isIndex = false;   // Bounded: holds int64 indices
  bool is1D = false;      // Bounded: a vector (numel is its count)
  // Bounded, where(c)[k]: c and k. Bounded, randperm(n)[:top]: n and top.
  Value *whereCond = nullptr;
  int64_t whereDim = 0;
  Value *drawOf = nullptr;
  Value *drawTop = nullptr;
  Node *origin = nullptr; // RandPerm: the randperm node
};

/// Ops computed elementwise on a bounded value's padded rows, padding
/// included: the result keeps the leading dimension.
bool isElementwise(const Node *node) {
  if (opRole(node) != OpRole::LeadingPreserving || node->outputs().size() != 1)
    return false;
  static const char *const notElementwise[] = {"aten::cat", "aten::slice",
                                               "aten::narrow", "aten::randperm",
                                               "aten::arange"};
  for (const char *op : notElementwise)
    if (is(node, op))
      return false;
  return neverRaisesOnValues(node); // padding rows are computed too
}

/// Whether every dimension argument of \p node named in \p names that it
/// has is a constant >= 1 (at least one is there): the op then works within
/// each row of dimension 0. Negative dimensions are refused, since the rank
/// is not known (-1 is dimension 0 of a vector).
bool onlyTrailingDims(const Node *node,
                      const std::vector<const char *> &names) {
  bool any = false;
  for (const char *name : names) {
    Value *dim = namedInput(node, name);
    if (!dim)
      continue;
    std::optional<std::vector<int64_t>> dims = constantIntList(dim);
    if (auto d = constantInt(dim))
      dims = std::vector<int64_t>{*d};
    if (!dims || dims->empty() ||
        !std::all_of(dims->begin(), dims->end(),
                     [](int64_t d) { return d > 0; }))
      return false;
    any = true;
  }
  return any;
}

/// Ops that, given dimension arguments >= 1, compute each row of dimension
/// 0 from that row alone (of each tensor operand): a bounded value's padded
/// rows can go through them as they are, the count unchanged. A list, not a
/// property of every op with a `dim`: renorm and weight_norm take one and
/// mix rows. None raises on the values in the padding rows (gather by a
/// padded index would). Reductions are handled with the masked reductions
/// (`reduce`). The names of \p node's dimension arguments, if it is one.
const std::vector<const char *> *perRowDims(const Node *node) {
  static const auto *ops = [] {
    auto *m = new std::unordered_map<c10::Symbol, std::vector<const char *>>;
    const std::pair<const char *, std::vector<const char *>> table[] = {
        {"aten::select", {"dim"}},       {"aten::slice", {"dim"}},
        {"aten::narrow", {"dim"}},       {"aten::unsqueeze", {"dim"}},
        {"aten::squeeze", {"dim"}},      {"aten::transpose", {"dim0", "dim1"}},
        {"aten::flip", {"dims"}},        {"aten::roll", {"dims"}},
        {"aten::sort", {"dim"}},         {"aten::argsort", {"dim"}},
        {"aten::topk", {"dim"}},         {"aten::kthvalue", {"dim"}},
        {"aten::cumsum", {"dim"}},       {"aten::cumprod", {"dim"}},
        {"aten::logcumsumexp", {"dim"}}, {"aten::softmax", {"dim"}},
        {"aten::log_softmax", {"dim"}},  {"aten::stack", {"dim"}},
        {"aten::cat", {"dim"}},
    };
    for (const auto &[op, dims] : table)
      m->emplace(c10::Symbol::fromQualString(op), dims);
    return m;
  }();
  auto it = ops->find(node->kind());
  return it == ops->end() ? nullptr : &it->second;
}

class Engine {
public:
  Engine(Graph &graph, PassContext &ctx, const AnalysisResult &analysis,
         const torch::jit::AliasDb &aliases)
      : graph(graph), ctx(ctx), analysis(analysis), aliases(aliases) {}

  bool run() {
    runBlock(graph.block());
    if (!changed)
      return false;
    materializeRest();
    // What the rewrites replaced, converted ifs included, is now dead.
    eraseDeadNodes(graph, ctx, kRule);
    return true;
  }

private:
  Graph &graph;
  PassContext &ctx;
  const AnalysisResult &analysis;
  const torch::jit::AliasDb &aliases;
  std::unordered_map<Value *, Rep> reps;
  std::vector<Value *> repOrder; // program order, for materialization
  std::unordered_set<Node *> absorbed;
  std::unordered_map<Value *, Value *> whereCounts; // where list -> count
  bool changed = false;

  //===--------------------------------------------------------------------===//
  // Walk
  //===--------------------------------------------------------------------===//

  void runBlock(Block *block) {
    for (auto it = block->nodes().begin(); it != block->nodes().end();) {
      Node *node = *it;
      ++it; // nodes the visit hoists go before `node`; never revisited
      visit(node);
    }
  }

  void visit(Node *node) {
    if (node->kind() == c10::prim::If && rep(node->input(0)) && convertIf(node))
      return;
    for (Block *b : node->blocks())
      runBlock(b);
    if (!node->blocks().empty())
      return; // loops and ifs consume lifted values as host values
    // A list of tensors (cat's, index's) counts by its elements.
    auto hasRep = [&](Value *v) {
      if (rep(v))
        return true;
      Node *list = v->node();
      return list->kind() == c10::prim::ListConstruct &&
             std::any_of(list->inputs().begin(), list->inputs().end(),
                         [&](Value *e) { return rep(e) != nullptr; });
    };
    bool anyRep =
        std::any_of(node->inputs().begin(), node->inputs().end(), hasRep);
    torch::jit::WithInsertPoint guard(node);
    if (anyRep ? rewrite(node) : root(node)) {
      absorbed.insert(node);
      changed = true;
    }
  }

  Rep *rep(Value *v) {
    auto it = reps.find(v);
    return it == reps.end() ? nullptr : &it->second;
  }

  void setRep(Value *v, Rep r) {
    if (r.kind == Rep::Kind::Lifted)
      applyHint(v, r.range);
    if (reps.emplace(v, r).second)
      repOrder.push_back(v);
  }

  /// Replaces every use of \p v (a result that is static again).
  void replaceStatic(Value *v, Value *with) { v->replaceAllUsesWith(with); }

  //===--------------------------------------------------------------------===//
  // Host ints and ranges
  //===--------------------------------------------------------------------===//

  Value *constant(int64_t c) { return graph.insertConstant(c); }

  /// min/max/+/- of two host ints, folded when both are constants.
  Value *hostOp(const char *op, Value *a, Value *b, const Node *anchor) {
    auto ca = constantInt(a), cb = constantInt(b);
    if (ca && cb) {
      std::string o = op;
      if (o == "prim::min")
        return constant(std::min(*ca, *cb));
      if (o == "prim::max")
        return constant(std::max(*ca, *cb));
      if (o == "aten::add")
        return constant(*ca + *cb);
      if (o == "aten::sub")
        return constant(*ca - *cb);
      if (o == "aten::mul")
        return constant(*ca * *cb);
      if (o == "aten::floordiv" && *cb > 0)
        return constant(floorDiv(*ca, *cb));
    }
    return emit(graph, op, {a, b}, anchor);
  }

  Range rangeOf(Value *v) {
    if (Rep *r = rep(v))
      return r->range;
    Range r;
    if (v->type()->kind() != c10::TypeKind::IntType)
      return r;
    if (auto c = constantInt(v)) {
      r.lo = r.hiConst = *c;
      r.hi = v;
      return r;
    }
    // A host int is its own upper bound; sizes are never negative.
    r.hi = v;
    OpRole role = opRole(v->node());
    if (role == OpRole::ShapeRead || role == OpRole::MetadataRead)
      r.lo = 0;
    return r;
  }

  Value *upper(const Range &r) {
    if (r.hi)
      return r.hi;
    return r.hiConst ? constant(*r.hiConst) : nullptr;
  }

  /// The range of scalar op \p node's result from its operands' ranges.
  Range rangeOfOp(Node *node) {
    Range out;
    if (node->inputs().empty() ||
        node->output()->type()->kind() != c10::TypeKind::IntType)
      return out;
    Range a = rangeOf(node->input(0));
    if (is(node, "aten::Int"))
      return a;
    if (node->inputs().size() != 2)
      return out;
    Range b = rangeOf(node->input(1));
    Value *ha = upper(a), *hb = upper(b);
    auto both = [](std::optional<int64_t> x, std::optional<int64_t> y,
                   auto f) -> std::optional<int64_t> {
      if (x && y)
        return f(*x, *y);
      return std::nullopt;
    };
    auto plus = [](int64_t x, int64_t y) { return x + y; };
    if (is(node, "prim::min")) {
      out.lo =
          both(a.lo, b.lo, [](int64_t x, int64_t y) { return std::min(x, y); });
      out.hi = ha && hb ? hostOp("prim::min", ha, hb, node) : (ha ? ha : hb);
      out.hiConst = a.hiConst && b.hiConst
                        ? std::min(*a.hiConst, *b.hiConst)
                        : (a.hiConst ? a.hiConst : b.hiConst);
    } else if (is(node, "prim::max")) {
      out.lo = a.lo && b.lo ? std::max(*a.lo, *b.lo) : (a.lo ? a.lo : b.lo);
      if (ha && hb)
        out.hi = hostOp("prim::max", ha, hb, node);
      out.hiConst = both(a.hiConst, b.hiConst,
                         [](int64_t x, int64_t y) { return std::max(x, y); });
    } else if (is(node, "aten::add")) {
      out.lo = both(a.lo, b.lo, plus);
      if (ha && hb)
        out.hi = hostOp("aten::add", ha, hb, node);
      out.hiConst = both(a.hiConst, b.hiConst, plus);
    } else if (is(node, "aten::sub")) {
      out.lo =
          both(a.lo, b.hiConst, [](int64_t x, int64_t y) { return x - y; });
      if (ha && b.lo)
        out.hi = hostOp("aten::sub", ha, constant(*b.lo), node);
      out.hiConst =
          both(a.hiConst, b.lo, [](int64_t x, int64_t y) { return x - y; });
    } else if (is(node, "aten::mul") && a.lo && b.lo && *a.lo >= 0 &&
               *b.lo >= 0) {
      out.lo = *a.lo * *b.lo;
      if (ha && hb)
        out.hi = hostOp("aten::mul", ha, hb, node);
      out.hiConst = both(a.hiConst, b.hiConst,
                         [](int64_t x, int64_t y) { return x * y; });
    } else if (is(node, "aten::floordiv") && b.lo && b.hiConst &&
               *b.lo == *b.hiConst && *b.lo > 0) {
      int64_t d = *b.lo;
      if (a.lo)
        out.lo = floorDiv(*a.lo, d);
      if (ha)
        out.hi = hostOp("aten::floordiv", ha, constant(d), node);
      if (a.hiConst)
        out.hiConst = floorDiv(*a.hiConst, d);
    }
    return out;
  }

  Range join(const Range &a, const Range &b, const Node *anchor) {
    Range r;
    if (a.lo && b.lo)
      r.lo = std::min(*a.lo, *b.lo);
    Value *ha = upper(a), *hb = upper(b);
    if (ha && hb)
      r.hi = hostOp("prim::max", ha, hb, anchor);
    if (a.hiConst && b.hiConst)
      r.hiConst = std::max(*a.hiConst, *b.hiConst);
    return r;
  }

  /// A user bound (`--bound NAME=N`) for \p v, if one names it.
  std::optional<int64_t> hintFor(const Value *v) {
    if (ctx.options.bounds.empty())
      return std::nullopt; // the usual case: no name or location to compute
    for (const auto &[key, bound] : ctx.options.bounds)
      if (boundKeyNames(key, v))
        return bound;
    return std::nullopt;
  }

  /// A hint promises 0 <= value <= N.
  void applyHint(const Value *v, Range &range) {
    std::optional<int64_t> hint = hintFor(v);
    if (!hint)
      return;
    if (!range.lo || *range.lo < 0)
      range.lo = 0;
    if (!range.hiConst || *hint < *range.hiConst) {
      range.hiConst = *hint;
      range.hi = constant(*hint);
    }
  }

  //===--------------------------------------------------------------------===//
  // Lifted values
  //===--------------------------------------------------------------------===//

  Value *deviceOf(Value *t, const Node *anchor) {
    return emit(graph, "prim::device", {t}, anchor);
  }

  /// The 0-d tensor for scalar \p v: its lifted value, or a host scalar put
  /// on \p device.
  Value *tensorOf(Value *v, Value *device, const Node *anchor) {
    if (Rep *r = rep(v))
      return r->value;
    auto dtype = liftedDType(v->type());
    return emit(graph, "aten::scalar_tensor", {v}, anchor,
                {NamedValue("dtype", static_cast<int64_t>(*dtype)),
                 NamedValue("device", device)});
  }

  Value *liftedDevice(Node *node) {
    for (Value *in : node->inputs())
      if (Rep *r = rep(in); r && r->kind == Rep::Kind::Lifted)
        return deviceOf(r->value, node);
    return nullptr;
  }

  bool liftScalarOp(Node *node) {
    if (!isScalarOp(node))
      return false;
    Value *device = liftedDevice(node);
    if (!device)
      return false;
    std::vector<Value *> operands;
    for (Value *in : node->inputs()) {
      Rep *r = rep(in);
      if (r && r->kind != Rep::Kind::Lifted)
        return false;
      if (!r && !liftedDType(in->type()))
        return false;
      operands.push_back(tensorOf(in, device, node));
    }
    Rep out(Rep::Kind::Lifted);
    out.range = rangeOfOp(node);
    out.value = emitScalarOpOnTensors(graph, node, operands);
    setRep(node->output(), out);
    return true;
  }

  /// `prim::If` on a lifted bool with pure branches: both branches run,
  /// their results are selected by where().
  bool convertIf(Node *node) {
    Rep *cond = rep(node->input(0));
    if (cond->kind != Rep::Kind::Lifted || isDataAssert(node))
      return false;
    std::string why = unconvertibleReason(node, aliases);
    for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i) {
      Value *a = node->blocks()[0]->outputs()[i];
      Value *b = node->blocks()[1]->outputs()[i];
      if (liftedDType(node->output(i)->type()))
        continue; // an int, float or bool: selected as a 0-d tensor
      if (!isTensor(node->output(i)))
        why = "the if returns a value that is neither a tensor nor a number";
      else if (analysis.info(a).shape != ShapeDep::Static ||
               analysis.info(b).shape != ShapeDep::Static || !congruent(a, b))
        why = "the branches' tensors are not provably of the same static "
              "shape and dtype";
    }
    if (!why.empty()) {
      ctx.declined(node, kRule, why);
      return false;
    }
    std::vector<Node *> hoisted;
    for (Block *b : node->blocks())
      for (Node *n : b->nodes())
        hoisted.push_back(n);
    auto outs = hoistBranches(node);
    for (Node *n : hoisted)
      visit(n);
    torch::jit::WithInsertPoint guard(node);
    Value *c = cond->value;
    Value *device = deviceOf(c, node);
    for (size_t i = 0; i < outs.size(); ++i) {
      auto [a, b] = outs[i];
      Value *out = node->output(i);
      if (isTensor(out)) {
        replaceStatic(out, emit(graph, "aten::where", {c, a, b}, node));
        continue;
      }
      Rep r(Rep::Kind::Lifted);
      r.range = join(rangeOf(a), rangeOf(b), node);
      r.value =
          emit(graph, "aten::where",
               {c, tensorOf(a, device, node), tensorOf(b, device, node)}, node);
      setRep(out, r);
    }
    ctx.rewrote(node, "if-convert");
    changed = true;
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Roots: data-dependent shapes from static inputs
  //===--------------------------------------------------------------------===//

  /// Whether \p node's results are never written to. They are fresh
  /// tensors (a nonzero, a selection, a gather), so a write must go through
  /// them or a view of them: uses are followed through views, index lists
  /// and if results; a use that stores one where it could be written later
  /// (a list append, an attribute) counts as a write. libtorch's alias
  /// analysis would count any write to a tensor kept in a list as one.
  static bool writable(const Node *node) {
    for (const Value *out : node->outputs())
      if (mayBeWritten(out, 0))
        return false;
    return true;
  }

  static bool mayBeWritten(const Value *v, int depth) {
    c10::TypeKind kind = v->type()->kind();
    if (kind != c10::TypeKind::TensorType && kind != c10::TypeKind::ListType &&
        kind != c10::TypeKind::TupleType && kind != c10::TypeKind::OptionalType)
      return false; // numbers, devices...: immutable
    if (depth > 32)
      return true;
    for (const torch::jit::Use &use : v->uses()) {
      const Node *user = use.user;
      if (user->kind() == c10::prim::Return) {
        const Node *owner = user->owningBlock()->owningNode();
        if (!owner)
          continue; // returned: the caller gets a fresh tensor either way
        if (owner->kind() != c10::prim::If ||
            mayBeWritten(owner->output(use.offset), depth + 1))
          return true;
        continue;
      }
      if (user->kind() == c10::prim::ListConstruct) {
        for (const torch::jit::Use &consumer : user->output()->uses()) {
          const Node *c = consumer.user;
          bool readOnly =
              ((c->kind() == c10::aten::index ||
                c->kind() == c10::Symbol::fromQualString("aten::index_put_")) &&
               consumer.offset == 1) ||
              ((c->kind() == c10::aten::cat || c->kind() == c10::aten::stack) &&
               consumer.offset == 0);
          if (!readOnly)
            return true;
        }
        continue;
      }
      if (user->kind() == c10::prim::ListUnpack ||
          user->kind() == c10::prim::TupleConstruct ||
          user->kind() == c10::prim::TupleUnpack ||
          user->kind() == c10::aten::__getitem__) {
        for (const Value *out : user->outputs())
          if (mayBeWritten(out, depth + 1))
            return true;
        continue;
      }
      const c10::FunctionSchema *schema = user->maybeSchema();
      if (!schema || use.offset >= schema->arguments().size())
        return true; // an op we cannot see into
      const c10::AliasInfo *alias =
          schema->arguments()[use.offset].alias_info();
      if (!alias)
        continue; // read only; the results are new tensors
      if (alias->isWrite())
        return true;
      for (const Value *out : user->outputs()) // a view of it
        if (mayBeWritten(out, depth + 1))
          return true;
    }
    return false;
  }

  void setBounded(Value *v, Value *padded, Value *count, bool isIndex,
                  bool is1D = false) {
    Rep r(Rep::Kind::Bounded);
    r.value = padded;
    r.count = count;
    r.isIndex = isIndex;
    r.is1D = is1D;
    setRep(v, r);
  }

  Value *boundOf(const Rep &r, const Node *anchor) {
    return r.bound ? r.bound : emit(graph, "aten::size", {r.value, 0}, anchor);
  }

  /// Whether \p mask is a comparison of \p x with a scalar or a 0-d tensor:
  /// then it has x's shape, and x[mask] is a vector.
  bool maskOfItself(const Value *mask, const Value *x) {
    const Node *cmp = mask->node();
    static const char *const comparisons[] = {
        "aten::gt", "aten::ge", "aten::lt", "aten::le", "aten::eq", "aten::ne"};
    if (std::none_of(std::begin(comparisons), std::end(comparisons),
                     [&](const char *op) { return is(cmp, op); }) ||
        cmp->inputs().size() != 2 || cmp->input(0) != x)
      return false;
    const Value *other = cmp->input(1);
    return !isTensor(other) || provablyZeroDim(other);
  }

  /// m, when \p t is `m.sum()` or `count_nonzero(m)` over all of a bool m.
  Value *countedMask(Value *t) {
    Node *def = t->node();
    // sum in int64 (the default for bool; another dtype could wrap or
    // round), and a count nothing writes to afterwards.
    bool sum = is(def, "aten::sum") && def->inputs().size() == 2 &&
               (def->input(1)->mustBeNone() ||
                constantInt(def->input(1)) ==
                    static_cast<int64_t>(c10::ScalarType::Long));
    bool nonzeros = is(def, "aten::count_nonzero") &&
                    def->inputs().size() == 2 && def->input(1)->mustBeNone();
    if (!(sum || nonzeros) || aliases.hasWriters(t))
      return nullptr;
    // Through the views masked-reduce puts on a mask (reshape, expand_as):
    // they keep its dtype.
    Value *source = def->input(0);
    while (is(source->node(), "aten::reshape") ||
           is(source->node(), "aten::view") ||
           is(source->node(), "aten::expand_as") ||
           is(source->node(), "aten::expand"))
      source = source->node()->input(0);
    if (analysis.info(source).dtype != DTypeKind::Bool)
      return nullptr;
    return def->input(0);
  }

  bool root(Node *node) {
    if (!writable(node))
      return false;
    if ((is(node, "aten::where") && node->inputs().size() == 1) ||
        is(node, "aten::nonzero_numpy")) {
      Rep r(Rep::Kind::WhereList);
      r.value = node->input(0);
      setRep(node->output(), r);
      return true;
    }
    if ((is(node, "aten::nonzero") || is(node, "aten::argwhere")) &&
        node->inputs().size() == 1) {
      auto outs = insertForm(graph, "nonzero", {node->input(0)}, node);
      setBounded(node->output(), outs[0], outs[1], true);
      return true;
    }
    if (is(node, "aten::masked_select") || is(node, "aten::index")) {
      auto sel = matchSelection(node->output(), analysis);
      if (!sel)
        return false;
      auto outs =
          insertForm(graph, sel->broadcasts ? "masked_select" : "select_rows",
                     {sel->base, sel->mask}, node);
      // masked_select is always a vector; so is x[m] for a mask of x's own
      // shape (x > 0, x == v, ...).
      setBounded(node->output(), outs[0], outs[1], false,
                 is(node, "aten::masked_select") ||
                     maskOfItself(sel->mask, sel->base));
      return true;
    }
    if (is(node, "aten::_unique2") || is(node, "aten::unique_consecutive")) {
      bool consecutive = is(node, "aten::unique_consecutive");
      size_t flags = consecutive ? 1 : 2;
      if (consecutive && !node->input(3)->mustBeNone())
        return false; // unique_consecutive over a dim: not handled
      auto inverse = torch::jit::toIValue(node->input(flags));
      auto counts = torch::jit::toIValue(node->input(flags + 1));
      if (!inverse || !counts)
        return false;
      auto outs = insertForm(
          graph, consecutive ? "unique_consecutive" : "unique",
          {node->input(0), node->input(flags), node->input(flags + 1)}, node);
      setBounded(node->output(0), outs[0], outs[3], false);
      replaceStatic(node->output(1), outs[1]);
      if (counts->toBool())
        setBounded(node->output(2), outs[2], outs[3], false);
      else
        replaceStatic(node->output(2), outs[2]);
      return true;
    }
    if (is(node, "aten::unique_dim") && constantInt(node->input(1)) == 0) {
      auto outs = insertForm(graph, "unique_rows", {node->input(0)}, node);
      setBounded(node->output(0), outs[0], outs[3], false);
      replaceStatic(node->output(1), outs[1]);
      setBounded(node->output(2), outs[2], outs[3], false);
      return true;
    }
    if ((is(node, "aten::Int") || is(node, "aten::IntImplicit")) &&
        isTensor(node->input(0))) {
      // A count of a mask's true elements lies in [0, mask.numel()]: bounded
      // with no hint. Any other int read from data needs --bound.
      Value *mask = countedMask(node->input(0));
      if (!mask && !hintFor(node->output()))
        return false;
      Rep r(Rep::Kind::Lifted);
      r.value = castTo(graph,
                       emit(graph, "aten::reshape",
                            {node->input(0), std::vector<int64_t>{}}, node),
                       c10::ScalarType::Long, node);
      if (mask) {
        r.range.lo = 0;
        r.range.hi = emit(graph, "aten::numel", {mask}, node);
      }
      setRep(node->output(), r);
      return true;
    }
    return false;
  }

  //===--------------------------------------------------------------------===//
  // Rules: ops on bounded and lifted values
  //===--------------------------------------------------------------------===//

  bool rewrite(Node *node) {
    if (!writable(node))
      return false;
    if (is(node, "aten::__getitem__") || is(node, "prim::ListUnpack"))
      return whereElement(node);
    if (liftScalarOp(node))
      return true;
    OpRole role = opRole(node);
    if (role == OpRole::MetadataRead) {
      for (size_t i = 0; i < node->inputs().size(); ++i)
        if (Rep *r = rep(node->input(i)); r && r->kind == Rep::Kind::Bounded)
          node->replaceInput(i, r->value); // rank, dtype, device: unchanged
      return false;
    }
    if (role == OpRole::ShapeRead)
      return sizeOf(node);
    if (perRow(node))
      return true;
    if (is(node, "aten::sort") || is(node, "aten::argsort") ||
        is(node, "aten::topk"))
      return sortRows(node);
    if (is(node, "aten::randperm"))
      return randperm(node);
    if (is(node, "aten::slice") || is(node, "aten::narrow"))
      return slice(node);
    if (is(node, "aten::arange"))
      return arange(node);
    if (is(node, "aten::index") || is(node, "aten::index_select"))
      return gather(node);
    if (is(node, "aten::cat"))
      return cat(node);
    if (is(node, "aten::index_put_"))
      return put(node);
    if (role == OpRole::Reduction)
      return reduce(node);
    if (isElementwise(node)) // a clone keeps indices; add(i, 0.5) would not
      return passRows(node, /*keepsDtype=*/is(node, "aten::clone"));
    return false;
  }

  bool whereElement(Node *node) {
    Rep *list = rep(node->input(0));
    if (!list || list->kind != Rep::Kind::WhereList)
      return false;
    std::vector<std::pair<Value *, int64_t>> elements;
    if (is(node, "prim::ListUnpack")) {
      for (size_t i = 0; i < node->outputs().size(); ++i)
        elements.emplace_back(node->output(i), static_cast<int64_t>(i));
    } else {
      auto k = constantInt(node->input(1));
      if (!k)
        return false;
      elements.emplace_back(node->output(), *k);
    }
    // At the where: its condition may be written to after it.
    torch::jit::WithInsertPoint guard(node->input(0)->node());
    Value *&count = whereCounts[node->input(0)];
    Value *bound = emit(graph, "aten::numel", {list->value}, node);
    for (auto [out, k] : elements) {
      auto outs =
          insertForm(graph, "where_index", {list->value, constant(k)}, node);
      if (!count) // every element has the same count: one is read
        count = outs[1];
      setBounded(out, outs[0], count, true, /*is1D=*/true);
      Rep &r = reps.at(out);
      r.bound = bound;
      r.whereCond = list->value;
      r.whereDim = k;
    }
    return true;
  }

  bool sizeOf(Node *node) {
    Rep *r = rep(node->input(0));
    if (!r || r->kind != Rep::Kind::Bounded)
      return false;
    Value *bound = boundOf(*r, node);
    if (is(node, "aten::size")) {
      if (node->inputs().size() != 2)
        return false; // the whole size list
      auto d = constantInt(node->input(1));
      if (!d || *d < 0)
        return false;
      if (*d > 0) { // trailing sizes are the padded tensor's
        replaceStatic(node->output(),
                      emit(graph, "aten::size", {r->value, *d}, node));
        return true;
      }
    }
    Rep out(Rep::Kind::Lifted);
    out.range.lo = 0;
    out.range.hi = bound;
    out.value = r->count;
    if (is(node, "aten::numel") && !r->is1D) {
      // count * (numel / bound): the rows' size, 0 when there are none.
      Value *numel = emit(graph, "aten::numel", {r->value}, node);
      Value *rowSize =
          hostOp("aten::floordiv", numel,
                 hostOp("prim::max", bound, constant(1), node), node);
      out.value = emit(graph, "aten::mul", {r->count, rowSize}, node);
      out.range.hi = numel;
    }
    setRep(node->output(), out);
    return true;
  }

  /// An int operand's range when it is a valid, non-negative length.
  std::optional<Range> length(Value *v) {
    if (v->type()->kind() != c10::TypeKind::IntType)
      return std::nullopt;
    Rep *r = rep(v);
    if (r && r->kind != Rep::Kind::Lifted)
      return std::nullopt;
    Range range = rangeOf(v);
    if (!range.lo || *range.lo < 0)
      return std::nullopt; // a negative end counts from the end
    return range;
  }

  /// min(count, k) for a 0-d count and a host or lifted k.
  Value *minCount(Value *count, Value *k, const Node *anchor) {
    if (Rep *r = rep(k))
      return emit(graph, "aten::minimum", {count, r->value}, anchor);
    return emit(graph, "aten::clamp", {count}, anchor, {NamedValue("max", k)});
  }

  bool randperm(Node *node) {
    Rep *n = rep(node->input(0));
    if (!n || n->kind != Rep::Kind::Lifted || node->inputs().size() != 5)
      return false;
    auto dtype = constantInt(node->input(1));
    if (!node->input(1)->mustBeNone() &&
        dtype != static_cast<int64_t>(c10::ScalarType::Long))
      return false;
    Value *bound = upper(n->range);
    if (!bound || !n->range.lo)
      return false;
    // Its one use is [:k]: a top-k of the keys there. Otherwise a full
    // random order of the keys.
    const auto &uses = node->output()->uses();
    if (uses.size() == 1 && is(uses[0].user, "aten::slice") &&
        uses[0].offset == 0) {
      Rep r(Rep::Kind::RandPerm);
      r.value = n->value;
      r.range = n->range;
      r.origin = node;
      setRep(node->output(), r);
      return true;
    }
    auto outs = insertForm(graph, "random_prefix",
                           {n->value, bound, bound, node->input(3)}, node);
    setBounded(node->output(), outs[0], n->value, true, /*is1D=*/true);
    return true;
  }

  /// arange(k) with a lifted k: arange(upper bound of k), count max(k, 0).
  bool arange(Node *node) {
    Rep *k = rep(node->input(0));
    if (!k || k->kind != Rep::Kind::Lifted || node->inputs().size() != 5)
      return false;
    Value *hi = upper(k->range);
    if (!hi)
      return false;
    Node *copy = graph.insertNode(graph.createClone(
        node, [&](Value *v) { return v == node->input(0) ? hi : v; }));
    Value *count = emit(graph, "aten::clamp", {k->value}, node,
                        {NamedValue("min", constant(0))});
    setBounded(node->output(), copy->output(), count,
               analysis.info(node->output()).dtype == DTypeKind::Long);
    return true;
  }

  /// A prefix of dim 0: x[:k] (`slice(x, 0, 0|None, k, 1)`), or
  /// `narrow(x, 0, 0, k)`, the same rows (narrow raises where k is past the
  /// rows; the prefix has the rows there are).
  bool slice(Node *node) {
    bool isSlice = is(node, "aten::slice") && node->inputs().size() == 5 &&
                   constantInt(node->input(4)) == 1;
    bool isNarrow = is(node, "aten::narrow") && node->inputs().size() == 4;
    if (!(isSlice || isNarrow) || constantInt(node->input(1)) != 0 ||
        !(node->input(2)->mustBeNone() || constantInt(node->input(2)) == 0))
      return false;
    Value *end = node->input(3);
    Rep *x = rep(node->input(0));
    if (x && x->kind == Rep::Kind::WhereList)
      return false;
    if (end->mustBeNone()) {
      if (!x || x->kind != Rep::Kind::Bounded)
        return false;
      setRep(node->output(), *x);
      return true;
    }
    std::optional<Range> k = length(end);
    if (!k)
      return false;
    if (x && x->kind == Rep::Kind::RandPerm) {
      Node *perm = x->origin;
      Value *bound = upper(x->range);
      Value *hi = upper(*k);
      Value *top = hi ? hostOp("prim::min", hi, bound, node) : bound;
      auto outs = insertForm(graph, "random_prefix",
                             {x->value, bound, top, perm->input(3)}, node);
      setBounded(node->output(), outs[0], minCount(x->value, end, node), true,
                 /*is1D=*/true);
      Rep &r = reps.at(node->output());
      r.drawOf = x->value;
      r.drawTop = top;
      return true;
    }
    Value *hi = upper(*k);
    if (x) { // a bounded tensor: its first min(k, count) rows
      Value *padded = x->value;
      if (hi)
        padded =
            emit(graph, "aten::slice", {padded, 0, constant(0), hi, 1}, node);
      setBounded(node->output(), padded, minCount(x->count, end, node),
                 x->isIndex, x->is1D);
      return true;
    }
    if (!rep(end))
      return false; // a static tensor sliced by a host int: static
    // A static tensor's first k rows, k lifted.
    Value *x0 = node->input(0);
    Value *size0 = emit(graph, "aten::size", {x0, 0}, node);
    Value *padded =
        hi ? emit(graph, "aten::slice", {x0, 0, constant(0), hi, 1}, node) : x0;
    Value *count = emit(graph, "aten::clamp", {rep(end)->value}, node,
                        {NamedValue("max", size0)});
    setBounded(node->output(), padded, count,
               analysis.info(x0).dtype == DTypeKind::Long);
    return true;
  }

  /// Whether \p v is known to hold int64 indices.
  bool isIndex(Value *v) {
    if (Rep *r = rep(v))
      return r->kind == Rep::Kind::Bounded && r->isIndex;
    return analysis.info(v).dtype == DTypeKind::Long;
  }

  Value *none() { return graph.insertConstant(c10::IValue()); }

  /// The count of a static tensor's rows, on its device.
  Value *rowsOf(Value *x, const Node *anchor) {
    return emit(graph, "aten::scalar_tensor",
                {emit(graph, "aten::size", {x, 0}, anchor)}, anchor,
                {NamedValue("dtype", static_cast<int64_t>(c10::kLong)),
                 NamedValue("device", deviceOf(x, anchor))});
  }

  /// x[i] and index_select(x, 0, i) with one integer index.
  bool gather(Node *node) {
    Value *src, *index;
    Node *list = nullptr;
    if (is(node, "aten::index")) {
      list = node->input(1)->node();
      if (list->kind() != c10::prim::ListConstruct ||
          list->inputs().size() != 1 || node->input(1)->uses().size() != 1)
        return false;
      src = node->input(0);
      index = list->input(0);
    } else {
      if (constantInt(node->input(1)) != 0)
        return false;
      src = node->input(0);
      index = node->input(2);
    }
    if (!isIndex(index))
      return false;
    Rep *s = rep(src), *i = rep(index);
    if ((s && s->kind != Rep::Kind::Bounded) ||
        (i && i->kind != Rep::Kind::Bounded))
      return false;
    if (s && i && s->whereCond && i->drawOf == s->count) {
      // where(c)[k][randperm(count)[:top]]: `top` random true positions of
      // c, one top-k over c's masked keys (no compaction of c).
      Value *out = insertForm(graph, "random_true_positions",
                              {s->whereCond, constant(s->whereDim), i->drawTop},
                              node)[0];
      setBounded(node->output(), out, i->count, true, /*is1D=*/true);
      if (list)
        absorbed.insert(list);
      return true;
    }
    Value *srcCount = s ? s->count : rowsOf(src, node);
    Value *padded = s ? s->value : src;
    Value *out = insertForm(
        graph, "gather_rows",
        {padded, srcCount, i ? i->value : index, i ? i->count : none()},
        node)[0];
    if (i) {
      setBounded(node->output(), out, i->count, s ? s->isIndex : isIndex(src),
                 i->is1D && s && s->is1D);
    } else
      replaceStatic(node->output(), out); // static again
    if (list)
      absorbed.insert(list);
    return true;
  }

  bool cat(Node *node) {
    Node *list = node->input(0)->node();
    if (list->kind() != c10::prim::ListConstruct ||
        node->input(0)->uses().size() != 1 || constantInt(node->input(1)) != 0)
      return false;
    std::vector<Value *> parts, counts;
    bool allIndex = true, all1D = true;
    for (Value *part : list->inputs()) {
      Rep *r = rep(part);
      if (r && r->kind != Rep::Kind::Bounded)
        return false;
      parts.push_back(r ? r->value : part);
      counts.push_back(r ? r->count : rowsOf(part, node));
      allIndex &= isIndex(part);
      all1D &= r && r->is1D;
    }
    Value *partList =
        graph.insertNode(graph.createList(c10::TensorType::get(), parts))
            ->output();
    Value *countList =
        graph.insertNode(graph.createList(c10::TensorType::get(), counts))
            ->output();
    auto outs = insertForm(graph, "cat_rows", {partList, countList}, node);
    setBounded(node->output(), outs[0], outs[1], allIndex, all1D);
    absorbed.insert(list);
    return true;
  }

  /// x[i] = v for a bounded 1-D index i and a 0-d v.
  bool put(Node *node) {
    Node *list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct ||
        list->inputs().size() != 1 || rep(node->input(0)) ||
        rep(node->input(2)))
      return false;
    auto accumulate = torch::jit::toIValue(node->input(3));
    if (!accumulate || !accumulate->isBool() || accumulate->toBool())
      return false;
    Rep *i = rep(list->input(0));
    if (!i || i->kind != Rep::Kind::Bounded || !i->isIndex ||
        !provablyZeroDim(node->input(2)))
      return false;
    Value *out = insertForm(
        graph, "put_rows", {node->input(0), i->value, i->count, node->input(2)},
        node)[0];
    replaceStatic(node->output(), out);
    ctx.rewrote(node, kRule);
    node->destroy(); // it writes: never erased as dead
    changed = true;
    return false;
  }

  /// An op of perRowDims() on trailing dimensions.
  bool perRow(Node *node) {
    const std::vector<const char *> *dims = perRowDims(node);
    if (!dims || !onlyTrailingDims(node, *dims))
      return false;
    Value *dtype = namedInput(node, "dtype");
    return passRows(node, (!dtype || dtype->mustBeNone()) &&
                              !is(node, "aten::argsort"));
  }

  /// The padded rows of \p node's bounded operands go through it as they
  /// are, and its results keep their count: for ops that compute each row of
  /// dimension 0 from the same rows of their operands (elementwise ops,
  /// perRowDims() on trailing dims, reductions over trailing dims). Every
  /// tensor operand is bounded with the one count (a list's elements too:
  /// cat and stack on dim >= 1) or 0-d: a larger static operand could
  /// broadcast against the padding. A result holds indices when the
  /// analysis says int64, or, its dtype unknown, when every bounded operand
  /// holds indices and the op keeps the dtype of its first (\p keepsDtype).
  bool passRows(Node *node, bool keepsDtype) {
    for (Value *out : node->outputs())
      if (!isTensor(out))
        return false;
    Value *count = nullptr;
    bool allIndex = true;
    // The padded stand-in of one operand, or null if it cannot go through.
    auto padded = [&](Value *v) -> Value * {
      Rep *r = rep(v);
      if (!r)
        return isTensor(v) && !provablyZeroDim(v) ? nullptr : v;
      if (r->kind != Rep::Kind::Bounded || (count && r->count != count))
        return nullptr;
      count = r->count;
      allIndex &= r->isIndex;
      return r->value;
    };
    std::unordered_map<Value *, Value *> replaced;
    Node *list = nullptr;
    std::vector<Value *> parts;
    for (Value *in : node->inputs()) {
      Node *def = in->node();
      if (in->type()->kind() == c10::TypeKind::ListType &&
          def->kind() == c10::prim::ListConstruct && def->inputs().size() &&
          isTensor(def->input(0))) {
        if (list || in->uses().size() != 1)
          return false;
        for (Value *e : def->inputs()) {
          Value *p = padded(e);
          if (!p || !rep(e))
            return false; // every element bounded, with the one count
          parts.push_back(p);
        }
        list = def;
        continue;
      }
      Value *p = padded(in);
      if (!p)
        return false;
      replaced[in] = p;
    }
    if (!count)
      return false;
    if (list)
      replaced[list->output()] =
          graph.insertNode(graph.createList(c10::TensorType::get(), parts))
              ->output();
    Node *copy = graph.insertNode(graph.createClone(node, [&](Value *v) {
      auto it = replaced.find(v);
      return it == replaced.end() ? v : it->second;
    }));
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      DTypeKind known = analysis.info(node->output(i)).dtype;
      bool index =
          known == DTypeKind::Long ||
          (known == DTypeKind::Unknown && allIndex && keepsDtype && i == 0);
      setBounded(node->output(i), copy->output(i), count, index);
    }
    if (list)
      absorbed.insert(list);
    return true;
  }

  /// sort and argsort of a bounded value along any constant dim, and topk
  /// along dim 0: along dim 0 the live rows sorted first (the sort_rows form:
  /// stable, so ties keep their order, and NaN and infinities sort as
  /// PyTorch sorts them); topk takes the first k rows of that order (sorted,
  /// which topk(sorted=False) allows). A negative dim of a sort is resolved
  /// on the host by the form (the rank is not known here); a topk's must be
  /// dim 0 of a vector, since along other dims the result is not bounded.
  bool sortRows(Node *node) {
    Rep *r = rep(node->input(0));
    bool topk = is(node, "aten::topk");
    if (!r || r->kind != Rep::Kind::Bounded)
      return false;
    for (size_t i = 1; i < node->inputs().size(); ++i)
      if (rep(node->input(i)) && !(topk && i == 1))
        return false;
    Value *dimArg = namedInput(node, "dim");
    std::optional<int64_t> dim = dimArg ? constantInt(dimArg) : std::nullopt;
    if (!dim || (topk && !(*dim == 0 || (*dim == -1 && r->is1D))))
      return false;
    Value *descArg = namedInput(node, topk ? "largest" : "descending");
    std::optional<c10::IValue> desc;
    if (descArg)
      if (auto v = torch::jit::toIValue(descArg))
        desc = *v;
    if (!desc || !desc->isBool())
      return false;
    auto outs = insertForm(graph, "sort_dim",
                           {r->value, r->count, constant(topk ? 0 : *dim),
                            graph.insertConstant(desc->toBool())},
                           node);
    if (is(node, "aten::argsort")) {
      setBounded(node->output(), outs[1], r->count, true, r->is1D);
      return true;
    }
    if (!topk) {
      setBounded(node->output(0), outs[0], r->count, r->isIndex, r->is1D);
      setBounded(node->output(1), outs[1], r->count, true, r->is1D);
      return true;
    }
    Value *k = node->input(1);
    if (!rep(k) && analysis.info(k).isDataDependent())
      return false; // k was read from data: the rows are cut to it there
    if (!rep(k)) {  // k rows, known on the host: static again
      replaceStatic(
          node->output(0),
          emit(graph, "aten::slice", {outs[0], 0, constant(0), k, 1}, node));
      replaceStatic(
          node->output(1),
          emit(graph, "aten::slice", {outs[1], 0, constant(0), k, 1}, node));
      return true;
    }
    std::optional<Range> range = length(k);
    if (!range)
      return false;
    Value *hi = upper(*range);
    Value *count = minCount(r->count, k, node);
    for (size_t i = 0; i < 2; ++i) {
      Value *padded = hi ? emit(graph, "aten::slice",
                                {outs[i], 0, constant(0), hi, 1}, node)
                         : outs[i];
      setBounded(node->output(i), padded, count, i == 1 || r->isIndex, r->is1D);
    }
    return true;
  }

  bool reduce(Node *node) {
    Rep *r = rep(node->input(0));
    if (!r || r->kind != Rep::Kind::Bounded || countTensorInputs(node) != 1)
      return false;
    for (size_t i = 1; i < node->inputs().size(); ++i)
      if (rep(node->input(i)))
        return false;
    RowView view{r->value,
                 insertForm(graph, "keep_rows", {r->value, r->count}, node)[0]};
    std::string why;
    std::vector<Value *> outs = emitMaskedReduction(graph, node, view, why);
    if (outs.empty() && onlyTrailingDims(node, {"dim"}))
      return passRows(node, /*keepsDtype=*/false); // each row on its own
    if (outs.empty()) {
      ctx.declined(node, kRule, why);
      return false;
    }
    for (size_t i = 0; i < outs.size(); ++i)
      replaceStatic(node->output(i), outs[i]);
    return true;
  }

  //===--------------------------------------------------------------------===//
  // Materialization
  //===--------------------------------------------------------------------===//

  std::unordered_map<Value *, Value *> materialized;
  std::unordered_map<Value *, Value *> countsOnHost;

  static bool returnedByGraph(const Node *user) {
    return user->kind() == c10::prim::Return &&
           user->owningBlock() == user->owningGraph()->block();
  }

  /// \p node, or the first producer up its first inputs with a source
  /// location (a list unpack has none; the where before it does).
  static const Node *located(const Node *node) {
    for (const Node *n = node; n;
         n = n->inputs().empty() ? nullptr : n->input(0)->node()) {
      if (n->sourceRange().source())
        return n;
      if (n->kind() == c10::prim::Param)
        break;
    }
    return node;
  }

  /// A graph output, or an element of a returned tuple.
  static bool isOutputPosition(const Node *user) {
    return returnedByGraph(user) ||
           (user->kind() == c10::prim::TupleConstruct &&
            user->output()->uses().size() == 1 &&
            returnedByGraph(user->output()->uses()[0].user));
  }

  std::string reasonFor(const Node *user) {
    if (isOutputPosition(user))
      return "materialized: it is returned (--padded-outputs returns "
             "(padded, count) instead)";
    if (user->kind() == c10::prim::Return)
      return "materialized: it leaves a loop or an if";
    return "materialized: '" + std::string(user->kind().toQualString()) +
           "' has no bounded form";
  }

  Value *materialize(Value *v, const Rep &r, const Node *user) {
    if (auto it = materialized.find(v); it != materialized.end())
      return it->second;
    Node *def = v->node();
    // Right after the definition, or after the count's read when another
    // value with the same count was cut there already: one sync each.
    Node *at = def->next();
    Value *&n = countsOnHost[r.count];
    if (r.kind == Rep::Kind::Bounded && n &&
        n->node()->owningBlock() == def->owningBlock() &&
        (n->node() == at || at->isBefore(n->node())))
      at = n->node()->next();
    torch::jit::WithInsertPoint guard(at);
    const Node *anchor = user->sourceRange().source() ? user : located(def);
    std::string why = reasonFor(user);
    Value *out;
    if (r.kind == Rep::Kind::Lifted) {
      const char *op = v->type()->kind() == c10::TypeKind::IntType ? "aten::Int"
                       : v->type()->kind() == c10::TypeKind::BoolType
                           ? "aten::Bool"
                           : "aten::Float";
      out = emit(graph, op, {r.value}, anchor);
      ctx.declined(out->node(), kRule, why);
    } else {
      if (!n || !n->node()->isBefore(at)) {
        n = emit(graph, "aten::Int", {r.count}, anchor);
        ctx.declined(n->node(), kRule, why);
      }
      out = emit(graph, "aten::slice", {r.value, 0, constant(0), n, 1}, anchor);
      ctx.declined(out->node(), kRule, why);
    }
    materialized[v] = out;
    return out;
  }

  /// `(padded, count)` in place of a bounded graph output.
  bool returnPadded(Value *v, const Rep &r, const torch::jit::Use &use) {
    if (!ctx.options.paddedOutputs || r.kind != Rep::Kind::Bounded)
      return false;
    Node *user = use.user;
    if (!isOutputPosition(user))
      return false;
    bool inReturnedTuple = user->kind() == c10::prim::TupleConstruct;
    torch::jit::WithInsertPoint guard(user);
    Value *pair =
        graph.insertNode(graph.createTuple({r.value, r.count}))->output();
    user->replaceInput(use.offset, pair);
    if (inReturnedTuple) { // retype the tuple around it
      std::vector<c10::TypePtr> types;
      for (Value *in : user->inputs())
        types.push_back(in->type());
      user->output()->setType(c10::TupleType::create(types));
    }
    return true;
  }

  void materializeRest() {
    for (Value *v : repOrder) {
      const Rep r = reps.at(v);
      if (r.kind == Rep::Kind::WhereList || r.kind == Rep::Kind::RandPerm)
        continue; // their remaining uses keep the original op
      std::vector<torch::jit::Use> uses = v->uses();
      for (const torch::jit::Use &use : uses) {
        if (absorbed.count(use.user) || returnPadded(v, r, use))
          continue;
        use.user->replaceInput(use.offset, materialize(v, r, use.user));
      }
    }
  }
};

} // namespace

static bool bound(std::shared_ptr<Graph> &graph, PassContext &ctx,
                  const AnalysisResult &analysis) {
  torch::jit::AliasDb aliases(graph);
  if (!Engine(*graph, ctx, analysis, aliases).run())
    return false;
  // The forms branch on host facts (None arguments, ranks): fold them.
  torch::jit::ConstantPropagation(graph, /*ignore_custom_classes=*/true);
  return true;
}

bool boundKeyNames(const std::string &key, const Value *v) {
  if (v->hasDebugName()) {
    std::string name = v->debugName();
    if (size_t dot = name.find('.'); dot != std::string::npos)
      name.resize(dot);
    if (key == name)
      return true;
  }
  size_t colon = key.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return false;
  std::optional<Location> loc = locationOf(v->node());
  if (!loc || key.substr(colon + 1) != std::to_string(loc->line))
    return false;
  std::string file = key.substr(0, colon);
  return loc->file == file ||
         (loc->file.size() > file.size() &&
          loc->file.compare(loc->file.size() - file.size(), file.size(),
                            file) == 0 &&
          loc->file[loc->file.size() - file.size() - 1] == '/');
}

bool boundShapes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  AnalysisResult analysis = analyzeGraph(*graph);
  if (analysis.findings.empty())
    return false; // nothing data-dependent: no trial copy, no second run
  // Materializations cost a sync each: a graph whose bounded form would
  // read the host more often than the original stays as it is.
  std::shared_ptr<Graph> trial = graph->copy();
  PassContext scratch;
  scratch.options = ctx.options;
  if (!bound(trial, scratch, analyzeGraph(*trial)))
    return false;
  size_t before = countSyncPoints(analysis),
         after = countSyncPoints(analyzeGraph(*trial));
  if (after > before) {
    std::string why = "bounded, the graph would reach the host at " +
                      std::to_string(after) + " points instead of " +
                      std::to_string(before) +
                      " (uses with no bounded form materialize)";
    for (size_t i = 0; i < analysis.findings.size(); ++i)
      if (analysis.findings[i].role == Role::Root)
        ctx.declined(analysis.findingNodes[i], kRule, why);
    return false;
  }
  return bound(graph, ctx, analysis);
}

} // namespace staticify
