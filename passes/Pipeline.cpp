//===- Pipeline.cpp - The pass registry and the pipeline driver
//------------===//

#include "passes/Pipeline.h"

#include "passes/AssumeNone.h"
#include "passes/BatchedNms.h"
#include "passes/BranchWrites.h"
#include "passes/AllTestedSelections.h"
#include "passes/EmptyTestedBranches.h"
#include "passes/CanonicalForms.h"
#include "passes/Bounded.h"
#include "passes/DictKeys.h"
#include "passes/DictRecords.h"
#include "passes/HoistReads.h"
#include "passes/HostReplay.h"
#include "passes/OptionalResults.h"
#include "passes/PinnedSizes.h"
#include "passes/GraphUtils.h"
#include "passes/IfConvert.h"
#include "passes/InPlace.h"
#include "passes/IndexToMask.h"
#include "passes/LiftScalars.h"
#include "passes/LeadingSelections.h"
#include "passes/MaskPropagate.h"
#include "passes/MaskStore.h"
#include "passes/MaskedReduce.h"
#include "passes/OpCatalogue.h"
#include "passes/Partition.h"
#include "passes/SpecializeInputs.h"
#include "passes/SpecializeTraining.h"
#include "passes/Simplify.h"
#include "passes/Uploads.h"

#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/lower_tuples.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static bool mayBeDynamicOp(c10::Symbol op) {
  // Asked per node of large graphs: answered once per op.
  thread_local std::unordered_map<c10::Symbol, bool> known;
  auto [it, fresh] = known.try_emplace(op);
  if (fresh)
    it->second = anyOpInfo(op, [](const OpInfo &e) {
      return e.role == OpRole::DynamicShapeRoot || e.role == OpRole::SyncRead;
    });
  return it->second;
}

/// Whether \p node makes a value data-dependent (a dynamic shape or a host
/// read).
static bool isDynamicOp(const Node *node) {
  if (!mayBeDynamicOp(node->kind()))
    return false;
  OpRole role = opRole(node);
  return role == OpRole::DynamicShapeRoot || role == OpRole::SyncRead;
}

/// Nodes that make a value data-dependent (a dynamic shape or a host read).
static size_t countDynamicOps(torch::jit::Block *block) {
  std::vector<Node *> nodes = collectNodes(block);
  return std::count_if(nodes.begin(), nodes.end(), isDynamicOp);
}

/// The ops a call of \p block runs, as the pipeline's last word weighs
/// them: every node but constants and the plumbing of lists and tuples,
/// once each (a loop's body counted once), a guard's fallback not counted
/// (it runs only where the facts its guard checks fail).
static size_t opsPerCall(const torch::jit::Block *block) {
  size_t ops = 0;
  for (const Node *node : block->nodes()) {
    switch (node->kind()) {
    case c10::prim::Constant:
    case c10::prim::ListConstruct:
    case c10::prim::ListUnpack:
    case c10::prim::TupleConstruct:
    case c10::prim::TupleUnpack:
      continue;
    case c10::prim::If:
      ops += 1 + opsPerCall(node->blocks()[0]);
      if (!node->hasAttribute(guardAttr()))
        ops += opsPerCall(node->blocks()[1]);
      continue;
    default:
      ops += 1;
      for (const torch::jit::Block *b : node->blocks())
        ops += opsPerCall(b);
    }
  }
  return ops;
}

static size_t opsPerCall(const Graph &graph) { return opsPerCall(graph.block()); }

static bool hasCalls(const torch::jit::Block *block) {
  for (const torch::jit::Node *node : block->nodes()) {
    if (node->kind() == c10::prim::CallMethod ||
        node->kind() == c10::prim::CallFunction)
      return true;
    for (const torch::jit::Block *b : node->blocks())
      if (hasCalls(b))
        return true;
  }
  return false;
}

static bool inlineCalls(std::shared_ptr<Graph> &graph, PassContext &) {
  if (!hasCalls(graph->block()))
    return false;
  torch::jit::Inline(*graph);
  return true;
}

/// `loss(a, b, reduction=mean|sum)` as `loss(a, b, reduction=none)` then
/// `mean()`/`sum()`, which is how PyTorch reduces a loss (kReducedLoss): the
/// elementwise part then goes through selections and padding like any
/// elementwise op, and the reduction is masked.
static bool decomposeReducedLoss(Graph &graph, Node *node) {
  int64_t reduction = lossReduction(node);
  if (reduction != 1 && reduction != 2)
    return false;
  torch::jit::WithInsertPoint guard(node);
  torch::jit::Value *none = graph.insertConstant(int64_t{0});
  torch::jit::Value *old = namedInput(node, "reduction");
  Node *perElement = graph.insertNode(graph.createClone(
      node, [&](torch::jit::Value *v) { return v == old ? none : v; }));
  perElement->setSourceRange(node->sourceRange());
  torch::jit::Value *reduced =
      emit(graph, reduction == 1 ? "aten::mean" : "aten::sum",
           {perElement->output()}, node,
           {torch::jit::NamedValue("dtype", c10::IValue())});
  node->output()->replaceAllUsesWith(reduced);
  node->destroy();
  return true;
}

/// `x.shape[i]` (`size(x)[i]` for a constant i, the list not written) as
/// `x.size(i)`: one spelling for the rules of a dimension's size (bound
/// lifts dimension 0 of a bounded value to its count). Out of range both
/// raise, with other texts.
static bool canonicalizeSizeItem(Graph &graph, Node *node) {
  if (node->kind() != c10::aten::__getitem__ || node->inputs().size() != 2)
    return false;
  Node *sizes = node->input(0)->node();
  std::optional<int64_t> dim = constantInt(node->input(1));
  if (sizes->kind() != c10::aten::size || sizes->inputs().size() != 1 ||
      !dim || !isTensor(sizes->input(0)))
    return false;
  const auto &uses = sizes->output()->uses();
  if (std::any_of(uses.begin(), uses.end(), [](const torch::jit::Use &u) {
        return mutatesFirstInput(u.user);
      }))
    return false;
  torch::jit::WithInsertPoint guard(node);
  torch::jit::Value *size =
      emit(graph, "aten::size", {sizes->input(0), node->input(1)}, node);
  node->output()->replaceAllUsesWith(size);
  node->destroy();
  return true;
}

/// `prim::unchecked_cast` of a value of the type it casts to already: the
/// value. An inlined function's Union parameter given a tensor
/// (torchvision.ops.roi_align's `boxes: Union[Tensor, List[Tensor]]`) is
/// cast back after its isinstance test; the rules see the tensor itself.
static bool dropRedundantCast(Node *node) {
  if (node->kind() != c10::prim::unchecked_cast ||
      !node->input(0)->type()->isSubtypeOf(*node->output()->type()))
    return false;
  node->output()->replaceAllUsesWith(node->input(0));
  node->destroy();
  return true;
}

/// The pass whose guard keeps \p node in its fallback: specialize-dtypes',
/// specialize-ranks' or specialize-shapes' version of a method, or bound's
/// guard on a size's bound.
static const char *guardingPass(const Node *node) {
  for (const torch::jit::Block *b = node->owningBlock(); b->owningNode();
       b = b->owningNode()->owningBlock())
    if (isGuardFallback(b)) {
      const Node *guard = b->owningNode();
      if (!guard->hasAttribute(specializedAttr()))
        return "bound";
      switch (guard->i(specializedAttr())) {
      case kSpecializedRanks:
        return "specialize-ranks";
      case kSpecializedShapes:
        return "specialize-shapes";
      default:
        return "specialize-dtypes";
      }
    }
  return "bound";
}

/// The dtype and rank of a tensor attribute of the module (a buffer, a
/// parameter), where the model fixes them (PassOptions::attributeFacts), on
/// the value that reads it: `table[self.relative_position_index]` is a
/// gather by an int64 buffer, not a selection by a mask of unknown dtype,
/// and `x[m] @ self.weight` a product by a matrix.
static bool attributeTypes(Graph &graph, const PassContext &ctx) {
  if (!ctx.options.attributeFacts)
    return false;
  bool changed = false;
  for (Node *node : collectNodes(graph.block())) {
    auto type = node->kind() == c10::prim::GetAttr
                    ? node->output()->type()->cast<c10::TensorType>()
                    : nullptr;
    if (!type || type->scalarType())
      continue;
    std::optional<std::vector<std::string>> path =
        modulePath(graph, node->output());
    if (!path)
      continue;
    if (auto facts = ctx.options.attributeFacts(*path)) {
      node->output()->setType(
          type->withScalarType(facts->dtype)->withDim(facts->rank));
      changed = true;
    }
  }
  return changed;
}

/// `b = c and <a test constant propagation folded to True>`, which
/// TorchScript compiles to an if returning constants: `if c: True else
/// False` is c (and the other way round, `not c`). torchvision's
/// batched_nms tests `boxes.numel() > 4000 and not _is_tracing()`; the
/// rules see the comparison itself.
static bool foldBoolIf(Graph &graph, Node *node) {
  if (node->kind() != c10::prim::If || node->outputs().size() != 1 ||
      node->output()->type()->kind() != c10::TypeKind::BoolType)
    return false;
  torch::jit::Block *then = node->blocks()[0], *otherwise = node->blocks()[1];
  if (then->nodes().begin() != then->nodes().end() ||
      otherwise->nodes().begin() != otherwise->nodes().end())
    return false;
  auto a = torch::jit::constant_as<bool>(then->outputs()[0]);
  auto b = torch::jit::constant_as<bool>(otherwise->outputs()[0]);
  if (!a || !b || *a == *b)
    return false;
  torch::jit::Value *c = node->input(0);
  if (!*a) {
    torch::jit::WithInsertPoint guard(node);
    c = emit(graph, "aten::__not__", {c}, node);
  }
  node->output()->replaceAllUsesWith(c);
  node->destroy();
  return true;
}

/// An if's result that both branches yield as one value made before the
/// if is that value: its uses take it, and the result goes (PyG's `if
/// edge_attr is None: return edge_index, None` beside `return edge_index,
/// edge_attr[mask]`, whose selection otherwise leaves the if).
static bool hoistSameYields(const std::vector<Node *> &nodes) {
  bool changed = false;
  for (Node *node : nodes) {
    if (node->kind() != c10::prim::If)
      continue;
    torch::jit::Block *a = node->blocks()[0], *b = node->blocks()[1];
    for (size_t i = node->outputs().size(); i-- > 0;) {
      torch::jit::Value *v = a->outputs()[i];
      if (v != b->outputs()[i] || node->isBefore(v->node()) ||
          v->node()->owningBlock() == a || v->node()->owningBlock() == b)
        continue;
      // Made outside the if: before it in this block or in one around it.
      const torch::jit::Block *owner = v->node()->owningBlock();
      bool outside = false;
      for (const Node *n = node; n && !outside; n = n->owningBlock()->owningNode())
        outside = n->owningBlock() == owner && v->node()->isBefore(n);
      if (!outside && v->node()->kind() != c10::prim::Param)
        continue;
      node->output(i)->replaceAllUsesWith(v);
      a->eraseOutput(i);
      b->eraseOutput(i);
      node->eraseOutput(i);
      changed = true;
    }
  }
  return changed;
}

/// Reads of one module attribute holding a host number that the method
/// never writes are one value: each `prim::GetAttr[name](obj)` takes the first read of that name
/// of that object, made right after the object (so it comes first on every
/// path). Facts that compare host values by identity then see them equal:
/// torchmetrics' `bincount(..., minlength=self.C * self.C).view(self.C,
/// self.C)` reads `self.C` four times. Not where the method writes an
/// attribute of that name, or calls code that could.
static bool mergeAttributeReads(Graph &graph) {
  std::vector<Node *> nodes = collectNodes(graph.block());
  std::unordered_set<std::string> written;
  for (const Node *node : nodes) {
    if (node->kind() == c10::prim::CallMethod ||
        node->kind() == c10::prim::CallFunction)
      return false;
    if (node->kind() == c10::prim::SetAttr)
      written.insert(node->s(c10::attr::name));
  }
  bool changed = false;
  std::map<std::pair<const Value *, std::string>, Value *> first;
  for (Node *node : nodes) {
    // Host numbers only: a parameter's reads stay where the lowering's
    // regions take them.
    if (node->kind() != c10::prim::GetAttr)
      continue;
    c10::TypeKind kind = node->output()->type()->kind();
    if (kind != c10::TypeKind::IntType && kind != c10::TypeKind::FloatType &&
        kind != c10::TypeKind::BoolType)
      continue;
    const std::string &name = node->s(c10::attr::name);
    if (written.count(name))
      continue;
    Value *object = node->input(0);
    auto [it, fresh] = first.try_emplace({object, name}, nullptr);
    if (fresh) {
      // The one read, right after the object is made.
      Node *read = graph.createClone(node, [](Value *v) { return v; });
      if (object->node()->kind() == c10::prim::Param)
        read->insertBefore(object->node()->owningBlock()->nodes().front());
      else
        read->insertAfter(object->node());
      it->second = read->output();
    }
    node->output()->replaceAllUsesWith(it->second);
    node->destroy();
    changed = true;
  }
  return changed;
}

/// Whether a value of static type \p type holds nothing but that type at
/// run time: one of TorchScript's types with no subtypes but themselves
/// (an Optional, a Union, Any, a class or an interface may hold several).
static bool isLeafType(c10::TypeKind kind) {
  switch (kind) {
  case c10::TypeKind::TensorType:
  case c10::TypeKind::IntType:
  case c10::TypeKind::FloatType:
  case c10::TypeKind::BoolType:
  case c10::TypeKind::StringType:
  case c10::TypeKind::NoneType:
  case c10::TypeKind::DeviceObjType:
    return true;
  default:
    return false;
  }
}

/// Whether no value of leaf type \p x is a \p candidate: a leaf of
/// another kind, or a container (lists, tuples, dicts, of any elements).
static bool excludes(c10::TypeKind x, const c10::TypePtr &candidate) {
  switch (candidate->kind()) {
  case c10::TypeKind::ListType:
  case c10::TypeKind::AnyListType:
  case c10::TypeKind::TupleType:
  case c10::TypeKind::AnyTupleType:
  case c10::TypeKind::DictType:
    return true;
  default:
    return isLeafType(candidate->kind()) && candidate->kind() != x;
  }
}

/// `isinstance(x, T)` where x's static type decides it is a constant:
/// true where the type is one of T's; false where x holds a leaf type that
/// none of T's can hold. torchvision's roi_align tests whether its boxes
/// are a list (`check_roi_boxes_shape`), and the untaken branch's cast of
/// them to a list would otherwise count as a use that may write them.
static bool foldIsinstance(Graph &graph, Node *node) {
  if (node->kind() != c10::prim::isinstance)
    return false;
  const c10::TypePtr &type = node->input()->type();
  const std::vector<c10::TypePtr> &candidates = node->tys(c10::attr::types);
  bool yes = std::any_of(candidates.begin(), candidates.end(),
                         [&](const c10::TypePtr &t) { return type->isSubtypeOf(*t); });
  bool no = isLeafType(type->kind()) &&
            std::all_of(candidates.begin(), candidates.end(),
                        [&](const c10::TypePtr &t) { return excludes(type->kind(), t); });
  if (!yes && !no)
    return false;
  torch::jit::WithInsertPoint guard(node);
  node->output()->replaceAllUsesWith(graph.insertConstant(yes));
  node->destroy();
  return true;
}

namespace {

/// What a value is known to be when one Optional is None.
enum class WhenNone { Unknown, None, True, False };

/// \p v's value when \p param is None, from what decides it alone: the
/// param itself, constants, `is`/`is not` None, `not`, and ifs on such a
/// condition (the branch it decides, or both branches where they agree).
WhenNone whenNone(const Value *v, const Value *param, int depth = 0) {
  if (v == param)
    return WhenNone::None;
  if (depth > 32)
    return WhenNone::Unknown;
  const Node *n = v->node();
  switch (n->kind()) {
  case c10::prim::Constant: {
    std::optional<c10::IValue> c = torch::jit::toIValue(v);
    if (c && c->isNone())
      return WhenNone::None;
    if (c && c->isBool())
      return c->toBool() ? WhenNone::True : WhenNone::False;
    return WhenNone::Unknown;
  }
  case c10::aten::__is__:
  case c10::aten::__isnot__: {
    bool bothNone = whenNone(n->input(0), param, depth + 1) == WhenNone::None &&
                    whenNone(n->input(1), param, depth + 1) == WhenNone::None;
    if (!bothNone)
      return WhenNone::Unknown;
    return (n->kind() == c10::aten::__is__) ? WhenNone::True : WhenNone::False;
  }
  case c10::aten::__not__: {
    WhenNone x = whenNone(n->input(0), param, depth + 1);
    return x == WhenNone::True    ? WhenNone::False
           : x == WhenNone::False ? WhenNone::True
                                  : WhenNone::Unknown;
  }
  case c10::prim::If: {
    size_t i = v->offset();
    WhenNone c = whenNone(n->input(0), param, depth + 1);
    if (c == WhenNone::True || c == WhenNone::False)
      return whenNone(n->blocks()[c == WhenNone::True ? 0 : 1]->outputs()[i],
                      param, depth + 1);
    WhenNone a = whenNone(n->blocks()[0]->outputs()[i], param, depth + 1);
    return a == whenNone(n->blocks()[1]->outputs()[i], param, depth + 1)
               ? a
               : WhenNone::Unknown;
  }
  default:
    return WhenNone::Unknown;
  }
}

} // namespace

/// A loop-carried Optional that enters the loop as None and that each
/// iteration passes on as None when it came in as None is None throughout
/// (induction on the iterations): its uses in the body and after the loop
/// become the None it entered as. torchvision's transform carries `targets`
/// through its per-image loop (`targets[i] if targets is not None else
/// None`, written back only when not None): with no targets (assume-none),
/// constant propagation alone never sees through the loop.
static bool foldLoopCarriedNone(const std::vector<Node *> &nodes) {
  bool changed = false;
  for (Node *loop : nodes) {
    if (loop->kind() != c10::prim::Loop)
      continue;
    torch::jit::Block *body = loop->blocks()[0];
    for (size_t i = 0; i + 2 < loop->inputs().size(); ++i) {
      Value *entry = loop->input(i + 2);
      Value *param = body->inputs()[i + 1];
      if (whenNone(entry, nullptr) != WhenNone::None ||
          param->type()->kind() != c10::TypeKind::OptionalType ||
          (param->uses().empty() && loop->output(i)->uses().empty()) ||
          whenNone(body->outputs()[i + 1], param) != WhenNone::None)
        continue;
      param->replaceAllUsesWith(entry);
      loop->output(i)->replaceAllUsesWith(entry);
      changed = true;
    }
  }
  return changed;
}

/// Whether \p node is one LowerSimpleTuples may remove or rewire.
static bool isTupleOp(const Node *node) {
  switch (node->kind()) {
  case c10::prim::TupleConstruct:
  case c10::prim::TupleUnpack:
  case c10::prim::TupleIndex:
  case c10::prim::TupleSlice:
    return true;
  default:
    return false;
  }
}

/// Canonical forms the analysis and the rewrites rely on. Constant
/// propagation never folds nondeterministic ops (rand*, randperm,
/// multinomial), and nothing here merges or reorders them.
static bool normalize(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // The data-dependent ops normalization starts from: constant
  // propagation ends with libtorch's dead-code elimination, which erases
  // dead ones (an unused torch.unique).
  if (ctx.countDynamicOpsAtNormalize && !ctx.dynamicOpsAtNormalize)
    ctx.dynamicOpsAtNormalize = countDynamicOps(graph->block());
  // isinstance first: constant propagation then removes what it decides.
  bool changed = attributeTypes(*graph, ctx) | mergeAttributeReads(*graph);
  for (Node *node : collectNodes(graph->block()))
    changed |= foldIsinstance(*graph, node);
  // In-place activations as their functional forms, where libtorch's alias
  // analysis proves that nothing else sees the write (a fresh tensor, no
  // alias used after): torchvision's mask and keypoint heads follow each
  // convolution with nn.ReLU(inplace=True), and a tensor written in place
  // is one bound keeps as it is (Flow.cpp, writable).
  // simplify, last, puts them back in place where nothing else reads them.
  changed |= functionalActivations(graph);
  std::vector<Node *> nodes;
  changed |= propagateConstants(graph, &nodes);
  // Tuples first: an inlined method's `return result, losses` is a tuple
  // built and unpacked, which the dict analysis below would take for an
  // escape of the detections (Faster R-CNN's roi_heads).
  if (std::any_of(nodes.begin(), nodes.end(), isTupleOp)) {
    // The unpacks it bypasses stay, unused, until dead code goes.
    torch::jit::LowerSimpleTuples(graph->block());
    eliminateDeadCode(graph, nullptr);
    // A constant that went through a tuple (`images, targets =
    // self.transform(images, None)`) reaches its uses only now.
    propagateConstants(graph, &nodes);
    changed = true; // it may or may not have: said changed, facts recomputed
  }

  // Each loop it folds may make another's entry None: again until none.
  while (foldLoopCarriedNone(nodes)) {
    propagateConstants(graph, &nodes);
    changed = true;
  }
  // Dicts accessed only at keys the graph fixes, as their entries
  // (DictRecords.h); their unrolled loops' constants propagate.
  if (dictRecords(graph)) {
    propagateConstants(graph, &nodes);
    changed = true;
  }
  // `"masks" in pred` of dicts built with known keys: the folded test's
  // branch goes with a second propagation.
  if (foldDictMembership(*graph, nodes)) {
    propagateConstants(graph, &nodes);
    changed = true;
  }
  // Ranks the program fixes first: the branches their tests decide go
  // before the sweep visits them.
  bool ranks = foldKnownRanks(graph, graph->block());
  if (ranks)
    nodes = collectNodes(graph->block());
  // One sweep for the per-node forms: each rewrite replaces only the node
  // it visits, by nodes it inserts before it (never visited).
  bool swept = false;
  for (Node *node : nodes)
    swept |= decomposeReducedLoss(*graph, node) ||
             canonicalizeSizeItem(*graph, node) || foldBoolIf(*graph, node) ||
             dropRedundantCast(node) || canonicalizeSpelling(*graph, node);
  changed |= ranks;
  if (mergeEqualTensorOps(graph))
    swept = true;
  // Optional results read where they are set (OptionalResults.h).
  if (forwardOptionalResults(graph))
    swept = true;
  // Unless the sweep changed it, the node list is the graph's still.
  bool current = !swept;
  changed |= swept;
  changed |= eliminateDeadCode(graph, current ? &nodes : nullptr);
  // An if's results lowered from a tuple may be yielded alike by both
  // branches; the tuples they went back into are lowered again.
  if (hoistSameYields(collectNodes(graph->block()))) {
    torch::jit::LowerSimpleTuples(graph->block());
    eliminateDeadCode(graph, nullptr);
    changed = true;
  }
  return changed;
}

/// passes/CanonicalForms.h's merge, of the original's reads and
/// data-dependent ops too (normalize merges neither: the report's "before"
/// counts the original's syncs on the normalized graph).
static bool mergeEqual(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // A static method is written back as it came.
  if (ctx.facts.analysis(graph).findings.empty())
    return false;
  MergeReads every = [](const Node *) { return false; };
  std::function<void(const Node *)> merged = [&](const Node *node) {
    ctx.rewrote(node, "merge-equal");
  };
  return mergeEqualTensorOps(graph, &every, &merged);
}

bool mergeRewrittenReads(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  MergeReads original = [&](const Node *node) { return ctx.isTracked(node); };
  if (!mergeEqualTensorOps(graph, &original, nullptr, /*plumbing=*/true))
    return false;
  ctx.facts.invalidate();
  return true;
}

/// passes/Uploads.h, over every node (uploads in branches and loops too).
static bool uploads(std::shared_ptr<Graph> &graph, PassContext &) {
  bool changed = false;
  for (Node *node : collectNodes(graph->block())) // destroys only the node
    changed |= buildOnDevice(*graph, node);       // it visits
  return changed;
}

const std::vector<PassInfo> &registeredPasses() {
  static const std::vector<PassInfo> passes = {
      {"inline",
       "inline prim::CallMethod / prim::CallFunction so that patterns across "
       "submodules and functions are seen",
       false, inlineCalls},
      {"normalize",
       "constant propagation, tuple lowering and dead-code elimination; "
       "`key in d` folded where every dict d may be is built in the graph "
       "with known keys; "
       "x.shape[i] as x.size(i); casts to a type the value has dropped; "
       "losses with a constant mean/sum as "
       "reduction none and mean()/sum(); never folds or merges "
       "nondeterministic ops",
       false, normalize},
      {"drop-data-asserts",
       "with --drop-data-asserts: `assert c` on tensor data (an if whose "
       "one branch only raises) -> removed with its condition, before the "
       "passes that judge ifs on data",
       true, dropDataAsserts},
      {"merge-equal",
       "an op computed twice from one set of operands that nothing writes "
       "(x[m.nonzero().squeeze(1)] beside y[m.nonzero().squeeze(1)]) -> "
       "once, data-dependent ops and host reads included: the second "
       "nonzero, and its sync, go",
       true, mergeEqual},
      {"specialize-dtypes",
       "a method indexing by a graph input of unknown dtype (obs[valid]) "
       "-> versioned on that input being bool (metadata: no sync): the "
       "first version reads it as a mask, the original is the fallback; "
       "only where the rewrites after it then reach the host less often",
       true, specializeDTypes},
      {"specialize-ranks",
       "a method selecting by (or from) a graph input of unknown rank "
       "(x[m.nonzero().squeeze(1)]) -> versioned on that input's rank, 1 or "
       "2 (metadata: no sync): the first version reads it with that rank, "
       "the original is the fallback; only where the rewrites after it then "
       "reach the host less often",
       true, specializeRanks},
      {"specialize-shapes",
       "a method selecting with masked_select(x, m) where the graph does not "
       "show x of m's shape (preds.masked_select(~target.isnan())) -> "
       "versioned on x.size() == m.size() (metadata: no sync) from where "
       "both are made: the first version selects x[m], by the mask's own "
       "count, the original is the fallback; likewise the rows of an "
       "expanded mask, x[m.unsqueeze(-1).expand_as(x)].view(-1, C) -> x[m] "
       "where m has x's leading shape and C its last size; only where the "
       "rewrites after it then reach the host less often",
       true, specializeShapes},
      {"host-replay",
       "host reads of tensors built from host numbers on a device "
       "(`(torch.as_tensor(std, device=x.device) == 0).any()`) -> the same "
       "ops on the host, read there, where they give the device's numbers "
       "exactly",
       true, hostReplay},
      {"pinned-sizes",
       "repeat_interleave(r) whose length a later op in the same block "
       "fixes (index_add_(0, ids, src) needs src's rows) -> "
       "searchsorted(cumsum(r), arange(S), right=True) of that static "
       "length: every run that succeeds has it",
       true, pinnedSizes},
      {"batched-nms",
       "batched_nms's per-class loop (for c in unique(idxs): nms of the rows "
       "of class c, kept rows marked in a mask) -> one NMS in which only "
       "boxes of one class suppress each other, marking the same mask; "
       "behind a guard on shapes, dtypes and devices",
       true, batchedNms},
      {"all-tested-selections",
       "`if not m.all(): x = x[m]` (or `if m.sum() != len(x)`, `if "
       "(~m).any()`...) -> x[m]: where m is a bool vector of x's rows, x[m] "
       "is x when every element holds; behind a host guard on m's dtype, "
       "rank and rows, the if as it was in its fallback",
       true, allTestedSelections},
      {"empty-tested-branches",
       "`if idx.numel() > 0: x[idx] = y[idx] - 1` (or len(idx) > 0, "
       "idx.size(0) != 0) of a vector idx -> the branch: where idx is "
       "empty, its gathers and stores at idx's rows read and write nothing "
       "and raise on nothing; only branches of such ops",
       true, emptyTestedBranches},
      {"leading-selections",
       "a selection along a dimension d >= 1 by a vector (x[:, m], "
       "x.index_select(1, i)) -> the same selection along dimension 0 of "
       "x.movedim(d, 0), moved back after the elementwise ops, reductions "
       "and ops along a dimension that follow it: the rules for dimension 0 "
       "meet it",
       true, leadingSelections},
      {"index-to-mask",
       "gather/index_select/index by where(m)[0] -> a padded gather "
       "selected by a mask (cumsum + scatter compaction, no sync)",
       true, indexToMask},
      {"mask-propagate",
       "f(x[m], y[m]) -> f(x, y)[m] for elementwise f; x[m][g[m]] -> "
       "x[m & g]",
       true, maskPropagate},
      {"masked-reduce",
       "reduce(x[mask]) -> reduce(where(mask, x, identity)): sum, mean, "
       "prod, any, all, amax/amin/max/min, count_nonzero, norm, logsumexp, "
       "var, std; "
       "numel/size/len -> count",
       true, maskedReduce},
      {"mask-store",
       "x[mask] = v -> copy_(where) in place, when v is 0-d or a "
       "selection by the same mask; masked_fill(m, v) with a 0-d tensor v "
       "(read on the host) -> where",
       true, maskStore},
      {"branch-writes",
       "if bool(t): y.op_(a) (a branch on data that writes in place) -> "
       "the branch computes y.op(a) out of place and the if returns it; "
       "one y.copy_() after the if writes it back (behind a guard on "
       "autograd recording y), so if-convert can run both branches",
       true, branchWrites},
      {"lift-scalars",
       "host scalars read from data (int(t), float(t), bool(t)) and what is "
       "computed from them stay on the device as 0-d tensors; ifs on them "
       "become where",
       true, liftScalars},
      {"if-convert",
       "if bool(t): pure branches with congruent tensor results -> both "
       "branches + where",
       true, ifConvert},
      {"bound",
       "what is still data-dependent becomes bounded (padded + device-side "
       "count): nonzero, where(c), x[mask], unique, randperm(n)[:k] as top-k, "
       "slices, gathers, cat; host ints from counts are lifted with integer "
       "ranges; uses with no bounded form materialize (reported)",
       true, boundShapes},
      {"hoist-reads",
       "host reads a for-loop makes every iteration (int(box[2] - box[0]), "
       "t[i].item()) of tensors made before it -> one copy to the host "
       "before the loop (t.cpu(), when it runs), read there; what the loop "
       "computes between tensor and read is replayed on the host only "
       "where its ops give the device's numbers exactly",
       true, hoistReads},
      // Last: the rewrites before it match torch.tensor(v, device=...) as
      // the value a store writes (mask-store, batched-nms).
      {"uploads",
       "torch.tensor/as_tensor of host numbers on a device -> built there "
       "(full; a fill_ per element of a short list), not copied from host "
       "memory, a copy that waits for the stream",
       true, uploads},
      {"simplify",
       "what the rewrites left, with fewer ops: x != 0 of a bool x that "
       "nothing writes -> x, x.dtype of a bool x -> the constant, the tests "
       "on it folded; int64 arithmetic with scalar_tensor(c) -> with c; "
       "shape reads of an elementwise op of one tensor -> of that tensor",
       false, simplify},
      // Not in the default pipeline: staticify --specialize-training puts
      // it right after inline (it needs the calls inlined, and normalize
      // after it to remove the other mode's branches).
      {"specialize-training",
       "reads of a submodule's `training` flag become its saved value, so "
       "normalize removes the other mode's branches (--specialize-training; "
       "not in the default pipeline)",
       false, specializeTraining},
      // Not in the default pipeline either: --assume-none puts it first.
      {"assume-none",
       "Optional arguments callers never pass (--assume-none NAME) become "
       "None after a check that raises when one is passed, so normalize "
       "removes the branches that test them (not in the default pipeline)",
       false, assumeNone},
  };
  return passes;
}

const PassInfo *findPass(std::string_view name) {
  for (const PassInfo &p : registeredPasses())
    if (p.name == name)
      return &p;
  return nullptr;
}

std::vector<std::string> defaultPipeline(bool inlineCalls) {
  std::vector<std::string> names;
  for (const PassInfo &p : registeredPasses())
    if ((p.name != "inline" || inlineCalls) && p.name != "specialize-training" &&
        p.name != "assume-none")
      names.push_back(p.name);
  return names;
}

std::vector<std::string> parsePassList(std::string_view list) {
  std::vector<std::string> names;
  if (list.empty())
    return names; // no passes: the analysis alone
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name(list.substr(start, comma == std::string_view::npos
                                            ? std::string_view::npos
                                            : comma - start));
    if (name.empty())
      throw std::invalid_argument(
          "the pass list '" + std::string(list) +
          "' has an empty name; give names separated by single commas, e.g. "
          "inline,normalize,bound");
    {
      if (!findPass(name)) {
        std::string known;
        for (const PassInfo &p : registeredPasses())
          known += (known.empty() ? "" : ", ") + p.name;
        throw std::invalid_argument("unknown pass '" + name +
                                    "'; known passes: " + known);
      }
      names.push_back(name);
    }
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return names;
}

bool runPass(const PassInfo &pass, std::shared_ptr<Graph> &graph,
             PassContext &ctx) {
  bool changed = pass.run(graph, ctx);
  if (!changed)
    return false;
  if (pass.rewrites)
    eraseDeadNodes(*graph, ctx, pass.name); // part of what it rewrote
  ctx.facts.invalidate();
  return true;
}

std::string renderSeconds(
    const std::vector<std::pair<std::string, double>> &steps,
    std::string_view prefix) {
  std::string text;
  double total = 0;
  auto line = [&](double seconds, const std::string &step) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%10.3f ms  ", seconds * 1e3);
    text += std::string(prefix) + ms + step + "\n";
  };
  for (const auto &[step, seconds] : steps) {
    line(seconds, step);
    total += seconds;
  }
  line(total, "total");
  return text;
}

GraphSummary summarize(const AnalysisResult &analysis) {
  GraphSummary s;
  s.numNodes = analysis.numNodes;
  s.counts = countByCategory(analysis.findings);
  s.syncPoints = countSyncPoints(analysis);
  s.outputsStatic = analysis.outputsStatic;
  s.fallbackSyncPoints = analysis.fallbackSyncPoints;
  s.errorPathSyncPoints = analysis.errorPathSyncPoints;
  return s;
}

namespace {

/// Runs \p f and appends its wall time to \p out under \p name.
template <typename F>
auto timed(std::vector<std::pair<std::string, double>> &out,
           const std::string &name, F &&f) {
  auto start = std::chrono::steady_clock::now();
  auto finish = [&] {
    out.emplace_back(name, std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count());
  };
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    finish();
  } else {
    auto r = f();
    finish();
    return r;
  }
}

/// countDynamicOps of the graph \p analysis analysed, from its census.
size_t countDynamicOps(const AnalysisResult &analysis) {
  std::vector<Node *> nodes = analysis.nodesWhere(mayBeDynamicOp);
  return std::count_if(nodes.begin(), nodes.end(), isDynamicOp);
}

std::vector<std::string> boundKeysNamingValues(
    torch::jit::Graph &graph,
    const std::vector<std::pair<std::string, int64_t>> &bounds) {
  std::vector<std::string> matched;
  if (bounds.empty())
    return matched;
  std::vector<const torch::jit::Value *> values(graph.inputs().begin(),
                                                graph.inputs().end());
  for (Node *node : collectNodes(graph.block())) {
    for (const torch::jit::Value *v : node->outputs())
      values.push_back(v);
    for (torch::jit::Block *b : node->blocks())
      values.insert(values.end(), b->inputs().begin(), b->inputs().end());
  }
  for (const auto &bound : bounds) {
    const std::string &key = bound.first;
    if (std::any_of(values.begin(), values.end(),
                    [&](const torch::jit::Value *v) {
                      return boundKeyNames(key, v);
                    }))
      matched.push_back(key);
  }
  return matched;
}

} // namespace

/// --verify-each: the graph is well formed after \p pass, and a pass that
/// says it changed nothing changed nothing (a rule that mutates and then
/// declines would leave half a rewrite behind).
void verifyAfter(const PassInfo &pass, Graph &graph, bool changed,
                 const std::string &before) {
  try {
    graph.lint();
  } catch (const std::exception &e) {
    std::string what = e.what();
    throw std::runtime_error("after pass '" + pass.name +
                             "': the graph fails lint: " +
                             what.substr(0, what.find('\n')));
  }
  if (!changed &&
      graph.toString(/*print_source_locations=*/false) != before)
    throw std::runtime_error("pass '" + pass.name +
                             "' changed the graph but reported no change");
  // The passes find their candidates in the analysis's node census: it is
  // every node, in program order.
  if (analyzeGraph(graph, Detail::Facts).nodes != collectNodes(graph.block()))
    throw std::runtime_error("after pass '" + pass.name +
                             "': the analysis's nodes are not the graph's");
}

/// A copy of \p original after the first \p count of \p passes, run as the
/// pipeline ran them (they are deterministic).
static std::shared_ptr<Graph> replayPasses(Graph &original,
                                           const std::vector<std::string> &passes,
                                           size_t count,
                                           const PassOptions &options) {
  std::shared_ptr<Graph> graph = original.copy();
  PassContext scratch;
  scratch.options = options;
  for (size_t i = 0; i < count; ++i)
    runPass(*findPass(passes[i]), graph, scratch);
  return graph;
}

PipelineResult runPipeline(std::shared_ptr<Graph> &graph,
                           const std::string &name,
                           const std::vector<std::string> &passes,
                           const PassOptions &options,
                           Graph *original) {
  PipelineResult result;
  result.report.name = name;
  result.report.passes = passes;
  result.report.inlined = false;

  // A saved output analysed again: its guards are guards still.
  recoverGuards(*graph);
  PassContext ctx;
  ctx.options = options;
  std::shared_ptr<const AnalysisResult> before;
  std::vector<Segment> beforeSegments;
  // The graph as the rewriting passes found it, for the policy's last word:
  // a copy, or (with \p original) how many passes made it from original.
  std::shared_ptr<Graph> unrewritten;
  std::optional<size_t> passesBeforeRewriting;
  std::optional<size_t> opsBefore; // when the first rewriting pass ran
  // Passes whose gain the sync count does not see: an upload's copy that
  // waits for the stream, a loop's reads made one copy.
  bool unseenGain = false;
  // Data-dependent ops once calls are inlined, and when the analysis first
  // looks: fewer means normalization erased dead ones. With \p original,
  // the first count is taken only where it matters, at the end: a method no
  // rewrite replaces is replaced still if normalization erased dead ones.
  ctx.countDynamicOpsAtNormalize = original == nullptr;
  std::optional<size_t> dynamicOpsNormalized;
  auto normalized = [&](const AnalysisResult &facts) {
    dynamicOpsNormalized = countDynamicOps(facts);
    if (ctx.dynamicOpsAtNormalize)
      result.droppedDeadDynamicOps =
          *dynamicOpsNormalized < *ctx.dynamicOpsAtNormalize;
    result.boundsMatched = boundKeysNamingValues(*graph, options.bounds);
  };
  for (size_t index = 0; index < passes.size(); ++index) {
    const std::string &passName = passes[index];
    const PassInfo *pass = findPass(passName);
    if (!pass)
      throw std::invalid_argument("unknown pass '" + passName + "'");
    if (pass->rewrites && !before) {
      before = timed(result.seconds, "analysis (before)",
                     [&] {
                       return ctx.facts.sharedAnalysis(graph, Detail::Report);
                     });
      normalized(*before);
      ctx.track(*before);
      beforeSegments = timed(result.seconds, "partition (before)", [&] {
                         return partitionGraph(*graph, *before).segments;
                       });
      opsBefore = opsPerCall(*graph);
      // Kept for the policy below, a static method's too: the passes judge
      // data by their own facts, and a rewrite of what the analysis counts
      // as host values (an `if` on `torch.rand(1).item()`, a tensor made on
      // the host) must not leave it reaching the device.
      if (original)
        passesBeforeRewriting = index;
      else
        unrewritten = graph->copy();
    }
    std::string unchanged;
    if (options.verifyEach)
      unchanged = graph->toString(/*print_source_locations=*/false);
    bool changed = timed(result.seconds, pass->name,
                         [&] { return runPass(*pass, graph, ctx); });
    if (options.verifyEach)
      verifyAfter(*pass, *graph, changed, unchanged);
    if (pass->name == "inline")
      result.report.inlined = true;
    result.rewritten |= changed && pass->rewrites;
    unseenGain |= changed && (pass->name == "uploads" || pass->name == "hoist-reads");
  }
  if (result.rewritten && options.mergeAfterRewrites)
    mergeRewrittenReads(graph, ctx);
  std::shared_ptr<const AnalysisResult> afterFacts =
      timed(result.seconds, "analysis (after)",
            [&] { return ctx.facts.sharedAnalysis(graph, Detail::Report); });
  if (!before)
    normalized(*afterFacts);
  // The policy over the whole pipeline (RewritePolicy.h): the passes whose
  // rewrites cannot cost a sync run without trials, but together with the
  // others they still might (masked-reduce's count of a selection, read
  // back for a host use, while bound keeps the selection). A method that
  // would reach the host at more points than before is left as it was,
  // and so is one that reaches it as often and runs more ops per call: a
  // rewrite exists to make the method faster. A method that reached it at
  // no point has nothing to gain but the copies uploads and hoist-reads
  // save, which the analysis does not count (and --padded-outputs would
  // change its signature for nothing).
  std::string reverted;
  if ((unrewritten || passesBeforeRewriting) && result.rewritten) {
    size_t was = countSyncPoints(*before), now = countSyncPoints(*afterFacts);
    size_t opsNow = opsPerCall(*graph);
    if (was == 0 && !unseenGain)
      reverted = "pipeline: the method reaches the host at no point; it is "
                 "left as it was";
    else if (now > was)
      reverted = "pipeline: the rewritten method would reach the host at " +
                 std::to_string(now) + " points instead of " +
                 std::to_string(was) + "; it is left as it was";
    else if (now == was && opsNow > *opsBefore && !unseenGain &&
             !options.keepEqualSyncRewrites)
      reverted = "pipeline: the rewritten method would reach the host at as "
                 "many points (" +
                 std::to_string(now) + ") and run " + std::to_string(opsNow) +
                 " ops per call instead of " + std::to_string(*opsBefore) +
                 "; it is left as it was";
    // Where what the rewrites left is a cut at the return, the flag that
    // returns it padded instead (the report's hints name it).
    if (!reverted.empty() && !options.paddedOutputs &&
        std::any_of(afterFacts->findingNodes.begin(),
                    afterFacts->findingNodes.end(), [&](const Node *node) {
                      return !ctx.isTracked(node) &&
                             ctx.reasonForNewNode(node).find(
                                 "--padded-outputs") != std::string::npos;
                    }))
      reverted += " (its host reads are cuts at the return, which "
                  "--padded-outputs returns padded)";
    if (!reverted.empty()) {
      if (!unrewritten) // derived again: the passes are deterministic
        unrewritten =
            replayPasses(*original, passes, *passesBeforeRewriting, options);
      graph = unrewritten;
      ctx.facts.invalidate();
      result.rewritten = false;
      afterFacts = ctx.facts.sharedAnalysis(graph, Detail::Report);
    }
  }
  if (original && dynamicOpsNormalized && !result.rewritten) {
    // The graph normalization started from, derived again from original:
    // the passes up to the first that is neither inline nor a rewrite.
    size_t first = 0;
    while (first < passes.size() && (findPass(passes[first])->rewrites ||
                                     passes[first] == "inline"))
      ++first;
    std::shared_ptr<Graph> entry =
        replayPasses(*original, passes, first, options);
    result.droppedDeadDynamicOps =
        *dynamicOpsNormalized < countDynamicOps(entry->block());
  }
  const AnalysisResult &after = *afterFacts;
  PartitionResult &partition = result.partition;
  partition = timed(result.seconds, "partition (after)",
                    [&] { return partitionGraph(*graph, after); });
  if (!before) {
    before = afterFacts;
    beforeSegments = partition.segments;
  }
  result.report.findings = before->findings;
  // Original nodes a guard moved into its fallback (bound's guard on a
  // size's bound keeps the original if there): the analysis counts their
  // reads apart, as every fallback's, and so does the report.
  std::unordered_set<const torch::jit::Node *> inFallback;
  if (reverted.empty() && result.rewritten)
    for (torch::jit::Node *n : collectNodes(graph->block()))
      if (inGuardFallback(n))
        inFallback.insert(n);
  for (size_t i = 0; i < result.report.findings.size(); ++i) {
    Finding &f = result.report.findings[i];
    if (!reverted.empty()) {
      if (f.role == Role::Root)
        f.reason = reverted;
      continue;
    }
    if (auto it = ctx.rewritten().find(f.id); it != ctx.rewritten().end()) {
      f.action = "rewritten";
      f.rule = it->second;
    } else if (inFallback.count(before->findingNodes[i])) {
      f.action = "rewritten";
      f.rule = guardingPass(before->findingNodes[i]);
    } else if (auto why = ctx.reasons().find(f.id);
               why != ctx.reasons().end()) {
      f.reason = why->second;
    }
  }
  // A finding no rule touched whose causes were all rewritten, and which is
  // no longer data-dependent (`0.1 / x[m].size(-1)` once x[m] is bounded),
  // was made static by its causes' rule.
  std::unordered_set<const torch::jit::Node *> stillFound(
      after.findingNodes.begin(), after.findingNodes.end());
  for (size_t i = 0; i < result.report.findings.size(); ++i) {
    Finding &f = result.report.findings[i];
    if (f.action != "kept" || !f.reason.empty() || f.causes.empty() ||
        stillFound.count(before->findingNodes[i]))
      continue;
    const std::vector<Finding> &all = result.report.findings;
    bool causesRewritten = std::all_of(
        f.causes.begin(), f.causes.end(), [&](size_t c) {
          return c < all.size() && all[c].action == "rewritten";
        });
    if (causesRewritten) {
      f.action = "rewritten";
      f.rule = all[f.causes.front()].rule;
    }
  }
  // A root no rule looked at says so: it is kept for want of a form, not
  // by a rule's decision.
  for (Finding &f : result.report.findings)
    if (f.role == Role::Root && f.action == "kept" && f.reason.empty())
      f.reason = "pipeline: no rewrite applies to '" + f.op +
                 "' (it has no static or bounded form here)";
  // What the rewrites left behind that was not there before (a count read
  // back by masked-reduce that lift-scalars could not keep on the device).
  if (result.rewritten) {
    for (size_t i = 0; i < after.findings.size(); ++i) {
      const torch::jit::Node *node = after.findingNodes[i];
      if (ctx.isTracked(node))
        continue;
      Finding f = after.findings[i];
      f.id = result.report.findings.size();
      f.causes.clear(); // ids of the "after" analysis: not comparable
      f.action = "introduced";
      f.reason = ctx.reasonForNewNode(node);
      // A root of a form's own (bound's bincount of the live values, whose
      // length is still the largest value's): the op's own reason.
      if (f.reason.empty() && f.role == Role::Root)
        f.reason = "pipeline: a form a rewrite emitted keeps it: " + f.message;
      result.report.findings.push_back(std::move(f));
    }
  }
  result.report.before = summarize(*before);
  result.report.before.partition = std::move(beforeSegments);
  result.report.after = summarize(after);
  result.report.after.opsPerCall = opsPerCall(*graph);
  result.report.before.opsPerCall =
      opsBefore ? *opsBefore : result.report.after.opsPerCall;
  result.report.after.partition = partition.segments;
  nameGuards(*graph);
  if (options.renderDot)
    result.dot = renderDot(*graph, partition, name, [&](const Node *n) {
      return ctx.reasonForNewNode(n).find("materialized") != std::string::npos;
    });
  return result;
}

} // namespace staticify
