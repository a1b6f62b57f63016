//===- DictRecords.cpp - Dicts whose keys the graph fixes, as their entries ===//

#include "passes/DictRecords.h"

#include "passes/GraphUtils.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>

#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Use;
using torch::jit::Value;

namespace {

/// Bodies unrolled over a dict's entries stay below this many nodes in all.
constexpr size_t kUnrollNodeLimit = 4096;

bool isDict(const Value *v) {
  return v->type()->kind() == c10::TypeKind::DictType;
}

/// A key a node names: a constant str or int.
std::optional<c10::IValue> constantKey(const Value *v) {
  if (v->node()->kind() != c10::prim::Constant)
    return std::nullopt;
  std::optional<c10::IValue> key = torch::jit::toIValue(v);
  if (!key || !(key->isString() || key->isInt()))
    return std::nullopt;
  return key;
}

/// The ops on a dict a record rewrites.
enum class DictOp {
  Other,
  GetItem,
  Get,
  SetItem,
  Pop,
  Contains,
  Len,
  Keys,
  Values,
  Items,
  Update
};

DictOp dictOp(const Node *n) {
  static const c10::Symbol get = c10::Symbol::fromQualString("aten::get");
  static const c10::Symbol items = c10::Symbol::fromQualString("aten::items");
  static const c10::Symbol pop = c10::Symbol::fromQualString("aten::pop");
  static const c10::Symbol update = c10::Symbol::fromQualString("aten::update");
  c10::Symbol kind = n->kind();
  if (kind == pop)
    return DictOp::Pop;
  if (kind == update)
    return DictOp::Update;
  if (kind == c10::aten::__getitem__)
    return DictOp::GetItem;
  if (kind == get)
    return DictOp::Get;
  if (kind == c10::aten::_set_item)
    return DictOp::SetItem;
  if (kind == c10::aten::__contains__)
    return DictOp::Contains;
  if (kind == c10::aten::len)
    return DictOp::Len;
  if (kind == c10::aten::keys)
    return DictOp::Keys;
  if (kind == c10::aten::values)
    return DictOp::Values;
  return kind == items ? DictOp::Items : DictOp::Other;
}

/// Whether \p op names a key (its second input).
bool keyed(DictOp op) {
  return op == DictOp::GetItem || op == DictOp::Get || op == DictOp::SetItem ||
         op == DictOp::Pop || op == DictOp::Contains;
}

bool sameKey(const c10::IValue &a, const c10::IValue &b) {
  if (a.isString() && b.isString())
    return a.toStringRef() == b.toStringRef();
  return a.isInt() && b.isInt() && a.toInt() == b.toInt();
}

/// A dict's entries at one point of the program, in insertion order (a
/// write at a key it holds keeps the key's place, as a dict does).
struct Record {
  std::vector<std::pair<c10::IValue, Value *>> entries;

  Value *find(const c10::IValue &key) const {
    for (const auto &[k, v] : entries)
      if (sameKey(k, key))
        return v;
    return nullptr;
  }
  void erase(const c10::IValue &key) {
    for (auto it = entries.begin(); it != entries.end(); ++it)
      if (sameKey(it->first, key)) {
        entries.erase(it);
        return;
      }
  }
  void set(const c10::IValue &key, Value *value) {
    for (auto &[k, v] : entries)
      if (sameKey(k, key)) {
        v = value;
        return;
      }
    entries.emplace_back(key, value);
  }
  bool sameKeys(const Record &other) const {
    if (entries.size() != other.entries.size())
      return false;
    for (size_t i = 0; i < entries.size(); ++i)
      if (!sameKey(entries[i].first, other.entries[i].first))
        return false;
    return true;
  }
  bool operator==(const Record &other) const {
    if (!sameKeys(other))
      return false;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].second != other.entries[i].second)
        return false;
    return true;
  }
};

/// Thrown where a family of dicts turns out not to be a record: the whole
/// rewrite is undone and tried again without it.
struct Refused {
  int family;
};

/// The families of dict values: a construct, and the results of the ifs
/// that may be it (each linked to the values its branches yield). A
/// family's label is its first member's position in program order, the
/// same in a copy of the graph.
class Families {
public:
  explicit Families(Graph &graph) {
    std::vector<Value *> values;
    auto add = [&](Value *v) {
      if (isDict(v) && !index.count(v)) {
        index[v] = parent.size();
        parent.push_back(parent.size());
        values.push_back(v);
      }
    };
    for (Value *in : graph.inputs())
      add(in);
    for (Node *node : collectNodes(graph.block())) {
      for (Block *b : node->blocks())
        for (Value *in : b->inputs())
          add(in);
      for (Value *out : node->outputs())
        add(out);
    }
    // If and loop results are one family with what their blocks yield,
    // loop carries with their entries.
    for (Node *node : collectNodes(graph.block())) {
      bool loop = node->kind() == c10::prim::Loop;
      if (!loop && node->kind() != c10::prim::If)
        continue;
      for (size_t i = 0; i < node->outputs().size(); ++i) {
        if (!isDict(node->output(i)))
          continue;
        for (Block *b : node->blocks()) {
          unite(node->output(i), b->outputs()[i + (loop ? 1 : 0)]);
          if (loop)
            unite(node->output(i), b->inputs()[i + 1]);
        }
        if (loop)
          unite(node->output(i), node->input(i + 2));
      }
    }
    for (Value *v : values) {
      size_t root = find(index.at(v));
      if (!label.count(root))
        label[root] = static_cast<int>(label.size());
    }
    for (Value *v : values)
      if (!admissible(graph, v))
        refused.insert(of(v));
  }

  /// The label of \p v's family, or -1 for a value that is no dict.
  int of(const Value *v) const {
    auto it = index.find(v);
    return it == index.end() ? -1 : label.at(find(it->second));
  }
  bool admissibleFamily(int family) const { return !refused.count(family); }

private:
  std::unordered_map<const Value *, size_t> index;
  mutable std::vector<size_t> parent;
  std::unordered_map<size_t, int> label;
  std::set<int> refused;

  size_t find(size_t i) const {
    while (parent[i] != i)
      i = parent[i] = parent[parent[i]];
    return i;
  }
  void unite(const Value *a, const Value *b) {
    auto ia = index.find(a), ib = index.find(b);
    if (ia != index.end() && ib != index.end())
      parent[find(ia->second)] = find(ib->second);
  }

  /// Whether \p v is made, and used, only as a record's value may be
  /// (DictRecords.h); the keys its uses name are checked by the walk.
  static bool admissible(Graph &graph, const Value *v) {
    const Node *def = v->node();
    if (def->kind() == c10::prim::DictConstruct) {
      for (size_t i = 0; i < def->inputs().size(); i += 2)
        if (!constantKey(def->input(i)))
          return false;
    } else if (def->kind() != c10::prim::If) {
      return false; // a graph input, a loop carry, a copy, an op's result
    }
    for (const Use &use : v->uses()) {
      const Node *user = use.user;
      DictOp op = dictOp(user);
      if (op != DictOp::Other) {
        // The walk checks the key, once loops over items are unrolled.
        // d.update(e): e is read whole, at the keys its record holds.
        bool read = use.offset == 0 || (op == DictOp::Update && use.offset == 1);
        if (!read || (keyed(op) && user->inputs().size() < 2))
          return false;
        continue;
      }
      switch (user->kind()) {
      case c10::prim::Return: {
        const Node *owner = user->owningBlock()->owningNode();
        if (!owner ? user->owningGraph() == &graph
                   : owner->kind() == c10::prim::If)
          continue;
        return false;
      }
      case c10::prim::TupleConstruct:
        if (user->output()->uses().size() == 1 &&
            user->output()->uses()[0].user == graph.return_node())
          continue;
        return false;
      default:
        return false;
      }
    }
    return true;
  }
};

/// Whether \p u, a node outside \p n, may run after \p n: unless it is
/// found before it in the innermost block they share.
bool mayRunAfter(const Node *u, const Node *n) {
  for (const Node *a = n; a; a = a->owningBlock()->owningNode())
    for (const Node *x = u; x; x = x->owningBlock()->owningNode())
      if (x->owningBlock() == a->owningBlock())
        return x == a || a->isBefore(x);
  return true;
}

class Walk {
public:
  Walk(Graph &graph, const Families &families, const std::set<int> &excluded)
      : graph(graph), families(families), excluded(excluded) {}

  bool run() {
    State state;
    block(graph.block(), state);
    materializeReturns(state);
    eraseDictResults();
    return changed;
  }

private:
  using State = std::unordered_map<const Value *, Record>;

  Graph &graph;
  const Families &families;
  const std::set<int> &excluded;
  bool changed = false;
  /// Lists built here from a record, which a loop over them may unroll.
  std::set<const Value *> builtLists;
  /// If results that are records, removed once their uses are rewritten.
  std::vector<Value *> dictResults;
  size_t unrolledNodes = 0;

  bool tracked(const Value *v) const {
    int family = families.of(v);
    return family >= 0 && families.admissibleFamily(family) &&
           !excluded.count(family);
  }
  [[noreturn]] void refuse(const Value *v) const {
    throw Refused{families.of(v)};
  }
  /// The key \p n names for \p dict: a constant by now, or \p dict is
  /// no record.
  c10::IValue keyOf(const Node *n, const Value *dict) const {
    std::optional<c10::IValue> key = constantKey(n->input(1));
    if (!key)
      refuse(dict);
    return *key;
  }
  Record &recordOf(State &state, const Value *v) const {
    auto it = state.find(v);
    if (it == state.end())
      refuse(v);
    return it->second;
  }

  void block(Block *b, State &state) {
    for (Node *n = b->nodes().front(); n != b->return_node();)
      n = visit(n, state);
  }

  /// Rewrites \p n; returns the node to visit next.
  Node *visit(Node *n, State &state) {
    Node *next = n->next();
    switch (n->kind()) {
    case c10::prim::DictConstruct:
      if (tracked(n->output())) {
        Record r;
        for (size_t i = 0; i + 1 < n->inputs().size(); i += 2)
          r.set(*constantKey(n->input(i)), n->input(i + 1));
        state[n->output()] = std::move(r);
        changed = true;
      }
      return next;
    case c10::prim::If:
      if (Node *first = inlineDecided(n))
        return first;
      visitIf(n, state);
      return next;
    case c10::prim::Loop:
      if (Node *first = unroll(n))
        return first;
      visitOpaque(n, state);
      return next;
    case c10::prim::TupleConstruct: // the returned tuple: materializeReturns
      return next;
    default:
      break;
    }
    if (!n->blocks().empty()) {
      visitOpaque(n, state);
      return next;
    }
    if (foldHostScalars(n))
      return next;
    // d.update(e) of a dict d left as it is reads e whole: e is no record.
    if (dictOp(n) == DictOp::Update && isDict(n->input(1)) &&
        tracked(n->input(1)) && !tracked(n->input(0)))
      refuse(n->input(1));
    if (n->inputs().empty() || !isDict(n->input(0)) || !tracked(n->input(0)))
      return next;
    Value *dict = n->input(0);
    Record &r = recordOf(state, dict);
    torch::jit::WithInsertPoint at(n);
    Value *result = nullptr;
    switch (dictOp(n)) {
    case DictOp::GetItem:
      result = r.find(keyOf(n, dict));
      if (!result)
        refuse(dict); // KeyError: the program raises there
      break;
    case DictOp::Get:
      result = r.find(keyOf(n, dict));
      if (!result)
        result = n->inputs().size() > 2 ? n->input(2)
                                         : graph.insertConstant(c10::IValue());
      break;
    case DictOp::SetItem:
      r.set(keyOf(n, dict), n->input(2));
      break;
    case DictOp::Pop: {
      c10::IValue key = keyOf(n, dict);
      result = r.find(key);
      if (!result && n->inputs().size() < 3)
        refuse(dict); // KeyError
      if (!result)
        result = n->input(2);
      r.erase(key);
      break;
    }
    case DictOp::Update: {
      const Value *other = n->input(1);
      if (!isDict(other) || !tracked(other))
        refuse(dict);
      for (const auto &[key, value] : recordOf(state, other).entries)
        r.set(key, value);
      break;
    }
    case DictOp::Contains:
      result = graph.insertConstant(r.find(keyOf(n, dict)) != nullptr);
      break;
    case DictOp::Len:
      result = graph.insertConstant(static_cast<int64_t>(r.entries.size()));
      break;
    case DictOp::Keys:
    case DictOp::Values:
    case DictOp::Items:
      result = buildList(n, r);
      break;
    case DictOp::Other:
      refuse(dict);
    }
    if (result)
      n->output()->replaceAllUsesWith(result);
    n->destroy();
    changed = true;
    return next;
  }

  Value *buildList(Node *n, const Record &r) {
    c10::TypePtr element = n->output()->type()->expectRef<c10::ListType>()
                               .getElementType();
    std::vector<Value *> elements;
    for (const auto &[key, value] : r.entries) {
      Value *k = graph.insertConstant(key);
      if (dictOp(n) == DictOp::Keys) {
        elements.push_back(k);
      } else if (dictOp(n) == DictOp::Values) {
        elements.push_back(value);
      } else {
        Value *pair = graph.insertNode(graph.createTuple({k, value}))->output();
        elements.push_back(pair->setType(element)); // the list's own type
      }
    }
    Value *list = graph.insertNode(graph.createList(element, elements))->output();
    builtLists.insert(list);
    return list;
  }

  /// A deterministic op on host numbers whose operands are constants (the
  /// `not` of a `key in d` this walk decided) as its result, so that an if
  /// on it is decided too.
  bool foldHostScalars(Node *n) {
    auto scalar = [](const Value *v) {
      c10::TypeKind k = v->type()->kind();
      return k == c10::TypeKind::BoolType || k == c10::TypeKind::IntType ||
             k == c10::TypeKind::FloatType;
    };
    if (n->inputs().empty() || n->outputs().size() != 1 ||
        !scalar(n->output()) || n->kind() == c10::prim::Constant ||
        n->hasSideEffects() || n->isNondeterministic() ||
        !std::all_of(n->inputs().begin(), n->inputs().end(), scalar) ||
        !std::all_of(n->inputs().begin(), n->inputs().end(), [](const Value *v) {
          return v->node()->kind() == c10::prim::Constant;
        }))
      return false;
    c10::optional<torch::jit::Stack> out = torch::jit::runNodeIfInputsAreConstant(n);
    if (!out || out->size() != 1)
      return false;
    torch::jit::WithInsertPoint at(n);
    n->output()->replaceAllUsesWith(graph.insertConstant((*out)[0]));
    n->destroy();
    changed = true;
    return true;
  }

  /// An if on a test this walk decided (`"boxes" not in d`) as the branch
  /// it takes: a write in it is then no write of one branch only. Returns
  /// the first node moved out of it (or the node after the if), or null.
  Node *inlineDecided(Node *n) {
    std::optional<bool> taken = constantBool(n->input(0));
    if (!taken)
      return nullptr;
    Block *live = n->blocks()[*taken ? 0 : 1];
    Node *first = live->nodes().begin() == live->nodes().end()
                      ? n->next()
                      : live->nodes().front();
    std::vector<Node *> moved(live->nodes().begin(), live->nodes().end());
    for (Node *node : moved)
      node->moveBefore(n);
    for (size_t i = 0; i < n->outputs().size(); ++i)
      n->output(i)->replaceAllUsesWith(live->outputs()[i]);
    n->destroy();
    changed = true;
    return first;
  }

  /// Each branch on its own copy of the state; what they leave different
  /// becomes a result of the if.
  void visitIf(Node *n, State &state) {
    State branch[2] = {state, state};
    for (size_t b = 0; b < 2; ++b)
      block(n->blocks()[b], branch[b]);
    auto join = [&](const Value *dict, const Record &a, const Record &b) {
      if (!a.sameKeys(b))
        refuse(dict);
      Record out;
      for (size_t i = 0; i < a.entries.size(); ++i) {
        Value *va = a.entries[i].second, *vb = b.entries[i].second;
        Value *v = va;
        if (va != vb) {
          v = n->addOutput()->setType(unifiedType(va, vb));
          n->blocks()[0]->registerOutput(va);
          n->blocks()[1]->registerOutput(vb);
        }
        out.entries.emplace_back(a.entries[i].first, v);
      }
      return out;
    };
    for (auto it = state.begin(); it != state.end();) {
      const Value *dict = it->first;
      const Record &a = branch[0].at(dict), &b = branch[1].at(dict);
      if (a == it->second && b == it->second) {
        ++it;
      } else if (usedAfter(dict, n)) {
        it->second = join(dict, a, b);
        ++it;
      } else {
        it = state.erase(it); // dead after the if: nothing to join
      }
    }
    size_t results = n->outputs().size();
    for (size_t i = 0; i < results; ++i) {
      Value *out = n->output(i);
      if (!isDict(out) || !tracked(out))
        continue;
      for (size_t b = 0; b < 2; ++b) {
        Value *yielded = n->blocks()[b]->outputs()[i];
        if (insideOf(yielded->node(), n->blocks()[b]))
          continue;
        // A dict from outside: made beside the if, and not used after it.
        if (yielded->node()->owningBlock() != n->owningBlock())
          refuse(out);
        if (usedAfter(yielded, n))
          refuse(out);
      }
      state[out] = join(out, recordOf(branch[0], n->blocks()[0]->outputs()[i]),
                        recordOf(branch[1], n->blocks()[1]->outputs()[i]));
      dictResults.push_back(out);
    }
  }

  /// Whether a use of \p v outside \p n may run after \p n.
  static bool usedAfter(const Value *v, const Node *n) {
    return std::any_of(v->uses().begin(), v->uses().end(), [&](const Use &use) {
      return !insideOf(use.user, n) && mayRunAfter(use.user, n);
    });
  }

  static c10::TypePtr unifiedType(const Value *a, const Value *b) {
    if (auto t = c10::unifyTypes(a->type(), b->type()))
      return *t;
    return a->type();
  }

  /// A loop (or another node with blocks) kept: it may read the records
  /// it sees, not write them.
  void visitOpaque(Node *n, State &state) {
    for (Block *b : n->blocks()) {
      State inner = state;
      block(b, inner);
      for (const auto &[dict, record] : state)
        if (!(inner.at(dict) == record))
          refuse(dict);
    }
  }

  /// A loop over a list built from a record (`for k, v in d.items()`),
  /// with no break, as one copy of its body per element, the key and value
  /// each copy reads given; returns the first node inserted (or the node
  /// after the loop, for no element), or null where it does not apply.
  Node *unroll(Node *loop) {
    Value *trips = loop->input(0);
    if (trips->node()->kind() != c10::aten::len)
      return nullptr;
    Value *list = trips->node()->input(0);
    Block *body = loop->blocks()[0];
    if (!builtLists.count(list) || constantBool(loop->input(1)) != true ||
        constantBool(body->outputs()[0]) != true)
      return nullptr;
    Value *index = body->inputs()[0];
    for (const Use &use : list->uses())
      if (use.user != trips->node() &&
          !(use.user->kind() == c10::aten::__getitem__ && use.offset == 0 &&
            use.user->owningBlock() == body && use.user->input(1) == index))
        return nullptr;
    const std::vector<Value *> &elements = list->node()->inputs().vec();
    size_t bodyNodes = countNodes(body);
    if (unrolledNodes + bodyNodes * elements.size() > kUnrollNodeLimit)
      return nullptr;
    unrolledNodes += bodyNodes * elements.size();

    Node *after = loop->next();
    std::vector<Value *> carried(loop->inputs().begin() + 2,
                                 loop->inputs().end());
    Node *first = nullptr;
    torch::jit::WithInsertPoint at(loop);
    for (size_t i = 0; i < elements.size(); ++i) {
      std::unordered_map<Value *, Value *> env;
      env[index] = graph.insertConstant(static_cast<int64_t>(i));
      first = first ? first : env[index]->node();
      for (size_t j = 0; j < carried.size(); ++j)
        env[body->inputs()[j + 1]] = carried[j];
      auto mapped = [&](Value *v) {
        auto it = env.find(v);
        return it == env.end() ? v : it->second;
      };
      for (Node *node : body->nodes()) {
        if (node->kind() == c10::aten::__getitem__ && node->input(0) == list) {
          env[node->output()] = elements[i];
          continue;
        }
        Node *source = node->kind() == c10::prim::TupleUnpack
                           ? mapped(node->input(0))->node()
                           : nullptr;
        if (source && source->kind() == c10::prim::TupleConstruct) {
          for (size_t k = 0; k < node->outputs().size(); ++k)
            env[node->output(k)] = source->input(k);
          continue;
        }
        Node *clone = graph.insertNode(graph.createClone(node, mapped));
        for (size_t k = 0; k < node->outputs().size(); ++k)
          env[node->output(k)] = clone->output(k);
      }
      for (size_t j = 0; j < carried.size(); ++j)
        carried[j] = mapped(body->outputs()[j + 1]);
    }
    for (size_t j = 0; j < carried.size(); ++j)
      loop->output(j)->replaceAllUsesWith(carried[j]);
    loop->destroy();
    changed = true;
    return first ? first : after;
  }

  /// The graph returns records as dicts built at its return.
  void materializeReturns(State &state) {
    Node *ret = graph.return_node();
    auto build = [&](Value *dict) {
      const Record &r = recordOf(state, dict);
      std::vector<Value *> keys, values;
      for (const auto &[key, value] : r.entries) {
        keys.push_back(graph.insertConstant(key));
        values.push_back(value);
      }
      const auto &type = dict->type()->expectRef<c10::DictType>();
      return graph
          .insertNode(graph.createDict(type.getKeyType(), type.getValueType(),
                                       keys, values))
          ->output();
    };
    torch::jit::WithInsertPoint at(ret);
    for (size_t i = 0; i < ret->inputs().size(); ++i) {
      Value *out = ret->input(i);
      if (isDict(out) && tracked(out)) {
        ret->replaceInput(i, build(out));
        continue;
      }
      Node *tuple = out->node();
      if (tuple->kind() != c10::prim::TupleConstruct ||
          std::none_of(tuple->inputs().begin(), tuple->inputs().end(),
                       [&](const Value *v) { return isDict(v) && tracked(v); }))
        continue;
      tuple->moveBefore(ret);
      torch::jit::WithInsertPoint beforeTuple(tuple);
      for (size_t k = 0; k < tuple->inputs().size(); ++k)
        if (isDict(tuple->input(k)) && tracked(tuple->input(k)))
          tuple->replaceInput(k, build(tuple->input(k)));
    }
  }

  /// The if results that were records, and what their branches yield for
  /// them, once nothing uses them (outer ifs free the inner ones' results).
  void eraseDictResults() {
    bool progress = true;
    while (progress && !dictResults.empty()) {
      progress = false;
      for (auto it = dictResults.begin(); it != dictResults.end();) {
        Value *out = *it;
        if (out->hasUses()) {
          ++it;
          continue;
        }
        Node *n = out->node();
        size_t i = out->offset();
        for (Block *b : n->blocks())
          b->eraseOutput(i);
        n->eraseOutput(i);
        it = dictResults.erase(it);
        progress = true;
      }
    }
    if (!dictResults.empty())
      refuse(dictResults.front());
  }
};

} // namespace

bool dictRecords(std::shared_ptr<Graph> &graph) {
  std::vector<Node *> nodes = collectNodes(graph->block());
  if (std::none_of(nodes.begin(), nodes.end(), [](const Node *n) {
        return n->kind() == c10::prim::DictConstruct;
      }))
    return false;
  // Families that turn out not to be records are found on copies, so that
  // the graph itself is rewritten once, by a walk that succeeds.
  std::set<int> excluded;
  for (;;) {
    std::shared_ptr<Graph> trial = graph->copy();
    Families families(*trial);
    try {
      if (!Walk(*trial, families, excluded).run())
        return false;
      break;
    } catch (const Refused &refused) {
      if (refused.family < 0 || !excluded.insert(refused.family).second)
        return false;
    }
  }
  Families families(*graph);
  return Walk(*graph, families, excluded).run();
}

} // namespace staticify
