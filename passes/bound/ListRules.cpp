//===- ListRules.cpp - Lists of bounded rows, one element per image -------===//
//
// torchvision's two-stage detectors keep per-image results in lists: the
// RPN appends each image's proposals, selected by score and NMS, to a list
// (`final_boxes.append(boxes)`) that the RoI heads read element by element,
// concatenate (`torch.cat(proposals)`) and measure. A list of tensors whose
// only writes are appends, read only by index, by len and by cat along
// dim 0, keeps each element's padded rows, with a list of counts beside it
// that each append extends in step:
//
//   L = []                      L = [];  C = []
//   L.append(x)   (x bounded)   L.append(padded(x));  C.append(count(x))
//   L[i]                        bounded: L[i] padded rows, C[i] its count
//   len(L)                      unchanged
//   torch.cat(L)                cat_rows(L, C): the live rows of each, in order
//
// A static element counts all its rows. A list built by a loop over every
// element of another, with one unconditional append per element of rows
// counted by that element's count (`for i, b in enumerate(boxes):
// temp.append(full_like(b[:, :1], i))`, as `_convert_to_roi_format` does),
// shares the other's counts, and so does a sibling filled in step with one
// (its one append right after the other's one, in the same block, of rows
// of the same count: RoIHeads' all_boxes, all_scores and all_labels), so
// that reads of both at one index read one count; two cats of lists with
// the same counts in the
// same order, made once every append is done, share their count (RetinaNet's
// per-level boxes, scores and labels; `cat([ids, concat_boxes], dim=1)`), so
// their rows line up.
//
// A use no rule absorbed (the return, past a trial's cutoff, in a guard's
// fallback) reads a copy of the list with each element cut to its count,
// every count copied to the host at once: one sync (Driver::materializeList).
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/BoundedForms.h"
#include "passes/GraphUtils.h"
#include "passes/Selection.h"

#include <algorithm>
#include <limits>

namespace staticify::bound {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// \p list's users now, when it gets its representation: the uses that
/// materialize it if no rule takes them (the rewrite's own use it padded).
void recordUsers(Value *list, RuleContext &rc) {
  std::unordered_set<const Node *> &users = rc.listUsers[list];
  for (const torch::jit::Use &use : list->uses())
    users.insert(use.user);
}

/// Whether every append of \p known to its list has run, each time, before
/// \p at reads the list: each is before it, and a loop around both also
/// holds the list's definition (a list made anew each iteration: RetinaNet's
/// per-level lists in its loop over images).
bool allDoneBefore(const RuleContext::ListCounts &known, const Node *at) {
  for (const Node *a : known.appends) {
    if (!a->isBefore(at))
      return false;
    for (const Node *n = a->owningBlock()->owningNode(); n;
         n = n->owningBlock()->owningNode())
      if (n->kind() == c10::prim::Loop && encloses(n->blocks()[0], at) &&
          !encloses(n->blocks()[0], known.list))
        return false;
  }
  return true;
}

/// Why a use of list \p list, made empty, keeps no element padded: it is
/// neither an append (whose result nothing reads), an index, len, nor a
/// cat along dim 0. Empty where none is.
std::string whyNotPaddedList(const Value *list, const RuleContext &rc) {
  for (const torch::jit::Use &use : list->uses()) {
    const Node *user = use.user;
    if (use.offset == 0 &&
        ((is(user, "aten::append") && !user->output()->hasUses()) ||
         (is(user, "aten::__getitem__") && rc.indexedLists) ||
         is(user, "aten::len") ||
         (is(user, "aten::cat") && constantInt(user->input(1)) == 0)))
      continue;
    // Returned: cut there, every count copied to the host at once
    // (Driver::materializeList; a CTC decoder's hypotheses).
    if (isOutputPosition(user) || leavesToReturn(user))
      continue;
    return "the list it is appended to is read by '" +
           std::string(user->kind().toQualString()) +
           "' (a list whose elements stay padded is read by index, len and "
           "cat along dim 0 only)";
  }
  return "";
}

/// The count list of another bounded list that \p list copies in step:
/// \p append, its one append, is unconditional in a loop over every element
/// of the other (trip count len(other), or enumerate's min(INT64_MAX,
/// len(other))) that never breaks, of rows counted by the other's count at
/// the loop's index; every append to the other is done before the loop, and
/// nothing else reads \p list before the loop ends. nullptr otherwise.
Value *mirroredCounts(Value *list, Node *append, Value *elementCount,
                      RuleContext &rc) {
  Block *body = append->owningBlock();
  Node *loop = body->owningNode();
  if (!loop || loop->kind() != c10::prim::Loop ||
      !list->node()->isBefore(loop) || constantBool(loop->input(1)) != true ||
      constantBool(body->outputs()[0]) != true)
    return nullptr;
  Node *item = elementCount->node();
  if (!is(item, "aten::__getitem__") || item->input(1) != body->inputs()[0])
    return nullptr;
  Value *counts = item->input(0);
  auto known = rc.listCounts.find(counts);
  if (known == rc.listCounts.end() || !allDoneBefore(known->second, loop))
    return nullptr;
  auto lengthOfOther = [&](Value *n) {
    Node *len = n->node();
    Rep *other = is(len, "aten::len") ? rc.rep(len->input(0)) : nullptr;
    return other &&
           (other->kind == Rep::Kind::BoundedList ||
            other->kind == Rep::Kind::SizeList) &&
           other->count == counts;
  };
  Value *trip = loop->input(0);
  bool everyElement = lengthOfOther(trip);
  if (!everyElement && is(trip->node(), "prim::min") &&
      trip->node()->inputs().size() == 1 &&
      trip->node()->input(0)->node()->kind() == c10::prim::ListConstruct) {
    bool sawLength = false, onlyUnbounded = true;
    for (Value *n : trip->node()->input(0)->node()->inputs()) {
      if (lengthOfOther(n))
        sawLength = true;
      else if (constantInt(n) != std::numeric_limits<int64_t>::max())
        onlyUnbounded = false;
    }
    everyElement = sawLength && onlyUnbounded;
  }
  if (!everyElement)
    return nullptr;
  for (const torch::jit::Use &use : list->uses())
    if (use.user != append && !loop->isBefore(use.user))
      return nullptr;
  return counts;
}

/// The count list of a sibling of \p list that \p append, its one append,
/// keeps in step with: a bounded list made in the same block, whose one
/// append comes earlier in the same block with rows of the same count, and
/// no use of \p list in between (RoIHeads.postprocess_detections'
/// `all_boxes.append(boxes); all_scores.append(scores); ...`, each image's
/// rows gathered by one `keep`). Reads of the siblings at one index then
/// share one count. nullptr where there is none.
Value *siblingCounts(Value *list, Node *append, Value *elementCount,
                     RuleContext &rc) {
  Node *def = list->node();
  Value *found = nullptr;
  const Node *foundAppend = nullptr;
  for (auto &[counts, known] : rc.listCounts) {
    if (known.appends.size() != 1 || known.key.size() != 1 || !known.list)
      continue;
    Node *first = known.appends[0];
    Value *sibling = first->input(0);
    Rep *r = rc.rep(sibling);
    if (!r || r->kind != Rep::Kind::BoundedList || r->count != counts ||
        known.list->owningBlock() != def->owningBlock() ||
        first->owningBlock() != append->owningBlock() ||
        !first->isBefore(append) ||
        !rc.sameCount(known.key[0], elementCount))
      continue;
    size_t siblingAppends = 0;
    for (const torch::jit::Use &u : sibling->uses())
      siblingAppends += is(u.user, "aten::append");
    bool between = std::any_of(
        list->uses().begin(), list->uses().end(), [&](const torch::jit::Use &u) {
          return u.user != append && first->isBefore(u.user) &&
                 u.user->isBefore(append);
        });
    // The nearest such sibling, so that the choice is the program's, not
    // the map's order.
    if (siblingAppends == 1 && !between &&
        (!foundAppend || foundAppend->isBefore(first))) {
      found = const_cast<Value *>(counts);
      foundAppend = first;
    }
  }
  return found;
}

/// One append to bounded list \p l: its element's padded rows go in the
/// list and its count (all its rows, for a tensor no rule bounds) in the
/// counts, in step.
void appendInStep(Node *a, const Rep &l, RuleContext &rc) {
  torch::jit::WithInsertPoint at(a);
  Value *e = a->input(1);
  Rep *r = rc.bounded(e);
  Value *count = r ? r->count : rc.rowsOf(e, a);
  if (r)
    a->replaceInput(1, r->value);
  emit(rc.graph, "aten::append", {l.count, count}, a);
  RuleContext::ListCounts &known = rc.listCounts[l.count];
  known.key.push_back(count);
  known.appends.push_back(a);
  rc.absorb(a);
}

/// `L.append(x)` of bounded x, to an empty list of tensors: L keeps its
/// elements' padded rows, with their counts beside them (or, where L
/// copies another's counts, those). The appends before this one are
/// rewritten here; those after it when the walk reaches them, so every
/// one must be walked and its element must have rows: one of rank >= 1,
/// or of rows that only the data sizes. Every check comes before the first
/// change.
RuleResult append(Node *node, RuleContext &rc) {
  Value *list = node->input(0);
  if (Rep *l = rc.rep(list); l && l->kind == Rep::Kind::BoundedList) {
    if (!rc.absorbed.count(node))
      appendInStep(node, *l, rc);
    return RuleResult::applied();
  }
  Rep *x = rc.bounded(node->input(1));
  Node *def = list->node();
  if (!x || rc.rep(list) || def->kind() != c10::prim::ListConstruct ||
      !def->inputs().empty() ||
      list->type()->expectRef<c10::ListType>().getElementType()->kind() !=
          c10::TypeKind::TensorType)
    return RuleResult::notApplicable();
  if (std::string why = whyNotPaddedList(list, rc); !why.empty())
    return RuleResult::declined(why);
  std::vector<Node *> appends;
  bool allIndex = true, all1D = true;
  bool readByIndex = std::any_of(
      list->uses().begin(), list->uses().end(),
      [](const torch::jit::Use &u) { return is(u.user, "aten::__getitem__"); });
  for (const torch::jit::Use &use : list->uses()) {
    if (!is(use.user, "aten::append"))
      continue;
    Node *a = use.user;
    Value *e = a->input(1);
    Rep *r = rc.rep(e);
    if (r && r->kind != Rep::Kind::Bounded)
      return RuleResult::declined();
    bool later = node->isBefore(a);
    if (inGuardFallback(a) ||
        (later && rc.cutoff && !a->isBefore(rc.cutoff)))
      return RuleResult::declined(
          "another append to the list is one the walk does not reach");
    // A tensor no rule bounds counts its rows, size(0): of a 0-d one that
    // raises, as cat does, but an element read back by index must not.
    std::optional<int64_t> rank = knownRank(e, &rc.analysis);
    if (!r && rank.value_or(0) < 1 && readByIndex &&
        !(later && rc.analysis.info(e).shape == ShapeDep::Leading))
      return RuleResult::declined(
          "another element appended to the list may have no rows");
    appends.push_back(a);
    allIndex &= rc.isIndex(e);
    all1D &= r ? r->is1D : rank == 1;
  }
  std::sort(appends.begin(), appends.end(),
            [](const Node *a, const Node *b) { return a->isBefore(b); });

  Rep l(Rep::Kind::BoundedList);
  l.value = list;
  l.isIndex = allIndex;
  l.is1D = all1D;
  if (appends.size() == 1) {
    l.count = mirroredCounts(list, node, x->count, rc);
    if (!l.count)
      l.count = siblingCounts(list, node, x->count, rc);
  }
  if (l.count) {
    node->replaceInput(1, x->value);
    rc.absorb(node);
  } else {
    Node *counts = rc.graph.createList(c10::TensorType::get(), {});
    counts->insertAfter(def);
    l.count = counts->output();
    rc.listCounts[l.count].list = def;
    for (Node *a : appends)
      if (!node->isBefore(a))
        appendInStep(a, l, rc);
  }
  rc.setRep(list, l);
  rc.madeIndexedLists |= readByIndex;
  recordUsers(list, rc);
  return RuleResult::applied();
}

/// C[i] of counts \p counts for an element read at \p i, before
/// \p node: reads at one loop index or one non-negative constant share it
/// where the first is visible.
Value *countAt(Value *counts, Value *i, Node *node, RuleContext &rc) {
  bool stable = constantInt(i).value_or(-1) >= 0 ||
                (i->node()->kind() == c10::prim::Param &&
                 i->node()->owningBlock()->owningNode() &&
                 i->node()->owningBlock()->owningNode()->kind() ==
                     c10::prim::Loop &&
                 i->offset() == 0);
  if (stable) {
    auto it = rc.itemCounts.find({counts, i});
    if (it != rc.itemCounts.end() && visibleAt(it->second, node))
      return it->second;
  }
  Value *count = emit(rc.graph, "aten::__getitem__", {counts, i}, node);
  if (stable)
    rc.itemCounts[{counts, i}] = count;
  return count;
}

/// `L[i]` of a bounded list: the element's padded rows, and its count.
/// `S[i]` of a list of its sizes: the count, lifted, below the padded size.
RuleResult item(Node *node, RuleContext &rc) {
  Rep *l = rc.rep(node->input(0));
  if (!l || (l->kind != Rep::Kind::BoundedList &&
             l->kind != Rep::Kind::SizeList))
    return RuleResult::notApplicable();
  Value *i = node->input(1);
  Value *element = emit(rc.graph, "aten::__getitem__", {l->value, i}, node);
  Value *count = countAt(l->count, i, node, rc);
  if (l->kind == Rep::Kind::BoundedList) {
    rc.setBounded(node->output(), element, count, l->isIndex, l->is1D);
  } else {
    Rep n(Rep::Kind::Lifted);
    n.value = count;
    n.range.lo = 0;
    n.range.hi = element;
    rc.setRep(node->output(), n);
  }
  return RuleResult::applied();
}

/// `len(L)`: as many elements as the list that stands for it (a split's
/// parts are split_rows's, and the original split must not run on padded
/// rows).
RuleResult length(Node *node, RuleContext &rc) {
  Rep *l = rc.rep(node->input(0));
  if (!l || (l->kind != Rep::Kind::BoundedList &&
             l->kind != Rep::Kind::SizeList))
    return RuleResult::notApplicable();
  if (l->value != node->input(0))
    rc.replaceStatic(node->output(),
                     emit(rc.graph, "aten::len", {l->value}, node));
  return RuleResult::applied();
}

/// `torch.cat(L)` of a bounded list: the live rows of each element, in
/// order. Cats of lists with the same counts, made where every append is
/// done, share the first one's count.
RuleResult cat(Node *node, RuleContext &rc) {
  Rep *l = rc.rep(node->input(0));
  if (!l || l->kind != Rep::Kind::BoundedList)
    return RuleResult::notApplicable();
  if (constantInt(node->input(1)) != 0)
    return RuleResult::declined();
  auto outs = insertForm(rc.graph, "cat_rows", {l->value, l->count}, node);
  Value *count = outs[1];
  const RuleContext::ListCounts &known = rc.listCounts.at(l->count);
  if (allDoneBefore(known, node)) {
    auto [it, fresh] = rc.appendedCatCounts.emplace(known.key, count);
    if (!fresh && visibleAt(it->second, node))
      count = it->second;
  }
  rc.setBounded(node->output(), outs[0], count, l->isIndex, l->is1D);
  return RuleResult::applied();
}

/// The sum of \p counts' elements where a cat of a list with these counts
/// made it already (appendedCatCounts) and it is visible at \p at; nullptr
/// otherwise.
Value *sumOfCounts(Value *counts, const Node *at, RuleContext &rc) {
  auto known = rc.listCounts.find(counts);
  if (known == rc.listCounts.end())
    return nullptr;
  auto sum = rc.appendedCatCounts.find(known->second.key);
  if (sum == rc.appendedCatCounts.end() || !visibleAt(sum->second, at))
    return nullptr;
  return sum->second;
}

/// `S.append(n)` to an empty int list, its one append, in a loop over every
/// element of a bounded list L, of n the element's count, lifted
/// (`boxes_per_image = [b.shape[0] for b in proposals]`): S holds the
/// padded sizes instead, a host list, and stands for L's counts. S is read
/// only by index, len and as split's sizes.
RuleResult sizeAppend(Node *node, RuleContext &rc) {
  Value *list = node->input(0);
  Rep *n = rc.lifted(node->input(1));
  Node *def = list->node();
  if (!n || !rc.indexedLists || rc.rep(list) ||
      def->kind() != c10::prim::ListConstruct || !def->inputs().empty() ||
      list->type()->expectRef<c10::ListType>().getElementType()->kind() !=
          c10::TypeKind::IntType)
    return RuleResult::notApplicable();
  size_t appends = 0;
  for (const torch::jit::Use &use : list->uses()) {
    const Node *user = use.user;
    if (is(user, "aten::append") && !user->output()->hasUses())
      ++appends;
    else if (!(use.offset == 0 && (is(user, "aten::__getitem__") ||
                                   is(user, "aten::len"))) &&
             !(use.offset == 1 && is(user, "aten::split") &&
               constantInt(user->input(2)) == 0))
      return RuleResult::notApplicable();
  }
  Value *counts = appends == 1 ? mirroredCounts(list, node, n->value, rc)
                               : nullptr;
  Value *padded = counts ? rc.upper(n->range) : nullptr;
  if (!padded)
    return RuleResult::notApplicable();
  node->replaceInput(1, padded);
  Rep sizes(Rep::Kind::SizeList);
  sizes.value = list;
  sizes.count = counts;
  rc.setRep(list, sizes);
  rc.madeIndexedLists = true;
  recordUsers(list, rc);
  return RuleResult::applied();
}

/// `x.split(S, 0)` of bounded x whose rows are the cat of a list with S's
/// counts (Faster R-CNN's `pred_boxes.split(boxes_per_image)`): part i
/// takes its live rows, padded to S's padded size (split_rows); the parts
/// are a bounded list with those counts.
RuleResult split(Node *node, RuleContext &rc) {
  Rep *sizes = rc.rep(node->input(1));
  Rep *x = rc.bounded(node->input(0));
  if (!sizes || sizes->kind != Rep::Kind::SizeList)
    return RuleResult::notApplicable();
  Value *sum = sumOfCounts(sizes->count, node, rc);
  if (!x || !sum || !rc.sameCount(x->count, sum))
    return RuleResult::declined(
        "the rows split are not provably those the sizes count");
  Value *parts = insertForm(rc.graph, "split_rows",
                            {x->value, sizes->count, sizes->value}, node)[0];
  Rep l(Rep::Kind::BoundedList);
  l.value = parts;
  l.count = sizes->count;
  l.isIndex = x->isIndex;
  l.is1D = x->is1D;
  rc.setRep(node->output(), l);
  recordUsers(node->output(), rc);
  return RuleResult::applied();
}

/// `for n in S: total += n` of S, a bounded list's sizes (BoxCoder.decode's
/// box_sum): total is the counts' sum, the count of the cat of that list,
/// lifted; the padded sizes' sum bounds it. The loop is not walked.
RuleResult sumOfSizes(Node *loop, RuleContext &rc) {
  if (loop->inputs().size() != 3 || loop->outputs().size() != 1 ||
      constantBool(loop->input(1)) != true)
    return RuleResult::notApplicable();
  Node *len = loop->input(0)->node();
  Rep *sizes = is(len, "aten::len") ? rc.rep(len->input(0)) : nullptr;
  if (!sizes || sizes->kind != Rep::Kind::SizeList)
    return RuleResult::notApplicable();
  Block *body = loop->blocks()[0];
  std::vector<Node *> nodes(body->nodes().begin(), body->nodes().end());
  if (nodes.size() != 2 || body->outputs().size() != 2 ||
      constantBool(body->outputs()[0]) != true)
    return RuleResult::notApplicable();
  Node *read = nodes[0], *add = nodes[1];
  Value *i = body->inputs()[0], *total = body->inputs()[1];
  if (!is(read, "aten::__getitem__") || read->input(0) != len->input(0) ||
      read->input(1) != i || !is(add, "aten::add") ||
      body->outputs()[1] != add->output() ||
      !((add->input(0) == total && add->input(1) == read->output()) ||
        (add->input(1) == total && add->input(0) == read->output())))
    return RuleResult::notApplicable();
  Value *init = loop->input(2);
  std::optional<int64_t> start = constantInt(init);
  Value *sum = sumOfCounts(sizes->count, loop, rc);
  if (rc.rep(init) || !start || !sum)
    return RuleResult::notApplicable();
  torch::jit::Graph &graph = rc.graph;
  Rep out(Rep::Kind::Lifted);
  out.value = *start == 0 ? sum
                          : emit(graph, "aten::add", {sum, init}, loop);
  out.range.lo = std::max<int64_t>(*start, 0);
  out.range.hi = emit(graph, "aten::add",
                      {emit(graph, "aten::sum", {sizes->value}, loop), init},
                      loop);
  if (*start < 0)
    out.range.lo.reset();
  rc.setRep(loop->output(0), out);
  rc.absorb(read);
  rc.absorb(add);
  return RuleResult::applied();
}

} // namespace

void addListRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"list-append", On::Use, ops({"aten::append"}), append});
  rules.push_back({"size-list-append", On::Use, ops({"aten::append"}),
                   sizeAppend});
  rules.push_back({"list-item", On::Use, ops({"aten::__getitem__"}), item});
  rules.push_back({"list-len", On::Use, ops({"aten::len"}), length});
  rules.push_back({"list-cat", On::Use, ops({"aten::cat"}), cat});
  rules.push_back({"list-split", On::Use, ops({"aten::split"}), split});
  rules.push_back({"sum-of-sizes", On::Use, ops({"prim::Loop"}), sumOfSizes});
}

} // namespace staticify::bound
