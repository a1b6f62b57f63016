//===- GraphUtils.cpp - Small helpers the rewriting passes share ----------===//

#include "passes/GraphUtils.h"

#include "passes/OpCatalogue.h"

#include <torch/csrc/jit/frontend/builtin_functions.h>
#include <torch/csrc/jit/frontend/schema_matching.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_set>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// Appends a byte code for \p type to \p key when the type is one whose
/// schema matching is decided by its kind alone (and so by the key): the
/// leaf types, and lists and optionals of them. False for any other type.
bool appendMatchKind(std::string &key, const c10::Type &type) {
  switch (type.kind()) {
  case c10::TypeKind::TensorType:
  case c10::TypeKind::IntType:
  case c10::TypeKind::FloatType:
  case c10::TypeKind::BoolType:
  case c10::TypeKind::NumberType:
  case c10::TypeKind::NoneType:
  case c10::TypeKind::StringType:
  case c10::TypeKind::DeviceObjType:
  case c10::TypeKind::ComplexType:
    key.push_back(static_cast<char>(type.kind()));
    return true;
  case c10::TypeKind::ListType:
  case c10::TypeKind::OptionalType:
    key.push_back(static_cast<char>(type.kind()));
    return appendMatchKind(key, *type.containedType(0));
  default:
    return false;
  }
}

/// The key of one call for the schema cache below: the op, each argument's
/// match kind, and the keyword arguments' names. Empty when some argument's
/// type is not decided by its kind.
std::string matchKey(c10::Symbol op,
                     const std::vector<torch::jit::NamedValue> &args,
                     const std::vector<torch::jit::NamedValue> &kwargs,
                     Graph &graph) {
  std::string key = std::to_string(static_cast<c10::unique_t>(op));
  auto append = [&](const torch::jit::NamedValue &arg) {
    key.push_back(':');
    return appendMatchKind(key, *arg.value(graph)->type());
  };
  for (const torch::jit::NamedValue &arg : args)
    if (!append(arg))
      return {};
  for (const torch::jit::NamedValue &arg : kwargs) {
    key += '|' + arg.name();
    if (!append(arg))
      return {};
  }
  return key;
}

/// Schemas `emit` matched before, by matchKey. libtorch's emitBuiltinCall
/// names and tries every overload of an op on every call and then looks
/// the operator up again; the passes emit the same few calls thousands of
/// times on a large graph. Matching is decided by the key (the argument
/// types' kinds), so a call seen before is matched against the one schema
/// it matched then, in the same order (exact types, then conversions).
/// Null: the call matched a builtin function, which emitBuiltinCall
/// inlines.
struct SchemaCache {
  std::mutex mutex;
  std::unordered_map<std::string, const c10::FunctionSchema *> schemas;
};

SchemaCache &schemaCache() {
  static SchemaCache cache;
  return cache;
}

/// What emitBuiltinNode does with a match: one node, its results packed
/// into a tuple when there are several.
Value *insertMatched(Graph &graph, c10::Symbol op,
                     const torch::jit::MatchedSchema &matched,
                     const torch::jit::SourceRange &range) {
  Node *node = graph.insertNode(graph.create(op, matched.inputs, 0));
  node->setSourceRange(range);
  for (const c10::TypePtr &type : matched.return_types)
    node->addOutput()->setType(type);
  if (node->outputs().size() == 1)
    return node->output();
  c10::TupleTypePtr named;
  if (matched.return_field_names)
    named = c10::TupleType::createNamed(c10::nullopt,
                                        *matched.return_field_names,
                                        matched.return_types);
  return graph.insertNode(graph.createTuple(node->outputs(), named))
      ->output();
}

} // namespace

Value *emit(torch::jit::Graph &graph, const char *op,
            std::vector<torch::jit::NamedValue> args, const Node *anchor,
            std::vector<torch::jit::NamedValue> kwargs) {
  const c10::Symbol symbol = c10::Symbol::fromQualString(op);
  const torch::jit::SourceRange &range = anchor->sourceRange();
  // Constants become graph values here, where matching would insert them,
  // so that the key can read their types.
  for (torch::jit::NamedValue &arg : args)
    arg = torch::jit::NamedValue(arg.value(graph));
  for (torch::jit::NamedValue &arg : kwargs)
    arg = torch::jit::NamedValue(arg.name(), arg.value(graph));
  // An operator-versioned graph may need an upgrader's historic schema:
  // that stays with emitBuiltinCall.
  const auto &variants = torch::jit::getAllOperatorsFor(symbol);
  std::string key = matchKey(symbol, args, kwargs, graph);
  if (key.empty() || variants.empty() || graph.get_op_version())
    return graph.insert(symbol, args, kwargs, range);
  key += '#' + std::to_string(variants.size());

  SchemaCache &cache = schemaCache();
  std::optional<const c10::FunctionSchema *> cached;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.schemas.find(key);
    if (it != cache.schemas.end())
      cached = it->second;
  }
  if (cached && !*cached)
    return graph.insert(symbol, args, kwargs, range);
  if (cached)
    return insertMatched(
        graph, symbol,
        torch::jit::matchSchemas({*cached}, range, graph, args, kwargs).second,
        range);

  // The candidates in emitBuiltinCall's order: the operators, then the
  // builtin functions (TorchScript wrappers it inlines, such as a scalar
  // on the left of a comparison), which stay with emitBuiltinCall.
  std::vector<const c10::FunctionSchema *> schemas;
  for (const auto &variant : variants)
    schemas.push_back(&variant->schema());
  for (torch::jit::Function *function :
       torch::jit::getAllBuiltinFunctionsFor(symbol)) {
    function->ensure_defined();
    schemas.push_back(&function->getSchema());
  }
  auto [index, matched] =
      torch::jit::matchSchemas(schemas, range, graph, args, kwargs);
  const bool isOperator = index < variants.size();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.schemas.emplace(std::move(key),
                          isOperator ? schemas[index] : nullptr);
  }
  if (!isOperator)
    return graph.insert(symbol, args, kwargs, range);
  return insertMatched(graph, symbol, matched, range);
}

bool opRegistered(const char *op) {
  return !torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(op))
              .empty();
}

std::pair<Value *, Value *> unpackPair(Graph &graph, Value *tuple) {
  Node *construct = tuple->node();
  if (construct->kind() == c10::prim::TupleConstruct &&
      tuple->uses().empty()) {
    std::pair<Value *, Value *> out{construct->input(0), construct->input(1)};
    construct->destroy();
    return out;
  }
  Node *unpack = graph.insertNode(graph.createTupleUnpack(tuple));
  return {unpack->output(0), unpack->output(1)};
}

void cloneNodes(torch::jit::Graph &graph, const std::vector<Node *> &nodes,
                std::unordered_map<Value *, Value *> &map, bool afterOriginals) {
  for (Node *n : nodes) {
    Node *clone = graph.createClone(n, [&](Value *v) {
      auto it = map.find(v);
      return it == map.end() ? v : it->second;
    });
    if (afterOriginals)
      clone->insertAfter(n);
    else
      graph.insertNode(clone);
    for (size_t i = 0; i < n->outputs().size(); ++i)
      map[n->output(i)] = clone->output(i);
  }
}

Value *emitDefaultDType(torch::jit::Graph &graph, const Node *anchor) {
  return emit(graph, "prim::dtype",
              {emit(graph, "aten::empty", {std::vector<int64_t>{0}}, anchor)},
              anchor);
}

std::vector<Value *>
emitIf(torch::jit::Graph &graph, Value *cond, const Node *anchor,
       size_t results, const std::function<std::vector<Value *>()> &then,
       const std::function<std::vector<Value *>()> &otherwise) {
  Node *branch =
      graph.insertNode(graph.create(c10::prim::If, {cond}, results));
  branch->setSourceRange(anchor->sourceRange());
  for (const auto *body : {&then, &otherwise}) {
    torch::jit::Block *block = branch->addBlock();
    torch::jit::WithInsertPoint in(block);
    for (Value *v : (*body)())
      block->registerOutput(v);
  }
  // Tensors of either branch are Tensor; a host number (a count of rows
  // the host chooses) keeps its type.
  for (size_t i = 0; i < results; ++i) {
    c10::TypePtr type = branch->blocks()[0]->outputs()[i]->type();
    branch->output(i)->setType(type->cast<c10::TensorType>()
                                   ? c10::TensorType::get()
                                   : type);
  }
  return {branch->outputs().begin(), branch->outputs().end()};
}

Value *emitIf(torch::jit::Graph &graph, Value *cond, const Node *anchor,
              const std::function<Value *()> &then,
              const std::function<Value *()> &otherwise) {
  return emitIf(
      graph, cond, anchor, 1,
      [&] { return std::vector<Value *>{then()}; },
      [&] { return std::vector<Value *>{otherwise()}; })[0];
}

bool returnedOnly(const torch::jit::Value *v) {
  const Node *ret = v->owningGraph()->return_node();
  return std::all_of(v->uses().begin(), v->uses().end(),
                     [&](const torch::jit::Use &u) { return u.user == ret; });
}

bool onlyRaises(const torch::jit::Block *block) {
  for (const Node *node : block->nodes())
    if (node->kind() == c10::prim::RaiseException)
      return true;
  return false;
}

bool onlyWarns(const torch::jit::Block *block) {
  if (!block->outputs().empty())
    return false;
  bool warns = false;
  for (const Node *node : block->nodes()) {
    if (node->kind() == c10::aten::warn) {
      warns = true;
      continue;
    }
    if (node->hasSideEffects() || !node->blocks().empty() ||
        writesAnything(node))
      return false;
  }
  return warns;
}

bool isGuardFallback(const torch::jit::Block *block) {
  const Node *owner = block->owningNode();
  return owner && owner->hasAttribute(guardAttr()) &&
         owner->blocks().size() > 1 && owner->blocks()[1] == block;
}

bool inGuardFallback(const Node *node) {
  for (const torch::jit::Block *b = node->owningBlock(); b->owningNode();
       b = b->owningNode()->owningBlock())
    if (isGuardFallback(b))
      return true;
  return false;
}

namespace {
constexpr std::string_view kGuardName = "staticify_guard";
constexpr std::string_view kBoundGuardName = "staticify_guard_bound";
constexpr std::string_view kShapeGuardName = "staticify_guard_shape";

bool startsWith(const std::string &s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

/// Gives the guard \p ifNode, which has no result, one to be named by: a
/// value v defined before it that a later node of its block uses, passed
/// through both branches (`staticify_guard = v`), the later uses reading
/// the result, which is v. TorchScript drops a result nothing uses when it
/// loads the code; this one is used. Returns nullptr when no later node
/// uses an earlier value.
Value *passThrough(Node *ifNode) {
  torch::jit::Block *block = ifNode->owningBlock();
  Node *ret = block->return_node();
  // Defined where it dominates the if: earlier in its block, the block's
  // parameters, or an enclosing block (a later node of the block uses it).
  auto definedBefore = [&](const Value *v) {
    const Node *def = v->node();
    if (def == block->param_node())
      return true;
    if (def->owningBlock() == block)
      return def->isBefore(ifNode);
    return !insideOf(def, ifNode);
  };
  auto later = [&](const Node *user) {
    return user == ret ||
           (user->owningBlock() == block && user->isAfter(ifNode));
  };
  Value *v = nullptr;
  for (Node *n = ifNode->next(); !v; n = n->next()) {
    for (Value *in : n->inputs())
      if (definedBefore(in) && in->node()->kind() != c10::prim::Constant) {
        v = in;
        break;
      }
    if (n == ret)
      break;
  }
  if (!v)
    return nullptr;
  Value *out = ifNode->addOutput()->setType(v->type());
  for (torch::jit::Block *b : ifNode->blocks())
    b->registerOutput(v);
  std::vector<torch::jit::Use> uses = v->uses();
  for (const torch::jit::Use &use : uses)
    if (later(use.user))
      use.user->replaceInput(use.offset, out);
  return out;
}
} // namespace

void nameGuards(torch::jit::Graph &graph) {
  for (Node *node : collectNodes(graph.block())) {
    if (node->kind() != c10::prim::If || !node->hasAttribute(guardAttr()))
      continue;
    Value *named = node->outputs().empty() ? passThrough(node) : node->output(0);
    if (named && !startsWith(named->debugNameBase(), kGuardName))
      named->setDebugName(std::string(node->i(guardAttr()) == kBoundGuard ? kBoundGuardName
                                      : node->i(guardAttr()) == kShapeGuard
                                          ? kShapeGuardName
                                          : kGuardName));
  }
}

void recoverGuards(torch::jit::Graph &graph) {
  // The loader orders an if's results by their variables, not as they were:
  // the named one may be any of them.
  auto guardName = [](const Node *node) -> std::optional<std::string> {
    if (node->kind() != c10::prim::If)
      return std::nullopt;
    for (const Value *v : node->outputs())
      if (v->hasDebugName() && startsWith(v->debugNameBase(), kGuardName))
        return v->debugNameBase();
    return std::nullopt;
  };
  for (Node *node : collectNodes(graph.block())) {
    if (node->hasAttribute(guardAttr()))
      continue;
    std::optional<std::string> name = guardName(node);
    if (!name)
      continue;
    bool carriesOuter = false;
    for (const torch::jit::Block *b = node->owningBlock(); b->owningNode();
         b = b->owningNode()->owningBlock())
      carriesOuter |= guardName(b->owningNode()) == name;
    if (!carriesOuter)
      node->i_(guardAttr(), startsWith(*name, kBoundGuardName)   ? kBoundGuard
                            : startsWith(*name, kShapeGuardName) ? kShapeGuard
                                                                 : 1);
  }
}

bool isUndefined(const Value *v) {
  return v->node()->kind() == c10::prim::Uninitialized;
}

bool isTensor(const Value *v) {
  return v->type()->kind() == c10::TypeKind::TensorType;
}

bool carriesTensor(const c10::TypePtr &type) {
  if (type->kind() == c10::TypeKind::TensorType)
    return true;
  for (const c10::TypePtr &contained : type->containedTypes())
    if (carriesTensor(contained))
      return true;
  return false;
}

std::optional<int64_t> constantInt(const Value *v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isInt())
    return std::nullopt;
  return iv->toInt();
}

std::optional<bool> constantBool(const Value *v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isBool())
    return std::nullopt;
  return iv->toBool();
}

std::optional<std::string> constantString(const Value *v) {
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isString())
    return std::nullopt;
  return iv->toStringRef();
}

std::optional<std::vector<int64_t>> constantIntList(const Value *v) {
  if (v->node()->kind() == c10::prim::ListConstruct) {
    // Only a list nothing writes to (no append in a loop...) is constant.
    for (const torch::jit::Use &use : v->uses())
      if (use.offset == 0 && mutatesFirstInput(use.user))
        return std::nullopt;
    std::vector<int64_t> items;
    for (const Value *item : v->node()->inputs()) {
      auto i = constantInt(item);
      if (!i)
        return std::nullopt;
      items.push_back(*i);
    }
    return items;
  }
  auto iv = torch::jit::toIValue(v);
  if (!iv || !iv->isIntList())
    return std::nullopt;
  return iv->toIntVector();
}

std::optional<std::vector<int64_t>> constantDims(const Value *v) {
  if (std::optional<std::vector<int64_t>> list = constantIntList(v))
    return list;
  if (std::optional<int64_t> d = constantInt(v))
    return std::vector<int64_t>{*d};
  return std::nullopt;
}

std::optional<size_t> inputIndex(const Node *node, std::string_view name) {
  // Compared in place: the analysis asks this of most nodes it visits.
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema)
    return std::nullopt;
  const std::vector<c10::Argument> &args = schema->arguments();
  for (size_t i = 0; i < node->inputs().size() && i < args.size(); ++i)
    if (args[i].name() == name)
      return i;
  return std::nullopt;
}

Value *namedInput(const Node *node, std::string_view name) {
  std::optional<size_t> i = inputIndex(node, name);
  return i ? node->input(*i) : nullptr;
}

static bool isErasable(const Node *node) {
  // A write to any argument (in place, or out=), as its schema says.
  if (node->kind() == c10::prim::Param || node->kind() == c10::prim::Return ||
      node->hasSideEffects() || writesAnything(node))
    return false;
  // An if or a loop goes with its blocks: only when nothing in them writes
  // or has a side effect.
  for (const torch::jit::Block *b : node->blocks())
    for (const Node *n : b->nodes())
      if (!isErasable(n))
        return false;
  return true;
}

/// Adds \p node to \p dead if every use of its outputs is by a dead node,
/// then considers its producers. Consumers are always considered before
/// their producers, so a producer is re-considered from each consumer.
static void markDead(Node *node, std::unordered_set<Node *> &dead,
                     std::vector<Node *> &order) {
  if (dead.count(node) || !isErasable(node))
    return;
  for (const Value *out : node->outputs())
    for (const torch::jit::Use &use : out->uses())
      if (!dead.count(use.user))
        return;
  dead.insert(node);
  order.push_back(node);
  for (Value *in : node->inputs())
    markDead(in->node(), dead, order);
}

size_t eraseIfDead(Node *node, PassContext &ctx, std::string_view rule) {
  std::unordered_set<Node *> dead;
  std::vector<Node *> order;
  markDead(node, dead, order);
  // Consumers first: destroying one drops its uses of its producers.
  for (Node *n : order) {
    ctx.rewrote(n, rule);
    n->destroy();
  }
  return order.size();
}

NodeIndex::NodeIndex(std::vector<std::pair<const Node *, size_t>> entries)
    : entries_(std::move(entries)) {
  std::sort(entries_.begin(), entries_.end());
}

std::optional<size_t> NodeIndex::find(const Node *node) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), node,
      [](const std::pair<const Node *, size_t> &e, const Node *n) {
        return e.first < n;
      });
  if (it == entries_.end() || it->first != node)
    return std::nullopt;
  return it->second;
}

static void collectInto(torch::jit::Block *block, std::vector<Node *> &out) {
  for (Node *node : block->nodes()) {
    out.push_back(node);
    for (torch::jit::Block *b : node->blocks())
      collectInto(b, out);
  }
}

size_t countNodes(const torch::jit::Block *block) {
  size_t n = 0;
  for (const Node *node : block->nodes())
    n += countNodes(node);
  return n;
}

size_t countNodes(const Node *node) {
  size_t n = 1;
  for (const torch::jit::Block *b : node->blocks())
    n += countNodes(b);
  return n;
}

std::vector<Node *> collectNodes(torch::jit::Block *block) {
  // Passes collect one graph's nodes again and again: reserving the last
  // count spares a large graph the vector's regrowths.
  thread_local size_t lastCount = 0;
  std::vector<Node *> nodes;
  nodes.reserve(lastCount);
  collectInto(block, nodes);
  lastCount = nodes.size();
  return nodes;
}

namespace {

/// Calls \p f on every node of \p block, nested blocks included, in
/// reverse program order (the reverse of collectNodes'): a node's blocks,
/// last first, before the node.
template <typename F> void forEachNodeReversed(torch::jit::Block *block, F &f) {
  for (Node *node : block->nodes().reverse()) {
    for (auto b = node->blocks().rbegin(); b != node->blocks().rend(); ++b)
      forEachNodeReversed(*b, f);
    f(node);
  }
}

/// The dead set of a sweep: its nodes, and whether one of them has blocks
/// (only then can a block's result list be a dead user).
class DeadSet {
public:
  explicit DeadSet(std::unordered_set<const Node *> &dead) : dead(dead) {
    withBlocks = std::any_of(dead.begin(), dead.end(), [](const Node *n) {
      return !n->blocks().empty();
    });
  }
  bool contains(const Node *node) const { return dead.count(node); }
  void insert(Node *node) {
    dead.insert(node);
    withBlocks |= !node->blocks().empty();
  }
  /// Whether \p user is dead: in the set, or the result list of a block of
  /// a node in it (a converted if's branch result). The user is not read
  /// when no dead node has blocks: a graph this large is not in cache.
  bool isDeadUser(const Node *user) const {
    if (dead.empty())
      return false;
    if (dead.count(user))
      return true;
    if (!withBlocks || user->kind() != c10::prim::Return)
      return false;
    const Node *owner = user->owningBlock()->owningNode();
    return owner && dead.count(owner);
  }

private:
  std::unordered_set<const Node *> &dead;
  bool withBlocks = false;
};

} // namespace

/// The pure nodes of \p graph whose results nothing live uses, consumers
/// before producers; the nodes in \p deadSoFar count as dead whatever they
/// are (and are not in the result), and those found are added to it.
///
/// With \p deadWriters, also whether libtorch's dead-code elimination might
/// remove something once they are gone: a node without side effects that
/// is not erasable here (it may write) with no live use of any result, or
/// an if or loop with a result no live node uses.
///
/// \p snapshot, when given, is the graph's nodes as they are (collectNodes).
static std::vector<Node *>
deadNodes(torch::jit::Graph &graph, std::unordered_set<const Node *> &deadSoFar,
          bool *deadWriters = nullptr,
          const std::vector<Node *> *snapshot = nullptr) {
  // In reverse program order every consumer, nested blocks included, is
  // seen before its producers: one pass marks, one sweep destroys.
  std::vector<Node *> order;
  if (deadWriters)
    *deadWriters = false;
  DeadSet dead(deadSoFar);
  auto hasLiveUse = [&](const Value *out) {
    for (const torch::jit::Use &use : out->uses())
      if (!dead.isDeadUser(use.user))
        return true;
    return false;
  };
  auto visit = [&](Node *node) {
    if (dead.contains(node))
      return;
    // Most nodes have a live use of every result: decided without asking
    // whether they could be erased.
    if (node->blocks().empty() && !node->outputs().empty() &&
        std::all_of(node->outputs().begin(), node->outputs().end(),
                    hasLiveUse))
      return;
    bool erasable = !node->outputs().empty() && isErasable(node);
    if (!erasable) {
      if (deadWriters && !*deadWriters &&
          node->kind() != c10::prim::Return && !node->hasSideEffects()) {
        bool allUnused = true, someUnused = false;
        for (const Value *out : node->outputs()) {
          bool unused = !hasLiveUse(out);
          allUnused &= unused;
          someUnused |= unused;
        }
        *deadWriters = allUnused || (someUnused && !node->blocks().empty());
      }
      return;
    }
    if (std::any_of(node->outputs().begin(), node->outputs().end(),
                    hasLiveUse)) {
      if (deadWriters && !*deadWriters && !node->blocks().empty() &&
          !std::all_of(node->outputs().begin(), node->outputs().end(),
                       hasLiveUse))
        *deadWriters = true;
      return;
    }
    dead.insert(node);
    order.push_back(node);
  };
  if (snapshot)
    std::for_each(snapshot->rbegin(), snapshot->rend(), visit);
  else
    forEachNodeReversed(graph.block(), visit);
  return order;
}

DeadNodes findDeadNodes(torch::jit::Graph &graph,
                        const std::vector<Node *> &alsoDead) {
  DeadNodes dead;
  dead.all.insert(alsoDead.begin(), alsoDead.end());
  dead.order = deadNodes(graph, dead.all);
  return dead;
}

size_t eraseNodes(const std::vector<Node *> &order, PassContext &ctx,
                  std::string_view rule) {
  for (Node *node : order) {
    ctx.rewrote(node, rule);
    node->destroy();
  }
  return order.size();
}

size_t eraseDeadNodes(torch::jit::Graph &graph, PassContext &ctx,
                      std::string_view rule) {
  return eraseNodes(findDeadNodes(graph, {}).order, ctx, rule);
}

static bool isConstant(const Value *v) {
  return v->node()->kind() == c10::prim::Constant;
}

/// Whether values of \p type are immutable for libtorch's alias analysis
/// (a subset: anything else counts as mutable, which only costs time).
static bool isImmutable(const c10::TypePtr &type) {
  switch (type->kind()) {
  case c10::TypeKind::IntType:
  case c10::TypeKind::FloatType:
  case c10::TypeKind::ComplexType:
  case c10::TypeKind::NumberType:
  case c10::TypeKind::BoolType:
  case c10::TypeKind::StringType:
  case c10::TypeKind::NoneType:
  case c10::TypeKind::DeviceObjType:
    return true;
  case c10::TypeKind::TupleType:
  case c10::TypeKind::OptionalType: {
    c10::ArrayRef<c10::TypePtr> elements = type->containedTypes();
    return std::all_of(elements.begin(), elements.end(), isImmutable);
  }
  default:
    return false;
  }
}

/// A node the full constant propagation might fold and the immutable-types
/// one does not: constant inputs, no blocks, deterministic, and a mutable
/// input or result (its alias analysis then decides).
static bool needsAliasingFold(const Node *node) {
  if (node->kind() == c10::prim::Constant ||
      node->kind() == c10::prim::Uninitialized || !node->blocks().empty() ||
      !std::all_of(node->inputs().begin(), node->inputs().end(), isConstant) ||
      node->isNondeterministic() || node->hasSideEffects())
    return false;
  // Constant inputs have no writers; a result something writes in place
  // (`coords = []` then `coords.append(...)`) has, and is never folded.
  auto written = [](const Value *v) {
    return std::any_of(v->uses().begin(), v->uses().end(),
                       [](const torch::jit::Use &use) {
                         return use.offset == 0 && mutatesFirstInput(use.user);
                       });
  };
  if (std::any_of(node->outputs().begin(), node->outputs().end(), written))
    return false;
  auto mutableValue = [](const Value *v) { return !isImmutable(v->type()); };
  return std::any_of(node->inputs().begin(), node->inputs().end(),
                     mutableValue) ||
         std::any_of(node->outputs().begin(), node->outputs().end(),
                     mutableValue);
}

bool propagateConstants(std::shared_ptr<torch::jit::Graph> &graph,
                        std::vector<Node *> *nodesAfter) {
  bool changed = torch::jit::ConstantPropagationImmutableTypes(graph);
  std::vector<Node *> nodes = collectNodes(graph->block());
  if (std::any_of(nodes.begin(), nodes.end(), needsAliasingFold)) {
    changed |= torch::jit::ConstantPropagation(graph,
                                               /*ignore_custom_classes=*/true);
    if (nodesAfter)
      nodes = collectNodes(graph->block());
  }
  if (nodesAfter)
    *nodesAfter = std::move(nodes);
  return changed;
}

bool eliminateDeadCode(std::shared_ptr<torch::jit::Graph> &graph,
                       const std::vector<Node *> *snapshot) {
  std::unordered_set<const Node *> dead;
  // Of the nodes libtorch's pass removes, the last has no used result (or
  // is an if or loop whose unused result it drops first): with no pure dead
  // node left, such a node is a writer or an if/loop here.
  bool deadWriters = false;
  std::vector<Node *> pure = deadNodes(*graph, dead, &deadWriters, snapshot);
  for (Node *node : pure)
    node->destroy();
  if (!deadWriters)
    return !pure.empty();
  size_t before = countNodes(graph->block());
  torch::jit::EliminateDeadCode(graph);
  return !pure.empty() || countNodes(graph->block()) != before;
}

bool computesSameValue(const Value *a, const Value *b,
                       const Aliases &aliases, int depth) {
  if (a == b)
    return true;
  const Node *x = a->node(), *y = b->node();
  if (x->kind() != y->kind() || a->offset() != b->offset() ||
      x->inputs().size() != y->inputs().size() || *a->type() != *b->type())
    return false;
  if (x->kind() == c10::prim::Constant) {
    // Numbers, bools, strings and None: what the frontend repeats.
    auto u = torch::jit::toIValue(a), v = torch::jit::toIValue(b);
    if (!u || !v)
      return false;
    if (u->isInt() && v->isInt())
      return u->toInt() == v->toInt();
    if (u->isDouble() && v->isDouble())
      return u->toDouble() == v->toDouble();
    if (u->isBool() && v->isBool())
      return u->toBool() == v->toBool();
    if (u->isString() && v->isString())
      return u->toStringRef() == v->toStringRef();
    return u->isNone() && v->isNone();
  }
  if (depth == 0 || x->kind() == c10::prim::Param || !x->blocks().empty() ||
      x->isNondeterministic() || x->hasSideEffects() ||
      mutatesFirstInput(x) || !x->maybeSchema() || aliases.hasWriters(a) ||
      aliases.hasWriters(b))
    return false;
  for (size_t i = 0; i < x->inputs().size(); ++i)
    if (!computesSameValue(x->input(i), y->input(i), aliases, depth - 1))
      return false;
  return true;
}

bool writtenByOthers(torch::jit::Graph &graph,
                     const Aliases &aliases, const Value *v,
                     const Node *except) {
  if (!aliases.hasWriters(v))
    return false;
  if (std::optional<bool> written = Aliases::writtenAfresh(v, except))
    return *written;
  torch::jit::ValueSet values = {v};
  for (Node *node : collectNodes(graph.block()))
    if (node != except && aliases.writesToAlias(node, values))
      return true;
  return false;
}

std::optional<std::vector<std::string>> modulePath(const torch::jit::Graph &graph,
                                                   const Value *v) {
  if (graph.inputs().empty())
    return std::nullopt;
  std::vector<std::string> path;
  while (v != graph.inputs()[0]) {
    const Node *def = v->node();
    if (def->kind() != c10::prim::GetAttr)
      return std::nullopt;
    path.push_back(def->s(c10::attr::name));
    v = def->input(0);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

static void correspond(const torch::jit::Block *from, torch::jit::Block *to,
                       std::unordered_map<const Node *, Node *> &map) {
  auto f = from->nodes().begin();
  auto t = to->nodes().begin();
  for (; f != from->nodes().end() && t != to->nodes().end(); ++f, ++t) {
    if ((*f)->kind() != (*t)->kind() ||
        (*f)->blocks().size() != (*t)->blocks().size())
      throw std::logic_error("correspondingNodes: the graphs differ");
    map.emplace(*f, *t);
    for (size_t b = 0; b < (*f)->blocks().size(); ++b)
      correspond((*f)->blocks()[b], (*t)->blocks()[b], map);
  }
  if (f != from->nodes().end() || t != to->nodes().end())
    throw std::logic_error("correspondingNodes: the graphs differ");
}

std::unordered_map<const Node *, Node *>
correspondingNodes(const torch::jit::Graph &from, torch::jit::Graph &to) {
  std::unordered_map<const Node *, Node *> map;
  correspond(from.block(), to.block(), map);
  return map;
}

void replaceGraphContents(torch::jit::Graph &dst,
                          const torch::jit::Graph &src) {
  torch::jit::Block *block = dst.block();
  while (!block->outputs().empty())
    block->eraseOutput(block->outputs().size() - 1);
  // Last first: every use is destroyed before its definition.
  std::vector<Node *> nodes(block->nodes().begin(), block->nodes().end());
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    (*it)->destroy();
  while (!block->inputs().empty())
    block->eraseInput(block->inputs().size() - 1);
  block->cloneFrom(const_cast<torch::jit::Block *>(src.block()),
                   [](torch::jit::Value *v) -> torch::jit::Value * {
                     throw std::logic_error("a graph refers to a value '%" +
                                            v->debugName() +
                                            "' from outside it");
                   });
}

bool insideOf(const Node *node, const Node *owner) {
  return std::any_of(owner->blocks().begin(), owner->blocks().end(),
                     [&](const torch::jit::Block *b) { return insideOf(node, b); });
}

bool insideOf(const Node *node, const torch::jit::Block *block) {
  // A graph input's node (prim::Param) belongs to no block.
  for (const torch::jit::Block *b = node->owningBlock(); b;
       b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
    if (b == block)
      return true;
  return false;
}

} // namespace staticify
