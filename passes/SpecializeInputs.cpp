//===- SpecializeInputs.cpp - A method versioned on its inputs' metadata --===//

#include "passes/SpecializeInputs.h"

#include "passes/Analysis.h"
#include "passes/CanonicalForms.h"
#include "passes/Containers.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/OpInfo.h"
#include "passes/Pipeline.h"
#include "passes/RewritePolicy.h"
#include "passes/Selection.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// The default pipeline's passes after \p pass: what a trial runs to see
/// what each version becomes.
std::vector<std::string> passesAfter(const char *pass) {
  std::vector<std::string> all = defaultPipeline(/*inlineCalls=*/false);
  auto self = std::find(all.begin(), all.end(), pass);
  return {self == all.end() ? all.end() : self + 1, all.end()};
}

/// What the first version takes to hold of one tensor: that it has dtype
/// \p dtype (no rank, no shapeOf), that it has \p rank dimensions, or that
/// it has \p shapeOf's shape. \p input is a graph input, or (with shapeOf)
/// a value of the method's top block, as is shapeOf.
struct Fact {
  Value *input = nullptr;
  std::optional<int64_t> rank;
  Value *shapeOf = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Bool;
  /// Or: that the rows `x[U.expand_as(x)].view(-1, C)` of this view
  /// (matchExpandedRows) are `x[m]` (expandedRowsTest); \p input is then x.
  Node *rowsView = nullptr;
};

/// The host test of \p fact (metadata: no sync).
Value *holds(Graph &graph, const Fact &fact, const Node *anchor) {
  if (fact.rowsView)
    return expandedRowsTest(graph, *matchExpandedRows(fact.rowsView), anchor);
  if (fact.shapeOf)
    return emit(graph, "aten::eq",
                {emit(graph, "aten::size", {fact.input}, anchor),
                 emit(graph, "aten::size", {fact.shapeOf}, anchor)},
                anchor);
  if (fact.rank)
    return emit(graph, "aten::eq",
                {emit(graph, "aten::dim", {fact.input}, anchor), *fact.rank},
                anchor);
  return emit(graph, "aten::eq",
              {emit(graph, "prim::dtype", {fact.input}, anchor),
               static_cast<int64_t>(fact.dtype)},
              anchor);
}

/// The input as the first version reads it, where \p fact holds: itself,
/// spelled so that the rewrites see the fact (`x.to(torch.bool)`, `x.to(torch.int64)`,
/// `x.view([x.size(0), ..., x.size(r - 1)])`, or `x.expand_as(y)`: a view
/// of x with x's own sizes and strides, and y's shape to the analysis).
Value *refined(Graph &graph, const Fact &fact, const Node *anchor) {
  if (fact.shapeOf)
    return emit(graph, "aten::expand_as", {fact.input, fact.shapeOf}, anchor);
  if (!fact.rank)
    return emit(graph, "aten::to",
                {fact.input, static_cast<int64_t>(fact.dtype), false, false},
                anchor);
  std::vector<Value *> sizes;
  for (int64_t d = 0; d < *fact.rank; ++d)
    sizes.push_back(emit(graph, "aten::size", {fact.input, d}, anchor));
  Value *list = graph.insertNode(graph.createList(c10::IntType::get(), sizes))
                    ->output();
  return emit(graph, "aten::view", {fact.input, list}, anchor);
}

/// The one tensor operand of \p node whose dtype the result takes: its
/// first, or, of an op that promotes its operands to their common dtype
/// (`ge(a, b) & valid`), the one not known to be bool: bool promotes to
/// any dtype, so the result has that operand's.
Value *dtypeOperand(Node *node, const AnalysisResult &analysis) {
  // cat/stack of parts all known int64 but one: that one's dtype decides
  // whether the result is int64 (a bool or integer part promotes to it;
  // PyG's `cat([edge_index[:, mask], loops], 1)`, loops an arange).
  if ((node->kind() == c10::aten::cat || node->kind() == c10::aten::stack) &&
      node->input(0)->node()->kind() == c10::prim::ListConstruct) {
    Value *decides = nullptr;
    for (Value *part : node->input(0)->node()->inputs()) {
      if (analysis.knows(part) && analysis.info(part).dtype == DTypeKind::Long)
        continue;
      if (decides)
        return nullptr;
      decides = part;
    }
    return decides;
  }
  const OpInfo *op = opInfo(node);
  if (!op || node->inputs().empty() || !isTensor(node->input(0)))
    return nullptr;
  if (op->dtype == DTypeRule::KeepsValueOperand)
    return node->input(0);
  if (op->dtype == DTypeRule::Promotes) {
    // Arithmetic of one tensor and integers (`gt_inds[pos] - 1`, mmdet's
    // assigned boxes): the tensor's dtype decides (an int64 stays int64);
    // a float number makes a float, a second tensor promotes with it.
    for (size_t i = 1; i < node->inputs().size(); ++i) {
      c10::TypeKind k = node->input(i)->type()->kind();
      if (k != c10::TypeKind::IntType && k != c10::TypeKind::BoolType)
        return nullptr;
    }
    return node->input(0);
  }
  if (op->dtype != DTypeRule::KeepsInput)
    return nullptr;
  if (!op->has(kElementwise) ||
      analysis.info(node->input(0)).dtype != DTypeKind::Bool)
    return node->input(0); // views, copies: the first's (not expand_as's y)
  Value *decides = nullptr;
  for (Value *in : node->inputs()) {
    if (!isTensor(in) || analysis.info(in).dtype == DTypeKind::Bool)
      continue;
    if (decides)
      return nullptr;
    decides = in;
  }
  return decides ? decides : node->input(0);
}

/// The graph input \p index reads, through ops that keep its dtype (views,
/// clone, to(device), expand_as, a selection x[i], `&` with masks), and
/// through a list it is read out of: the one input behind the tensors the
/// list holds (tianshou's n-step `indices = [indice]`, then `cur =
/// indices[-1]` and an append of the next index, made from cur, in a
/// loop); nullptr where it is none.
Value *inputBehind(Value *index, const Graph &graph,
                   const AnalysisResult &analysis, int depth = 0) {
  for (; depth < 16; ++depth) {
    Node *node = index->node();
    if (node->kind() == c10::prim::Param)
      return node->owningBlock() == graph.block() && isTensor(index) ? index
                                                                      : nullptr;
    if (const Value *list = containerOf(index);
        list && list->type()->kind() == c10::TypeKind::ListType) {
      std::optional<HeldTensors> held = heldTensors(list);
      if (!held)
        return nullptr;
      Value *found = nullptr;
      for (const Value *t : held->stored) {
        if (t == index)
          continue;
        Value *behind =
            inputBehind(const_cast<Value *>(t), graph, analysis, depth + 4);
        if (behind && found && behind != found)
          return nullptr;
        found = behind ? behind : found;
      }
      return found;
    }
    index = dtypeOperand(node, analysis);
    if (!index)
      return nullptr;
  }
  return nullptr;
}

/// A graph input whose dtype would decide an index or a mask, and whether
/// it may also be integer indices (an index is; masked_select's mask is a
/// mask or raises).
struct DecidingInput {
  Value *input;
  bool mayIndex;
};

/// The graph inputs whose dtype would decide an index or a mask: given,
/// unknown, to indexing or an indexed store, or as masked_select's mask (a
/// bool mask, or a uint8 one PyTorch still takes with a warning).
std::vector<DecidingInput>
inputsDecidingIndices(const Graph &graph, const AnalysisResult &analysis) {
  std::vector<DecidingInput> inputs;
  auto add = [&](Value *index, bool mayIndex) {
    if (index->mustBeNone() ||
        analysis.info(index).dtype != DTypeKind::Unknown)
      return;
    Value *input = inputBehind(index, graph, analysis);
    if (!input)
      return;
    auto it = std::find_if(inputs.begin(), inputs.end(),
                           [&](const DecidingInput &d) { return d.input == input; });
    if (it == inputs.end())
      inputs.push_back({input, mayIndex});
    else
      it->mayIndex &= mayIndex;
  };
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return op == c10::aten::index || op == c10::aten::index_put_ ||
                op == c10::aten::index_put || op == c10::aten::masked_select;
       })) {
    if (node->kind() == c10::aten::masked_select) {
      if (node->inputs().size() == 2)
        add(node->input(1), false);
      continue;
    }
    Node *list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct)
      continue;
    for (Value *index : list->inputs())
      add(index, true);
  }
  return inputs;
}

/// The graph inputs of unknown dtype whose values unique() or
/// unique_consecutive() orders, directly or through ops that keep their
/// dtype (a selection `tok[m]` included): bound takes those of integers
/// only (PyTorch's CPU unique orders NaN its own way), so the first
/// version reads them as int64, the usual dtype of ids and labels.
std::vector<Value *> inputsDecidingUniques(const Graph &graph,
                                           const AnalysisResult &analysis) {
  std::vector<Value *> inputs;
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return op == c10::aten::_unique2 || op == c10::aten::unique_consecutive ||
                op == c10::aten::unique_dim;
       })) {
    Value *x = node->input(0);
    if (analysis.info(x).dtype != DTypeKind::Unknown)
      continue;
    Value *input = inputBehind(x, graph, analysis);
    if (input && std::find(inputs.begin(), inputs.end(), input) == inputs.end())
      inputs.push_back(input);
  }
  return inputs;
}

/// The first node of \p graph's top block after every value \p facts name
/// is defined: where the versions begin (the method's first node where
/// they name graph inputs only).
Node *versionPoint(Graph &graph, const std::vector<Fact> &facts) {
  Block *top = graph.block();
  Node *first = *top->nodes().begin();
  for (const Fact &fact : facts) {
    std::vector<Value *> made = {fact.input, fact.shapeOf};
    if (fact.rowsView) {
      std::optional<ExpandedRows> rows = matchExpandedRows(fact.rowsView);
      made = {rows->x, rows->unsqueezed};
      if (rows->width && !widthReadAnywhere(rows->width))
        made.push_back(rows->width);
    }
    for (Value *v : made)
      if (v && v->node()->owningBlock() == top &&
          v->node()->kind() != c10::prim::Param &&
          !first->isAfter(v->node()))
        first = v->node()->next();
  }
  return first;
}

/// Whether the versions return a returned tuple's items one by one, the
/// tuple made after them, or the method's results as they are (bound's
/// returnPair pads the first version's with --padded-outputs).
enum class Results { AsTheyAre, OneByOne };

/// The returned tuple that versions of \p graph from \p first may return
/// item by item, or nullptr.
Node *returnedTuple(Graph &graph, Node *first) {
  Node *ret = graph.block()->return_node();
  if (ret->inputs().size() != 1)
    return nullptr;
  Node *tuple = ret->input(0)->node();
  return tuple->kind() == c10::prim::TupleConstruct &&
                 tuple->owningBlock() == graph.block() &&
                 ret->input(0)->uses().size() == 1 && tuple->isAfter(first)
             ? tuple
             : nullptr;
}

/// Versions \p graph's body from versionPoint() on \p facts.
void version(std::shared_ptr<Graph> &shared, const std::vector<Fact> &facts,
             Results results) {
  Graph &graph = *shared;
  Block *top = graph.block();
  Node *first = versionPoint(graph, facts);
  Node *ret = top->return_node();
  Value *test = nullptr;
  {
    torch::jit::WithInsertPoint at(first);
    for (const Fact &fact : facts) {
      Value *one = holds(graph, fact, first);
      test = test ? emit(graph, "aten::__and__", {test, one}, first) : one;
    }
  }
  // One by one, the returned tuple is made after the versions: a tuple out
  // of an if holds its tensors where TorchScript's alias analysis loses
  // them (each may then alias any other, and an in-place op on one writes
  // them all: YOLOv8's `target_labels.clamp_(0)` keeps an if on data).
  Node *sink = ret;
  if (results == Results::OneByOne)
    if (Node *tuple = returnedTuple(graph, first))
      sink = tuple;
  Node *ifNode = graph.create(c10::prim::If, {test}, 0);
  ifNode->insertBefore(first);
  ifNode->i_(guardAttr(), 1);
  bool ranks = std::any_of(facts.begin(), facts.end(),
                           [](const Fact &fact) { return fact.rank.has_value(); });
  bool shapes = std::any_of(facts.begin(), facts.end(), [](const Fact &fact) {
    return fact.shapeOf || fact.rowsView;
  });
  ifNode->i_(specializedAttr(), shapes  ? kSpecializedShapes
                                : ranks ? kSpecializedRanks
                                        : 1);
  Block *then = ifNode->addBlock();
  Block *otherwise = ifNode->addBlock();
  // The original body becomes the fallback, as it is.
  for (Node *node = first; node != ret;) {
    Node *next = node->next();
    if (node != sink)
      node->moveBefore(otherwise->return_node());
    node = next;
  }
  for (Value *out : sink->inputs())
    otherwise->registerOutput(out);
  // The specialized body: a copy reading each input as the fact says.
  std::unordered_map<Value *, Value *> env;
  {
    torch::jit::WithInsertPoint at(then->return_node());
    for (const Fact &fact : facts)
      if (!fact.rowsView)
        env[fact.input] = refined(graph, fact, otherwise->nodes().front());
  }
  auto lookup = [&](Value *v) {
    auto it = env.find(v);
    return it == env.end() ? v : it->second;
  };
  for (Node *node : otherwise->nodes()) {
    Node *copy = graph.createClone(node, lookup);
    then->appendNode(copy);
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      copy->output(i)->copyMetadata(node->output(i));
      env[node->output(i)] = copy->output(i);
    }
  }
  for (size_t i = 0; i < sink->inputs().size(); ++i) {
    Value *out = sink->input(i);
    then->registerOutput(lookup(out));
    Value *result = ifNode->addOutput()->setType(out->type());
    sink->replaceInput(i, result);
  }
  // Rows of an expanded mask, where the facts say they are rows of the
  // mask: selected as such in the first version.
  for (const Fact &fact : facts) {
    if (!fact.rowsView)
      continue;
    std::optional<ExpandedRows> rows = matchExpandedRows(fact.rowsView);
    Node *view = lookup(fact.rowsView->output())->node();
    Node *index = view->input(0)->node();
    torch::jit::WithInsertPoint at(view);
    Value *selected =
        rowsOfExpanded(graph, lookup(rows->x), lookup(rows->unsqueezed), view);
    selected->setType(view->output()->type());
    view->output()->replaceAllUsesWith(selected);
    view->destroy();
    if (index->output()->uses().empty())
      index->destroy();
  }
  // What the facts make canonical (a nonzero made a vector, of an m now of
  // rank 1, is where(m)[0]): normalize's sweep, on the first version.
  // A test of a rank the facts fix (`if x.dim() == 0`) takes its branch
  // first.
  foldKnownRanks(shared, then);
  for (Node *node : collectNodes(then))
    canonicalizeSpelling(graph, node);
}

/// The sync points left in \p graph after the passes \p after, with the
/// method versioned on \p facts (none: as it is), on a copy.
size_t syncPointsWith(Graph &graph, PassContext &ctx,
                      const std::vector<Fact> &facts,
                      const std::vector<std::string> &after,
                      Results results = Results::AsTheyAre) {
  RewriteTrial trial(graph, ctx);
  if (!facts.empty()) {
    std::vector<Fact> theirs = facts;
    for (Fact &fact : theirs) {
      fact.input = trial.counterpart(fact.input);
      if (fact.shapeOf)
        fact.shapeOf = trial.counterpart(fact.shapeOf);
      if (fact.rowsView)
        fact.rowsView = trial.counterpart(fact.rowsView);
    }
    version(trial.graph(), theirs, results);
  }
  trial.runPasses(after);
  // Each version counted as it would run: with what the pipeline merges
  // after its last pass.
  if (ctx.options.mergeAfterRewrites)
    mergeRewrittenReads(trial.graph(), trial.ctx());
  return trial.cost().syncPoints;
}

/// The sync points left with \p graph versioned on \p facts, its results
/// returned as they are or, where that differs (a returned tuple, no
/// --padded-outputs), one by one: the fewer of the two, and how.
std::pair<size_t, Results> bestVersion(Graph &graph, PassContext &ctx,
                                       const std::vector<Fact> &facts,
                                       const std::vector<std::string> &after) {
  size_t whole = syncPointsWith(graph, ctx, facts, after);
  if (whole == 0 || ctx.options.paddedOutputs ||
      !returnedTuple(graph, versionPoint(graph, facts)))
    return {whole, Results::AsTheyAre};
  size_t items = syncPointsWith(graph, ctx, facts, after, Results::OneByOne);
  return items < whole ? std::make_pair(items, Results::OneByOne)
                       : std::make_pair(whole, Results::AsTheyAre);
}

bool versionable(const std::shared_ptr<Graph> &graph, PassContext &ctx) {
  // A padded output changes the method's results' types in the version
  // bound rewrites; the others then return theirs whole, with their size
  // as the count (bound's returnPair): tensors and tuples of them. A
  // returned dict would lack its counts' keys in the other versions.
  auto tensors = [](const c10::TypePtr &t) {
    if (t->kind() == c10::TypeKind::TensorType)
      return true;
    auto tuple = t->cast<c10::TupleType>();
    return tuple && std::all_of(tuple->elements().begin(), tuple->elements().end(),
                                [](const c10::TypePtr &e) {
                                  return e->kind() == c10::TypeKind::TensorType;
                                });
  };
  return graph->block()->nodes().begin() != graph->block()->nodes().end() &&
         (!ctx.options.paddedOutputs ||
          ctx.facts.analysis(graph).outputsStatic ||
          std::all_of(graph->outputs().begin(), graph->outputs().end(),
                      [&](const Value *out) { return tensors(out->type()); }));
}

/// The tensor inputs of unknown rank from which a data-dependent shape is
/// computed (a nonzero, a selection, an op given a size read from data:
/// `scores.topk(int(m.sum()))`), or an op in a branch that raises for a rank
/// its arguments do not fit (`repeat`, `permute`, a dim past the rank: at a
/// known rank if-convert can show it never does, YOLOv8's `if fg_mask.max()
/// > 1: ....repeat([1, n, 1])`), at most kMaxRankInputs of them.
std::vector<Value *> inputsReachingShapeRoots(Graph &graph,
                                              const AnalysisResult &analysis) {
  auto sizedByData = [&](const Node *node) {
    return std::any_of(node->inputs().begin(), node->inputs().end(),
                       [&](const Value *in) {
                         return in->type()->kind() == c10::TypeKind::IntType &&
                                analysis.info(in).isDataDependent();
                       });
  };
  auto raisesOnRankInBranch = [](const Node *node) {
    const OpInfo *op = opInfo(node);
    bool onRank = node->kind() == c10::aten::repeat ||
                  node->kind() == c10::aten::permute ||
                  (op && op->has(kRaisesOnlyOnDims));
    // In a branch on data, which if-convert would run unconditionally.
    const Node *owner = node->owningBlock()->owningNode();
    return onRank && owner && owner->kind() == c10::prim::If &&
           owner->input(0)->node()->kind() == c10::aten::Bool &&
           isTensor(owner->input(0)->node()->input(0));
  };
  constexpr size_t kMaxRankInputs = 4;
  constexpr size_t kMaxVisits = 4096;
  std::vector<Value *> inputs;
  for (Value *input : graph.inputs()) {
    auto type = input->type()->cast<c10::TensorType>();
    if (!type || type->dim() || knownRank(input))
      continue;
    std::vector<const Value *> work = {input};
    std::unordered_set<const Value *> seen = {input};
    bool reaches = false;
    while (!work.empty() && !reaches && seen.size() < kMaxVisits) {
      const Value *v = work.back();
      work.pop_back();
      for (const torch::jit::Use &use : v->uses()) {
        if (opRole(use.user) == OpRole::DynamicShapeRoot ||
            raisesOnRankInBranch(use.user) ||
            (!use.user->outputs().empty() && isTensor(use.user->output(0)) &&
             sizedByData(use.user))) {
          reaches = true;
          break;
        }
        for (const Value *out : use.user->outputs())
          if (carriesTensor(out->type()) && seen.insert(out).second)
            work.push_back(out);
      }
    }
    if (reaches)
      inputs.push_back(input);
    if (inputs.size() == kMaxRankInputs)
      break;
  }
  return inputs;
}

/// Of each masked_select(x, m) whose operands the graph does not show to be
/// of one shape: that x's shape root has m's (shapeRoot: the values whose
/// shapes they keep), both tensors of the method's top block, one fact per
/// root, at most kMaxShapeFacts of them. Ranks known apart never match.
std::vector<Fact> selectionShapeFacts(Graph &graph,
                                      const AnalysisResult &analysis) {
  constexpr size_t kMaxShapeFacts = 4;
  auto topLevel = [&](const Value *v) {
    return isTensor(v) && v->node()->owningBlock() == graph.block();
  };
  std::vector<Fact> facts;
  for (Node *node : analysis.nodesWhere(
           [](c10::Symbol op) { return op == c10::aten::masked_select; })) {
    if (node->inputs().size() != 2 ||
        provablySameShape(node->input(0), node->input(1)))
      continue;
    Value *x = shapeRoot(node->input(0)), *m = shapeRoot(node->input(1));
    std::optional<int64_t> rx = knownRank(x), rm = knownRank(m);
    if (!topLevel(x) || !topLevel(m) || (rx && rm && *rx != *rm) ||
        std::any_of(facts.begin(), facts.end(),
                    [&](const Fact &f) { return f.input == x || f.input == m; }))
      continue;
    facts.push_back({x, std::nullopt, m});
    if (facts.size() == kMaxShapeFacts)
      break;
  }
  // Rows of an expanded mask (matchExpandedRows), all of the top block and
  // C made before the selection, so that the versions both select.
  for (Node *node : graph.block()->nodes()) {
    if (facts.size() == kMaxShapeFacts)
      break;
    std::optional<ExpandedRows> rows = matchExpandedRows(node);
    if (!rows)
      continue;
    const Node *index = node->input(0)->node();
    if (index->owningBlock() != graph.block() || !topLevel(rows->x) ||
        !topLevel(rows->unsqueezed) ||
        (rows->width && !widthReadAnywhere(rows->width) &&
         rows->width->node()->owningBlock() == graph.block() &&
         rows->width->node()->isAfter(index)))
      continue;
    Fact fact;
    fact.input = rows->x;
    fact.rowsView = node;
    facts.push_back(fact);
  }
  return facts;
}

/// Versions \p graph on \p facts where the passes after \p pass then reach
/// the host at fewer points than they do on the method as it is (both
/// tried); returns whether it did.
bool versionWhereFewerSyncs(std::shared_ptr<Graph> &shared, PassContext &ctx,
                            const std::vector<Fact> &facts, const char *pass) {
  if (facts.empty())
    return false;
  Graph &graph = *shared;
  const std::vector<std::string> after = passesAfter(pass);
  auto [points, results] = bestVersion(graph, ctx, facts, after);
  if (points >= syncPointsWith(graph, ctx, {}, after))
    return false;
  version(shared, facts, results);
  return true;
}

} // namespace

bool specializeDTypes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  if (!versionable(graph, ctx))
    return false;
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  std::vector<Fact> facts;
  std::vector<bool> mayIndex;
  for (const DecidingInput &d : inputsDecidingIndices(*graph, analysis)) {
    facts.push_back({d.input, std::nullopt});
    mayIndex.push_back(d.mayIndex);
  }
  size_t indices = facts.size();
  for (Value *input : inputsDecidingUniques(*graph, analysis))
    if (std::none_of(facts.begin(), facts.end(),
                     [&](const Fact &f) { return f.input == input; }))
      facts.push_back({input, std::nullopt, nullptr, c10::ScalarType::Long});
  if (facts.empty())
    return false;
  // An input that decides an index is tried as a mask (bool) first; then,
  // one by one, as int64 indices where that version reaches the host at
  // fewer points still (PyG's edge_index: its rows gather, they never
  // select).
  const std::vector<std::string> after = passesAfter("specialize-dtypes");
  size_t best = syncPointsWith(*graph, ctx, facts, after);
  for (size_t i = 0; i < indices && best > 0; ++i) {
    if (!mayIndex[i])
      continue;
    std::vector<Fact> asIndices = facts;
    asIndices[i].dtype = c10::ScalarType::Long;
    size_t points = syncPointsWith(*graph, ctx, asIndices, after);
    if (points < best) {
      best = points;
      facts = std::move(asIndices);
    }
  }
  if (best >= syncPointsWith(*graph, ctx, {}, after))
    return false;
  version(graph, facts, Results::AsTheyAre);
  return true;
}

bool specializeShapes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  if (!versionable(graph, ctx))
    return false;
  return versionWhereFewerSyncs(
      graph, ctx, selectionShapeFacts(*graph, ctx.facts.analysis(graph)),
      "specialize-shapes");
}

bool specializeRanks(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  if (!versionable(graph, ctx))
    return false;
  std::vector<Value *> inputs =
      inputsReachingShapeRoots(*graph, ctx.facts.analysis(graph));
  if (inputs.empty())
    return false;
  const std::vector<std::string> after = passesAfter("specialize-ranks");
  size_t best = syncPointsWith(*graph, ctx, {}, after);
  std::vector<Fact> chosen;
  Results chosenResults = Results::AsTheyAre;
  auto tryFacts = [&](const std::vector<Fact> &facts) {
    if (best == 0 || facts.empty())
      return;
    auto [points, results] = bestVersion(*graph, ctx, facts, after);
    if (points < best) {
      best = points;
      chosen = facts;
      chosenResults = results;
    }
  };
  // Vectors, matrices, and stacks or batches of masks and images ([N, H,
  // W]: SAM's `masks[keep].sum((-1, -2))` reduces trailing dims only at
  // rank 3; [B, M, H, W] flattened to [B * M, H, W] first, at rank 4).
  constexpr int64_t kMaxRank = 4;
  if (inputs.size() <= 2) {
    // Every choice of rank (none, 1 to 4) for each: an expert's input and
    // its router may only help together (24 trials at most).
    for (int64_t a = 0; a <= kMaxRank; ++a)
      for (int64_t b = 0; b <= (inputs.size() == 2 ? kMaxRank : 0); ++b) {
        std::vector<Fact> facts;
        if (a)
          facts.push_back({inputs[0], a});
        if (b)
          facts.push_back({inputs[1], b});
        tryFacts(facts);
      }
  } else {
    // Every input at one rank (a mask and the tensors it selects from,
    // `x[m] -= v[m]`, only help together), then greedily, input by input:
    // the rank whose version, with those chosen before, reaches the host at
    // the fewest points.
    for (int64_t rank = 1; rank <= kMaxRank; ++rank) {
      std::vector<Fact> facts;
      for (Value *input : inputs)
        facts.push_back({input, rank});
      tryFacts(facts);
    }
    // Round after round while one chose a rank: an input whose rank helps
    // only beside another's (SAM's masks, selected by a mask computed
    // from its iou predictions) is tried again once that one is chosen.
    for (bool more = true; more;) {
      more = false;
      for (Value *input : inputs) {
        if (std::any_of(chosen.begin(), chosen.end(),
                        [&](const Fact &f) { return f.input == input; }))
          continue;
        size_t before = best;
        for (int64_t rank = 1; rank <= kMaxRank; ++rank) {
          std::vector<Fact> facts = chosen;
          facts.push_back({input, rank});
          tryFacts(facts);
        }
        more |= best < before;
      }
    }
  }
  if (chosen.empty())
    return false;
  version(graph, chosen, chosenResults);
  return true;
}

} // namespace staticify

