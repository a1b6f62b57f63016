//===- DictKeys.cpp - `key in d` folded where the keys are known ----------===//

#include "passes/DictKeys.h"

#include "passes/GraphUtils.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// What the analysis follows: dicts with string keys, and lists of them.
enum class Holder { None, Dict, List };

bool isStringKeyedDict(const c10::TypePtr &type) {
  auto dict = type->cast<c10::DictType>();
  return dict && dict->getKeyType()->kind() == c10::TypeKind::StringType;
}

Holder holderOf(const Value *v) {
  c10::TypePtr type = v->type();
  if (auto optional = type->cast<c10::OptionalType>())
    type = optional->getElementType();
  if (isStringKeyedDict(type))
    return Holder::Dict;
  if (auto list = type->cast<c10::ListType>())
    if (isStringKeyedDict(list->getElementType()))
      return Holder::List;
  return Holder::None;
}

/// The objects (dict or list construct nodes) a value may hold; `unknown`
/// when it may hold one made elsewhere (an input, an op not modelled).
struct Objects {
  std::set<const Node *> nodes;
  bool unknown = false;

  bool join(const Objects &other) {
    bool changed = other.unknown && !unknown;
    unknown |= other.unknown;
    for (const Node *n : other.nodes)
      changed |= nodes.insert(n).second;
    return changed;
  }
  bool setUnknown() {
    bool changed = !unknown;
    unknown = true;
    return changed;
  }
};

class DictKeys {
public:
  DictKeys(const torch::jit::Graph &graph, const std::vector<Node *> &nodes)
      : nodes_(nodes) {
    // What comes from outside holds dicts made elsewhere: the graph's
    // inputs, and the parameters of blocks other than ifs' and loops'.
    for (const Value *v : graph.inputs())
      if (holderOf(v) != Holder::None)
        at(v).setUnknown();
    for (const Node *node : nodes)
      if (node->kind() != c10::prim::If && node->kind() != c10::prim::Loop)
        for (const torch::jit::Block *block : node->blocks())
          for (const Value *v : block->inputs())
            if (holderOf(v) != Holder::None)
              at(v).setUnknown();
  }

  void solve() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const Node *node : nodes_)
        changed |= transfer(node);
    }
    // A list that escaped may have had anything done to its dicts.
    for (const Node *list : escapedLists_)
      for (const Node *dict : elements_[list].nodes)
        escapedDicts_.insert(dict);
  }

  /// The answer to `key in v`, when every dict \p v may be decides it.
  std::optional<bool> contains(const Value *v, const std::string &key) {
    const Objects *dicts = known(v);
    if (!dicts)
      return std::nullopt;
    size_t builtWithKey = 0;
    for (const Node *dict : dicts->nodes)
      builtWithKey += builtWith_[dict].count(key);
    if (builtWithKey == dicts->nodes.size())
      return true; // no modelled op removes a key
    if (builtWithKey == 0 && neverWritten(key))
      return false;
    return std::nullopt;
  }

  bool knownDict(const Node *dict) const {
    return builtWith_.count(dict) && !escapedDicts_.count(dict) &&
           !unknownKeys_.count(dict);
  }

  const Objects *pointsTo(const Value *v) const {
    auto it = points_.find(v);
    return it == points_.end() ? nullptr : &it->second;
  }

  std::vector<const Value *> holders(const Node *dict) const {
    std::vector<const Value *> out;
    for (const auto &[v, objects] : points_)
      if (holderOf(v) == Holder::Dict && objects.nodes.count(dict))
        out.push_back(v);
    return out;
  }

  bool mayHold(const Value *v, const Node *dict) const {
    const Objects *objects = pointsTo(v);
    if (!objects)
      return false;
    if (holderOf(v) == Holder::Dict)
      return objects->nodes.count(dict) > 0;
    for (const Node *list : objects->nodes)
      if (auto it = elements_.find(list);
          it != elements_.end() && it->second.nodes.count(dict))
        return true;
    return false;
  }

private:
  Objects &at(const Value *v) { return points_[v]; }

  /// The dicts \p v may be, when all of them are known: made in the graph
  /// with constant keys, written at constant keys only, never escaped.
  const Objects *known(const Value *v) const {
    auto it = points_.find(v);
    if (it == points_.end() || it->second.unknown || it->second.nodes.empty())
      return nullptr;
    for (const Node *dict : it->second.nodes)
      if (escapedDicts_.count(dict) || unknownKeys_.count(dict))
        return nullptr;
    return &it->second;
  }

  /// Whether a known dict built without \p key.
  bool lacks(const Node *dict, const std::string &key) const {
    auto it = builtWith_.find(dict);
    return it != builtWith_.end() && !it->second.count(key) &&
           !escapedDicts_.count(dict) && !unknownKeys_.count(dict);
  }

  /// Whether no dict built without \p key ever gets it. A write of the key
  /// that may reach such a dict is allowed only in the then-branch of an
  /// `if key in d` whose dicts were all built without it: the first write
  /// that would add it to one of them runs after that test saw none of them
  /// hold it (torchvision: `if "masks" in pred: ... result[i]["masks"] =`),
  /// so none runs.
  bool neverWritten(const std::string &key) {
    for (const auto &[write, written] : writes_) {
      if (written != key)
        continue;
      const Objects &targets = at(write->input(0));
      bool reachesLacking = std::any_of(
          targets.nodes.begin(), targets.nodes.end(),
          [&](const Node *dict) { return lacks(dict, key); });
      if (reachesLacking && !guardedByAbsence(write, key))
        return false;
    }
    return true;
  }

  bool guardedByAbsence(const Node *write, const std::string &key) {
    for (const torch::jit::Block *block = write->owningBlock();
         block->owningNode(); block = block->owningNode()->owningBlock()) {
      const Node *owner = block->owningNode();
      if (owner->kind() != c10::prim::If || block != owner->blocks()[0])
        continue;
      const Node *test = owner->input(0)->node();
      if (test->kind() != c10::aten::__contains__ ||
          constantString(test->input(1)) != key)
        continue;
      const Objects *tested = known(test->input(0));
      if (tested && std::all_of(tested->nodes.begin(), tested->nodes.end(),
                                [&](const Node *d) { return lacks(d, key); }))
        return true;
    }
    return false;
  }

  bool flow(const Value *from, const Value *to) {
    return from == to ? false : at(to).join(at(from));
  }

  /// \p v reaches a use the analysis does not model.
  bool escape(const Value *v) {
    bool changed = false;
    Holder holder = holderOf(v);
    for (const Node *object : at(v).nodes)
      changed |= holder == Holder::List ? escapedLists_.insert(object).second
                                        : escapedDicts_.insert(object).second;
    return changed;
  }

  bool escapeHolders(const Node *node) {
    bool changed = false;
    for (const Value *v : node->inputs())
      if (holderOf(v) != Holder::None)
        changed |= escape(v);
    for (const Value *v : node->outputs())
      if (holderOf(v) != Holder::None)
        changed |= at(v).setUnknown();
    return changed;
  }

  /// The elements of the lists \p list may be flow into \p to.
  bool elementsInto(const Value *list, const Value *to) {
    const Objects &lists = at(list);
    bool changed = false;
    if (lists.unknown)
      changed |= at(to).setUnknown();
    for (const Node *l : lists.nodes) {
      if (escapedLists_.count(l))
        changed |= at(to).setUnknown();
      changed |= at(to).join(elements_[l]);
    }
    return changed;
  }

  /// \p element is stored into the lists \p list may be.
  bool storeElement(const Value *list, const Value *element) {
    const Objects &lists = at(list);
    bool changed = lists.unknown ? escape(element) : false;
    for (const Node *l : lists.nodes)
      changed |= elements_[l].join(at(element));
    return changed;
  }

  bool transfer(const Node *node) {
    switch (node->kind()) {
    case c10::prim::DictConstruct:
      return dictConstruct(node);
    case c10::prim::ListConstruct:
      if (holderOf(node->output()) != Holder::List)
        return escapeHolders(node);
      {
        bool changed = at(node->output()).join(Objects{{node}, false});
        for (const Value *element : node->inputs())
          changed |= elements_[node].join(at(element));
        return changed;
      }
    case c10::aten::append:
      if (holderOf(node->input(0)) != Holder::List)
        return escapeHolders(node);
      return storeElement(node->input(0), node->input(1)) |
             flow(node->input(0), node->output());
    case c10::aten::__getitem__:
      switch (holderOf(node->input(0))) {
      case Holder::List:
        return elementsInto(node->input(0), node->output());
      case Holder::Dict: // a value: a dict stored as one escaped already
        return holderOf(node->output()) != Holder::None &&
               at(node->output()).setUnknown();
      case Holder::None:
        return escapeHolders(node);
      }
      return false;
    case c10::aten::_set_item:
      return setItem(node);
    case c10::prim::unchecked_cast:
      return holderOf(node->output()) != Holder::None &&
             flow(node->input(0), node->output());
    case c10::prim::If:
      return ifResults(node);
    case c10::prim::Loop:
      return loopCarried(node);
    case c10::prim::TupleConstruct:
      // The tuple a graph returns: nothing in the graph reads it.
      if (returnedOnly(node->output()))
        return false;
      return escapeHolders(node);
    default:
      return isRead(node) ? readResults(node) : escapeHolders(node);
    }
  }

  /// Ops that leave the dicts and lists they take as they are.
  static bool isRead(const Node *node) {
    static const std::unordered_set<c10::Symbol> reads = {
        c10::aten::__contains__, c10::aten::len,
        c10::aten::keys,         c10::aten::values,
        c10::aten::__is__,       c10::aten::__isnot__,
        c10::prim::isinstance,   c10::Symbol::fromQualString("aten::items"),
        c10::Symbol::fromQualString("aten::get")};
    return reads.count(node->kind()) > 0;
  }

  /// A read's result that holds dicts (the values of a dict of dicts) is
  /// not followed.
  bool readResults(const Node *node) {
    bool changed = false;
    for (const Value *v : node->outputs())
      if (holderOf(v) != Holder::None)
        changed |= at(v).setUnknown();
    return changed;
  }

  bool dictConstruct(const Node *node) {
    bool changed = at(node->output()).join(Objects{{node}, false});
    // Keys and values alternate; a value that holds dicts is not followed.
    for (size_t i = 1; i < node->inputs().size(); i += 2)
      if (holderOf(node->input(i)) != Holder::None)
        changed |= escape(node->input(i));
    if (!visited_.insert(node).second)
      return changed;
    for (size_t i = 0; i + 1 < node->inputs().size(); i += 2) {
      if (std::optional<std::string> key = constantString(node->input(i)))
        builtWith_[node].insert(*key);
      else
        unknownKeys_.insert(node);
    }
    if (!isStringKeyedDict(node->output()->type()))
      unknownKeys_.insert(node);
    return true;
  }

  bool setItem(const Node *node) {
    const Value *target = node->input(0), *value = node->input(2);
    switch (holderOf(target)) {
    case Holder::List:
      return storeElement(target, value);
    case Holder::Dict: {
      bool changed = holderOf(value) != Holder::None && escape(value);
      if (std::optional<std::string> key = constantString(node->input(1))) {
        if (recorded_.insert(node).second)
          writes_.emplace_back(node, *key);
        return changed;
      }
      for (const Node *dict : at(target).nodes)
        changed |= unknownKeys_.insert(dict).second;
      return changed;
    }
    case Holder::None:
      return escapeHolders(node);
    }
    return false;
  }

  bool ifResults(const Node *node) {
    bool changed = false;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      if (holderOf(node->output(i)) == Holder::None)
        continue;
      for (const torch::jit::Block *block : node->blocks())
        changed |= flow(block->outputs()[i], node->output(i));
    }
    return changed;
  }

  bool loopCarried(const Node *node) {
    // inputs: trip count, condition, carried...; the body's inputs: the
    // iteration, carried...; its outputs: the condition, carried...
    const torch::jit::Block *body = node->blocks()[0];
    bool changed = false;
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value *carried = body->inputs()[i + 1];
      if (holderOf(carried) == Holder::None)
        continue;
      changed |= flow(node->input(i + 2), carried);
      changed |= flow(body->outputs()[i + 1], carried);
      changed |= flow(carried, node->output(i));
    }
    return changed;
  }

  const std::vector<Node *> &nodes_;
  std::unordered_map<const Value *, Objects> points_;
  std::unordered_map<const Node *, Objects> elements_; // list -> its dicts
  std::unordered_map<const Node *, std::set<std::string>> builtWith_;
  std::vector<std::pair<const Node *, std::string>> writes_; // constant keys
  std::unordered_set<const Node *> recorded_;
  std::unordered_set<const Node *> unknownKeys_; // a key that is not constant
  std::unordered_set<const Node *> escapedDicts_, escapedLists_;
  std::unordered_set<const Node *> visited_;
};

bool isMembershipTest(const Node *node) {
  return node->kind() == c10::aten::__contains__ &&
         node->inputs().size() == 2 &&
         holderOf(node->input(0)) == Holder::Dict &&
         node->input(0)->type()->kind() == c10::TypeKind::DictType &&
         constantString(node->input(1));
}

} // namespace

struct DictObjects::Impl {
  Impl(const torch::jit::Graph &graph, std::vector<Node *> nodes)
      : nodes(std::move(nodes)), keys(graph, this->nodes) {
    keys.solve();
  }
  std::vector<Node *> nodes; // DictKeys keeps a reference
  DictKeys keys;
};

DictObjects::DictObjects(const torch::jit::Graph &graph,
                         const std::vector<Node *> &nodes)
    : impl(std::make_unique<Impl>(graph, nodes)) {}

DictObjects::~DictObjects() = default;

bool DictObjects::known(const Node *dict) const {
  return impl->keys.knownDict(dict);
}

std::vector<const Value *> DictObjects::holders(const Node *dict) const {
  return impl->keys.holders(dict);
}

std::set<const Node *> DictObjects::dictsOf(const Value *v,
                                            bool *unknown) const {
  const auto *objects = impl->keys.pointsTo(v);
  *unknown = !objects || objects->unknown;
  return objects ? objects->nodes : std::set<const Node *>{};
}

bool DictObjects::mayHold(const Value *v, const Node *dict) const {
  return impl->keys.mayHold(v, dict);
}

bool foldDictMembership(torch::jit::Graph &graph,
                        const std::vector<Node *> &nodes) {
  std::vector<Node *> tests;
  for (Node *node : nodes)
    if (isMembershipTest(node))
      tests.push_back(node);
  if (tests.empty())
    return false;
  DictKeys keys(graph, nodes);
  keys.solve();
  bool changed = false;
  for (Node *test : tests) {
    std::optional<bool> answer =
        keys.contains(test->input(0), *constantString(test->input(1)));
    if (!answer)
      continue;
    torch::jit::WithInsertPoint guard(test);
    test->output()->replaceAllUsesWith(graph.insertConstant(*answer));
    test->destroy();
    changed = true;
  }
  return changed;
}

} // namespace staticify
