//===- PinnedSizes.cpp - data-dependent lengths that a later op fixes -----===//

#include "passes/PinnedSizes.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"

#include <optional>
#include <vector>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "pinned-sizes";

/// `repeat_interleave` by a tensor of repeats, the length of its result
/// their sum: the repeats alone (`repeat_interleave(r)`: ids 0, 0, 1, ...)
/// or with the values they repeat (`x.repeat_interleave(r, dim)`).
struct Repeat {
  Value *repeats = nullptr;
  Value *self = nullptr; // null: the ids themselves
  Value *dim = nullptr;  // null, or None: self flattened
};

std::optional<Repeat> matchRepeat(Node *node) {
  if (node->kind() != c10::aten::repeat_interleave || node->outputs().size() != 1)
    return std::nullopt;
  if (node->inputs().size() == 2 && isTensor(node->input(0)) &&
      node->input(1)->mustBeNone())
    return Repeat{node->input(0), nullptr, nullptr};
  if (node->inputs().size() == 4 && isTensor(node->input(0)) &&
      isTensor(node->input(1)) && node->input(3)->mustBeNone()) {
    Value *dim = node->input(2);
    if (!dim->mustBeNone() && constantInt(dim) != 0)
      return std::nullopt; // another dim moves the rows: not an index
    return Repeat{node->input(1), node->input(0), dim};
  }
  return std::nullopt;
}

/// An op that raises unless its index (input 2) has as many elements as
/// its source (input 3) has along its dim (input 1).
bool pinsIndex(const Node *node, size_t offset) {
  static const std::array<c10::Symbol, 4> ops = {
      c10::Symbol::aten("index_add"), c10::Symbol::aten("index_add_"),
      c10::Symbol::aten("index_copy"), c10::Symbol::aten("index_copy_")};
  return offset == 2 && node->inputs().size() >= 4 &&
         std::find(ops.begin(), ops.end(), node->kind()) != ops.end() &&
         isTensor(node->input(3));
}

/// A cast or other one-tensor elementwise op (`ids.long()`,
/// `ids.to(device)`): the same length.
bool keepsLength(const Node *node) {
  if (!opElementwise(node) || node->outputs().size() != 1 ||
      !isTensor(node->output()))
    return false;
  return countTensorInputs(node) == 1 && isTensor(node->input(0));
}

struct Pin {
  Node *consumer = nullptr;
  std::vector<Node *> chain; // from the producer's use to the consumer's
};

/// The op pinning \p v's length, in \p block, through casts.
std::optional<Pin> findPin(Value *v, Block *block, std::vector<Node *> chain) {
  for (const torch::jit::Use &use : v->uses()) {
    Node *user = use.user;
    if (user->owningBlock() != block)
      continue;
    if (pinsIndex(user, use.offset))
      return Pin{user, chain};
    if (keepsLength(user) && use.offset == 0) {
      std::vector<Node *> longer = chain;
      longer.push_back(user);
      if (auto pin = findPin(user->output(), block, longer))
        return pin;
    }
  }
  return std::nullopt;
}

/// The node of \p block that holds \p node (itself, or an if or loop
/// around it); null where it is outside \p block.
Node *ancestorIn(Node *node, const Block *block) {
  while (node && node->owningBlock() != block)
    node = node->owningBlock()->owningNode();
  return node;
}

/// Why \p v's uses other than \p first may see a length before \p consumer
/// checks it: empty where none does.
std::string earlyUseReason(Value *v, Node *first, Node *consumer) {
  Block *block = consumer->owningBlock();
  for (const torch::jit::Use &use : v->uses()) {
    if (use.user == first)
      continue;
    Node *at = ancestorIn(use.user, block);
    if (!at)
      return "it is used outside the block of the op that fixes its length";
    if (at != consumer && at != block->return_node() && !at->isAfter(consumer))
      return "it is used before the op that fixes its length";
  }
  return "";
}

/// searchsorted(cumsum(r), arange(S), right=True): position j's segment,
/// the first whose running sum passes j.
Value *segmentIds(Graph &graph, Value *repeats, Value *length,
                  const Node *anchor) {
  Value *sums = emit(graph, "aten::cumsum", {repeats, 0}, anchor);
  Value *positions = emit(
      graph, "aten::arange", {length}, anchor,
      {NamedValue("dtype", static_cast<int64_t>(c10::ScalarType::Long)),
       NamedValue("device", emit(graph, "prim::device", {repeats}, anchor))});
  return emit(graph, "aten::searchsorted", {sums, positions}, anchor,
              {NamedValue("right", true)});
}

} // namespace

bool pinnedSizes(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  std::vector<Node *> producers;
  for (Node *node : collectNodes(graph->block()))
    if (matchRepeat(node))
      producers.push_back(node);
  // Facts about the graph as it was: only original values (the sources)
  // are asked after a rewrite.
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  bool changed = false;
  for (Node *producer : producers) {
    Repeat r = *matchRepeat(producer);
    Block *block = producer->owningBlock();
    std::optional<Pin> pin = findPin(producer->output(), block, {});
    if (!pin)
      continue;
    Node *consumer = pin->consumer;
    Node *first = pin->chain.empty() ? consumer : pin->chain.front();
    // Each value on the way is read only from the pinning op on (the ids
    // returned, `batch`, are the ones it checked).
    std::string why = earlyUseReason(producer->output(), first, consumer);
    for (size_t i = 0; why.empty() && i < pin->chain.size(); ++i)
      why = earlyUseReason(pin->chain[i]->output(),
                           i + 1 < pin->chain.size() ? pin->chain[i + 1] : consumer,
                           consumer);
    Value *source = consumer->input(3);
    if (why.empty() && analysis.knows(source) &&
        analysis.info(source).shape != ShapeDep::Static)
      why = "the size that would fix its length depends on data too";
    if (!why.empty()) {
      ctx.declined(producer, kRule, why);
      continue;
    }
    // The casts on the way run where the consumer does (they read nothing
    // else), so that the source is computed before the ids.
    for (Node *cast : pin->chain)
      cast->moveBefore(consumer);
    torch::jit::WithInsertPoint at(first);
    Value *length =
        emit(*graph, "aten::size", {source, consumer->input(1)}, first);
    Value *result;
    if (!r.self) {
      // The ids take the repeats' dtype, as repeat_interleave's do.
      result = emit(*graph, "aten::to",
                    {segmentIds(*graph, r.repeats, length, first),
                     emit(*graph, "prim::dtype", {r.repeats}, first)},
                    first);
    } else {
      Value *x = r.dim->mustBeNone()
                     ? emit(*graph, "aten::reshape",
                            {r.self, std::vector<int64_t>{-1}}, first)
                     : r.self;
      // One repeat per element (a single one broadcasts over all: then the
      // original runs, with its read).
      Value *perElement = emit(
          *graph, "aten::__and__",
          {emit(*graph, "aten::eq",
                {emit(*graph, "aten::dim", {r.repeats}, first), 1}, first),
           emit(*graph, "aten::eq",
                {emit(*graph, "aten::numel", {r.repeats}, first),
                 emit(*graph, "aten::size", {x, 0}, first)},
                first)},
          first);
      result = emitIf(
          *graph, perElement, first,
          [&] {
            return emit(*graph, "aten::index_select",
                        {x, 0, segmentIds(*graph, r.repeats, length, first)},
                        first);
          },
          [&] {
            return graph->insertNode(graph->createClone(producer, [](Value *v) {
                          return v;
                        }))->output();
          });
      result->node()->i_(guardAttr(), 1);
    }
    producer->output()->replaceAllUsesWith(result);
    ctx.rewrote(producer, kRule);
    producer->destroy();
    changed = true;
  }
  return pinnedWidths(graph, ctx) || changed;
}

} // namespace staticify
