//===- ContainerRules.cpp - Returned dicts whose entries stay padded ------===//
//
// With --padded-outputs, a dict built in the graph and returned keeps its
// bounded entries padded, each with its count beside it:
//
//   {"boxes": b, "scores": s}     -> {"boxes": padded(b), "scores": ...,
//                                     "boxes_count": count(b), ...}
//   d["boxes"] (later)            -> bounded again: d["boxes"] padded, its
//                                    count d["boxes_count"]
//   d["boxes"] = x (later)        -> x padded, and d["boxes_count"] = its
//                                    count
//
// torchvision's detectors return one such dict per image, in a list, and
// their transform's postprocess reads and rewrites the boxes in it
// (resize_boxes): without this every dict is cut to its count where it is
// built, one host read per image.
//
// Preconditions, checked before anything changes: the dict is built with
// constant string keys and Tensor values, and every value that may be it
// (passes/DictKeys.h's points-to: in lists, read out of them, through ifs
// and loops) may be no other dict; each such value is only read or
// written at constant keys after it is built in program order (a read
// before would have been walked already), tested for a key, put in a list
// or tuple, or returned. Nothing reads the dict as a whole (`len`, `keys`,
// `items`: the counts would show). No key of the dict is an entry's count
// key. A later write of a padded entry must store a bounded value (the
// store rule) or, if its value is static, one of known rank >= 1 (its rows
// are its count); a later write the rules leave unfollowed (a value
// materialized before it) vetoes the driver's run, which is then tried
// again without padded dicts (Driver.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/BoundedForms.h"
#include "passes/bound/Rules.h"

#include "passes/GraphUtils.h"
#include "passes/Selection.h"

#include <set>

namespace staticify::bound {

using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The key an entry's count goes under.
std::string countKeyOf(const std::string &key) { return key + "_count"; }

/// Whether a graph output (or an element of a returned tuple) may hold
/// \p dict.
bool returned(const torch::jit::Graph &graph, const DictObjects &dicts,
              const Node *dict) {
  for (const Value *out : graph.outputs()) {
    if (dicts.mayHold(out, dict))
      return true;
    if (out->node()->kind() == c10::prim::TupleConstruct)
      for (const Value *element : out->node()->inputs())
        if (dicts.mayHold(element, dict))
          return true;
  }
  return false;
}

/// Uses of a dict that neither read nor write its entries, nor see its
/// keys as a whole.
bool passesDictOn(const Node *user) {
  switch (user->kind()) {
  case c10::aten::append:
  case c10::prim::ListConstruct:
  case c10::prim::TupleConstruct:
  case c10::prim::Return:
  case c10::prim::Loop:
  case c10::aten::__is__:
  case c10::aten::__isnot__:
    return true;
  default:
    return false;
  }
}

RuleResult paddedDict(Node *node, RuleContext &rc) {
  if (!rc.ctx.options.paddedOutputs || !rc.paddedDicts)
    return RuleResult::notApplicable();
  auto type = node->output()->type()->cast<c10::DictType>();
  if (!type || type->getKeyType()->kind() != c10::TypeKind::StringType ||
      type->getValueType()->kind() != c10::TypeKind::TensorType)
    return RuleResult::notApplicable();
  const DictObjects &dicts = rc.dictObjects();
  if (!returned(rc.graph, dicts, node))
    return RuleResult::notApplicable();
  if (!dicts.known(node))
    return RuleResult::declined(
        "a returned dict that reaches a use the analysis does not follow: "
        "its entries are cut to their counts where it is built");
  std::map<std::string, std::string> countKeys;
  std::set<std::string> keys;
  for (size_t i = 0; i + 1 < node->inputs().size(); i += 2) {
    std::string key = *constantString(node->input(i));
    keys.insert(key);
    if (rc.bounded(node->input(i + 1)))
      countKeys[key] = countKeyOf(key);
  }
  if (countKeys.empty())
    return RuleResult::notApplicable();
  std::set<std::string> countKeyNames;
  for (const auto &entry : countKeys)
    countKeyNames.insert(entry.second);
  auto refuse = [](const std::string &why) {
    return RuleResult::declined("a returned dict is cut to its counts where "
                                "it is built: " + why);
  };
  for (const std::string &key : keys)
    if (countKeyNames.count(key))
      return refuse("its key '" + key + "' would clash with a count's");

  struct Access {
    Node *node;
    std::string countKey;
  };
  std::vector<Access> reads, stores;
  for (const Value *holder : dicts.holders(node)) {
    bool unknown = false;
    if (dicts.dictsOf(holder, &unknown).size() != 1 || unknown)
      return refuse("a value that may be it may be another dict too");
    for (const torch::jit::Use &use : holder->uses()) {
      Node *user = use.user;
      if (passesDictOn(user))
        continue;
      bool keyed = (is(user, "aten::__getitem__") ||
                    is(user, "aten::_set_item") ||
                    is(user, "aten::__contains__")) &&
                   use.offset == 0;
      std::optional<std::string> key =
          keyed ? constantString(user->input(1)) : std::nullopt;
      if (!key)
        return refuse("'" + std::string(user->kind().toQualString()) +
                      "' takes it at a key the graph does not fix, or as "
                      "a whole");
      if (countKeyNames.count(*key))
        return refuse("its key '" + *key + "' would clash with a count's");
      auto padded = countKeys.find(*key);
      if (padded == countKeys.end() || is(user, "aten::__contains__"))
        continue;
      if (!node->isBefore(user))
        return refuse("'" + *key + "' is accessed before the dict is built");
      (is(user, "aten::__getitem__") ? reads : stores)
          .push_back({user, padded->second});
    }
  }
  // A later write of a static value: its rows are its count, where its
  // rank says it has rows.
  std::vector<Access> staticStores, pending;
  for (const Access &store : stores) {
    Value *x = store.node->input(2);
    if (rc.rep(x) && !rc.bounded(x))
      return refuse("a later write stores a scalar in a padded entry");
    if (rc.rep(x) || rc.analysis.info(x).shape != ShapeDep::Static) {
      pending.push_back(store); // the store rule's, when the walk is there
      continue;
    }
    std::optional<int64_t> rank = knownRank(x, &rc.analysis);
    if (!rank || *rank < 1)
      return refuse("a later write stores a tensor whose rank the graph "
                    "does not fix");
    staticStores.push_back(store);
  }

  torch::jit::Graph &graph = rc.graph;
  for (size_t i = 0; i + 1 < node->inputs().size(); i += 2)
    if (Rep *r = rc.bounded(node->input(i + 1))) {
      Value *count = r->count;
      torch::jit::WithInsertPoint at(node);
      node->replaceInput(
          i + 1,
          insertForm(graph, "neutral_padding", {r->value, count}, node)[0]);
      node->addInput(graph.insertConstant(
          countKeys.at(*constantString(node->input(i)))));
      node->addInput(count);
    }
  // A read becomes a read of the padded rows and one of the count; the
  // original is erased once its uses are rewritten or cut.
  for (const Access &read : reads) {
    torch::jit::WithInsertPoint at(read.node);
    Value *dict = read.node->input(0);
    Value *count = emit(graph, "aten::__getitem__",
                        {dict, graph.insertConstant(read.countKey)},
                        read.node);
    Value *padded = emit(graph, "aten::__getitem__",
                         {dict, read.node->input(1)}, read.node);
    rc.setBounded(read.node->output(), padded, count, /*isIndex=*/false);
  }
  for (const Access &store : staticStores) {
    torch::jit::WithInsertPoint at(store.node->next());
    Value *x = store.node->input(2);
    emit(graph, "aten::_set_item",
         {store.node->input(0), graph.insertConstant(store.countKey),
          rc.rowsOf(x, store.node)},
         store.node);
  }
  for (const Access &store : pending)
    rc.pendingStores[store.node] = store.countKey;
  rc.paddedDictsMade.push_back({node, countKeys});
  return RuleResult::applied();
}

/// A later write of a padded entry (paddedDict): the padded rows, and the
/// count beside them.
RuleResult paddedStore(Node *node, RuleContext &rc) {
  auto pending = rc.pendingStores.find(node);
  Rep *x = rc.bounded(node->input(2));
  if (pending == rc.pendingStores.end() || !x)
    return RuleResult::notApplicable();
  torch::jit::Graph &graph = rc.graph;
  {
    torch::jit::WithInsertPoint before(node);
    node->replaceInput(
        2, insertForm(graph, "neutral_padding", {x->value, x->count}, node)[0]);
  }
  torch::jit::WithInsertPoint at(node->next());
  emit(graph, "aten::_set_item",
       {node->input(0), graph.insertConstant(pending->second), x->count},
       node);
  rc.pendingStores.erase(pending);
  return RuleResult::applied();
}

} // namespace

void addContainerRules(std::vector<BoundRule> &rules) {
  using On = BoundRule::On;
  rules.push_back({"padded-dict", On::Use, ops({"prim::DictConstruct"}),
                   paddedDict});
  rules.push_back(
      {"padded-dict-store", On::Use, ops({"aten::_set_item"}), paddedStore});
}

} // namespace staticify::bound
