//===- Context.cpp - What bound's rules may do: reps, emitting, ranges ----===//

#include "passes/bound/Rules.h"

#include "passes/Bounded.h"
#include "passes/BoundedForms.h"
#include "passes/DTypes.h"
#include "passes/GraphUtils.h"
#include "passes/LiftScalars.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"
#include "passes/SpecializeInputs.h"

#include <algorithm>

namespace staticify::bound {

using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

bool is(const Node *node, const char *op) {
  return node->kind() == c10::Symbol::fromQualString(op);
}

bool isOutputPosition(const Node *user) {
  // The graph's return, or a version's (specialize-*: an if at the top
  // whose results are the method's results, and nothing after it).
  auto returnedByGraph = [](const Node *n) {
    if (n->kind() != c10::prim::Return)
      return false;
    const torch::jit::Block *top = n->owningGraph()->block();
    const Node *version = n->owningBlock()->owningNode();
    if (n->owningBlock() == top)
      return true;
    if (!version || version->owningBlock() != top ||
        !version->hasAttribute(specializedAttr()) ||
        version->next() != top->return_node())
      return false;
    for (const Value *out : version->outputs())
      for (const torch::jit::Use &use : out->uses())
        if (use.user != top->return_node())
          return false;
    return true;
  };
  return returnedByGraph(user) ||
         (user->kind() == c10::prim::TupleConstruct &&
          user->output()->uses().size() == 1 &&
          returnedByGraph(user->output()->uses()[0].user));
}

bool leavesToReturn(const Node *user, int depth) {
  if (depth > 8)
    return false;
  if (user->kind() == c10::prim::TupleConstruct) // a tuple a branch yields
    return user->output()->uses().size() == 1 &&
           leavesToReturn(user->output()->uses()[0].user, depth + 1);
  const Node *owner = user->owningBlock()->owningNode();
  if (user->kind() != c10::prim::Return || !owner ||
      owner->kind() != c10::prim::If)
    return false;
  for (const Value *out : owner->outputs())
    for (const torch::jit::Use &use : out->uses())
      if (!isOutputPosition(use.user) && !leavesToReturn(use.user, depth + 1))
        return false;
  return true;
}

bool returnedAsMoved(const Node *user) {
  bool moves = user->kind() == c10::aten::movedim ||
               user->kind() == c10::aten::transpose ||
               user->kind() == c10::aten::permute ||
               user->kind() == c10::aten::t;
  if (!moves || user->outputs().size() != 1 ||
      user->output()->uses().size() != 1)
    return false;
  const Node *next = user->output()->uses()[0].user;
  return isOutputPosition(next) || leavesToReturn(next);
}

bool returnedInDict(const Node *user) {
  if (user->kind() != c10::prim::DictConstruct ||
      user->output()->uses().size() != 1)
    return false;
  const Node *next = user->output()->uses()[0].user;
  return isOutputPosition(next) || leavesToReturn(next);
}

std::vector<c10::Symbol> ops(std::initializer_list<const char *> names) {
  std::vector<c10::Symbol> symbols;
  for (const char *name : names)
    symbols.push_back(c10::Symbol::fromQualString(name));
  return symbols;
}

namespace {

/// Python's floor division of \p x by a positive \p d.
int64_t floorDiv(int64_t x, int64_t d) {
  return x >= 0 ? x / d : -((-x + d - 1) / d);
}

} // namespace

//===----------------------------------------------------------------------===//
// Representations
//===----------------------------------------------------------------------===//

const DictObjects &RuleContext::dictObjects() {
  if (!dicts)
    dicts = std::make_unique<DictObjects>(graph, collectNodes(graph.block()));
  return *dicts;
}

void RuleContext::setRep(Value *v, Rep r) {
  if (r.kind == Rep::Kind::Lifted)
    applyHint(v, r.range);
  if (reps.emplace(v, r).second)
    repOrder.push_back(v);
}

void RuleContext::rename(Value *from, Value *to) {
  auto swap = [&](Value *&v) {
    if (v == from)
      v = to;
  };
  for (auto &[v, r] : reps) {
    for (Value **field :
         {&r.value, &r.count, &r.bound, &r.whereCond, &r.drawOf, &r.drawTop,
          &r.indexesBelow, &r.selectedFrom, &r.selectedBy, &r.atPositions})
      swap(*field);
    swap(r.range.hi);
  }
  for (auto &[mask, first] : selectionCounts) {
    swap(first.first);
    swap(first.second);
  }
  std::unordered_map<const Value *, Value *> equal;
  for (auto [count, same] : equalCounts) {
    swap(same);
    equal[count == from ? to : count] = same;
  }
  equalCounts = std::move(equal);
  std::map<std::vector<const Value *>, Value *> cats;
  for (const auto &[key, made] : appendedCatCounts) {
    std::vector<const Value *> parts = key;
    for (const Value *&part : parts)
      if (part == from)
        part = to;
    Value *count = made;
    swap(count);
    cats.emplace(std::move(parts), count);
  }
  appendedCatCounts = std::move(cats);
  for (auto &[list, count] : whereCounts)
    swap(count);
  for (auto &[key, count] : itemCounts)
    swap(count);
  std::map<std::pair<const Value *, const Value *>, Value *> mins;
  for (auto [key, count] : minCounts) {
    swap(count);
    mins[{key.first == from ? to : key.first,
          key.second == from ? to : key.second}] = count;
  }
  minCounts = std::move(mins);
  for (auto &[counts, known] : listCounts)
    for (const Value *&count : known.key)
      if (count == from)
        count = to;
  for (RandomOrder &drawn : randomOrders) {
    swap(drawn.order);
    for (Value *&mask : drawn.masks)
      swap(mask);
    swap(drawn.sizes);
    for (auto &[dim, stride] : drawn.strides)
      swap(stride);
  }
}

Rep &RuleContext::setBounded(Value *v, Value *padded, Value *count,
                             bool isIndex, bool is1D) {
  Rep r(Rep::Kind::Bounded);
  r.value = padded;
  r.count = count;
  r.isIndex = isIndex;
  r.is1D = is1D;
  setRep(v, r);
  return reps.at(v);
}

void RuleContext::replaceWriter(Node *node) {
  ctx.rewrote(node, kRule);
  replacedWriter = node;
}

bool RuleContext::isIndex(Value *v) {
  if (Rep *r = rep(v))
    return r->kind == Rep::Kind::Bounded && r->isIndex;
  return dtypeOf(v, 0) == DTypeKind::Long;
}

DTypeKind RuleContext::dtypeOf(const Value *v, int depth) {
  if (analysis.knows(v) || depth > 16)
    return analysis.info(v).dtype;
  // A value made since the analysis (a guard's fallback copies a branch):
  // inferred as the analysis would, an if's result from its branches'.
  const Node *node = v->node();
  if (node->kind() == c10::prim::If) {
    size_t i = v->offset();
    DTypeKind a = dtypeOf(node->blocks()[0]->outputs()[i], depth + 1);
    return a == dtypeOf(node->blocks()[1]->outputs()[i], depth + 1)
               ? a
               : DTypeKind::Unknown;
  }
  return inferDType(node, v, [&](const Value *in) {
    return dtypeOf(in, depth + 1);
  });
}

//===----------------------------------------------------------------------===//
// Emitting
//===----------------------------------------------------------------------===//

Value *RuleContext::deviceOf(Value *t, const Node *anchor) {
  return emit(graph, "prim::device", {t}, anchor);
}

Value *RuleContext::tensorOf(Value *v, Value *device, const Node *anchor) {
  if (Rep *r = rep(v))
    return r->value;
  auto dtype = liftedDType(v->type());
  // scalar_tensor takes a number: a bool goes through int (exact).
  if (v->type()->kind() == c10::TypeKind::BoolType)
    v = emit(graph, "aten::Int", {v}, anchor);
  return emit(graph, "aten::scalar_tensor", {v}, anchor,
              {NamedValue("dtype", static_cast<int64_t>(*dtype)),
               NamedValue("device", device)});
}

Value *RuleContext::rowsOf(Value *x, const Node *anchor) {
  // Undefined where its branch ran (an early return's value): so is its
  // count, read only where the value is.
  if (isUndefined(x))
    return graph.insertNode(graph.createUninitialized(c10::TensorType::get()))
        ->output();
  return emit(graph, "aten::scalar_tensor",
              {emit(graph, "aten::size", {x, 0}, anchor)}, anchor,
              {NamedValue("dtype", static_cast<int64_t>(c10::kLong)),
               NamedValue("device", deviceOf(x, anchor))});
}

Value *RuleContext::guardOriginal(Value *cond, Node *node,
                                  const std::function<Value *()> &fast) {
  Value *out = emitIf(graph, cond, node, fast, [&] {
    return graph.insertNode(graph.createClone(node, [](Value *v) { return v; }))
        ->output();
  });
  out->setType(node->output()->type());
  out->node()->i_(guardAttr(), 1);
  return out;
}

std::vector<Value *> RuleContext::intListElements(Value *list) {
  std::vector<Value *> elements;
  if (std::optional<std::vector<int64_t>> all = constantIntList(list)) {
    for (int64_t c : *all)
      elements.push_back(constant(c));
  } else if (list->node()->kind() == c10::prim::ListConstruct) {
    elements.assign(list->node()->inputs().begin(), list->node()->inputs().end());
  }
  return elements;
}

Value *RuleContext::boundOf(const Rep &r, const Node *anchor) {
  return r.bound ? r.bound : emit(graph, "aten::size", {r.value, 0}, anchor);
}

Value *RuleContext::minCount(Value *count, Value *k, const Node *anchor) {
  // One per (count, k) where it is visible: rows cut alike share it, and
  // elementwise ops can combine them (bound's rows cut in a branch whose
  // test caps their count: capBranchRows).
  auto same = equalCounts.find(count);
  Value *&known =
      minCounts[{same == equalCounts.end() ? count : same->second, k}];
  if (known && visibleAt(known, anchor))
    return known;
  if (Rep *r = rep(k))
    known = emit(graph, "aten::minimum", {count, r->value}, anchor);
  else
    known = emit(graph, "aten::clamp", {count}, anchor, {NamedValue("max", k)});
  return known;
}

Value *RuleContext::prefixCount(Value *count, Value *k,
                                const std::optional<SignGuard> &sign,
                                const Node *anchor) {
  auto fromEnd = [&](Value *end) {
    return emit(graph, "aten::clamp",
                {emit(graph, "aten::add", {count, end}, anchor)}, anchor,
                {NamedValue("min", constant(0))});
  };
  if (sign)
    return emitIf(
        graph, sign->nonNegative, anchor,
        [&] { return minCount(count, k, anchor); },
        [&] { return fromEnd(sign->whenNegative); });
  Value *end = rep(k)->value;
  return emit(graph, "aten::where",
              {emit(graph, "aten::ge", {end, constant(0)}, anchor),
               minCount(count, k, anchor), fromEnd(end)},
              anchor);
}

//===----------------------------------------------------------------------===//
// Ranges
//===----------------------------------------------------------------------===//

Value *RuleContext::hostOp(const char *op, Value *a, Value *b,
                           const Node *anchor) {
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

Range RuleContext::rangeOf(Value *v) {
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
  // A host int is its own upper bound; sizes are never negative, nor is
  // max(n, c) below c.
  r.hi = v;
  Node *def = v->node();
  OpRole role = opRole(def);
  if (role == OpRole::ShapeRead || role == OpRole::MetadataRead)
    r.lo = 0;
  if (is(def, "prim::max") && def->inputs().size() == 2)
    for (Value *operand : def->inputs())
      if (auto c = constantInt(operand))
        r.lo = std::max(r.lo.value_or(*c), *c);
  // min(n, c) is at most c, and of a size never negative.
  if (is(def, "prim::min") && def->inputs().size() == 2)
    for (size_t i = 0; i < 2; ++i)
      if (auto c = constantInt(def->input(i))) {
        r.hiConst = std::min(r.hiConst.value_or(*c), *c);
        std::optional<int64_t> other = rangeOf(def->input(1 - i)).lo;
        if (other)
          r.lo = std::min(*other, *c);
      }
  return r;
}

Value *RuleContext::upper(const Range &r) {
  if (r.hi)
    return r.hi;
  return r.hiConst ? constant(*r.hiConst) : nullptr;
}

Range RuleContext::rangeOfOp(Node *node) {
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
    out.hi = upperOfMin(a, b, node);
    out.hiConst = a.hiConst && b.hiConst ? std::min(*a.hiConst, *b.hiConst)
                                         : (a.hiConst ? a.hiConst : b.hiConst);
  } else if (is(node, "prim::max")) {
    out.lo = a.lo && b.lo ? std::max(*a.lo, *b.lo) : (a.lo ? a.lo : b.lo);
    out.hi = upperOfMax(a, b, node);
    out.hiConst = both(a.hiConst, b.hiConst,
                       [](int64_t x, int64_t y) { return std::max(x, y); });
  } else if (is(node, "aten::add")) {
    out.lo = both(a.lo, b.lo, plus);
    if (ha && hb)
      out.hi = hostOp("aten::add", ha, hb, node);
    out.hiConst = both(a.hiConst, b.hiConst, plus);
  } else if (is(node, "aten::sub")) {
    out.lo = both(a.lo, b.hiConst, [](int64_t x, int64_t y) { return x - y; });
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

/// Whether x <= y for all values in ranges \p x and \p y.
static bool alwaysAtMost(const Range &x, const Range &y) {
  return x.hiConst && y.lo && *x.hiConst <= *y.lo;
}

Value *RuleContext::upperOfMin(const Range &a, const Range &b,
                               const Node *anchor) {
  Value *ha = upper(a), *hb = upper(b);
  if (!ha || !hb)
    return ha ? ha : hb; // either bounds the min
  if (alwaysAtMost(a, b))
    return ha;
  if (alwaysAtMost(b, a))
    return hb;
  return hostOp("prim::min", ha, hb, anchor);
}

Value *RuleContext::upperOfMax(const Range &a, const Range &b,
                               const Node *anchor) {
  Value *ha = upper(a), *hb = upper(b);
  if (!ha || !hb)
    return nullptr;
  // x <= hiConst(x) <= (a constant upper bound of y): max(x, y) <= it.
  auto coveredBy = [](const Range &x, const Range &y, Value *hy) {
    std::optional<int64_t> c = constantInt(hy);
    return alwaysAtMost(x, y) || (x.hiConst && c && *x.hiConst <= *c);
  };
  if (coveredBy(b, a, ha))
    return ha;
  if (coveredBy(a, b, hb))
    return hb;
  return hostOp("prim::max", ha, hb, anchor);
}

Range RuleContext::join(const Range &a, const Range &b, const Node *anchor) {
  Range r;
  if (a.lo && b.lo)
    r.lo = std::min(*a.lo, *b.lo);
  r.hi = upperOfMax(a, b, anchor);
  if (a.hiConst && b.hiConst)
    r.hiConst = std::max(*a.hiConst, *b.hiConst);
  return r;
}

std::optional<Range> RuleContext::length(Value *v) {
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

std::optional<RuleContext::SignGuard>
RuleContext::signGuard(Value *v, const Node *anchor) {
  if (v->type()->kind() != c10::TypeKind::IntType)
    return std::nullopt;
  auto nonNegative = [&](Value *x) {
    std::optional<int64_t> lo = rangeOf(x).lo;
    return lo && *lo >= 0;
  };
  auto hostInt = [&](Value *x) {
    return !rep(x) && !analysis.info(x).isDataDependent();
  };
  auto guardOn = [&](Value *x) {
    return SignGuard{emit(graph, "aten::ge", {x, constant(0)}, anchor), x};
  };
  if (hostInt(v))
    return guardOn(v);
  // min(x, n), n >= 0: negative exactly when x is, and then equal to x.
  Node *def = v->node();
  if (!lifted(v) || !is(def, "prim::min") || def->inputs().size() != 2)
    return std::nullopt;
  for (size_t i = 0; i < 2; ++i)
    if (hostInt(def->input(i)) && nonNegative(def->input(1 - i)))
      return guardOn(def->input(i));
  return std::nullopt;
}

std::optional<int64_t> RuleContext::hintFor(const Value *v) {
  if (ctx.options.bounds.empty())
    return std::nullopt; // the usual case: no name or location to compute
  for (const auto &[key, bound] : ctx.options.bounds)
    if (boundKeyNames(key, v))
      return bound;
  return std::nullopt;
}

/// A hint promises 0 <= value <= N.
void RuleContext::applyHint(const Value *v, Range &range) {
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

/// A clone of \p node at the insertion point on the operands in
/// \p replaced (a list's elements, \p parts, in a new list); its results.
std::vector<Value *>
cloneOnRows(torch::jit::Graph &graph, Node *node,
            std::unordered_map<Value *, Value *> replaced, Node *list,
            const std::vector<Value *> &parts) {
  if (list)
    replaced[list->output()] =
        graph.insertNode(graph.createList(c10::TensorType::get(), parts))
            ->output();
  Node *copy = graph.insertNode(graph.createClone(node, [&](Value *v) {
    auto it = replaced.find(v);
    return it == replaced.end() ? v : it->second;
  }));
  return {copy->outputs().begin(), copy->outputs().end()};
}

std::vector<Value *>
cloneOnValidRows(RuleContext &rc, Node *node,
                 std::unordered_map<Value *, Value *> replaced, Value *rows,
                 Value *count) {
  torch::jit::Graph &graph = rc.graph;
  auto it = replaced.find(rows);
  if (!rc.ctx.options.runtimeOps || node->outputs().size() != 1 ||
      it == replaced.end() || !opRegistered(kValidRowsKernel) ||
      !opRegistered(kPaddedRowsKernel))
    return cloneOnRows(graph, node, std::move(replaced), nullptr, {});
  Value *padded = it->second;
  it->second = emit(graph, kValidRowsKernel, {padded, count}, node);
  Value *out = cloneOnRows(graph, node, std::move(replaced), nullptr, {})[0];
  Value *bound = emit(graph, "aten::size", {padded, rc.constant(0)}, node);
  return {emit(graph, kPaddedRowsKernel, {out, bound}, node)};
}

std::vector<Value *>
emitRankGuarded(RuleContext &rc, Node *node,
                const std::unordered_map<Value *, Value *> &replaced,
                const std::vector<Value *> &parts, Value *firstPadded,
                Value *cond, Value *count, size_t results,
                const OnOperands &apply, const OnOperands &fast) {
  torch::jit::Graph &graph = rc.graph;
  auto fallback = [&] {
    // Each bounded operand cut to its own count (a source indexed by rows
    // of another count keeps its rows); counts known equal read once.
    std::vector<std::pair<Value *, Value *>> read = {
        {count, emit(graph, "aten::Int", {count}, node)}}; // count, host int
    auto cut = [&](Value *padded, Value *by) {
      auto it = std::find_if(read.begin(), read.end(), [&](const auto &r) {
        return rc.sameCount(r.first, by);
      });
      Value *n = it != read.end() ? it->second : nullptr;
      if (!n) {
        n = emit(graph, "aten::Int", {by}, node);
        read.emplace_back(by, n);
      }
      return emit(graph, "aten::slice", {padded, 0, rc.constant(0), n, 1},
                  node);
    };
    // In operand order, so that the graph printed is the same every run.
    std::unordered_map<Value *, Value *> valid;
    for (Value *original : node->inputs())
      if (auto it = replaced.find(original);
          it != replaced.end() && !valid.count(original)) {
        Rep *r = rc.bounded(original);
        valid[original] = r ? cut(it->second, r->count) : it->second;
      }
    std::vector<Value *> validParts;
    for (Value *p : parts)
      validParts.push_back(cut(p, count));
    Value *bound = emit(graph, "aten::size", {firstPadded, 0}, node);
    std::vector<Value *> padded;
    for (Value *v : apply(valid, validParts))
      padded.push_back(insertForm(graph, "pad_rows", {v, bound}, node)[0]);
    return padded;
  };
  std::vector<Value *> out = emitIf(
      graph, cond, node, results,
      [&] { return (fast ? fast : apply)(replaced, parts); }, fallback);
  out[0]->node()->i_(guardAttr(), 1);
  return out;
}

std::vector<Value *>
emitRankGuarded(RuleContext &rc, Node *node,
                const std::unordered_map<Value *, Value *> &replaced,
                Node *list, const std::vector<Value *> &parts,
                Value *firstPadded, Value *cond, Value *count,
                const OnOperands &fast) {
  return emitRankGuarded(
      rc, node, replaced, parts, firstPadded, cond, count,
      node->outputs().size(),
      [&](const std::unordered_map<Value *, Value *> &r,
          const std::vector<Value *> &p) {
        return cloneOnRows(rc.graph, node, r, list, p);
      },
      fast);
}

bool RuleContext::sameCount(const Value *a, const Value *b, int depth) const {
  auto canonical = [&](const Value *c) {
    auto it = equalCounts.find(c);
    return it == equalCounts.end() ? c : it->second;
  };
  a = canonical(a);
  b = canonical(b);
  if (a == b)
    return true;
  const Node *x = a->node(), *y = b->node();
  if (depth > 6 || x->kind() != y->kind() || x->inputs().size() != y->inputs().size() ||
      a->offset() != b->offset())
    return false;
  c10::Symbol kind = x->kind();
  if (kind == c10::aten::scalar_tensor)
    return sameHostInt(x->input(0), y->input(0)); // the number, wherever it lives
  // One op of one schema on equal operands: the same count (a sum of one
  // mask reshaped twice, two cats' `c + n`). Nothing may write what they
  // read, nor draw at random.
  if (!x->maybeSchema() || x->schema() != y->schema() || !x->blocks().empty() ||
      x->isNondeterministic() || x->hasSideEffects() || writesAnything(x) ||
      aliases.hasWriters(a) || aliases.hasWriters(b))
    return false;
  for (size_t i = 0; i < x->inputs().size(); ++i) {
    const Value *u = x->input(i), *v = y->input(i);
    if (isTensor(u) != isTensor(v))
      return false;
    if (isTensor(u)) {
      if (!(u == v && !aliases.hasWriters(u)) && !sameCount(u, v, depth + 1))
        return false;
      continue;
    }
    if (sameHostInt(u, v))
      continue;
    const Node *lu = u->node(), *lv = v->node();
    if (lu->kind() == c10::prim::ListConstruct && lv->kind() == c10::prim::ListConstruct &&
        lu->inputs().size() == lv->inputs().size() &&
        std::equal(lu->inputs().begin(), lu->inputs().end(), lv->inputs().begin(),
                   [](const Value *p, const Value *q) { return sameHostInt(p, q); }))
      continue;
    std::optional<std::vector<int64_t>> iu = constantIntList(u), iv = constantIntList(v);
    if (iu && iv && *iu == *iv)
      continue;
    std::optional<c10::IValue> cu = torch::jit::toIValue(u), cv = torch::jit::toIValue(v);
    if (!cu || !cv || !(cu->isNone() == cv->isNone()) ||
        (!cu->isNone() && !(cu->isDouble() && cv->isDouble() &&
                            cu->toDouble() == cv->toDouble()) &&
         !(cu->isBool() && cv->isBool() && cu->toBool() == cv->toBool())))
      return false;
  }
  return true;
}

} // namespace staticify::bound
