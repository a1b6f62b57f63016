//===- Flow.cpp - Where a bound value goes: writes, and trials' stops -----===//
//
// Two questions the driver asks of the graph: whether a fresh tensor a rule
// would replace may be written later (then its op is kept), and where a
// trial the policy refused may stop instead (Rules.h).
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/Selection.h"

#include <algorithm>
#include <optional>
#include <unordered_set>
#include <vector>

namespace staticify::bound {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

/// Whether \p node's results are never written to. They are fresh
/// tensors (a nonzero, a selection, a gather), so a write must go through
/// them or a view of them: uses are followed through views, index lists
/// and if results; a use that stores one where it could be written later
/// (a list append, an attribute) counts as a write. libtorch's alias
/// analysis would count any write to a tensor kept in a list as one.
bool writable(const Node *node) {
  for (const Value *out : node->outputs())
    if (mayBeWritten(out, 0))
      return false;
  return true;
}

/// Whether a dict or list \p c (holding a fresh tensor) may hand an
/// element to something that writes it: its elements read out and then
/// written, or \p c passed where the walk cannot see. Returned, stored
/// in a list or dict followed the same way, tested for a key, measured,
/// or given other elements, it writes none of them. torchvision's heads
/// put their detections in dicts (`{"boxes": boxes[keep], ...}`) appended
/// to the returned list.
bool mayExposeElements(const Value *c, int depth) {
  if (depth > 32)
    return true;
  for (const torch::jit::Use &use : c->uses()) {
    const Node *user = use.user;
    switch (user->kind()) {
    case c10::prim::Return: {
      const Node *owner = user->owningBlock()->owningNode();
      if (!owner)
        continue; // returned
      if (owner->kind() != c10::prim::If ||
          mayExposeElements(owner->output(use.offset), depth + 1))
        return true;
      continue;
    }
    case c10::aten::append:
      if (use.offset == 1 && mayExposeElements(user->input(0), depth + 1))
        return true;
      if (use.offset == 1 && user->output()->hasUses())
        return true; // the list append returns, not followed
      continue;    // offset 0: another element goes in
    case c10::aten::_set_item:
      if (use.offset != 0)
        return true; // c stored as a value: not followed
      continue;      // an entry replaced: no element written
    case c10::aten::__getitem__: {
      if (use.offset != 0)
        return true;
      const Value *element = user->output();
      c10::TypeKind kind = element->type()->kind();
      if (kind == c10::TypeKind::DictType || kind == c10::TypeKind::ListType
              ? mayExposeElements(element, depth + 1)
              : mayBeWritten(element, depth + 1))
        return true;
      continue;
    }
    case c10::aten::__contains__:
    case c10::aten::len:
    case c10::aten::keys:
      continue;
    case c10::prim::TupleConstruct: // the tuple the graph returns
      if (returnedOnly(user->output()))
        continue;
      return true;
    default:
      return true;
    }
  }
  return false;
}

bool mayBeWritten(const Value *v, int depth) {
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
        if (readOnly)
          continue;
        // An op whose schema gives the list no alias annotation reads its
        // elements; its results may be views of them (broadcast_tensors),
        // so what writes those writes the elements. One that writes it, or
        // stores it (append's `t(c -> *) el`), may write them anywhere.
        const c10::FunctionSchema *schema = c->maybeSchema();
        if (!schema || consumer.offset >= schema->arguments().size() ||
            schema->arguments()[consumer.offset].alias_info())
          return true;
        for (const Value *out : c->outputs())
          if (mayBeWritten(out, depth + 1))
            return true;
      }
      continue;
    }
    if (user->kind() == c10::prim::DictConstruct) {
      if (use.offset % 2 == 0 || mayExposeElements(user->output(), depth + 1))
        return true; // a key, or a dict whose values someone may write
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

/// The first node of \p ifNode's block that computes only its condition
/// (`boxes.numel() > 4000` before batched_nms's if): stopped there, a
/// trial reads the values the condition reads instead of the condition.
const Node *conditionStart(const Node *ifNode) {
  std::unordered_set<const Node *> slice{ifNode};
  const Node *first = ifNode;
  std::vector<const Value *> work{ifNode->input(0)};
  while (!work.empty() && slice.size() < 64) {
    const Node *def = work.back()->node();
    work.pop_back();
    if (def->owningBlock() != ifNode->owningBlock() ||
        def->kind() == c10::prim::Constant || slice.count(def))
      continue;
    bool onlyCondition = true;
    for (const Value *out : def->outputs())
      for (const torch::jit::Use &use : out->uses())
        onlyCondition &= slice.count(use.user) > 0;
    if (!onlyCondition)
      continue;
    slice.insert(def);
    if (def->isBefore(first))
      first = def;
    for (const Value *in : def->inputs())
      work.push_back(in);
  }
  return first;
}

namespace {

/// The host test of \p hi (an upper bound of `a`) against `b` that decides
/// `a OP b`, and the value it decides it to: for `a > b`, `hi <= b` makes it
/// false. Only the upper bound decides: a count's lower bound, 0, never
/// decides a test worth making.
struct Decision {
  bool strict; // hi < b, else hi <= b
  bool value;
};
std::optional<Decision> decisionByUpperBound(c10::Symbol op) {
  if (op == c10::aten::gt)
    return Decision{false, false};
  if (op == c10::aten::ge)
    return Decision{true, false};
  if (op == c10::aten::lt)
    return Decision{true, true};
  if (op == c10::aten::le)
    return Decision{false, true};
  if (op == c10::aten::eq)
    return Decision{true, false};
  if (op == c10::aten::ne)
    return Decision{true, true};
  return std::nullopt;
}

/// `b OP a` as `a OP' b`.
c10::Symbol mirrored(c10::Symbol op) {
  if (op == c10::aten::gt)
    return c10::aten::lt;
  if (op == c10::aten::lt)
    return c10::aten::gt;
  if (op == c10::aten::ge)
    return c10::aten::le;
  if (op == c10::aten::le)
    return c10::aten::ge;
  return op; // eq, ne
}

} // namespace

Node *guardIfByBound(Node *ifNode, RuleContext &rc) {
  if (!rc.boundGuards)
    return nullptr;
  Value *cond = ifNode->input(0);
  Node *cmp = cond->node();
  if (!rc.lifted(cond) || cmp->inputs().size() != 2 ||
      ifNode->blocks().size() != 2)
    return nullptr;
  Value *a = cmp->input(0), *b = cmp->input(1);
  if (a->type()->kind() != c10::TypeKind::IntType ||
      b->type()->kind() != c10::TypeKind::IntType)
    return nullptr;
  c10::Symbol op = cmp->kind();
  if (rc.lifted(b) && !rc.rep(a)) {
    std::swap(a, b);
    op = mirrored(op);
  }
  Rep *lifted = rc.lifted(a);
  std::optional<Decision> decision = decisionByUpperBound(op);
  if (!lifted || rc.rep(b) || !decision)
    return nullptr;
  Value *hi = rc.upper(lifted->range);
  if (!hi)
    return nullptr;
  // Of a length, a test that holds only when the bound is 0 or less
  // (`n == 0`, `n > 0`) would take the fallback whenever there are rows.
  std::optional<int64_t> c = constantInt(b);
  if (c && *c <= (decision->strict ? 1 : 0))
    return nullptr;
  Graph &graph = rc.graph;
  torch::jit::WithInsertPoint insert(ifNode);
  Value *test =
      emit(graph, decision->strict ? "aten::lt" : "aten::le", {hi, b}, ifNode);
  Node *guard = graph.create(c10::prim::If, {test}, 0);
  guard->setSourceRange(ifNode->sourceRange());
  guard->insertBefore(ifNode);
  guard->i_(guardAttr(), kBoundGuard);
  // The decided branch's own nodes go to the fast block, where the
  // analysis's facts about them hold and the driver visits them; the
  // fallback's if gets a copy (the driver does not visit a fallback).
  torch::jit::Block *fast = guard->addBlock(), *fallback = guard->addBlock();
  torch::jit::Block *decided = ifNode->blocks()[decision->value ? 0 : 1];
  for (Node *n : std::vector<Node *>(decided->nodes().begin(),
                                     decided->nodes().end()))
    n->moveBefore(fast->return_node());
  for (Value *out : decided->outputs())
    fast->registerOutput(out);
  while (!decided->outputs().empty())
    decided->eraseOutput(decided->outputs().size() - 1);
  decided->cloneFrom(fast, [](Value *v) { return v; });
  for (Value *out : ifNode->outputs())
    out->replaceAllUsesWith(guard->addOutput()->setType(out->type()));
  ifNode->moveBefore(fallback->return_node());
  for (Value *out : ifNode->outputs())
    fallback->registerOutput(out);
  return guard;
}

bool readsTensor(const Node *node) {
  return opRole(node) == OpRole::SyncRead &&
         std::any_of(node->inputs().begin(), node->inputs().end(),
                     [](const Value *in) { return isTensor(in); });
}

bool madeWithNoRows(const Value *v) {
  const Node *node = v->node();
  const OpInfo *op = opInfo(node);
  std::optional<size_t> size = inputIndex(node, "size");
  if (!op || !op->has(kMakesSized) || !size)
    return false;
  std::optional<std::vector<int64_t>> sizes =
      constantIntList(node->input(*size));
  return sizes && !sizes->empty() && (*sizes)[0] == 0 &&
         std::all_of(sizes->begin(), sizes->end(),
                     [](int64_t d) { return d >= 0; });
}

namespace {

/// Whether \p block only makes tensors of no rows (and the constants,
/// size lists and devices they take): it has no effect, raises nothing
/// and reads no data, so not running it changes nothing but its results.
bool onlyMakesNoRows(torch::jit::Block *block) {
  for (Node *node : block->nodes()) {
    c10::Symbol k = node->kind();
    if (k == c10::prim::Constant || k == c10::prim::ListConstruct ||
        k == c10::prim::device || k == c10::prim::dtype)
      continue;
    if (node->outputs().size() != 1 || !madeWithNoRows(node->output()))
      return false;
  }
  return true;
}

/// Whether the nodes of \p block, as the rules left it, compute the same
/// whatever the data and the count, raising nothing: the nodes the rules
/// replaced (absorbed: dead) aside, an original node is pure, never raises
/// on values and reads no represented value (it would be materialized
/// there, cut to a count that may be 0), and a node a rule made reads no
/// tensor on the host and has no blocks but a form's if on a host fact
/// (a guard's fallback cuts to the count). The forms the rules insert are
/// total on padded rows.
bool runsOnPaddedRows(torch::jit::Block *block,
                      const std::unordered_set<const Node *> &originals,
                      RuleContext &rc) {
  for (Node *node : block->nodes()) {
    if (rc.absorbed.count(node))
      continue;
    if (!node->blocks().empty()) {
      // A form's choice on a shape (first_filled's `rows.size(0) == 0`): on
      // the host, total where its branches are. Not a guard, whose fallback
      // cuts to the count.
      if (originals.count(node) || node->kind() != c10::prim::If ||
          node->hasAttribute(guardAttr()) || rc.rep(node->input(0)))
        return false;
      for (torch::jit::Block *b : node->blocks())
        if (!runsOnPaddedRows(b, originals, rc))
          return false;
      continue;
    }
    if (readsTensor(node) || node->hasSideEffects())
      return false;
    if (!originals.count(node))
      continue;
    if (!neverRaisesOnValues(node) || mutatesFirstInput(node))
      return false;
    for (Value *in : node->inputs())
      if (rc.rep(in))
        return false;
  }
  return true;
}

} // namespace

std::optional<EmptyEarlyReturn> matchEmptyEarlyReturn(Node *ifNode,
                                                      RuleContext &rc) {
  if (ifNode->kind() != c10::prim::If)
    return std::nullopt;
  Value *cond = ifNode->input(0);
  Node *cmp = cond->node();
  if (!rc.lifted(cond) || ifNode->hasAttribute(guardAttr()) ||
      cmp->kind() != c10::aten::eq ||
      cmp->inputs().size() != 2 || ifNode->outputs().empty())
    return std::nullopt;
  // cond: `n == 0` for n the numel, size(0) or len of bounded x.
  Value *n = cmp->input(0);
  if (constantInt(n) == 0)
    n = cmp->input(1);
  else if (constantInt(cmp->input(1)) != 0)
    return std::nullopt;
  Node *size = n->node();
  if (!rc.lifted(n) || opRole(size) != OpRole::ShapeRead ||
      (is(size, "aten::size") &&
       (size->inputs().size() != 2 || constantInt(size->input(1)) != 0)))
    return std::nullopt;
  Value *x = size->input(0);
  Rep *rx = rc.bounded(x);
  torch::jit::Block *then = ifNode->blocks()[0];
  torch::jit::Block *otherwise = ifNode->blocks()[1];
  if (!rx || !onlyMakesNoRows(then))
    return std::nullopt;
  // Each result of `then`: no rows, on x's device (or that of a value with
  // x's count), of the dtype of `else`'s (and of its rank: checked once
  // the rules gave `else`'s rows a representation).
  EmptyEarlyReturn match;
  for (size_t i = 0; i < ifNode->outputs().size(); ++i) {
    Value *none = then->outputs()[i], *rows = otherwise->outputs()[i];
    const ValueInfo &a = rc.analysis.info(none);
    const ValueInfo &b = rc.analysis.info(rows);
    std::optional<int64_t> rank = knownRank(none, &rc.analysis);
    std::optional<size_t> device = inputIndex(none->node(), "device");
    if (!madeWithNoRows(none) || a.dtype == DTypeKind::Unknown ||
        a.dtype != b.dtype || !rank || !device)
      return std::nullopt;
    Node *on = none->node()->input(*device)->node();
    if (on->kind() != c10::prim::device)
      return std::nullopt;
    Rep *onRep = rc.bounded(on->input(0));
    if (on->input(0) != x && !(onRep && rc.sameCount(onRep->count, rx->count)))
      return std::nullopt;
    match.ranks.push_back(*rank);
  }
  match.tested = x;
  match.elseResults.assign(otherwise->outputs().begin(),
                           otherwise->outputs().end());
  for (Node *node : collectNodes(otherwise))
    match.originals.insert(node);
  return match;
}

bool selectEmptyBranch(Node *ifNode, const EmptyEarlyReturn &match,
                       RuleContext &rc) {
  Rep *lifted = rc.lifted(ifNode->input(0));
  Rep *x = rc.bounded(match.tested);
  torch::jit::Block *otherwise = ifNode->blocks()[1];
  if (!lifted || !x || !runsOnPaddedRows(otherwise, match.originals, rc))
    return false;
  // Every result was joined as bounded rows (joinBranches): its count is
  // one of the if's results.
  std::vector<size_t> counts;
  for (size_t i = 0; i < match.elseResults.size(); ++i) {
    Rep *r = rc.bounded(ifNode->output(i));
    Rep *rows = rc.bounded(match.elseResults[i]);
    int64_t rank = match.ranks[i];
    if (!r || (knownRank(match.elseResults[i], &rc.analysis) != rank &&
               !(rank == 1 && rows && rows->is1D)))
      return false;
    auto at = std::find(ifNode->outputs().begin(), ifNode->outputs().end(),
                        r->count);
    if (at == ifNode->outputs().end())
      return false;
    counts.push_back(at - ifNode->outputs().begin());
  }
  // With no padded rows, x has none and `then` is the branch taken; else
  // `else` runs on the padded rows, and its counts are 0 where n is.
  Graph &graph = rc.graph;
  {
    torch::jit::WithInsertPoint insert(ifNode);
    Value *rows = emit(graph, "aten::size", {x->value, 0}, ifNode);
    ifNode->replaceInput(0, emit(graph, "aten::eq", {rows, 0}, ifNode));
  }
  torch::jit::WithInsertPoint insert(otherwise->return_node());
  for (size_t j : counts)
    otherwise->return_node()->replaceInput(
        j, emit(graph, "aten::masked_fill",
                {otherwise->outputs()[j], lifted->value, 0}, ifNode));
  return true;
}

/// Why \p user reads \p v where it is, when \p user sits in a cold
/// branch that \p v is defined outside: one that only raises (an error
/// message's sizes), or a guard's fallback (guardAttr()). nullptr where
/// it does not. The analysis counts the host reads of cold branches apart
/// (errorPathSyncPoints, fallbackSyncPoints).
const char *coldPath(const Node *user, const Value *v) {
  std::unordered_set<const torch::jit::Block *> aroundDef;
  for (const torch::jit::Block *b = v->node()->owningBlock(); b;
       b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
    aroundDef.insert(b);
  for (const torch::jit::Block *b = user->owningBlock();
       b && !aroundDef.count(b);
       b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr) {
    if (onlyRaises(b))
      return "materialized for a branch that only raises";
    if (onlyWarns(b))
      return "materialized for a branch that only warns";
    if (isGuardFallback(b))
      return "materialized in a guard's fallback";
  }
  return nullptr;
}

/// The outermost guard fallback around \p user that \p v is defined
/// outside of, or nullptr.
torch::jit::Block *guardFallbackAround(Node *user, const Value *v) {
  torch::jit::Block *found = nullptr;
  for (torch::jit::Block *b = user->owningBlock(); b && !encloses(b, v->node());
       b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
    if (isGuardFallback(b))
      found = b;
  return found;
}

/// Whether \p v is defined before \p at.
bool definedBefore(const Value *v, const Node *at) {
  return v->node()->kind() == c10::prim::Param || v->node()->isBefore(at);
}

bool visibleAt(const Value *v, const Node *at) {
  return definedBefore(v, at) && encloses(v->node()->owningBlock(), at);
}

/// Whether \p def is in \p b or a block nested in it.
bool encloses(const torch::jit::Block *b, const Node *def) {
  for (const torch::jit::Block *d = def->owningBlock(); d;
       d = d->owningNode() ? d->owningNode()->owningBlock() : nullptr)
    if (d == b)
      return true;
  return false;
}


bool alongRows(const Value *dim, const Value *of, const Rep &r,
               const AnalysisResult &analysis) {
  std::optional<int64_t> d = constantInt(dim);
  if (!d)
    return false;
  if (r.is1D && (*d == 0 || *d == -1))
    return true;
  return resolveDim(*d, of, 0, &analysis) == 0;
}

/// Whether \p node is one of \p graph's (a node a restored trial made is
/// gone).
bool inGraph(Graph &graph, const Node *node) {
  for (const Node *n : collectNodes(graph.block()))
    if (n == node)
      return true;
  return false;
}

} // namespace staticify::bound
