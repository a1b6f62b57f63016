//===- Driver.cpp - The bound pass: walk, dispatch, materialize, trials ---===//
//
// The driver's walk (Driver.h): each node goes to the rules registered for
// it; after the walk, uses no rule absorbed materialize. Its ifs are
// DriverIfs.cpp's. boundShapes, the pass, runs the driver on each dynamic
// island in trials, kept where the rewrite policy allows (Trials.h).
//
//===----------------------------------------------------------------------===//

#include "passes/Bounded.h"
#include "passes/BoundedForms.h"

#include "passes/GraphCheckpoint.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/LiftScalars.h"
#include "passes/Partition.h"
#include "passes/RewritePolicy.h"
#include "passes/Selection.h"
#include "passes/bound/Driver.h"
#include "passes/bound/Rules.h"
#include "passes/bound/Trials.h"

#include <torch/csrc/jit/passes/constant_propagation.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace bound {

namespace {

std::vector<BoundRule> &ruleTable() {
  static std::vector<BoundRule> rules = [] {
    // Op-specific rules are asked before trait rules (Driver::candidates);
    // within each, in this order.
    std::vector<BoundRule> r;
    addListRules(r); // before any rule that could take a list for a tensor
    addScalarRules(r);
    addShapeRules(r);
    addOrderRules(r); // scans along dim 0: before per-row takes their dims
    addRowRules(r);
    addRandomRules(r);
    addIndexRules(r);
    addRootRules(r);
    addDetectionRules(r);
    addContainerRules(r);
    return r;
  }();
  return rules;
}

} // namespace

void registerBoundRule(BoundRule rule) {
  ruleTable().push_back(std::move(rule));
}

const std::vector<BoundRule> &boundRules() { return ruleTable(); }

bool Driver::run(size_t &midSyncPoints) {
  // Rules ask the ranks of values whose producers they have rewritten.
  RankSnapshot ranks(graph, &rc.analysis);
  runBlock(graph.block());
  // A later write of a padded dict entry that no rule followed would
  // leave the entry's count stale (ContainerRules.cpp).
  vetoed = !rc.pendingStores.empty() || vetoedBoth;
  if (!changed || vetoed)
    return false;
  materializeRest();
  midSyncPoints = midReads.size();
  return true;
}

void Driver::eraseJoinedResults() {
  for (Node *node : joined)
    for (size_t i = node->outputs().size(); i-- > 0;) {
      if (node->output(i)->hasUses())
        continue;
      for (Block *b : node->blocks())
        b->eraseOutput(i);
      node->eraseOutput(i);
    }
}

void Driver::runBlock(Block *block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node *node = *it;
    ++it; // nodes the visit hoists go before `node`; never revisited
    visit(node);
  }
}

bool Driver::holdsCutoff(const Node *node) const {
  for (const Node *n = cutoff->owningBlock()->owningNode(); n;
       n = n->owningBlock()->owningNode())
    if (n == node)
      return true;
  return false;
}

void Driver::visit(Node *node) {
  if (rc.absorbed.count(node))
    return; // rewritten already, by a rule for a node before it
  if (cutoff && !node->isBefore(cutoff)) {
    // An if or loop that holds the cutoff: what runs before it inside.
    if (holdsCutoff(node))
      for (Block *b : node->blocks())
        runBlock(b);
    return;
  }
  if (node->kind() == c10::prim::If && rc.rep(node->input(0))) {
    if (convertIf(node))
      return;
    if (selectBothBranches(node))
      return;
    if (Node *guard = guardIfByBound(node, rc)) {
      changed = true;
      visit(guard);
      // After the visit, which joins the guard's results (a rewrite).
      std::string why = "the test is decided by the bound of the size where "
                        "it can be; the original if, with its read, where "
                        "not";
      if (bothWhy.first == node) // an earlier trial's
        why += " (" + bothWhy.second + ")";
      ctx.declined(guard, kRule, why);
      return;
    }
  }
  // A loop a rule rewrites whole (a sum of a bounded list's sizes).
  if (node->kind() == c10::prim::Loop && dispatchLoop(node)) {
    changed = true;
    rc.absorb(node);
    return;
  }
  // A guard's fallback (guardAttr()) runs only where the host facts it
  // checks fail: it keeps the original computation, and what it uses
  // from outside is read inside it (coldPath).
  bool isGuard = node->hasAttribute(guardAttr());
  std::optional<EmptyEarlyReturn> early = matchEmptyEarlyReturn(node, rc);
  for (size_t i = 0; i < node->blocks().size(); ++i)
    if (!(isGuard && i == 1))
      runBlock(node->blocks()[i]);
  if (node->kind() == c10::prim::If) {
    joinBranches(node);
    if (early && selectEmptyBranch(node, *early, rc))
      ctx.rewrote(node, kRule);
  }
  if (!node->blocks().empty())
    return; // loops and ifs consume lifted values as host values
  // A list of tensors (cat's, index's) counts by its elements.
  auto hasRep = [&](Value *v) {
    if (rc.rep(v))
      return true;
    Node *list = v->node();
    if (list->kind() != c10::prim::ListConstruct)
      return false;
    return std::any_of(list->inputs().begin(), list->inputs().end(),
                       [&](Value *e) { return rc.rep(e) != nullptr; });
  };
  bool anyRep =
      std::any_of(node->inputs().begin(), node->inputs().end(), hasRep);
  if (!writable(node))
    return;
  if (!anyRep && roots && !roots->count(node))
    return; // a root of another island
  torch::jit::WithInsertPoint guard(node);
  if (!dispatch(node, anyRep ? BoundRule::On::Use : BoundRule::On::Root))
    return;
  changed = true;
  if (rc.replacedWriter == node) {
    rc.replacedWriter = nullptr;
    writers.push_back(node);
  }
  rc.absorb(node);
}

const std::vector<const BoundRule *> &Driver::candidates(BoundRule::On on,
                                                         c10::Symbol op) {
  auto &byOp = candidatesOf[on == BoundRule::On::Use];
  auto [it, fresh] = byOp.try_emplace(op);
  if (fresh) {
    for (bool traits : {false, true})
      for (const BoundRule &rule : boundRules())
        if (rule.on == on && rule.ops.empty() == traits &&
            (traits || std::count(rule.ops.begin(), rule.ops.end(), op)))
          it->second.push_back(&rule);
  }
  return it->second;
}

bool Driver::dispatchLoop(Node *node) {
  if (!loopRules) {
    loopRules.emplace();
    for (const BoundRule &rule : boundRules())
      if (rule.on == BoundRule::On::Use &&
          std::count(rule.ops.begin(), rule.ops.end(), c10::prim::Loop))
        loopRules->push_back(&rule);
  }
  torch::jit::WithInsertPoint at(node);
  return ask(node, *loopRules);
}

bool Driver::dispatch(Node *node, BoundRule::On on) {
  return ask(node, candidates(on, node->kind()));
}

bool Driver::ask(Node *node, const std::vector<const BoundRule *> &rules) {
  for (const BoundRule *rule : rules) {
    InsertedBefore inserted(node);
    RuleResult result = rule->fn(node, rc);
    if (result.kind == RuleResult::Kind::Applied)
      return true;
    inserted.rollback();
    if (result.kind == RuleResult::Kind::Declined) {
      if (!result.why.empty())
        ctx.declined(node, kRule, result.why);
      return false;
    }
  }
  return false;
}

const Node *Driver::located(const Node *node) {
  for (const Node *n = node; n;
       n = n->inputs().empty() ? nullptr : n->input(0)->node()) {
    if (n->sourceRange().source())
      return n;
    if (n->kind() == c10::prim::Param)
      break;
  }
  return node;
}

std::string Driver::reasonFor(const Node *user) const {
  if (isOutputPosition(user))
    return "materialized: it is returned (--padded-outputs returns "
           "(padded, count) instead)";
  if (leavesToReturn(user))
    return "materialized: it is returned (through an if, which "
           "--padded-outputs does not pad)";
  if (returnedAsMoved(user))
    return "materialized: it is returned (its dimensions moved by '" +
           std::string(user->kind().toQualString()) + "')";
  if (returnedInDict(user))
    return ctx.options.paddedOutputs
               ? "materialized: it is returned (in a dict that "
                 "--padded-outputs cannot pad: a key that clashes with a "
                 "count's, or a use that reads it whole)"
               : "materialized: it is returned (in a dict: --padded-outputs "
                 "returns it padded, its count beside it)";
  if (user->kind() == c10::prim::Return)
    return "materialized: it leaves a loop or an if";
  return "materialized: '" + std::string(user->kind().toQualString()) +
         "' has no bounded form";
}

bool Driver::noteUse(const Node *user) {
  if (isOutputPosition(user) || leavesToReturn(user) || returnedAsMoved(user) ||
      returnedInDict(user))
    return false;
  // Where a second trial may stop: before the ifs around the use (a read in
  // one branch is paid for the other's too when the values stop before the
  // if), else at the use; a return node has no place of its own.
  const Node *place = user->kind() == c10::prim::Return
                          ? user->owningBlock()->owningNode()
                          : user;
  while (place && place->owningBlock()->owningNode() &&
         place->owningBlock()->owningNode()->kind() == c10::prim::If)
    place = place->owningBlock()->owningNode();
  if (place && (!firstMid || place->isBefore(firstMid)))
    firstMid = place;
  return true;
}

Value *Driver::maskOfCount(const Rep &r) {
  // A selection x[m] has selectedFrom and selectedBy; a top-k's indices
  // into one have selectedBy alone, and a count of their own.
  if (r.selectedFrom && r.selectedBy)
    return r.selectedBy;
  // Rows computed from a selection keep its count (`node_idx[edge_index[:,
  // mask]]`): the mask of the selection with that count.
  for (const auto &[v, other] : rc.reps)
    if (other.kind == Rep::Kind::Bounded && other.count == r.count &&
        other.selectedFrom && other.selectedBy)
      return other.selectedBy;
  return nullptr;
}

Value *Driver::hoistRead(Value *read, Value *count, Node *at,
                         const std::string &why) {
  // The if around the earlier read, in a block that \p at is in.
  Node *around = read->node();
  while (around && !encloses(around->owningBlock(), at))
    around = around->owningBlock()->owningNode();
  // \p at in the if's own block, after it: its read runs whenever the
  // if's does (one nested in a later branch would not).
  if (!around || around == read->node() || around->kind() != c10::prim::If ||
      at->owningBlock() != around->owningBlock() || !around->isBefore(at) ||
      !visibleAt(count, around))
    return read;
  // The count is known before the if (\p count, this one's; \p read's
  // when its rows share a mask): one read there serves the read in the
  // branch and this one, which would both run where the branch is taken;
  // where it is not, this one would run alone (the count an edge selection
  // and, under `if edge_attr is not None`, its attributes' share).
  torch::jit::WithInsertPoint guard(around);
  Value *hoisted = emit(graph, "aten::Int", {count}, around);
  ctx.declined(hoisted->node(), kRule, why);
  read->replaceAllUsesWith(hoisted);
  if (midReads.erase(read->node()))
    midReads.insert(hoisted->node());
  for (auto *reads : {&countsOnHost, &countsOfMask})
    for (auto &[key, n] : *reads)
      if (n == read)
        n = hoisted;
  return hoisted;
}

Value *Driver::materialize(Value *v, const Rep &r, const Node *user) {
  if (auto it = materialized.find(v); it != materialized.end())
    return it->second;
  Node *def = v->node();
  // Right after the definition, or after the count's read when another
  // value with the same count was cut there already: one sync each.
  Node *at = def->next();
  Value *&n = countsOnHost[r.count];
  // Rows selected by one unwritten mask are as many as its true elements,
  // whatever the base: one read for all (PyG's `edge_index[:, mask]` and,
  // in a branch, `edge_attr[mask]`).
  Value *mask = r.kind == Rep::Kind::Bounded ? maskOfCount(r) : nullptr;
  if (!n && mask)
    if (auto it = countsOfMask.find(mask); it != countsOfMask.end())
      n = it->second;
  if (r.kind == Rep::Kind::Bounded && n &&
      n->node()->owningBlock() == def->owningBlock() &&
      (n->node() == at || at->isBefore(n->node())))
    at = n->node()->next();
  torch::jit::WithInsertPoint guard(at);
  const Node *anchor = user->sourceRange().source() ? user : located(def);
  bool mid = noteUse(user);
  // Rows an if makes in one branch and leaves undefined in another (an
  // early return's): the count is undefined there too, so the cut runs in
  // the branches that define it, by the if's own condition (mmdet's
  // `if not keep.any(): return empties`).
  if (r.kind == Rep::Kind::Bounded && def->kind() == c10::prim::If &&
      r.count->node() == def) {
    std::vector<bool> undefined;
    for (Block *b : def->blocks())
      undefined.push_back(isUndefined(b->outputs()[r.count->offset()]));
    if (std::count(undefined.begin(), undefined.end(), true) == 1) {
      Node *branch = graph.insertNode(graph.create(c10::prim::If, {def->input(0)}, 1));
      branch->setSourceRange(def->sourceRange());
      branch->output()->setType(v->type());
      for (size_t k = 0; k < 2; ++k) {
        Block *block = branch->addBlock();
        torch::jit::WithInsertPoint in(block);
        Value *none = nullptr;
        block->registerOutput(
            undefined[k] ? graph.insertNode(graph.createUninitialized(v->type()))->output()
                         : emitMaterialized(v, r, anchor, reasonFor(user), none, mid));
      }
      materialized[v] = branch->output();
      return branch->output();
    }
  }
  if (r.kind == Rep::Kind::Bounded && n && !visibleAt(n, at))
    n = hoistRead(n, r.count, at, reasonFor(user));
  if (r.kind == Rep::Kind::Bounded && (!n || !visibleAt(n, at)))
    n = nullptr; // not read yet at this point (or in a block \p at is not in)
  Value *out = emitMaterialized(v, r, anchor, reasonFor(user), n, mid);
  if (mask)
    countsOfMask.emplace(mask, n);
  materialized[v] = out;
  return out;
}

Value *Driver::materializeOnColdPath(const Value *v, const Rep &r, Node *user,
                                     const char *why) {
  Block *fallback = guardFallbackAround(user, v);
  // Reads go before the fallback's first node as it was before the first
  // of them, in the order they are made.
  Node *start = nullptr;
  if (fallback) {
    auto [it, fresh] = startOf.try_emplace(fallback, nullptr);
    if (fresh)
      it->second = fallback->param_node()->next();
    start = it->second;
  }
  if (!fallback || !definedBefore(r.value, start) ||
      (r.count && !definedBefore(r.count, start))) {
    torch::jit::WithInsertPoint guard(user);
    Value *n = nullptr;
    return emitMaterialized(v, r, user, why, n, false);
  }
  // In a guard's fallback, each value and count is read once, where the
  // fallback starts.
  Value *&out = materializedIn[{fallback, v}];
  if (out)
    return out;
  torch::jit::WithInsertPoint guard(start);
  Value *&n = countsIn[{fallback, r.count}];
  out = emitMaterialized(v, r, user, why, n, false);
  return out;
}

Value *Driver::emitMaterialized(const Value *v, const Rep &r,
                                const Node *anchor, const std::string &why,
                                Value *&n, bool mid) {
  if (r.kind == Rep::Kind::Lifted) {
    const char *op = v->type()->kind() == c10::TypeKind::IntType ? "aten::Int"
                     : v->type()->kind() == c10::TypeKind::BoolType
                         ? "aten::Bool"
                         : "aten::Float";
    Value *out = emit(graph, op, {r.value}, anchor);
    ctx.declined(out->node(), kRule, why);
    if (mid)
      midReads.insert(out->node());
    return out;
  }
  if (!n) {
    n = emit(graph, "aten::Int", {r.count}, anchor);
    ctx.declined(n->node(), kRule, why);
  }
  if (mid) // a shared read counts once
    midReads.insert(n->node());
  Value *out =
      emit(graph, "aten::slice", {r.value, 0, rc.constant(0), n, 1}, anchor);
  ctx.declined(out->node(), kRule, why);
  return out;
}

bool Driver::returnPadded(const Rep &r, const torch::jit::Use &use) {
  if (!ctx.options.paddedOutputs || r.kind != Rep::Kind::Bounded)
    return false;
  Node *user = use.user;
  if (!isOutputPosition(user))
    return false;
  torch::jit::WithInsertPoint guard(user);
  Value *rows = insertForm(graph, "neutral_padding", {r.value, r.count}, user)[0];
  returnPair(user, use.offset, rows, r.count, 0);
  return true;
}

/// Retypes the tuple \p node builds to its inputs' types.
static void retypeTuple(Node *node) {
  std::vector<c10::TypePtr> types;
  for (Value *in : node->inputs())
    types.push_back(in->type());
  node->output()->setType(c10::TupleType::create(types));
}

/// (\p r, its size along \p dim as an int64 0-d tensor on r's device),
/// made before \p at: a result the program computed whole, as the pair a
/// padded output is (no padding).
static Value *wholePair(torch::jit::Graph &graph, Value *r, int64_t dim,
                        Node *at) {
  torch::jit::WithInsertPoint guard(at);
  Value *n = emit(graph, "aten::size", {r, dim}, at);
  Value *count = emit(graph, "aten::scalar_tensor", {n}, at,
                      {{"dtype", static_cast<int64_t>(c10::ScalarType::Long)},
                       {"device", emit(graph, "prim::device", {r}, at)}});
  return graph.insertNode(graph.createTuple({r, count}))->output();
}

void Driver::returnPair(Node *user, size_t offset, Value *padded, Value *count,
                        int64_t dim) {
  torch::jit::WithInsertPoint guard(user);
  Value *pair = graph.insertNode(graph.createTuple({padded, count}))->output();
  user->replaceInput(offset, pair);
  if (user->kind() == c10::prim::TupleConstruct)
    retypeTuple(user);
  // In a version's block (specialize-*), the other blocks return the same
  // output as the program computes it: whole, with its size as the count.
  Node *ret = user->kind() == c10::prim::Return ? user
                                                : user->output()->uses()[0].user;
  Node *version = ret->owningBlock()->owningNode();
  if (!version)
    return;
  size_t index = ret == user ? offset : user->output()->uses()[0].offset;
  for (torch::jit::Block *b : version->blocks()) {
    if (b == ret->owningBlock())
      continue;
    Value *out = b->outputs()[index];
    if (ret == user) {
      if (!out->type()->cast<c10::TupleType>())
        b->replaceOutput(index, wholePair(graph, out, dim, b->return_node()));
      continue;
    }
    Node *tuple = out->node();
    if (tuple->kind() != c10::prim::TupleConstruct ||
        tuple->owningBlock() != b || out->uses().size() != 1) {
      // A tuple made elsewhere: its elements, and a tuple of them here.
      torch::jit::WithInsertPoint at(b->return_node());
      Node *parts = graph.insertNode(graph.createTupleUnpack(out));
      tuple = graph.insertNode(graph.createTuple(parts->outputs()));
      b->replaceOutput(index, tuple->output());
    }
    if (!tuple->input(offset)->type()->cast<c10::TupleType>()) {
      tuple->replaceInput(offset,
                          wholePair(graph, tuple->input(offset), dim, tuple));
      retypeTuple(tuple);
    }
  }
  version->output(index)->setType(ret->input(index)->type());
}

bool Driver::returnPaddedAlongDim(const Rep &r, const torch::jit::Use &use) {
  if (!ctx.options.paddedOutputs || r.kind != Rep::Kind::Bounded ||
      use.offset != 0)
    return false;
  Node *view = use.user;
  // Only leading-selections' movedim back: a transpose the program wrote
  // of selected rows is returned padded along dim 0 of what it selected,
  // cut as before.
  bool moves = view->kind() == c10::aten::movedim && view->inputs().size() == 3 &&
               constantInt(view->input(1)) == 0 && constantInt(view->input(2));
  if (!moves || view->outputs().size() != 1 ||
      view->output()->uses().size() != 1 ||
      !isOutputPosition(view->output()->uses()[0].user))
    return false;
  // `edge_index[:, mask]` (leading-selections: movedim(movedim(x, 1, 0)
  // [mask], 0, 1)) comes back padded along dim 1.
  const torch::jit::Use out = view->output()->uses()[0];
  torch::jit::WithInsertPoint guard(out.user);
  Value *rows = insertForm(graph, "neutral_padding", {r.value, r.count}, out.user)[0];
  Node *moved = graph.insertNode(graph.createClone(view, [&](Value *v) {
    return v == view->input(0) ? rows : v;
  }));
  int64_t dim = *constantInt(view->input(2));
  returnPair(out.user, out.offset, moved->output(), r.count, dim);
  return true;
}

Value *Driver::materializeList(const Rep &r, Node *user) {
  torch::jit::WithInsertPoint at(user);
  bool mid = noteUse(user);
  std::string why = mid ? reasonFor(user)
                        : "materialized: it is returned (each element cut to "
                          "its count, the counts copied to the host at once)";
  Value *n = emit(graph, "aten::len", {r.value}, user);
  // Every count copied to the host at once (one sync; a read per element
  // would sync once per element), where there is one (stack takes none).
  Node *copy = nullptr;
  Value *onHost = emitIf(
      graph, emit(graph, "aten::gt", {n, 0}, user), user,
      [&] {
        Value *stacked = emit(graph, "aten::stack", {r.count, 0}, user);
        Value *copied = emit(graph, "aten::cpu", {stacked}, user);
        copy = copied->node();
        return copied;
      },
      [&] {
        return emit(graph, "aten::zeros",
                    {graph.insertConstant(std::vector<int64_t>{0})}, user,
                    {torch::jit::NamedValue(
                        "dtype", static_cast<int64_t>(c10::ScalarType::Long))});
      });
  ctx.declined(copy, kRule, why);
  if (mid)
    midReads.insert(copy);
  bool sizes = r.kind == Rep::Kind::SizeList;
  Value *out = graph
                   .insertNode(graph.createList(
                       sizes ? c10::TypePtr(c10::IntType::get())
                             : c10::TypePtr(c10::TensorType::get()),
                       {}))
                   ->output();
  Node *loop = graph.insertNode(
      graph.create(c10::prim::Loop, {n, graph.insertConstant(true)}, 0));
  Block *body = loop->addBlock();
  Value *i = body->addInput()->setType(c10::IntType::get());
  torch::jit::WithInsertPoint in(body);
  Value *padded = emit(graph, "aten::__getitem__", {r.value, i}, user);
  Value *count = emit(graph, "aten::select", {onHost, 0, i}, user);
  Value *rows = emit(graph, "aten::Int", {count}, user);
  Value *cut = sizes ? rows
                    : emit(graph, "aten::slice",
                           {padded, 0, rc.constant(0), rows, 1}, user);
  emit(graph, "aten::append", {out, cut}, user);
  body->registerOutput(graph.insertConstant(true));
  return out;
}

void Driver::materializeRest() {
  for (Value *v : rc.repOrder) {
    const Rep r = rc.reps.at(v);
    if (r.kind == Rep::Kind::WhereList || r.kind == Rep::Kind::RandPerm)
      continue; // their remaining uses keep the original op
    std::vector<torch::jit::Use> uses = v->uses();
    for (const torch::jit::Use &use : uses) {
      if (rc.absorbed.count(use.user) || returnPadded(r, use) ||
          returnPaddedAlongDim(r, use))
        continue;
      if (r.kind == Rep::Kind::BoundedList || r.kind == Rep::Kind::SizeList) {
        if (rc.listUsers.at(v).count(use.user)) // not the rewrite's own
          use.user->replaceInput(use.offset, materializeList(r, use.user));
        continue;
      }
      const char *cold = coldPath(use.user, v);
      use.user->replaceInput(use.offset,
                             cold ? materializeOnColdPath(v, r, use.user, cold)
                                  : materialize(v, r, use.user));
    }
  }
}

} // namespace bound

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

namespace {

/// Each island's trial analyses and checkpoints the whole graph: islands
/// times nodes above this and the graph is decided as a whole (one trial),
/// not island by island. Torchvision's detectors (5k nodes, up to 40
/// islands) are decided island by island; the 12k-node benchmark graph
/// (600 islands) as a whole.
constexpr size_t kIslandTrialNodes = size_t(1) << 18;

/// Trials of one island: the whole, then stopped before the first use that
/// materialized mid-way, at most this many times in all.
constexpr size_t kCutoffTrials = 3;

} // namespace

bool boundShapes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  if (analysis.findings.empty())
    return false; // nothing data-dependent: nothing to try
  // Materializations cost a sync each. The graph's dynamic islands are
  // independent (no def-use edge joins two): each is bounded in place under
  // a checkpoint, and kept only where the policy allows it, so one island
  // with no bounded form leaves the others free. Past kIslandTrialNodes
  // the graph is one trial, as a whole (each costs an analysis).
  RewriteCost current = rewriteCost(analysis);
  std::vector<std::vector<Node *>> islands =
      bound::rootsByIsland(*graph, analysis);
  if (islands.size() * analysis.numNodes > kIslandTrialNodes) {
    std::vector<Node *> all;
    for (const auto &island : islands)
      all.insert(all.end(), island.begin(), island.end());
    islands = {std::move(all)};
  }
  bool changed = false;
  // The random orders the kept islands drew: a later island's picks from a
  // mask disjoint from theirs share them (RuleContext::randomOrders).
  std::vector<bound::RuleContext::RandomOrder> randomOrders;
  for (size_t k = 0; k < islands.size(); ++k) {
    std::unordered_set<const Node *> only(islands[k].begin(), islands[k].end());
    const std::unordered_set<const Node *> *filter =
        islands.size() > 1 ? &only : nullptr;
    GraphCheckpoint checkpoint(*graph);
    PassContext before = ctx;
    auto restore = [&] {
      checkpoint.restore();
      ctx = before;
    };
    // A rewrite the policy refuses is tried again, up to kCutoffTrials
    // times, stopping before the first use that materialized mid-way:
    // its values are read there instead of further on, where (past an if
    // on a lifted bool, say) they would cost more reads. RetinaNet's
    // per-level detections then stay bounded up to batched_nms.
    const Node *cutoff = nullptr;
    std::optional<bound::Driver> driver;
    std::optional<DeadNodes> dead;
    RewriteCost after;
    std::string why; // the first trial's reason, when the policy refused it
    // The trials of this island, kept where the policy allows one (the
    // graph is then rewritten): whether one was.
    auto trials = [&](bool indexedLists) {
      cutoff = nullptr;
      // The trials with guards on bounds (guardIfByBound), then, where the
      // policy refused them all, without: a guard's fallback may move where
      // a later trial stops (Faster R-CNN's RPN).
      bool boundGuards = true;
      // Padded returned dicts, and both branches of ifs on counts, unless a
      // trial's walk vetoed them.
      bool paddedDicts = true;
      bool bothBranches = true;
      std::pair<Node *, std::string> vetoedIf; // the if that refused both
      for (size_t attempt = 0;; ++attempt) {
        size_t midSyncPoints = 0;
        driver.emplace(*graph, ctx, ctx.facts.analysis(graph),
                       ctx.facts.aliases(graph), filter, cutoff, boundGuards,
                       paddedDicts, bothBranches, indexedLists, vetoedIf);
        driver->randomOrders() = randomOrders;
        bool ran = driver->run(midSyncPoints);
        if (!ran) {
          bool withoutBoth = driver->vetoedBothBranches() && bothBranches;
          if (withoutBoth)
            vetoedIf = driver->whyNotBoth();
          bool again =
              withoutBoth || (driver->vetoedPaddedDicts() && paddedDicts);
          restore(); // what the rules recorded while declining goes too
          if (!again)
            return false;
          (withoutBoth ? bothBranches : paddedDicts) = false;
          attempt = size_t(-1);
          cutoff = nullptr;
          continue;
        }
        // The cost of the graph as it will be once dead code is erased: what
        // the rewrite replaced is still there, dead, until it is kept.
        ctx.facts.invalidate();
        const AnalysisResult &trial = ctx.facts.analysis(graph);
        dead = findDeadNodes(*graph, driver->replacedWriters());
        after = {bound::liveSyncPoints(trial, dead->all), midSyncPoints};
        if (rewriteAllowed(current, after))
          return true;
        if (why.empty())
          why = "bounded, the graph would reach the host at " +
                std::to_string(after.syncPoints) + " points instead of " +
                std::to_string(current.syncPoints) +
                (after.syncPoints == current.syncPoints
                     ? ", " + std::to_string(after.midSyncPoints) +
                           " of them mid-computation"
                     : "") +
                " (" + bound::materializationSummary(trial, ctx, dead->all) + ")";
        const Node *next = driver->firstMidUse();
        restore();
        bool exhausted = attempt + 1 >= kCutoffTrials || !next ||
                         !bound::inGraph(*graph, next);
        if (!exhausted && next->kind() == c10::prim::If)
          next = bound::conditionStart(next); // on the graph as it was
        exhausted |= cutoff && !next->isBefore(cutoff);
        if (exhausted) {
          if (!boundGuards)
            return false;
          boundGuards = false; // again, from the whole
          attempt = size_t(-1);
          cutoff = nullptr;
          continue;
        }
        cutoff = next;
      }
    };
    // Lists kept padded and read by index (per-image proposals) stay
    // padded only as far as rules follow them; where the trial still reads
    // mid-way, cutting the lists where they are filled may cost fewer reads
    // (one per list): that is tried too, and the cheaper kept (the padded
    // one on a tie).
    bool accepted = trials(true);
    if (accepted && driver->madeIndexedLists() && after.midSyncPoints > 0) {
      RewriteCost withLists = after;
      restore();
      bool cut = trials(false);
      bool better = cut && (after.syncPoints < withLists.syncPoints ||
                            (after.syncPoints == withLists.syncPoints &&
                             after.midSyncPoints < withLists.midSyncPoints));
      if (!better) {
        if (cut)
          restore();
        accepted = trials(true);
      }
    }
    if (!accepted) {
      if (!why.empty())
        bound::declineAll(ctx, islands[k], why);
      continue;
    }
    // The roots past the cutoff are an island of their own, tried next on
    // the values read before it (batched_nms's NMS on the boxes read
    // there); the reason the whole was refused stays with them in case
    // that trial keeps them too.
    if (cutoff) {
      std::vector<Node *> rest;
      for (Node *root : islands[k])
        if (!root->isBefore(cutoff)) {
          ctx.declined(root, bound::kRule,
                       "bounded up to '" +
                           std::string(cutoff->kind().toQualString()) +
                           "', not past it: whole, " + why);
          rest.push_back(root);
        }
      if (!rest.empty())
        islands.insert(islands.begin() + k + 1, std::move(rest));
    }
    // What the later islands carry over (their roots, the random orders
    // this one drew) is judged before anything is erased: an erased node
    // is freed memory, and its address may soon hold a new node. Whatever
    // the rewrite replaces, or the folding below could erase (a node of
    // constant operands only), is dropped.
    if (k + 1 < islands.size()) {
      std::unordered_set<const Node *> going(dead->all.begin(), dead->all.end());
      going.insert(driver->replacedWriters().begin(),
                   driver->replacedWriters().end());
      auto stays = [&](const Node *n) {
        return !going.count(n) &&
               (n->inputs().empty() ||
                !std::all_of(n->inputs().begin(), n->inputs().end(),
                             [](const Value *in) {
                               return in->node()->kind() == c10::prim::Constant;
                             }));
      };
      // An if's or a loop's result may be erased unused (eraseJoinedResults).
      auto valueStays = [&](const Value *v) {
        const Node *n = v->node();
        return n->kind() == c10::prim::Param ||
               (stays(n) && n->kind() != c10::prim::If &&
                n->kind() != c10::prim::Loop);
      };
      for (size_t j = k + 1; j < islands.size(); ++j)
        islands[j].erase(std::remove_if(islands[j].begin(), islands[j].end(),
                                        [&](Node *n) { return !stays(n); }),
                         islands[j].end());
      randomOrders = std::move(driver->randomOrders());
      randomOrders.erase(
          std::remove_if(randomOrders.begin(), randomOrders.end(),
                         [&](const bound::RuleContext::RandomOrder &drawn) {
                           return !valueStays(drawn.order) ||
                                  !std::all_of(drawn.masks.begin(),
                                               drawn.masks.end(), valueStays);
                         }),
          randomOrders.end());
      // Their sizes and strides are made again in the next island, where it
      // needs them.
      for (bound::RuleContext::RandomOrder &drawn : randomOrders) {
        drawn.sizes = nullptr;
        drawn.strides.clear();
      }
    }
    for (Node *writer : driver->replacedWriters())
      writer->destroy(); // reported when replaced
    // What the rewrites replaced, converted ifs included, is dead: found
    // above, and nothing changed since but the writers' destruction.
    eraseNodes(dead->order, ctx, bound::kRule);
    driver->eraseJoinedResults();
    // The forms branch on host facts (None arguments, ranks): fold them.
    // Those are immutable values, and normalize folded everything else the
    // graph had, so no alias database is needed here.
    torch::jit::ConstantPropagationImmutableTypes(graph);
    ctx.facts.invalidate();
    current = after;
    changed = true;
  }
  return changed;
}

} // namespace staticify
