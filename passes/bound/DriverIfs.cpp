//===- DriverIfs.cpp - The driver's ifs on lifted and host bools ----------===//
//
// An `if` on a lifted bool: both branches run and where() selects
// (convertIf), or, where the rules make the branches bounded, both run
// hoisted and the device picks each result (selectBothBranches,
// BothBranches.cpp). An `if` on a host bool whose branches return bounded
// rows returns them padded, with a count (joinBranches).
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Driver.h"

#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/LiftScalars.h"
#include "passes/Selection.h"

namespace staticify::bound {

bool Driver::convertIf(Node *node) {
  Rep *cond = rc.lifted(node->input(0));
  if (!cond || isDataAssert(node))
    return false;
  // x[k] of bounded rows at a constant k (`int(nonzero[0])` under `if
  // nonzero.numel() > 0`) becomes row_at, which reads zeros past the live
  // rows where the original raises: it cannot raise in the branch not taken.
  // Of an if that returns numbers only: one that returns tensors runs both
  // branches on the padded rows (selectBothBranches).
  bool numbers = std::all_of(
      node->outputs().begin(), node->outputs().end(),
      [](const Value *v) { return liftedDType(v->type()).has_value(); });
  auto rowAt = [&](const Node *n) {
    return numbers && n->kind() == c10::aten::select &&
           n->inputs().size() == 3 && rc.bounded(n->input(0)) &&
           constantInt(n->input(1)) == 0 && constantInt(n->input(2));
  };
  std::string why = unconvertibleReason(node, rc.aliases, &rc.analysis, rowAt);
  for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i) {
    Value *a = node->blocks()[0]->outputs()[i];
    Value *b = node->blocks()[1]->outputs()[i];
    if (liftedDType(node->output(i)->type()))
      continue; // an int, float or bool: selected as a 0-d tensor
    if (!isTensor(node->output(i)))
      why = "the if returns a value that is neither a tensor nor a number";
    else if (rc.analysis.info(a).shape != ShapeDep::Static ||
             rc.analysis.info(b).shape != ShapeDep::Static)
      why = "a branch's tensor has a data-dependent shape";
  }
  if (!why.empty()) {
    ctx.declined(node, kRule, why);
    return false;
  }
  Value *c = cond->value;
  shieldBranches(graph, node, c, &rc.analysis);
  std::vector<Node *> hoisted;
  for (Block *b : node->blocks())
    for (Node *n : b->nodes())
      hoisted.push_back(n);
  auto outs = hoistBranches(node);
  for (Node *n : hoisted)
    visit(n);
  torch::jit::WithInsertPoint guard(node);
  Value *device = rc.deviceOf(c, node);
  for (size_t i = 0; i < outs.size(); ++i) {
    auto [a, b] = outs[i];
    Value *out = node->output(i);
    if (isTensor(out)) {
      // Of static shapes not provably congruent, behind a host-static
      // guard, as if-convert does.
      rc.replaceStatic(out, selectBranch(graph, c, a, b, node));
      continue;
    }
    Rep r(Rep::Kind::Lifted);
    r.range = rc.join(rc.rangeOf(a), rc.rangeOf(b), node);
    r.value = emit(
        graph, "aten::where",
        {c, rc.tensorOf(a, device, node), rc.tensorOf(b, device, node)}, node);
    rc.setRep(out, r);
  }
  ctx.rewrote(node, "if-convert");
  changed = true;
  return true;
}

bool Driver::selectBothBranches(Node *node) {
  Rep *cond = rc.lifted(node->input(0));
  if (!rc.bothBranches || !cond ||
      cond->value->type()->kind() != c10::TypeKind::TensorType ||
      node->hasAttribute(guardAttr()) || node->outputs().empty() ||
      matchEmptyEarlyReturn(node, rc)) // selectEmptyBranch's, cheaper
    return false;
  std::string why = whyNotBothBranches(node, rc);
  if (!why.empty()) {
    bothWhy = {node, "both branches cannot run: " + why};
    ctx.declined(node, kRule, bothWhy.second);
    return false;
  }
  // The original if, for the guards' fallbacks: a copy made before the
  // walk, inserted once a guard takes it.
  Node *original = graph.createClone(node, [](Value *v) { return v; });
  capBranchRows(node, rc);
  std::unordered_set<const Node *> originals;
  std::vector<Node *> hoisted;
  for (Block *b : node->blocks())
    for (Node *n : collectNodes(b)) {
      originals.insert(n);
      if (n->owningBlock() == b)
        hoisted.push_back(n);
    }
  Node *start = node->prev();
  if (Node *test = node->input(0)->node();
      is(test, "aten::gt") && constantInt(test->input(1)) == 0)
    for (Node *n : collectNodes(node->blocks()[0]))
      rc.hoistedWherePositive[n] = test->input(0);
  hoistBranches(node);
  for (Node *n : hoisted)
    visit(n);
  why = whyNotSafeUnconditionally(start->next(), node, originals, rc);
  for (size_t i = 0; why.empty() && i < node->outputs().size(); ++i) {
    Value *a = node->blocks()[0]->outputs()[i];
    if (rc.thenStandsForBoth.count(node->output(i))) {
      // Its rows stand for the else branch's, which are as many: none.
      Rep *rows = rc.bounded(a);
      Rep *n = rc.lifted(node->input(0)->node()->input(0));
      if (!rows || !n || !rc.sameCount(rows->count, n->value))
        why = "the then branch's result is not rows the test counts";
      continue;
    }
    if (!canPick(a, node->blocks()[1]->outputs()[i], rc))
      why = "a result is not, in both, bounded rows or a static tensor of "
            "one known rank";
  }
  if (!why.empty()) {
    // The trial is run again without; the reason outlives it.
    bothWhy = {node, "both branches cannot run: " + why};
    original->destroy();
    vetoedBoth = true;
    return true;
  }
  std::vector<Node *> guards;
  std::unordered_map<Value *, Value *> renamed;
  nestAfterGuards(start->next(), node, guards, renamed, rc);
  std::vector<std::pair<Value *, Value *>> outs;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    auto name = [&](Value *v) {
      auto it = renamed.find(v);
      return it == renamed.end() ? v : it->second;
    };
    outs.emplace_back(name(node->blocks()[0]->outputs()[i]),
                      name(node->blocks()[1]->outputs()[i]));
  }
  for (Block *b : node->blocks())
    while (!b->outputs().empty())
      b->eraseOutput(b->outputs().size() - 1);
  // The picks, where the innermost guard's static code ends.
  std::vector<Picked> results;
  {
    torch::jit::WithInsertPoint at(
        guards.empty() ? node : guards.back()->blocks()[0]->return_node());
    for (size_t i = 0; i < outs.size(); ++i) {
      auto [a, b] = outs[i];
      if (rc.thenStandsForBoth.count(node->output(i))) {
        const Rep &rows = *rc.bounded(a);
        results.push_back({rows.value, rows.count, rows.isIndex, rows.is1D});
        continue;
      }
      results.push_back(pick(cond->value, a, b, node, rc));
    }
  }
  returnPicks(guards, original, results, node, rc);
  if (guards.empty())
    original->destroy();
  // The if's results are the picks: bounded by padded rows and a count,
  // or static. The if, now empty, stays as their definition (its results
  // keep what the analysis knows of them), on a constant test.
  {
    torch::jit::WithInsertPoint at(node);
    node->replaceInput(0, graph.insertConstant(true));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const Picked &r = results[i];
    for (Block *b : node->blocks())
      b->registerOutput(r.padded);
    if (auto it = rc.thenStandsForBoth.find(node->output(i));
        it != rc.thenStandsForBoth.end())
      RankSnapshot::assume(node->output(i), it->second);
    if (r.count)
      rc.setBounded(node->output(i), r.padded, r.count, r.isIndex, r.is1D);
    else
      rc.replaceStatic(node->output(i), r.padded);
  }
  ctx.rewrote(node, kRule);
  changed = true;
  return true;
}

std::optional<Driver::BranchRows> Driver::branchRows(Value *v, Block *block,
                                                     bool fallback) {
  if (Rep *r = rc.bounded(v))
    return BranchRows{r->value, r->count, r->isIndex, r->is1D};
  if (!isTensor(v) ||
      (!fallback && rc.analysis.info(v).shape != ShapeDep::Static))
    return std::nullopt;
  torch::jit::WithInsertPoint guard(block->return_node());
  return BranchRows{v, rc.rowsOf(v, v->node()), rc.isIndex(v),
                    knownRank(v, &rc.analysis) == 1};
}

/// The operands a and b of a select's guard's result \p i (selectBranch:
/// `where(c, a, b)` where the host finds their shapes, dtypes and devices
/// agree, else the original if, yielding a or b): its fallback picks one of
/// the two values the fast block selects between.
static std::optional<std::pair<Value *, Value *>> selectedOperands(Node *node,
                                                                   size_t i) {
  if (!node->hasAttribute(guardAttr()) || node->blocks().size() != 2)
    return std::nullopt;
  Node *where = node->blocks()[0]->outputs()[i]->node();
  Node *pick = node->blocks()[1]->outputs()[i]->node();
  if (where->kind() != c10::aten::where || where->inputs().size() != 3 ||
      pick->kind() != c10::prim::If || pick->outputs().size() != 1)
    return std::nullopt;
  Value *a = where->input(1), *b = where->input(2);
  Value *x = pick->blocks()[0]->outputs()[0], *y = pick->blocks()[1]->outputs()[0];
  if (x != a || y != b)
    return std::nullopt;
  return std::make_pair(a, b);
}

void Driver::joinBranches(Node *node) {
  if (!writable(node))
    return;
  // The results it had: those added here are padded rows and counts.
  const size_t results = node->outputs().size();
  // The counts joined so far, with the branch counts each joins: results
  // that have one count in each branch (selections by one mask there,
  // kornia's match_mnn) keep one count after the if too.
  struct Joined {
    Value *then, *otherwise, *count;
  };
  std::vector<Joined> counts;
  for (size_t i = 0; i < results; ++i) {
    Block *then = node->blocks()[0], *otherwise = node->blocks()[1];
    Value *a = then->outputs()[i], *b = otherwise->outputs()[i];
    if (!rc.bounded(a) && !rc.bounded(b))
      continue;
    auto operands = selectedOperands(node, i);
    InsertedBefore insertedThen(then->return_node());
    InsertedBefore insertedOtherwise(otherwise->return_node());
    std::optional<BranchRows> ra = branchRows(a, then, false);
    std::optional<BranchRows> rb =
        ra ? branchRows(b, otherwise, node->hasAttribute(guardAttr()))
           : std::nullopt;
    if (!ra || !rb) {
      insertedThen.rollback();
      insertedOtherwise.rollback();
      continue; // a branch's rows are cut where they leave the if
    }
    // The result's every use is rewritten or materialized from the new
    // results, so its branches return padded rows too rather than cut
    // their rows to a count.
    then->return_node()->replaceInput(i, ra->padded);
    otherwise->return_node()->replaceInput(i, rb->padded);
    then->registerOutput(ra->padded);
    otherwise->registerOutput(rb->padded);
    // The padded rows' type: both branches' rows, which are tensors where
    // the result is an Optional[Tensor] that the branches refine (PyG's
    // `if edge_attr is not None: edge_attr = cat([edge_attr[mask], ...])`),
    // and the count's slice takes no Optional.
    c10::optional<c10::TypePtr> rows =
        c10::unifyTypes(ra->padded->type(), rb->padded->type());
    Value *padded =
        node->addOutput()->setType(rows ? *rows : node->output(i)->type());
    // One count both branches keep, made before the if (FCOS's
    // `if self.normalize_by_size: rel_codes = rel_codes * sizes`): the
    // result keeps it, and with it what it shares with other values.
    Value *count = ra->count;
    // A select's guard picks a or b in its fallback: where the two share
    // one count made before the if, the result has it either way (the
    // fallback's rows are a's or b's, cut to that count).
    Rep *sa = operands ? rc.bounded(operands->first) : nullptr;
    Rep *sb = operands ? rc.bounded(operands->second) : nullptr;
    bool oneCount = sa && sb && rc.sameCount(sa->count, sb->count) &&
                    rc.sameCount(sa->count, ra->count) &&
                    !encloses(then, ra->count->node()) &&
                    !encloses(otherwise, ra->count->node());
    if (!oneCount && (!rc.sameCount(ra->count, rb->count) ||
                      encloses(then, ra->count->node()) ||
                      encloses(otherwise, ra->count->node()))) {
      auto twin = std::find_if(counts.begin(), counts.end(), [&](const Joined &j) {
        return rc.sameCount(j.then, ra->count) &&
               rc.sameCount(j.otherwise, rb->count);
      });
      if (twin != counts.end()) {
        count = twin->count;
      } else {
        then->registerOutput(ra->count);
        otherwise->registerOutput(rb->count);
        count = node->addOutput()->setType(ra->count->type());
        counts.push_back({ra->count, rb->count, count});
      }
    }
    rc.setBounded(node->output(i), padded, count, ra->isIndex && rb->isIndex,
                  ra->is1D && rb->is1D);
    if (joined.empty() || joined.back() != node)
      joined.push_back(node);
    ctx.rewrote(node, kRule);
    changed = true;
  }
}

} // namespace staticify::bound
