//===- BothBranches.cpp - An if on a count, both branches on the device ---===//
//
// `if n > limit: a(rows) else: b(rows)` on a count n that only the device
// knows (batched_nms's choice of strategy, `boxes.numel() > 4000`, of
// selected boxes) cannot ask the host which branch to run without a read.
// Where both branches, on padded rows, compute without effects and raise
// nothing, both run and the device picks each result: where(c, a, b) of
// padded rows made as many, and where(c, count_a, count_b). This file has
// what the driver (DriverIfs.cpp, selectBothBranches) needs around the walk of
// the hoisted branches: which ifs may be tried, whether the hoisted code is
// safe to run unconditionally, and the nesting of the guards in it.
//
// A guard in the hoisted code (the batched-nms pass's, on shapes and
// dtypes) has a fallback that may raise or read where the original branch
// would not have run. So what follows each guard moves into its fast block,
// and its fallback becomes a copy of the original if (which reads the
// count, on the cold path): where a guard's facts hold, both branches'
// static code runs; where one fails, the program runs as it was.
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

namespace staticify::bound {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Why \p block cannot run whichever way the if goes, before the rules see
/// it: effects, raises, loops or writes outside a guard's fallback.
std::string whyNotHoistable(const Block *block) {
  for (const Node *node : block->nodes()) {
    const char *op = node->kind().toQualString();
    if (node->kind() == c10::prim::RaiseException)
      return "a branch raises";
    if (node->kind() == c10::prim::Loop)
      return "a branch contains a loop";
    if (node->hasSideEffects())
      return std::string("a branch has a side effect ('") + op + "')";
    if (writesAnything(node))
      return std::string("a branch writes to a value ('") + op + "')";
    if (node->hasAttribute(guardAttr())) {
      // Its fallback runs only where its facts fail: then the original if.
      std::string why = whyNotHoistable(node->blocks()[0]);
      if (!why.empty())
        return why;
      continue;
    }
    for (const Block *b : node->blocks()) {
      if (node->kind() != c10::prim::If)
        return std::string("a branch contains '") + op + "'";
      std::string why = whyNotHoistable(b);
      if (!why.empty())
        return why;
    }
  }
  return "";
}

bool anyUsed(const Node *node) {
  return std::any_of(node->outputs().begin(), node->outputs().end(),
                     [](const Value *v) { return v->hasUses(); });
}

} // namespace

std::string whyNotBothBranches(Node *ifNode, RuleContext &rc) {
  for (size_t i = 0; i < ifNode->outputs().size(); ++i) {
    const Value *out = ifNode->output(i);
    if (!isTensor(out))
      return "the if returns a value that is not a tensor";
    // where() makes a new tensor: a write to it would no longer reach the
    // branch value it aliased. The uses tell (the alias database's answer
    // counts every tensor a custom op such as NMS may return as written).
    if (mayBeWritten(out, 0))
      return "a result of the if may be written to in place";
    // Picked by where(): of one rank (the driver's pick checks it once the
    // rules know more: a vector's rows).
    std::optional<int64_t> a =
        knownRank(ifNode->blocks()[0]->outputs()[i], &rc.analysis);
    std::optional<int64_t> b =
        knownRank(ifNode->blocks()[1]->outputs()[i], &rc.analysis);
    if (a && b && *a != *b) {
      std::string why = whyEmptyShapesDiffer(ifNode, i, rc);
      if (!why.empty())
        return "its branches' results have different ranks, and " + why;
      rc.thenStandsForBoth[out] = *a;
    }
  }
  for (const Block *b : ifNode->blocks()) {
    std::string why = whyNotHoistable(b);
    if (!why.empty())
      return why;
  }
  return "";
}

std::string whyNotSafeUnconditionally(
    Node *from, Node *end, const std::unordered_set<const Node *> &originals,
    RuleContext &rc) {
  for (Node *node = from; node != end; node = node->next()) {
    if (rc.absorbed.count(node))
      continue; // replaced: dead once the rewrite is kept
    bool original = originals.count(node) != 0;
    if (original && !anyUsed(node) && !node->hasSideEffects())
      continue; // dead
    const char *op = node->kind().toQualString();
    if (node->hasSideEffects() || writesAnything(node))
      return std::string("'") + op + "' has an effect";
    if (readsTensor(node))
      return std::string("'") + op + "' reads the device";
    if (node->hasAttribute(guardAttr())) {
      Block *fast = node->blocks()[0];
      std::string why = whyNotSafeUnconditionally(
          fast->nodes().front(), fast->return_node(), originals, rc);
      if (!why.empty())
        return why;
      continue;
    }
    if (original) {
      if (!neverRaisesOnValues(node) && !dimsWithinRank(node, &rc.analysis) &&
          node->blocks().empty() &&
          !(node->outputs().size() == 1 && madeWithNoRows(node->output())))
        return std::string("'") + op +
               "' may raise where its branch would not have run";
      for (Value *in : node->inputs())
        if (rc.rep(in))
          return std::string("'") + op + "' reads a bounded value there";
    }
    for (Block *b : node->blocks()) {
      // A form's loops run a host-static number of times (over a rank).
      if (original && node->kind() != c10::prim::If)
        return std::string("a branch contains '") + op + "'";
      // A guard inside another if would keep its fallback there.
      for (Node *inner : collectNodes(b))
        if (inner->hasAttribute(guardAttr()))
          return "a guard is nested in an if";
      std::string why = whyNotSafeUnconditionally(
          b->nodes().front(), b->return_node(), originals, rc);
      if (!why.empty())
        return why;
    }
  }
  return "";
}

void nestAfterGuards(Node *from, Node *end,
                     std::vector<Node *> &guards,
                     std::unordered_map<Value *, Value *> &renamed,
                     RuleContext &rc) {
  for (Node *node = from; node != end; node = node->next()) {
    if (!node->hasAttribute(guardAttr()))
      continue;
    Block *fast = node->blocks()[0];
    std::vector<Node *> rest;
    for (Node *m = node->next(); m != end; m = m->next())
      rest.push_back(m);
    for (Node *m : rest)
      m->moveBefore(fast->return_node());
    // What followed the guard now reads what its fast block made.
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value *out = node->output(i), *made = fast->outputs()[i];
      for (const torch::jit::Use &use :
           std::vector<torch::jit::Use>(out->uses().begin(), out->uses().end()))
        if (encloses(fast, use.user))
          use.user->replaceInput(use.offset, made);
      rc.rename(out, made);
      renamed[out] = made;
      for (auto &[from, to] : renamed)
        if (to == out)
          to = made;
    }
    guards.push_back(node);
    nestAfterGuards(fast->nodes().front(), fast->return_node(), guards,
                    renamed, rc);
    return;
  }
}

bool canPick(Value *a, Value *b, RuleContext &rc) {
  auto rankOf = [&](Value *v) -> std::optional<int64_t> {
    Rep *r = rc.bounded(v);
    if (r && r->is1D)
      return 1;
    return knownRank(v, &rc.analysis);
  };
  for (Value *v : {a, b})
    if ((rc.rep(v) && !rc.bounded(v)) ||
        (!rc.rep(v) && rc.analysis.info(v).shape != ShapeDep::Static))
      return false;
  std::optional<int64_t> rankA = rankOf(a), rankB = rankOf(b);
  if (rankA && rankB)
    return *rankA == *rankB;
  // Two static tensors: the pick's guard compares their shapes, metadata
  // (`x[1]` and `x[0]` of rows the rules made row_at's, of one rank the
  // program does not spell out).
  return (rc.bounded(a) && rc.bounded(b)) || (!rc.rep(a) && !rc.rep(b));
}

namespace {

/// The bounded value whose rows \p n counts, times a row size: numel(x),
/// x.size(0), len(x) of a bounded x; \p perRow says whether numel.
Value *countedRows(Value *n, bool &perRow, RuleContext &rc) {
  Node *def = n->node();
  perRow = is(def, "aten::numel");
  bool rows = (is(def, "aten::size") && def->inputs().size() == 2 &&
               constantInt(def->input(1)) == 0) ||
              is(def, "aten::len");
  if ((!perRow && !rows) || !rc.bounded(def->input(0)))
    return nullptr;
  return def->input(0);
}

} // namespace

bool capBranchRows(Node *ifNode, RuleContext &rc) {
  Node *test = ifNode->input(0)->node();
  bool capsElse = is(test, "aten::gt") || is(test, "aten::ge");
  bool capsThen = is(test, "aten::le") || is(test, "aten::lt");
  if ((!capsElse && !capsThen) || test->inputs().size() != 2)
    return false;
  Value *limit = test->input(1);
  bool perRow = false;
  Value *x = countedRows(test->input(0), perRow, rc);
  if (!x || rc.rep(limit) || limit->type()->kind() != c10::TypeKind::IntType)
    return false;
  Block *block = ifNode->blocks()[capsElse ? 1 : 0];
  const Rep rows = *rc.bounded(x);
  // The values to cut: bounded with x's count, made before the if.
  std::vector<Value *> cut;
  for (Node *n : collectNodes(block))
    for (Value *v : n->inputs())
      if (Rep *r = rc.bounded(v);
          r && rc.sameCount(r->count, rows.count) && !insideOf(v->node(), block) &&
          std::find(cut.begin(), cut.end(), v) == cut.end())
        cut.push_back(v);
  if (cut.empty())
    return false;
  // T on the host, before the if: the count is at most L (L - 1 for > and
  // <=) over the elements per row, and at most the bound B; every count
  // where a row holds no element (numel is 0 whatever the count).
  torch::jit::Graph &graph = rc.graph;
  torch::jit::WithInsertPoint at(ifNode);
  auto host = [&](const char *op, Value *a, Value *b) {
    return rc.hostOp(op, a, b, ifNode);
  };
  Value *cap = limit;
  if (is(test, "aten::ge") || is(test, "aten::lt"))
    cap = host("aten::sub", limit, rc.constant(1));
  Value *bound = emit(graph, "aten::size", {rows.value, rc.constant(0)}, ifNode);
  if (perRow) {
    Value *elements =
        host("aten::floordiv", emit(graph, "aten::numel", {rows.value}, ifNode),
             host("prim::max", bound, rc.constant(1)));
    Value *none = emit(graph, "aten::eq", {elements, rc.constant(0)}, ifNode);
    cap = host("aten::floordiv", cap, host("prim::max", elements, rc.constant(1)));
    cap = host("prim::max", cap,
               host("aten::mul", bound, emit(graph, "aten::Int", {none}, ifNode)));
  }
  Value *end =
      host("prim::max", host("prim::min", cap, bound), rc.constant(0));
  // x[:T] at the branch's start (the original's x where it runs), for its
  // reads: bound's prefix rule cuts the padded rows.
  torch::jit::WithInsertPoint first(block->nodes().front());
  for (Value *v : cut) {
    Value *head = emit(graph, "aten::slice",
                       {v, rc.constant(0), rc.constant(0), end, rc.constant(1)},
                       ifNode);
    head->setType(v->type());
    for (const torch::jit::Use &use : std::vector<torch::jit::Use>(v->uses()))
      if (use.user != head->node() && insideOf(use.user, block))
        use.user->replaceInput(use.offset, head);
  }
  return true;
}

Picked pick(Value *c, Value *a, Value *b, const Node *anchor,
            RuleContext &rc) {
  torch::jit::Graph &graph = rc.graph;
  if (!rc.bounded(a) && !rc.bounded(b))
    return Picked{selectBranch(graph, c, a, b, anchor), nullptr, false, false};
  auto rows = [&](Value *v) {
    if (Rep *r = rc.bounded(v))
      return Picked{r->value, r->count, r->isIndex, r->is1D};
    return Picked{v, rc.rowsOf(v, anchor), rc.isIndex(v),
                  knownRank(v, &rc.analysis) == 1};
  };
  // A value one branch leaves undefined (an early return's) is read only
  // where the other ran (selectBranch): the other's rows serve both.
  if (isUndefined(a))
    return rows(b);
  if (isUndefined(b))
    return rows(a);
  Picked ra = rows(a), rb = rows(b);
  auto size0 = [&](Value *t) {
    return emit(graph, "aten::size", {t, 0}, anchor);
  };
  Value *n =
      emit(graph, "prim::max", {size0(ra.padded), size0(rb.padded)}, anchor);
  auto padTo = [&](Value *t) {
    return insertForm(graph, "pad_rows", {t, n}, anchor)[0];
  };
  return Picked{
      selectBranch(graph, c, padTo(ra.padded), padTo(rb.padded), anchor),
      rc.sameCount(ra.count, rb.count)
          ? ra.count
          : emit(graph, "aten::where", {c, ra.count, rb.count}, anchor),
      ra.isIndex && rb.isIndex, ra.is1D && rb.is1D};
}

void returnPicks(const std::vector<Node *> &guards, Node *original,
                 std::vector<Picked> &results, const Node *ifNode,
                 RuleContext &rc) {
  for (size_t k = guards.size(); k-- > 0;) {
    Node *guard = guards[k];
    Block *fast = guard->blocks()[0], *fallback = guard->blocks()[1];
    Node *copy = k == 0 ? original
                        : rc.graph.createClone(original,
                                               [](Value *v) { return v; });
    copy->insertBefore(fallback->return_node());
    torch::jit::WithInsertPoint at(fallback->return_node());
    for (size_t i = 0; i < results.size(); ++i) {
      Picked &r = results[i];
      Value *all = copy->output(i);
      fast->registerOutput(r.padded);
      fallback->registerOutput(all);
      r.padded = guard->addOutput()->setType(all->type());
      if (r.count) {
        fast->registerOutput(r.count);
        fallback->registerOutput(rc.rowsOf(all, ifNode));
        r.count = guard->addOutput()->setType(r.count->type());
      }
    }
  }
}

} // namespace staticify::bound
