//===- PinnedWidths.cpp - ranges sized by a read count, pinned by broadcast ===//
//
// `arange(n)` of a count read from the device (`n = int(lengths.max())`),
// its width carried through views and elementwise ops (the padding mask
// `arange(n)[None, :] < lengths[:, None]`) into an elementwise op with a
// tensor whose size along that dim is S: broadcasting raises unless n is S
// or 1 (or S is 1, where the result is n wide; a guard sends that case to
// the original). A width of 1 broadcasts: every column reads position 0.
// So on every run that succeeds the chain computed from
// `arange(S) * (t != 1)` gives, broadcast, what the original gave, and the
// read is gone. See PinnedSizes.h for the contract this rests on.
//
//===----------------------------------------------------------------------===//

#include "passes/PinnedSizes.h"

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/OpInfo.h"
#include "passes/Selection.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::NamedValue;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "pinned-sizes";

/// `arange(n)` (or `arange(0, n)`, step 1) of a count read from one device
/// tensor: `int(t)`, `int(t.item())`, or `t.item()` of an integer tensor.
struct CountedRange {
  Node *arange = nullptr;
  Value *count = nullptr;     // n
  Value *source = nullptr;    // t
  std::vector<Node *> reads;  // from t to n, in order
  bool checkIntegral = false; // a Scalar read of a tensor of unknown dtype
};

std::optional<CountedRange> matchCountedRange(Node *node,
                                              const AnalysisResult &facts) {
  if (node->kind() != c10::aten::arange || node->outputs().size() != 1)
    return std::nullopt;
  Value *end = namedInput(node, "end");
  if (!end)
    return std::nullopt;
  if (Value *start = namedInput(node, "start"); start && constantInt(start) != 0)
    return std::nullopt;
  if (Value *step = namedInput(node, "step"); step && constantInt(step) != 1)
    return std::nullopt;
  CountedRange r{node, end, nullptr, {}};
  Node *read = end->node();
  if (read->kind() == c10::aten::Int && read->inputs().size() == 1) {
    r.reads.insert(r.reads.begin(), read);
    Value *in = read->input(0);
    if (in->node()->kind() == c10::aten::item && isTensor(in->node()->input(0))) {
      r.reads.insert(r.reads.begin(), in->node());
      r.source = in->node()->input(0);
    } else if (isTensor(in)) {
      r.source = in;
    }
  } else if (read->kind() == c10::aten::item && isTensor(read->input(0))) {
    // A Scalar: an integer only where the tensor's dtype is one (arange of
    // a float count is ceil(n) wide); the guard checks a dtype not known.
    Value *t = read->input(0);
    r.reads.push_back(read);
    r.source = t;
    r.checkIntegral = !facts.knows(t) || (facts.info(t).dtype != DTypeKind::Long &&
                                          facts.info(t).dtype != DTypeKind::Byte &&
                                          facts.info(t).dtype != DTypeKind::Bool);
  }
  if (!r.source)
    return std::nullopt;
  // Each read feeds only the next (the count itself is checked by the walk).
  for (size_t i = 0; i + 1 < r.reads.size(); ++i)
    if (r.reads[i]->output()->uses().size() != 1)
      return std::nullopt;
  return r;
}

/// An elementwise op, or the in-place form of one (`masked_fill_`).
bool elementwiseOrInPlace(const Node *node) {
  if (opElementwise(node))
    return true;
  std::string name = node->kind().toUnqualString();
  if (name.size() < 2 || name.back() != '_' || name[name.size() - 2] == '_')
    return false;
  c10::Symbol base = c10::Symbol::fromQualString(
      std::string(node->kind().ns().toUnqualString()) + "::" +
      name.substr(0, name.size() - 1));
  return mutatesFirstInput(node) &&
         anyOpInfo(base, [](const OpInfo &op) { return op.has(kElementwise); });
}

/// A value of the chain: its rank and the dim that is n wide.
struct Wide {
  int64_t rank;
  int64_t dim;
};

/// An elementwise op where the chain's width meets a size of its own.
struct Pin {
  Node *consumer;
  Value *other;     // the operand whose size pins the width
  int64_t fromEnd;  // the width's dim, counted from the end (negative)
  bool inPlace;     // the other is the op's self, written: never widened
};

/// Whether \p v provably has size 1 at \p fromEnd (negative) or lacks
/// that dim: a number, a tensor of known rank below it or with an unsqueeze
/// there.
bool broadcastsAt(const Value *v, int64_t fromEnd) {
  if (!isTensor(v))
    return true;
  std::optional<int64_t> rank = knownRank(v);
  if (rank && *rank < -fromEnd)
    return true;
  const Node *n = v->node();
  if (n->kind() == c10::aten::unsqueeze && rank) {
    std::optional<int64_t> d = constantInt(n->input(1));
    return d && (*d < 0 ? *d + *rank : *d) == *rank + fromEnd;
  }
  return false;
}

/// An operand taken to broadcast along the width (a 1 there, or no such
/// dim), at a rank, where the graph does not show it: the guard checks
/// `dim() == rank and size(fromEnd) == 1` (the size where it has the dim).
struct Presumed {
  Value *operand;
  int64_t fromEnd;
  int64_t rank;
};

/// The chain from a counted range to the ops that pin its width.
struct Chain {
  std::vector<Node *> links; // in program order once sorted
  std::vector<Pin> pins;
  std::vector<Presumed> presumed;
  std::unordered_map<const Value *, Wide> wide;
  /// Host ints that are n: the count, and `size(v, dim)` of a chain value.
  std::vector<Value *> counts;
  std::string why; // empty: the chain is whole
};

bool isFullSlice(const Node *n) {
  Value *start = namedInput(n, "start"), *end = namedInput(n, "end"),
        *step = namedInput(n, "step");
  return start && end && step &&
         (start->mustBeNone() || constantInt(start) == 0) &&
         (end->mustBeNone() ||
          constantInt(end) == std::numeric_limits<int64_t>::max()) &&
         constantInt(step) == 1;
}

int64_t nonNegative(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

/// Follows \p r's result through the ops that keep its width a dim of
/// theirs (views, and elementwise ops whose other operands broadcast along
/// it) to the elementwise ops that pin it. Links stay in the range's
/// block; pins may sit in blocks nested in it.
Chain followWidth(const CountedRange &r) {
  Chain c;
  Block *block = r.arange->owningBlock();
  c.counts.push_back(r.count);
  // The count converted (`expand(1, n)` of a Scalar n reads IntImplicit(n)).
  for (const torch::jit::Use &use : r.count->uses()) {
    c10::Symbol kind = use.user->kind();
    if (kind == c10::aten::IntImplicit || kind == c10::aten::ScalarImplicit ||
        (kind == c10::aten::Int && !isTensor(use.user->input(0)))) {
      if (use.user->owningBlock() != block)
        continue; // a use besides: the walk declines
      c.counts.push_back(use.user->output());
      c.links.push_back(use.user);
    }
  }
  c.wide[r.arange->output()] = {1, 0};
  std::vector<Value *> work = {r.arange->output()};
  auto link = [&](Node *n, Wide w) {
    c.links.push_back(n);
    c.wide[n->output()] = w;
    work.push_back(n->output());
  };
  auto isCount = [&](const Value *v) {
    return std::find(c.counts.begin(), c.counts.end(), v) != c.counts.end();
  };
  auto linked = [&](const Node *n) {
    return std::find(c.links.begin(), c.links.end(), n) != c.links.end();
  };
  // Extends the chain by \p user, \p v's use at \p offset; a reason where
  // it cannot.
  auto step = [&](Node *user, size_t offset, Wide w) -> std::string {
    c10::Symbol kind = user->kind();
    bool here = user->owningBlock() == block;
    std::optional<int64_t> dim =
        user->inputs().size() > 1 ? constantInt(user->input(1)) : std::nullopt;
    if (here && offset == 0 && kind == c10::aten::size && user->inputs().size() == 2) {
      if (!dim)
        return "a size of it is read";
      // The width is a count; another dim's size is the same in a copy.
      if (nonNegative(*dim, w.rank) == w.dim)
        c.counts.push_back(user->output());
      c.links.push_back(user);
      return "";
    }
    if (here && offset == 0 && kind == c10::aten::unsqueeze && dim) {
      int64_t at = nonNegative(*dim, w.rank + 1);
      link(user, {w.rank + 1, at <= w.dim ? w.dim + 1 : w.dim});
      return "";
    }
    if (here && offset == 0 && kind == c10::aten::slice && dim &&
        isFullSlice(user)) {
      link(user, w);
      return "";
    }
    if (here && offset == 0 && kind == c10::aten::select && dim) {
      int64_t at = nonNegative(*dim, w.rank);
      if (at == w.dim)
        return "a position along its width is selected";
      link(user, {w.rank - 1, at < w.dim ? w.dim - 1 : w.dim});
      return "";
    }
    if (here && offset == 0 && kind == c10::aten::permute) {
      std::optional<std::vector<int64_t>> dims = constantIntList(user->input(1));
      if (!dims || static_cast<int64_t>(dims->size()) != w.rank)
        return "it is permuted by dims not known";
      for (size_t i = 0; i < dims->size(); ++i)
        if (nonNegative((*dims)[i], w.rank) == w.dim) {
          link(user, {w.rank, static_cast<int64_t>(i)});
          return "";
        }
      return "it is permuted by dims not known";
    }
    if (here && offset == 0 && kind == c10::aten::expand) {
      Node *list = user->input(1)->node();
      int64_t rank = static_cast<int64_t>(list->inputs().size());
      if (list->kind() != c10::prim::ListConstruct ||
          list->output()->uses().size() != 1 || rank < w.rank)
        return "it is expanded to sizes not known";
      int64_t at = w.dim + rank - w.rank;
      for (int64_t i = 0; i < rank; ++i)
        if (isCount(list->input(i)) != (i == at) &&
            !(i == at && constantInt(list->input(i)) == -1))
          return "it is expanded to a size of its own along its width";
      c.links.push_back(list);
      link(user, {rank, at});
      return "";
    }
    if (!elementwiseOrInPlace(user) || user->isNondeterministic() ||
        user->outputs().size() != 1 || !isTensor(user->output()))
      return "its width is read by '" + std::string(kind.toQualString()) + "'";
    if (writesAnything(user) && offset == 0)
      return "it is written in place";
    int64_t fromEnd = w.dim - w.rank;
    Value *pinning = nullptr;
    std::vector<Presumed> presumed;
    int64_t resultRank = w.rank;
    for (size_t i = 0; i < user->inputs().size(); ++i) {
      Value *o = user->input(i);
      if (i == offset || !isTensor(o))
        continue;
      if (c.wide.count(o))
        return "two of its values meet";
      std::optional<int64_t> rank = knownRank(o);
      if (broadcastsAt(o, fromEnd) && rank) {
        resultRank = std::max(resultRank, *rank);
        continue;
      }
      // An unsqueezed operand (`lengths[:, None]`) is taken to broadcast
      // along the width, at the least rank its ops give it; any other to
      // pin it.
      if (o->node()->kind() == c10::aten::unsqueeze) {
        std::optional<int64_t> d = constantInt(o->node()->input(1));
        int64_t least = rank ? *rank
                             : std::max<int64_t>(minimumRank(o),
                                                 d ? (*d < 0 ? -*d : *d + 1) : 1);
        presumed.push_back({o, fromEnd, least});
        resultRank = std::max(resultRank, least);
      } else if (!pinning) {
        pinning = o;
      }
    }
    c.presumed.insert(c.presumed.end(), presumed.begin(), presumed.end());
    if (pinning) {
      if (!insideOf(user, block))
        return "the op that fixes its width is outside its block";
      c.pins.push_back({user, pinning, fromEnd,
                        writesAnything(user) && pinning == user->input(0)});
      return "";
    }
    if (!here)
      return "it flows into a branch or loop";
    link(user, {resultRank, resultRank + fromEnd});
    return "";
  };
  while (!work.empty() && c.why.empty()) {
    Value *v = work.back();
    work.pop_back();
    for (const torch::jit::Use &use : v->uses()) {
      if (linked(use.user))
        continue; // an op of two chain values: reached already
      c.why = step(use.user, use.offset, c.wide.at(v));
      if (!c.why.empty())
        break;
    }
    if (c.why.empty() && c.links.size() > 64)
      c.why = "it flows through too many ops";
  }
  if (c.why.empty() && c.pins.empty())
    c.why = "no op fixes its width";
  // The counts feed only the range and the chain's expands (a use the walk
  // did not take would keep the original's read alive).
  for (size_t i = 0; c.why.empty() && i < c.counts.size(); ++i)
    for (const torch::jit::Use &use : c.counts[i]->uses())
      if (use.user != r.arange && !linked(use.user))
        c.why = "the count is used besides as the range's length";
  for (const Node *n : c.links)
    if (c.why.empty() && n->kind() == c10::aten::size && !isCount(n->output()))
      for (const torch::jit::Use &use : n->output()->uses())
        if (!linked(use.user))
          c.why = "a size of it is used besides in its expands";
  std::sort(c.links.begin(), c.links.end(),
            [](const Node *a, const Node *b) { return a->isBefore(b); });
  return c;
}

/// Clones \p chain's links at the insertion point with \p map (which gives
/// the range's and the counts' replacements), then \p pin's consumer.
Value *cloneThrough(Graph &graph, const Chain &chain, const Pin &pin,
                    std::unordered_map<Value *, Value *> &map) {
  std::vector<Node *> nodes;
  for (Node *n : chain.links)
    if (!map.count(n->output())) // a count: replaced
      nodes.push_back(n);
  nodes.push_back(pin.consumer);
  cloneNodes(graph, nodes, map, false);
  return map.at(pin.consumer->output());
}

/// `a and b()` on the host, \p b emitted only where \p a holds.
Value *emitAnd(Graph &graph, Value *a, const Node *anchor,
               const std::function<Value *()> &b) {
  Node *branch = graph.insertNode(graph.create(c10::prim::If, {a}, 1));
  branch->setSourceRange(anchor->sourceRange());
  branch->output()->setType(c10::BoolType::get());
  {
    torch::jit::WithInsertPoint in(branch->addBlock());
    branch->blocks()[0]->registerOutput(b());
  }
  torch::jit::WithInsertPoint in(branch->addBlock());
  branch->blocks()[1]->registerOutput(graph.insertConstant(false));
  return branch->output();
}

/// The guard's host condition for \p pin: the count's tensor sits on the
/// range's device or the CPU; every operand taken to broadcast along the
/// width does; and the pinning operand
/// has the width's dim, of a size other than 1 (unless written in place,
/// which never widens it).
Value *pinHolds(Graph &graph, const CountedRange &r, const Chain &chain,
                const Pin &pin) {
  const Node *at = pin.consumer;
  // The range's device, or the CPU (a CPU number broadcasts into any
  // device's op): no copy.
  Value *device = namedInput(r.arange, "device");
  Value *cpu = graph.insertConstant(c10::Device(c10::kCPU));
  Value *sourceDevice = emit(graph, "prim::device", {r.source}, at);
  Value *holds = emit(
      graph, "aten::__or__",
      {emit(graph, "aten::eq", {sourceDevice, cpu}, at),
       emit(graph, "aten::eq", {sourceDevice, device->mustBeNone() ? cpu : device}, at)},
      at);
  auto dimOf = [&](Value *v) { return emit(graph, "aten::dim", {v}, at); };
  if (r.checkIntegral)
    holds = emit(graph, "aten::__and__",
                 {holds, emit(graph, "aten::__not__",
                              {emit(graph, "aten::is_floating_point", {r.source}, at)},
                              at)},
                 at);
  for (const Presumed &p : chain.presumed) {
    holds = emit(graph, "aten::__and__",
                 {holds, emit(graph, "aten::eq", {dimOf(p.operand), p.rank}, at)}, at);
    if (p.rank >= -p.fromEnd)
      holds = emitAnd(graph, holds, at, [&] {
        return emit(graph, "aten::eq",
                    {emit(graph, "aten::size", {p.operand, p.fromEnd}, at), 1}, at);
      });
  }
  holds = emit(graph, "aten::__and__",
               {holds, emit(graph, "aten::ge", {dimOf(pin.other), -pin.fromEnd}, at)},
               at);
  if (pin.inPlace)
    return holds;
  return emitAnd(graph, holds, at, [&] {
    return emit(graph, "aten::ne",
                {emit(graph, "aten::size", {pin.other, pin.fromEnd}, at), 1}, at);
  });
}

} // namespace

bool pinnedWidths(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &facts = ctx.facts.analysis(graph);
  std::vector<CountedRange> ranges;
  for (Node *node : collectNodes(graph->block()))
    if (std::optional<CountedRange> r = matchCountedRange(node, facts))
      ranges.push_back(*r);
  bool changed = false;
  for (const CountedRange &r : ranges) {
    Chain chain = followWidth(r);
    if (Value *device = namedInput(r.arange, "device");
        !device || (!device->mustBeNone() && device->node()->kind() != c10::prim::device))
      chain.why = "its device is not a tensor's";
    if (!chain.why.empty()) {
      for (Node *read : r.reads)
        ctx.declined(read, kRule, chain.why);
      continue;
    }
    for (const Pin &pin : chain.pins) {
      torch::jit::WithInsertPoint at(pin.consumer);
      Value *holds = pinHolds(*graph, r, chain, pin);
      Node *guard = graph->insertNode(
          graph->create(c10::prim::If, {holds}, pin.consumer->outputs().size()));
      guard->setSourceRange(pin.consumer->sourceRange());
      // Where the pinning size is 1 the fallback's width is the count's.
      guard->i_(guardAttr(), pin.inPlace ? 1 : kShapeGuard);
      for (size_t i = 0; i < guard->outputs().size(); ++i)
        guard->output(i)->setType(pin.consumer->output(i)->type());
      {
        // Width S; where the count is 1 every position reads 0.
        torch::jit::WithInsertPoint in(guard->addBlock());
        Value *width = emit(*graph, "aten::size", {pin.other, pin.fromEnd}, pin.consumer);
        std::unordered_map<Value *, Value *> map;
        for (Value *count : chain.counts)
          map[count] = width;
        Node *range = graph->insertNode(graph->createClone(r.arange, [&](Value *v) {
          return v == r.count ? width : v;
        }));
        Value *one = emit(
            *graph, "aten::ne",
            {emit(*graph, "aten::to",
                  {emit(*graph, "aten::reshape", {r.source, std::vector<int64_t>{}},
                        pin.consumer),
                   static_cast<int64_t>(c10::ScalarType::Long)},
                  pin.consumer),
             1},
            pin.consumer);
        map[r.arange->output()] =
            emit(*graph, "aten::mul", {range->output(), one}, pin.consumer);
        guard->blocks()[0]->registerOutput(cloneThrough(*graph, chain, pin, map));
      }
      {
        // The original, with its read.
        torch::jit::WithInsertPoint in(guard->addBlock());
        std::unordered_map<Value *, Value *> map;
        std::vector<Node *> origin = r.reads;
        origin.push_back(r.arange);
        cloneNodes(*graph, origin, map, false);
        guard->blocks()[1]->registerOutput(cloneThrough(*graph, chain, pin, map));
      }
      pin.consumer->output()->replaceAllUsesWith(guard->output());
      pin.consumer->destroy();
    }
    for (Node *read : r.reads)
      ctx.rewrote(read, kRule);
    // The original chain, now unread: erasing its ends erases the rest.
    std::vector<Node *> ends;
    for (Node *n : chain.links)
      if (!n->hasUses())
        ends.push_back(n);
    for (Node *n : ends)
      eraseIfDead(n, ctx, kRule);
    changed = true;
  }
  return changed;
}

} // namespace staticify
