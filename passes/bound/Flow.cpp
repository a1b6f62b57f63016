//===- Flow.cpp - Where a bound value goes: writes, and trials' stops -----===//
//
// Two questions the driver asks of the graph: whether a fresh tensor a rule
// would replace may be written later (then its op is kept), and where a
// trial the policy refused may stop instead (Rules.h).
//
//===----------------------------------------------------------------------===//

#include "passes/bound/Rules.h"

#include "passes/GraphUtils.h"

#include <algorithm>
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
      if (std::all_of(user->output()->uses().begin(),
                      user->output()->uses().end(),
                      [](const torch::jit::Use &u) {
                        return u.user->kind() == c10::prim::Return &&
                 !u.user->owningBlock()->owningNode();
                      }))
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
        if (!readOnly)
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

/// Whether \p node is one of \p graph's (a node a restored trial made is
/// gone).
bool inGraph(Graph &graph, const Node *node) {
  for (const Node *n : collectNodes(graph.block()))
    if (n == node)
      return true;
  return false;
}

} // namespace staticify::bound
