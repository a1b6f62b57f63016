//===- MaskStore.cpp - masked writes: x[mask] = v, masked_fill(m, t) -----===//

#include "passes/MaskStore.h"

#include "passes/GraphUtils.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

static constexpr const char *kRule = "mask-store";

/// The mask selection written through by an index_put node, if its only
/// index is a boolean mask.
static std::optional<Selection> storeSelection(Node *node,
                                               const AnalysisResult &analysis) {
  Node *list = node->input(1)->node();
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1)
    return std::nullopt;
  DTypeKind k = analysis.info(list->input(0)).dtype;
  if (k != DTypeKind::Bool && k != DTypeKind::Byte)
    return std::nullopt;
  Selection sel;
  sel.node = node;
  sel.base = node->input(0);
  sel.mask = list->input(0);
  sel.isByteMask = k == DTypeKind::Byte;
  return sel;
}

/// masked_fill(x, m, v) and masked_fill_ with a 0-d tensor v read v on the
/// host (kReadsValueOnHost): where(m, v, x) reads nothing. v is cast to x's
/// dtype as masked_fill casts it; the two differ only where masked_fill
/// raises (a value that overflows x's dtype). A v not provably 0-d is left:
/// masked_fill raises for it, where would broadcast it.
static bool fillByWhere(Graph &graph, const AnalysisResult &analysis,
                        PassContext &ctx) {
  static const c10::Symbol fill = c10::Symbol::fromQualString("aten::masked_fill");
  static const c10::Symbol fillInPlace =
      c10::Symbol::fromQualString("aten::masked_fill_");
  bool changed = false;
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return op == fill || op == fillInPlace;
       })) {
    const OpInfo *op = opInfo(node);
    Value *v = node->inputs().back();
    if (!op || !op->has(kReadsValueOnHost) || analysis.info(v).onHost)
      continue;
    if (!provablyZeroDim(v)) {
      ctx.declined(node, kRule, "the fill value is a tensor not known to be 0-d");
      continue;
    }
    torch::jit::WithInsertPoint guard(node);
    Value *x = node->input(0);
    Value *cast =
        emit(graph, "aten::to", {v, emit(graph, "prim::dtype", {x}, node)}, node);
    Value *result = emit(graph, "aten::where", {node->input(1), cast, x}, node);
    if (node->kind() == fillInPlace)
      result = emit(graph, "aten::copy_", {x, result}, node);
    node->output()->replaceAllUsesWith(result);
    ctx.rewrote(node, kRule);
    node->destroy();
    changed = true;
  }
  return changed;
}

/// Whether the store \p node to \p x may be a new value instead: x made
/// afresh (not a graph input) in the store's block or one around it
/// through ifs only (a loop would carry the write to its next iteration),
/// and after the store nothing but x itself reads its memory, so its later
/// uses can read the new value.
static bool storesAsNewValue(Value *x, Node *node) {
  for (const torch::jit::Block *b = node->owningBlock();
       b != x->node()->owningBlock(); b = b->owningNode()->owningBlock())
    if (!b->owningNode() || b->owningNode()->kind() != c10::prim::If)
      return false;
  return Aliases::onlyItselfReadAfter(x, node);
}

/// Makes the uses of \p x after \p at read \p now: those in \p at's block
/// (and blocks in it), and, where that block is an if's branch, those after
/// the if read a new result of it (\p now from this branch, x from the
/// other), and so on out to x's own block.
static void readAfter(Value *x, Node *at, Value *now) {
  torch::jit::Block *block = at->owningBlock();
  auto inBlock = [block](const Node *user) {
    for (const torch::jit::Block *b = user->owningBlock(); b;
         b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr)
      if (b == block)
        return true;
    return false;
  };
  std::vector<torch::jit::Use> later;
  for (const torch::jit::Use &use : x->uses())
    if (use.user != at && inBlock(use.user) && use.user->isAfter(at))
      later.push_back(use);
  for (const torch::jit::Use &use : later)
    use.user->replaceInput(use.offset, now);
  if (block == x->node()->owningBlock())
    return;
  Node *ifNode = block->owningNode();
  Value *merged = ifNode->addOutput()->setType(x->type());
  for (torch::jit::Block *branch : ifNode->blocks())
    branch->registerOutput(branch == block ? now : x);
  readAfter(x, ifNode, merged);
}

bool maskStore(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult *facts = &ctx.facts.analysis(graph);
  const Aliases *aliasFacts = &ctx.facts.aliases(graph);
  bool changed = false;
  // A store written as a new value makes the uses after it read a value the
  // analysis and the alias database have never seen: they are recomputed
  // before the next store is looked at.
  bool stale = false;
  static const c10::Symbol indexPutInPlace =
      c10::Symbol::fromQualString("aten::index_put_");
  static const c10::Symbol indexPut =
      c10::Symbol::fromQualString("aten::index_put");
  const std::vector<Node *> stores =
      facts->nodesWhere([](c10::Symbol op) {
        return op == indexPutInPlace || op == indexPut;
      });
  for (Node *node : stores) {
    if (stale) {
      ctx.facts.invalidate();
      facts = &ctx.facts.analysis(graph);
      aliasFacts = &ctx.facts.aliases(graph);
      stale = false;
    }
    const AnalysisResult &analysis = *facts;
    const Aliases &aliases = *aliasFacts;
    bool inPlace = node->kind() == indexPutInPlace;
    auto sel = storeSelection(node, analysis);
    if (!sel)
      continue;
    if (writtenByOthers(*graph, aliases, sel->mask, node)) {
      ctx.declined(node, kRule, "the mask is written to in place");
      continue;
    }
    Value *x = node->input(0);
    Value *v = node->input(2);
    if (constantBool(node->input(3)) != false) {
      ctx.declined(node, kRule, "accumulate=True is not rewritten");
      continue;
    }
    // What is stored: a 0-d value, or a selection by the same mask.
    Value *source = nullptr;
    Node *sourceSelection = nullptr;
    bool rankGuard = false; // y's rank is x's only where the host checks it
    if (provablyZeroDim(v)) {
      source = v;
    } else if (auto vs = matchSelection(v, analysis)) {
      // y[m] is read at the store: y and m must not change in between (x is
      // stored to by this very node, so it may not be y's writer either).
      if (vs->mask == sel->mask && !vs->broadcasts &&
          !writtenByOthers(*graph, aliases, vs->base, node) &&
          !writtenByOthers(*graph, aliases, vs->mask, node) &&
          !aliases.mayAlias(vs->base, x)) {
        source = vs->base;
        sourceSelection = vs->node;
        std::optional<int64_t> rank = knownRank(vs->base, &analysis);
        rankGuard = !provablySameRank(vs->base, x) &&
                    !(rank && rank == knownRank(x, &analysis));
      }
    }
    if (!source) {
      ctx.declined(node, kRule,
                   "the stored value is neither 0-d nor a selection by the "
                   "same mask");
      continue;
    }
    if (rankGuard && !inPlace) {
      ctx.declined(node, kRule,
                   "the stored selection's rank is not provably x's, and a "
                   "functional index_put is not guarded");
      continue;
    }
    torch::jit::WithInsertPoint guard(node);
    Value *mask = emitMaskLike(*graph, *sel, x, node);
    Value *result;
    // A 0-d v goes in by where, cast to x's dtype as index_put_ casts it:
    // masked_fill_ with a tensor value reads it on the host (its CUDA
    // kernel takes v.item()).
    if (source == v)
      source = emit(*graph, "aten::to",
                    {v, emit(*graph, "prim::dtype", {x}, node)}, node);
    if (rankGuard) {
      // where(m, y, x) is x[m] = y[m] only where y has x's rank (elsewhere
      // the two broadcast differently, and the store mostly raises): a host
      // check of the ranks, whose fallback is the store as it was (the
      // selection made there, in the branch that needs it).
      Value *sameRank = emit(*graph, "aten::eq",
                             {emit(*graph, "aten::dim", {source}, node),
                              emit(*graph, "aten::dim", {x}, node)},
                             node);
      Value *rawMask = sel->mask;
      result = emitIf(
          *graph, sameRank, node,
          [&] {
            return emit(
                *graph, "aten::copy_",
                {x, emit(*graph, "aten::where", {mask, source, x}, node)},
                node);
          },
          [&] {
            Value *selected = emitSelect(*graph, source, rawMask, node);
            Value *indices =
                graph
                    ->insertNode(graph->createList(
                        c10::OptionalType::ofTensor(), {rawMask}))
                    ->output();
            return emit(*graph, "aten::index_put_",
                        {x, indices, selected, false}, node);
          });
      result->node()->i_(guardAttr(), 1);
    } else if (inPlace && storesAsNewValue(x, node)) {
      // Out of place: the uses after the store read the new value. An
      // in-place write to a tensor autodiff saw (the profiling executor's
      // differentiable graphs, grad mode on) raises where the original's
      // did not, once a specialization removed what shielded it (an
      // eval-mode dropout).
      result = emit(*graph, "aten::where", {mask, source, x}, node);
      readAfter(x, node, result);
      stale = true;
    } else if (inPlace)
      result =
          emit(*graph, "aten::copy_",
               {x, emit(*graph, "aten::where", {mask, source, x}, node)}, node);
    else
      result =
          emit(*graph, "aten::type_as",
               {emit(*graph, "aten::where", {mask, source, x}, node), x}, node);
    node->output()->replaceAllUsesWith(result);
    ctx.rewrote(node, kRule);
    node->destroy();
    if (sourceSelection)
      eraseIfDead(sourceSelection, ctx, kRule);
    changed = true;
  }
  if (changed) // the analysis above is of the graph before these rewrites
    ctx.facts.invalidate();
  return fillByWhere(*graph, ctx.facts.analysis(graph), ctx) || changed;
}

} // namespace staticify
