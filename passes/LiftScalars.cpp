//===- LiftScalars.cpp - host scalars read from data -> 0-d device tensors ===//

#include "passes/LiftScalars.h"

#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/OpCatalogue.h"

#include <algorithm>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "lift-scalars";

} // namespace

std::optional<c10::ScalarType> liftedDType(const c10::TypePtr &t) {
  switch (t->kind()) {
  case c10::TypeKind::IntType:
    return c10::ScalarType::Long;
  case c10::TypeKind::FloatType:
    return c10::ScalarType::Double;
  case c10::TypeKind::BoolType:
    return c10::ScalarType::Bool;
  default:
    return std::nullopt;
  }
}

namespace {

/// `t.item()`: a Scalar whose Python type (int, float, bool) follows t's
/// dtype at run time. Lifted, it keeps t's dtype.
bool isItem(const Node *node) {
  return node->kind() == c10::Symbol::fromQualString("aten::item") &&
         isTensor(node->input(0));
}

/// What `where(m)[k].numel()`, `nonzero(m).size(0)`, `nonzero(m).numel()`
/// and their len/size spellings read: the count of m's nonzero elements,
/// times m.dim() for the numel of nonzero's [count, m.dim()] coordinates.
struct CountedMask {
  Value *mask = nullptr;
  bool timesRank = false;
  explicit operator bool() const { return mask != nullptr; }
};

CountedMask countedMask(const Node *node) {
  const std::string op = node->kind().toQualString();
  bool rows =
      op == "aten::len" || (op == "aten::size" && node->inputs().size() == 2 &&
                            constantInt(node->input(1)) == 0);
  if (!rows && op != "aten::numel")
    return {};
  const Node *producer = node->input(0)->node();
  if (producer->kind() == c10::aten::__getitem__) {
    const Node *where = producer->input(0)->node();
    if (where->kind() == c10::aten::where && where->inputs().size() == 1)
      return {where->input(0)}; // each index tensor has one entry per nonzero
  }
  const OpInfo *info = opInfo(producer);
  if (info && info->has(kNonzeroCoordinates))
    return {producer->input(0), /*timesRank=*/!rows};
  return {};
}

bool isSource(const Node *node) {
  const OpInfo *op = opInfo(node);
  bool conversion = op && op->has(kHostConversion) &&
                    isTensor(node->input(0)) &&
                    liftedDType(node->output()->type());
  return conversion || isItem(node) || countedMask(node);
}

bool isNumber(const Value *v) {
  return v->type()->kind() == c10::TypeKind::NumberType;
}

/// The tensor op computing scalar op \p node on 0-d tensors, if any.
const char *tensorOpFor(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op ? op->tensorForm : nullptr;
}

/// int(x), float(x), bool(x): a conversion of a host number (or a Scalar).
bool isConversion(const Node *node) {
  const OpInfo *op = opInfo(node);
  return op && op->has(kHostConversion) && op->tensorForm;
}

} // namespace

bool isScalarOp(const Node *node) {
  if (!tensorOpFor(node) || node->outputs().size() != 1 ||
      !liftedDType(node->output()->type()))
    return false;
  // int()/float()/bool() also convert an item()'s Scalar: types are known
  // from there on. Other arithmetic on a Scalar has a run-time type.
  bool conversion = isConversion(node);
  for (const Value *in : node->inputs())
    if (!liftedDType(in->type()) && !(conversion && isNumber(in)))
      return false; // lists (prim::min of a list), tensors, strings...
  return true;
}

Value *castTo(Graph &graph, Value *t, c10::ScalarType dtype,
              const Node *anchor) {
  if (dtype == c10::ScalarType::Bool)
    return emit(graph, "aten::ne", {t, 0}, anchor);
  return emit(graph, "aten::to", {t, static_cast<int64_t>(dtype)}, anchor);
}

Value *emitScalarOpOnTensors(Graph &graph, Node *node,
                             const std::vector<Value *> &operands) {
  c10::ScalarType out = *liftedDType(node->output()->type());
  const OpInfo &info = *opInfo(node);
  std::vector<Value *> args;
  bool anyFloat = false;
  for (Value *in : node->inputs())
    anyFloat |= in->type()->kind() == c10::TypeKind::FloatType;
  for (size_t i = 0; i < operands.size(); ++i) {
    Value *in = node->input(i), *t = operands[i];
    // Python promotes int to float in mixed arithmetic and comparisons;
    // true division always computes in float.
    if ((anyFloat || info.has(kDivision)) &&
        in->type()->kind() != c10::TypeKind::FloatType &&
        in->type()->kind() != c10::TypeKind::BoolType)
      t = castTo(graph, t, c10::ScalarType::Double, node);
    args.push_back(t);
  }
  if (isConversion(node))
    return castTo(graph, args[0], out, node);
  if (node->kind() == c10::aten::floordiv) // emitted as div(rounding_mode)
    return emit(
        graph, "aten::div", {args[0], args[1]}, node,
        {torch::jit::NamedValue("rounding_mode", std::string("floor"))});
  std::vector<torch::jit::NamedValue> named(args.begin(), args.end());
  return emit(graph, tensorOpFor(node), named, node);
}

namespace {

/// `torch.as_tensor(x, dtype=d, device=dev)` (or torch.tensor,
/// torch.scalar_tensor) of a host number x with a dtype and a device: the
/// 0-d tensor `t.to(dev, d)` makes from x's lifted tensor t, which holds
/// x's value in int64, float64 or bool, a float first cast to the default
/// dtype as TorchScript makes it (torchaudio's biquads rebuild each
/// coefficient they read so). The two differ only where the original
/// raises: a float that overflows the default dtype, which its checked
/// conversion refuses and a cast makes inf. Without a dtype, or without a
/// device (the result lives on the host, where the lifted tensor is not):
/// left alone.
bool isScalarFactory(const Node *node, size_t offset) {
  static const auto asTensor = c10::Symbol::fromQualString("aten::as_tensor");
  if (offset != 0 || node->outputs().size() != 1 ||
      !(node->kind() == asTensor || node->kind() == c10::aten::tensor ||
        node->kind() == c10::aten::scalar_tensor) ||
      !liftedDType(node->input(0)->type()))
    return false;
  const Value *dtype = namedInput(node, "dtype");
  const Value *device = namedInput(node, "device");
  const Value *grad = namedInput(node, "requires_grad");
  return dtype && !dtype->mustBeNone() && device && !device->mustBeNone() &&
         (!grad || constantBool(grad) == false);
}

/// Tensor ops whose scalar argument at \p offset also takes a 0-d tensor.
bool acceptsTensorAt(const Node *node, size_t offset) {
  const OpInfo *op = opInfo(node);
  if (!op || !isTensor(node->output(0)) || node->outputs().size() != 1)
    return false;
  if (op->has(kScalarOperandTakesTensor)) // add/sub's alpha stays a scalar
    return offset == 1 && node->inputs().size() <= 3 &&
           isTensor(node->input(0));
  if (op->has(kConditionFirst)) // where(c, a, b)
    return offset == 1 || offset == 2;
  if (op->has(kFillValueTakesTensor)) // masked_fill(x, m, value)
    return offset == 2;
  return false;
}

struct Region {
  std::vector<Node *> sources;                  // the sync reads it grows from
  std::unordered_set<Node *> touched;           // every user seen, for grouping
  std::unordered_set<Node *> ops;               // scalar ops
  std::unordered_set<Node *> ifs;               // converted ifs
  std::vector<std::pair<Node *, size_t>> sinks; // tensor ops taking a scalar
  std::unordered_set<Node *> returnsTo; // ifs that a region value leaves by
  std::string whyNot;
  const Node *blocker = nullptr;
};

/// Grows the region of \p sources to completion (so that `touched` is the
/// whole reach), recording the first reason it cannot be lifted.
Region growRegion(const std::vector<Node *> &sources,
                  const Aliases &aliases, const AnalysisResult &facts) {
  Region r;
  r.sources = sources;
  std::vector<Value *> work;
  std::unordered_set<Value *> seen;
  auto push = [&](Value *v) {
    if (seen.insert(v).second)
      work.push_back(v);
  };
  for (Node *s : sources)
    push(s->output());
  auto fail = [&](std::string why, const Node *blocker) {
    if (r.whyNot.empty()) {
      r.whyNot = std::move(why);
      r.blocker = blocker;
    }
  };
  while (!work.empty()) {
    Value *v = work.back();
    work.pop_back();
    for (const torch::jit::Use &use : v->uses()) {
      Node *user = use.user;
      r.touched.insert(user);
      if (user->kind() == c10::prim::Return) {
        Node *owner = user->owningBlock()->owningNode();
        if (!owner || owner->kind() != c10::prim::If) {
          fail(owner ? "it is carried by a loop"
                     : "it is returned as a host value",
               owner);
          continue;
        }
        r.touched.insert(owner);
        r.returnsTo.insert(owner);
        push(owner->output(use.offset));
        continue;
      }
      if (user->kind() == c10::prim::If) {
        std::string why = unconvertibleReason(user, aliases, &facts);
        if (why.empty() && isDataAssert(user))
          why = "it decides a data assert";
        for (size_t i = 0; why.empty() && i < user->outputs().size(); ++i) {
          if (!isTensor(user->output(i))) {
            if (!liftedDType(user->output(i)->type()))
              why = "the if returns a non-numeric value";
            else
              push(user->output(i));
          }
        }
        if (!why.empty())
          fail("it decides an if that cannot be converted: " + why, user);
        r.ifs.insert(user);
        continue;
      }
      if (isScalarOp(user)) {
        r.ops.insert(user);
        push(user->output());
        continue;
      }
      if (isScalarFactory(user, use.offset) ||
          (!inputAffectsShape(user, use.offset) &&
           acceptsTensorAt(user, use.offset))) {
        r.sinks.emplace_back(user, use.offset);
        continue;
      }
      fail("'" + std::string(user->kind().toQualString()) +
               "' needs it as a host value",
           user);
    }
  }
  // A value leaving an if's branch is only lifted if that if is converted.
  for (Node *owner : r.returnsTo)
    if (!r.ifs.count(owner))
      fail("a branch of an if on a host value returns it", owner);
  return r;
}

/// Where a node comes in program order once converted ifs are hoisted.
using Rank = std::pair<size_t, size_t>;

class Lifter {
public:
  /// \p conditions: for each converted if, the stand-in for its lifted
  /// condition that its branches' shields read (shieldBranches).
  Lifter(Graph &graph, const std::unordered_map<Node *, Value *> &conditions)
      : graph(graph), conditions(conditions) {}

  /// Lifts \p region, whose converted ifs' branches are hoisted already;
  /// \p rank orders its nodes in program order as it is now (other
  /// regions' rewrites insert nodes but never move this one's).
  void run(const Region &region,
           const std::unordered_map<const Node *, Rank> &rank,
           PassContext &ctx) {
    // Lift the sources, then every region node in program order.
    std::vector<Node *> dead;
    for (Node *source : region.sources) {
      torch::jit::WithInsertPoint guard(source->next());
      if (CountedMask counted = countedMask(source)) {
        // The count of nonzero elements, read on the device (int64).
        Value *mask = counted.mask;
        Value *count =
            emit(graph, "aten::sum",
                 {emit(graph, "aten::ne", {mask, 0}, source)}, source);
        if (counted.timesRank)
          count = emit(graph, "aten::mul",
                       {count, emit(graph, "aten::dim", {mask}, source)},
                       source);
        if (!device)
          device = emit(graph, "prim::device", {count}, source);
        lifted[source->output()] = count;
        dead.push_back(source);
        continue;
      }
      // A host number carries no gradient: the tensor standing for it is
      // detached, or a loss scaled by `t.item()` would differentiate t.
      Value *t = emit(
          graph, "aten::detach",
          {emit(graph, "aten::reshape",
                {source->input(0), std::vector<int64_t>{}}, source)},
          source);
      if (!device)
        device = emit(graph, "prim::device", {t}, source);
      auto dtype = liftedDType(source->output()->type());
      lifted[source->output()] =
          dtype ? castTo(t, *dtype, source) : pythonNumber(t, source);
      dead.push_back(source);
    }
    std::unordered_map<Node *, size_t> sinks(region.sinks.begin(),
                                             region.sinks.end());
    // The region's nodes in program order: walking only them keeps a graph
    // of many small regions linear, not regions times nodes.
    std::vector<std::pair<Rank, Node *>> order;
    for (const auto *set : {&region.ops, &region.ifs})
      for (Node *node : *set)
        order.emplace_back(rank.at(node), node);
    for (const auto &[node, offset] : sinks)
      order.emplace_back(rank.at(node), node);
    std::sort(order.begin(), order.end());
    for (const auto &[at, node] : order) {
      if (region.ops.count(node)) {
        liftOp(node);
        dead.push_back(node);
      } else if (region.ifs.count(node)) {
        liftIf(node);
        dead.push_back(node);
      } else if (auto it = sinks.find(node); it != sinks.end()) {
        liftSink(node, it->second, ctx);
      }
    }
    for (Node *node : dead)
      for (Value *out : node->outputs())
        if (auto it = lifted.find(out); it != lifted.end())
          out->replaceAllUsesWith(it->second);
    // Consumers before producers.
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      ctx.rewrote(*it, (*it)->kind() == c10::prim::If ? "if-convert" : kRule);
      (*it)->destroy();
    }
  }

private:
  Graph &graph;
  const std::unordered_map<Node *, Value *> &conditions;
  Value *device = nullptr; // where host operands go: the first source's
  std::unordered_map<Value *, Value *> lifted;
  std::map<std::pair<Value *, const torch::jit::Block *>, Value *> hostTensors;

  /// `t.item()` as a Python number would be: int64 for integral dtypes,
  /// float64 for floating ones, bool for bool; chosen by branches on t's
  /// dtype, known on the host.
  Value *pythonNumber(Value *t, const Node *anchor) {
    Value *floating = emit(graph, "aten::is_floating_point", {t}, anchor);
    Value *isBool = emit(graph, "aten::eq",
                         {emit(graph, "prim::dtype", {t}, anchor),
                          static_cast<int64_t>(c10::ScalarType::Bool)},
                         anchor);
    return emitIf(
        graph, floating, anchor,
        [&] { return castTo(t, c10::ScalarType::Double, anchor); },
        [&] {
          return emitIf(
              graph, isBool, anchor, [&] { return t; },
              [&] { return castTo(t, c10::ScalarType::Long, anchor); });
        });
  }

  Value *castTo(Value *t, c10::ScalarType dtype, const Node *anchor) {
    return staticify::castTo(graph, t, dtype, anchor);
  }

  /// The tensor for \p v: its lifted value, or a host scalar made a 0-d
  /// tensor of its TorchScript type's dtype on the data's device.
  Value *operand(Value *v, const Node *anchor) {
    if (auto it = lifted.find(v); it != lifted.end())
      return it->second;
    // A host value becomes a tensor once per block, at its first use there:
    // nodes are lifted in program order, so later uses are dominated.
    auto key = std::make_pair(v, anchor->owningBlock());
    if (auto it = hostTensors.find(key); it != hostTensors.end())
      return it->second;
    auto dtype = liftedDType(v->type());
    Value *t =
        emit(graph, "aten::scalar_tensor", {v}, anchor,
             {torch::jit::NamedValue("dtype", static_cast<int64_t>(*dtype)),
              torch::jit::NamedValue("device", device)});
    hostTensors.emplace(key, t);
    return t;
  }

  void liftOp(Node *node) {
    torch::jit::WithInsertPoint guard(node);
    std::vector<Value *> args;
    for (Value *in : node->inputs())
      args.push_back(operand(in, node));
    lifted[node->output()] = emitScalarOpOnTensors(graph, node, args);
  }

  void liftIf(Node *node) {
    torch::jit::WithInsertPoint guard(node);
    Value *c = lifted.at(node->input(0));
    if (auto it = conditions.find(node); it != conditions.end()) {
      Node *standIn = it->second->node();
      standIn->output()->replaceAllUsesWith(c);
      standIn->destroy();
    }
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      Value *a = node->blocks()[0]->outputs()[i];
      Value *b = node->blocks()[1]->outputs()[i];
      Value *out = node->output(i);
      if (isTensor(out)) {
        out->replaceAllUsesWith(selectBranch(graph, c, a, b, node));
        continue;
      }
      lifted[out] = emit(graph, "aten::where",
                         {c, operand(a, node), operand(b, node)}, node);
    }
  }

  void liftSink(Node *user, size_t offset, PassContext &ctx) {
    torch::jit::WithInsertPoint guard(user);
    Value *t = lifted.at(user->input(offset));
    if (isScalarFactory(user, offset)) {
      // TorchScript makes a float in the default dtype first (0.1 with
      // dtype=float64 is 0.10000000149011612), an int in int64, a bool in
      // bool: the lifted tensor's dtype but for floats.
      if (user->input(offset)->type()->kind() == c10::TypeKind::FloatType)
        t = emit(graph, "aten::to", {t, emitDefaultDType(graph, user)}, user);
      Value *made = emit(graph, "aten::to",
                         {t, namedInput(user, "device"),
                          namedInput(user, "dtype")},
                         user);
      user->output()->replaceAllUsesWith(made);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    Value *scalar = user->input(offset);
    // The tensor the scalar meets: for where(c, a, b), the other value, not
    // the condition.
    Value *ref = nullptr;
    if (user->kind() == c10::aten::where)
      ref = user->input(offset == 1 ? 2 : 1);
    else
      for (Value *in : user->inputs())
        if (isTensor(in) && in != scalar) {
          ref = in;
          break;
        }
    if (scalar->type()->kind() == c10::TypeKind::FloatType ||
        isNumber(scalar)) {
      // A Python float takes the tensor operand's result type (an item() is
      // a float only if t is floating: a branch on a dtype known on the
      // host).
      auto asPythonFloat = [&] {
        Value *rt = emit(graph, "aten::result_type", {ref, 0.0}, user);
        return emit(graph, "aten::to", {t, rt}, user);
      };
      if (!isNumber(scalar))
        t = asPythonFloat();
      else
        t = emitIf(graph, emit(graph, "aten::is_floating_point", {t}, user),
                   user, asPythonFloat, [&] { return t; });
    }
    // The original had a host number, fine next to a tensor on any device;
    // a 0-d tensor must be on the other operand's device. Same device (the
    // usual case): nothing to do; otherwise the copy the original made.
    Value *refDevice = emit(graph, "prim::device", {ref}, user);
    Value *sameDevice =
        emit(graph, "aten::eq",
             {emit(graph, "prim::device", {t}, user), refDevice}, user);
    Value *onDevice = t;
    t = emitIf(
        graph, sameDevice, user, [&] { return onDevice; },
        [&] {
          return emit(graph, "aten::to", {onDevice, refDevice}, user);
        });
    if (opInfo(user) && opInfo(user)->has(kFillValueTakesTensor)) {
      // masked_fill(x, m, t) with a 0-d tensor t reads t on the host (its
      // CUDA kernel takes t.item()): where(m, t, x) reads nothing. t is
      // cast to x's dtype, as masked_fill casts its value; the two differ
      // only where masked_fill raises (a value that overflows x's dtype),
      // as the cast to the result type above already does.
      Value *x = user->input(0);
      Value *value = emit(graph, "aten::to",
                          {t, emit(graph, "prim::dtype", {x}, user)}, user);
      Value *replacement =
          emit(graph, "aten::where", {user->input(1), value, x}, user);
      user->output()->replaceAllUsesWith(replacement);
      ctx.rewrote(user, kRule);
      user->destroy();
      return;
    }
    // Everything after the first operand goes by name: keyword-only
    // arguments of the Tensor overload (alpha, rounding_mode) are positional
    // in the Scalar one, and matched positionally schema matching would pick
    // the Scalar overload again and read the tensor back.
    std::vector<torch::jit::NamedValue> args = {user->input(0)}, kwargs;
    const auto &schemaArgs = user->schema().arguments();
    for (size_t i = 1; i < user->inputs().size(); ++i)
      kwargs.emplace_back(schemaArgs.at(i).name(),
                          i == offset ? t : user->input(i));
    Value *replacement =
        emit(graph, user->kind().toQualString(), args, user, kwargs);
    user->output()->replaceAllUsesWith(replacement);
    ctx.rewrote(user, kRule);
    user->destroy();
  }
};

} // namespace

bool liftScalars(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  std::vector<Node *> sources;
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return anyOpInfo(op, [](const OpInfo &e) {
           return e.role == OpRole::SyncRead || e.role == OpRole::ShapeRead ||
                  e.has(kHostConversion);
         });
       }))
    if (isSource(node))
      sources.push_back(node);
  if (sources.empty())
    return false;
  const Aliases &aliases = ctx.facts.aliases(graph);
  // Sources whose regions meet (the sampler's two counts meet in the ifs
  // that balance them) are lifted together or not at all.
  std::vector<size_t> group(sources.size());
  std::unordered_map<Node *, size_t> firstToucher;
  std::function<size_t(size_t)> find = [&](size_t i) {
    return group[i] == i ? i : group[i] = find(group[i]);
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    group[i] = i;
    for (Node *n : growRegion({sources[i]}, aliases, analysis).touched) {
      auto [it, inserted] = firstToucher.emplace(n, i);
      if (!inserted)
        group[find(i)] = find(it->second);
    }
  }
  std::unordered_map<size_t, std::vector<Node *>> components;
  std::vector<size_t> roots;
  for (size_t i = 0; i < sources.size(); ++i) {
    auto &members = components[find(i)];
    if (members.empty())
      roots.push_back(find(i));
    members.push_back(sources[i]);
  }
  std::vector<Region> regions;
  std::unordered_set<Node *> convertedIfs;
  for (size_t root : roots) {
    Region region = growRegion(components[root], aliases, analysis);
    if (!region.whyNot.empty()) {
      for (Node *source : region.sources)
        ctx.declined(source, kRule, region.whyNot);
      if (region.blocker)
        ctx.declined(region.blocker, kRule, region.whyNot);
      continue;
    }
    convertedIfs.insert(region.ifs.begin(), region.ifs.end());
    regions.push_back(std::move(region));
  }
  if (regions.empty())
    return false;
  // The regions' nodes ranked in program order once the branches of every
  // converted if are hoisted before it: from the analysis's node order, in
  // which an if comes before its branches' nodes, a converted if ranks
  // after the last of them instead, and an if that ends where the one
  // around it ends (its last branch node is that one's) before that one.
  std::unordered_map<const Node *, Rank> rank;
  for (const Region &region : regions) {
    for (const auto *set : {&region.ops, &region.ifs})
      for (const Node *n : *set)
        rank.emplace(n, Rank());
    for (const auto &[n, offset] : region.sinks)
      rank.emplace(n, Rank());
  }
  std::vector<std::pair<size_t, Node *>> ifsByPosition;
  const std::vector<Node *> &nodes = analysis.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = rank.find(nodes[i]);
    if (it == rank.end())
      continue;
    if (convertedIfs.count(nodes[i])) {
      size_t last = i + countNodes(nodes[i]) - 1;
      it->second = {2 * last + 1, nodes.size() - i};
      ifsByPosition.emplace_back(i, nodes[i]);
    } else {
      it->second = {2 * i, 0};
    }
  }
  // The ops of their branches that may raise on values get shields, on a
  // stand-in for the lifted condition (liftIf puts the condition in), while
  // the analysis's dtype facts still name the graph's values.
  std::unordered_map<Node *, Value *> conditions;
  for (const auto &[at, ifNode] : ifsByPosition) {
    torch::jit::WithInsertPoint guard(ifNode);
    Value *standIn =
        graph->insertNode(graph->createUninitialized(c10::TensorType::get()))
            ->output();
    shieldBranches(*graph, ifNode, standIn, &analysis);
    conditions.emplace(ifNode, standIn);
  }
  // Hoist innermost first, so that program order has each value before
  // its use.
  for (auto it = ifsByPosition.rbegin(); it != ifsByPosition.rend(); ++it)
    hoistBranches(it->second);
  for (const Region &region : regions)
    Lifter(*graph, conditions).run(region, rank, ctx);
  return true;
}

} // namespace staticify
