//===- Containers.cpp - What a list or dict of tensors may hold -----------===//

#include "passes/Containers.h"

#include "passes/GraphUtils.h"

#include <algorithm>
#include <unordered_set>

namespace staticify {

using torch::jit::Node;
using torch::jit::Value;

bool holdsTensors(const c10::TypePtr &type) {
  if (type->kind() == c10::TypeKind::TensorType)
    return true;
  if (auto list = type->cast<c10::ListType>())
    return holdsTensors(list->getElementType());
  if (auto dict = type->cast<c10::DictType>())
    return dict->getKeyType()->kind() == c10::TypeKind::StringType &&
           holdsTensors(dict->getValueType());
  return false;
}

bool splitsInput(const Node *node) {
  const std::string op = node->kind().toQualString();
  return op == "aten::split" || op == "aten::split_with_sizes" ||
         op == "aten::unsafe_split" || op == "aten::chunk" ||
         op == "aten::tensor_split" || op == "aten::unbind";
}

const Value *containerOf(const Value *v) {
  const Node *node = v->node();
  if ((node->kind() == c10::prim::ListUnpack ||
       node->kind() == c10::aten::__getitem__) &&
      v->type()->kind() == c10::TypeKind::TensorType &&
      holdsTensors(node->input(0)->type()))
    return node->input(0);
  return nullptr;
}

namespace {

/// Whether \p v is a result its op's schema says is new, no alias of an
/// input. Ops without a schema (tuple and attribute reads, casts) may hand
/// out a container made elsewhere.
bool freshResult(const Value *v) {
  const c10::FunctionSchema *schema = v->node()->maybeSchema();
  return schema && v->offset() < schema->returns().size() &&
         !schema->returns()[v->offset()].alias_info();
}

/// How Walker::uses follows a container.
enum class Follow {
  /// What is stored in it is what is asked about.
  Stores,
  /// It holds the container asked about, among others: only what its
  /// reads hand out may be that one, so only writes through them count.
  Reads,
};

/// One heldTensors() question. Containers nest and are stored in each
/// other, so the walk may meet a container it is answering already: that
/// is a cycle no answer covers. An archive is untrusted: the walk is
/// bounded in depth and in steps.
class Walker {
public:
  explicit Walker(const std::string *key) : key(key) {}

  bool held(const Value *c, HeldTensors &out, int depth) {
    if (!enter(c, depth))
      return false;
    bool ok = built(c, out, depth) && uses(c, Follow::Stores, out, depth + 1);
    inProgress.erase(c);
    return ok;
  }

private:
  std::unordered_set<const Value *> inProgress;
  int steps = 0;
  const std::string *key; // only a dict of tensors' entries under it

  /// Whether an entry of dict \p dict at key \p k is not what is asked
  /// about: another constant key of a dict of tensors.
  bool otherKey(const Value *dict, const Value *k) const {
    auto type = dict->type()->cast<c10::DictType>();
    if (!key || !type ||
        type->getValueType()->kind() != c10::TypeKind::TensorType)
      return false;
    std::optional<std::string> constant = constantString(k);
    return constant && *constant != *key;
  }

  bool enter(const Value *c, int depth) {
    return depth <= 32 && ++steps <= 4096 && holdsTensors(c->type()) &&
           inProgress.insert(c).second;
  }

  /// An element of a container: a tensor, or a container whose holdings
  /// are the outer one's too.
  bool element(const Value *v, HeldTensors &out, int depth) {
    if (v->type()->kind() == c10::TypeKind::TensorType) {
      out.stored.push_back(v);
      return true;
    }
    return held(v, out, depth);
  }

  /// What \p c is built from.
  bool built(const Value *c, HeldTensors &out, int depth) {
    const Node *def = c->node();
    switch (def->kind()) {
    case c10::prim::ListConstruct:
    case c10::prim::DictConstruct: {
      bool dict = def->kind() == c10::prim::DictConstruct;
      for (size_t i = dict ? 1 : 0; i < def->inputs().size(); i += dict ? 2 : 1)
        if (!(dict && otherKey(c, def->input(i - 1))) &&
            !element(def->input(i), out, depth + 1))
          return false;
      return true;
    }
    case c10::aten::list:        // a copy of what its source holds
    case c10::aten::__getitem__: // a container read out of a container
      return held(def->input(0), out, depth + 1);
    case c10::prim::Param: // an input
    case c10::prim::If:    // a join the walk does not follow
    case c10::prim::Loop:
      return false;
    default:
      if (splitsInput(def) &&
          def->input(0)->type()->kind() == c10::TypeKind::TensorType) {
        out.parts.push_back(def);
        return true;
      }
      // A fresh list an op made (`where(m)`): not one that may be another
      // container under a new name (a tuple's element, an attribute, a
      // cast), whose stores the walk would not see.
      if (!freshResult(c))
        return false;
      out.produced.push_back(c);
      return true;
    }
  }

  /// What the uses of \p c store in it; false where a use may store
  /// something unseen or hand the container where the walk cannot see.
  bool uses(const Value *c, Follow follow, HeldTensors &out, int depth) {
    if (depth > 32 || ++steps > 4096)
      return false;
    for (const torch::jit::Use &use : c->uses()) {
      const Node *user = use.user;
      switch (user->kind()) {
      case c10::aten::append:
      case c10::aten::_set_item: {
        if (user->kind() == c10::aten::append && user->output()->hasUses())
          return false; // the list again, under another name
        if (use.offset != 0) { // c stored in another container
          if (use.offset != user->inputs().size() - 1 ||
              !uses(user->input(0), Follow::Reads, out, depth + 1))
            return false;
          continue;
        }
        if (follow == Follow::Reads ||
            (user->kind() == c10::aten::_set_item &&
             otherKey(c, user->input(1))))
          continue; // another element: not what is asked about
        if (!element(user->inputs().back(), out, depth + 1))
          return false;
        continue;
      }
      case c10::prim::ListConstruct:
      case c10::prim::DictConstruct:
        if (!uses(user->output(), Follow::Reads, out, depth + 1))
          return false;
        continue;
      case c10::aten::__getitem__:
      case c10::prim::ListUnpack:
        if (use.offset != 0)
          return false;
        for (const Value *read : user->outputs()) {
          if (read->type()->kind() == c10::TypeKind::TensorType)
            out.reads.push_back(read);
          else if (!uses(read, Follow::Stores, out, depth + 1))
            return false;
        }
        continue;
      case c10::aten::len:
      case c10::aten::keys:
      case c10::aten::__contains__:
      case c10::aten::list: // a copy: what it stores is its own
        continue;
      case c10::prim::TupleConstruct: // the tuple the graph returns
        if (!returnedOnly(user->output()))
          return false;
        continue;
      case c10::prim::Return: // the graph's own: nothing stores after it
        if (user->owningBlock()->owningNode())
          return false;
        continue;
      case c10::aten::cat:
      case c10::aten::stack:
        if (use.offset == 0)
          continue;
        return false;
      default:
        return false; // passed where the walk cannot see
      }
    }
    return true;
  }
};

} // namespace

std::optional<std::string> readKey(const Value *v) {
  const Node *node = v->node();
  if (node->kind() != c10::aten::__getitem__ ||
      !node->input(0)->type()->cast<c10::DictType>())
    return std::nullopt;
  return constantString(node->input(1));
}

std::optional<HeldTensors> heldTensors(const Value *c, const std::string *key) {
  HeldTensors out;
  if (!Walker(key).held(c, out, 0))
    return std::nullopt;
  if (out.stored.empty() && out.parts.empty() && out.produced.empty())
    return std::nullopt; // nothing says what it holds
  return out;
}

} // namespace staticify
