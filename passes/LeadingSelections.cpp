//===- LeadingSelections.cpp - Selections along dim d >= 1 along dim 0 ----===//

#include "passes/LeadingSelections.h"

#include "passes/GraphUtils.h"
#include "passes/OpCatalogue.h"
#include "passes/Pipeline.h"
#include "passes/RewritePolicy.h"
#include "passes/Selection.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

constexpr const char *kRule = "leading-selections";

/// `movedim(s, 0, d)` made here: the value s and d.
struct Moved {
  Value *source;
  int64_t dim;
};

std::optional<Moved> movedFromFront(const Value *v) {
  const Node *node = v->node();
  if (node->kind() != c10::aten::movedim || node->inputs().size() != 3 ||
      constantInt(node->input(1)) != 0)
    return std::nullopt;
  std::optional<int64_t> d = constantInt(node->input(2));
  if (!d || *d < 1)
    return std::nullopt;
  return Moved{node->input(0), *d};
}

Value *emitMove(Graph &graph, Value *v, int64_t from, int64_t to,
                const Node *anchor) {
  return emit(graph, "aten::movedim", {v, from, to}, anchor);
}

/// The selected dimension of \p node and the index, when it selects along
/// a dimension >= 1 by a 1-D index and its result's shape depends on data.
struct AlongDim {
  int64_t dim;
  Value *index;
};

std::optional<AlongDim> selectionAlongDim(Node *node,
                                          const AnalysisResult &analysis,
                                          PassContext &ctx) {
  if (!analysis.info(node->output(0)).isDataDependent())
    return std::nullopt;
  if (node->kind() == c10::aten::index && node->inputs().size() == 2) {
    const Node *list = node->input(1)->node();
    if (list->kind() != c10::prim::ListConstruct || list->inputs().size() < 2)
      return std::nullopt;
    int64_t dim = static_cast<int64_t>(list->inputs().size()) - 1;
    for (int64_t i = 0; i < dim; ++i)
      if (!list->input(i)->mustBeNone())
        return std::nullopt;
    // A k-D mask spans k dimensions, a k-D integer index makes k: only a
    // vector is one dimension in and one out.
    Value *index = list->input(dim);
    if (index->mustBeNone())
      return std::nullopt;
    if (knownRank(index, &analysis) != 1) {
      ctx.declined(node, kRule,
                   "an index along a dimension after the first whose rank is "
                   "not known to be 1 before the program runs (a k-D mask "
                   "spans k dimensions)");
      return std::nullopt;
    }
    return AlongDim{dim, index};
  }
  if (node->kind() == c10::aten::index_select && node->inputs().size() == 3) {
    std::optional<int64_t> dim = constantInt(node->input(1));
    if (!dim)
      return std::nullopt;
    dim = resolveDim(*dim, node->input(0), 0, &analysis);
    if (!dim || *dim < 1)
      return std::nullopt;
    return AlongDim{*dim, node->input(2)};
  }
  return std::nullopt;
}

/// x[:, ..., i] -> movedim(movedim(x, d, 0)[i], 0, d), and index_select
/// alike; returns the move back.
Node *moveToFront(Graph &graph, Node *node, const AlongDim &along,
                  PassContext &ctx) {
  torch::jit::WithInsertPoint guard(node);
  Value *front = emitMove(graph, node->input(0), along.dim, 0, node);
  Value *selected =
      node->kind() == c10::aten::index
          ? emitSelect(graph, front, along.index, node)
          : emit(graph, "aten::index_select", {front, 0, along.index}, node);
  Value *back = emitMove(graph, selected, 0, along.dim, node);
  node->output()->replaceAllUsesWith(back);
  ctx.rewrote(node, kRule);
  node->destroy();
  return back->node();
}

/// The dimension of s = movedim(t, d, 0) that is dimension \p k of t.
int64_t frontDim(int64_t k, int64_t d) { return k == d ? 0 : k < d ? k + 1 : k; }

/// A consumer of moved values rewritten on their sources; its results are
/// moved back to \p backDim (none when nullopt).
struct Sunk {
  Node *clone;
  std::optional<int64_t> backDim;
};

/// Dimension arguments of \p node resolved against rank \p rank (nullopt
/// when negative and the rank is unknown): the constant `dim`, or nullopt
/// (as the vector's absence) for None. \p ok false when not constant.
std::optional<std::vector<int64_t>> dimsOf(const Node *node, const Value *of,
                                           const AnalysisResult &analysis,
                                           bool &ok) {
  ok = false;
  const Value *dim = namedInput(node, "dim");
  if (!dim)
    return std::nullopt;
  if (dim->mustBeNone()) {
    ok = true;
    return std::nullopt;
  }
  std::optional<std::vector<int64_t>> dims = constantIntList(dim);
  if (!dims) {
    std::optional<int64_t> one = constantInt(dim);
    if (!one)
      return std::nullopt;
    dims = std::vector<int64_t>{*one};
  }
  for (int64_t &k : *dims) {
    std::optional<int64_t> r = resolveDim(k, of, 0, &analysis);
    if (!r)
      return std::nullopt;
    k = *r;
  }
  ok = true;
  return dims;
}

/// Sinks the move of \p moved past \p use when a layout fact allows it.
std::optional<Sunk> sinkPast(Graph &graph, Node *use, const Moved &moved,
                             const AnalysisResult &analysis) {
  if (writesAnything(use) || use->kind() == c10::prim::Return)
    return std::nullopt;
  // t.size(k) -> s.size(k').
  if (use->kind() == c10::aten::size && use->inputs().size() == 2) {
    std::optional<int64_t> k = constantInt(use->input(1));
    if (!k || !(k = resolveDim(*k, use->input(0), 0, &analysis)))
      return std::nullopt;
    torch::jit::WithInsertPoint guard(use);
    Value *dim = graph.insertConstant(frontDim(*k, moved.dim));
    Node *clone = graph.insertNode(graph.createClone(use, [](Value *v) { return v; }));
    clone->replaceInput(0, moved.source);
    clone->replaceInput(1, dim);
    return Sunk{clone, std::nullopt};
  }
  // t[k] (select along j != d): s's select along j', the move back to d,
  // one less where j comes before it (PyG's `row, col = edge_index[0],
  // edge_index[1]` of `edge_index[:, mask]`).
  if (use->kind() == c10::aten::select && use->inputs().size() == 3) {
    std::optional<int64_t> j = constantInt(use->input(1));
    if (!j || !(j = resolveDim(*j, use->input(0), 0, &analysis)) || *j == moved.dim)
      return std::nullopt;
    torch::jit::WithInsertPoint guard(use);
    Value *dim = graph.insertConstant(frontDim(*j, moved.dim));
    Node *clone = graph.insertNode(graph.createClone(use, [](Value *v) { return v; }));
    clone->replaceInput(0, moved.source);
    clone->replaceInput(1, dim);
    return Sunk{clone, *j < moved.dim ? moved.dim - 1 : moved.dim};
  }
  const OpInfo *info = opInfo(use);
  if (!info)
    return std::nullopt;
  for (const Value *out : use->outputs())
    if (!isTensor(out))
      return std::nullopt; // split's and unbind's lists: not here
  // Every other tensor operand is moved from the same d and of one rank, or
  // 0-d (which broadcasts the same way in either layout).
  const Value *first = nullptr;
  std::optional<int64_t> rank;
  std::vector<std::pair<size_t, Value *>> sources;
  for (size_t i = 0; i < use->inputs().size(); ++i) {
    Value *in = use->input(i);
    if (!isTensor(in))
      continue;
    std::optional<Moved> m = movedFromFront(in);
    bool movedAlike = m && m->dim == moved.dim;
    if (movedAlike && !first) {
      first = in;
      rank = knownRank(in, &analysis);
    }
    if (movedAlike && (in == first || provablySameRank(in, first) ||
                       (rank && knownRank(in, &analysis) == rank))) {
      sources.emplace_back(i, m->source);
      continue;
    }
    if (!provablyZeroDim(in))
      return std::nullopt;
  }
  if (sources.empty())
    return std::nullopt;

  std::optional<int64_t> backDim = moved.dim;
  std::optional<std::pair<size_t, Value *>> newDims;
  bool withDim = namedInput(use, "dim") != nullptr;
  bool ofFirst = sources.size() == 1 && sources.front().first == 0;
  if (withDim) {
    if (!ofFirst)
      return std::nullopt; // gather's index, cat's parts: not here
    bool ok = false;
    std::optional<std::vector<int64_t>> dims =
        dimsOf(use, use->input(0), analysis, ok);
    if (!ok)
      return std::nullopt;
    const Value *keepdim = namedInput(use, "keepdim");
    if (!dims) {
      // Over every element: the same numbers in another order, except for
      // a position in the flattened input (argmax).
      if (info->role != OpRole::Reduction || info->dtype == DTypeRule::Long)
        return std::nullopt;
      backDim.reset();
    } else {
      std::vector<int64_t> mapped;
      for (int64_t k : *dims)
        mapped.push_back(frontDim(k, moved.dim));
      Value *dimArg = namedInput(use, "dim");
      torch::jit::WithInsertPoint guard(use);
      Value *constant = dimArg->type()->kind() == c10::TypeKind::IntType
                            ? graph.insertConstant(mapped.front())
                            : graph.insertConstant(mapped);
      newDims.emplace(*inputIndex(use, "dim"), constant);
      if (keepdim) {
        std::optional<bool> keep = constantBool(keepdim);
        if (!keep)
          return std::nullopt;
        if (!*keep) {
          bool reducesMoved = std::count(dims->begin(), dims->end(), moved.dim);
          if (reducesMoved)
            backDim.reset();
          else
            *backDim -= std::count_if(dims->begin(), dims->end(),
                                      [&](int64_t k) { return k < moved.dim; });
        }
      } else if (!info->has(kKeepsRank) && !info->has(kKeepsShape)) {
        return std::nullopt;
      }
    }
  } else if (info->role == OpRole::Reduction && ofFirst &&
             countTensorInputs(use) == 1) {
    if (info->dtype == DTypeRule::Long)
      return std::nullopt;
    backDim.reset();
  } else if (!opElementwise(use)) {
    return std::nullopt;
  }

  torch::jit::WithInsertPoint guard(use);
  Node *clone = graph.insertNode(graph.createClone(use, [](Value *v) { return v; }));
  for (auto &[index, source] : sources)
    clone->replaceInput(index, source);
  if (newDims)
    clone->replaceInput(newDims->first, newDims->second);
  for (Value *out : clone->outputs())
    if (out->type()->kind() == c10::TypeKind::TensorType)
      out->setType(c10::TensorType::get());
  return Sunk{clone, backDim};
}

/// `cat([t, u, ...], d)` of \p list, t moved from the front to d, along d:
/// the cat along 0 of the sources (u moved to the front, a view, where it
/// is not moved itself), moved back to d. Every part that is not moved
/// has a known rank past d (movedim would raise otherwise; a cat of parts
/// of unequal ranks raises in the original).
std::optional<std::pair<Node *, Sunk>> sinkPastCat(Graph &graph, Node *list,
                                                   const Moved &moved,
                                                   const AnalysisResult &analysis) {
  if (list->kind() != c10::prim::ListConstruct || list->output()->uses().size() != 1)
    return std::nullopt;
  Node *cat = list->output()->uses()[0].user;
  if (cat->kind() != c10::aten::cat || list->output()->uses()[0].offset != 0 ||
      cat->inputs().size() != 2)
    return std::nullopt;
  std::optional<int64_t> dim = constantInt(cat->input(1));
  std::optional<int64_t> rank;
  for (Value *part : list->inputs())
    if (!movedFromFront(part) && !rank)
      rank = knownRank(part, &analysis);
  if (dim && *dim < 0)
    dim = rank ? std::optional<int64_t>(*dim + *rank) : std::nullopt;
  if (!dim || *dim != moved.dim)
    return std::nullopt;
  for (Value *part : list->inputs()) {
    std::optional<Moved> m = movedFromFront(part);
    std::optional<int64_t> r = m ? std::nullopt : knownRank(part, &analysis);
    if (m ? m->dim != moved.dim : !(r && *r > moved.dim))
      return std::nullopt;
  }
  torch::jit::WithInsertPoint guard(cat);
  std::vector<Value *> parts;
  for (Value *part : list->inputs()) {
    std::optional<Moved> m = movedFromFront(part);
    parts.push_back(m ? m->source : emitMove(graph, part, moved.dim, 0, cat));
  }
  Node *joined = graph.insertNode(graph.createList(c10::TensorType::get(), parts));
  Value *front = graph.insertConstant(int64_t{0});
  Node *clone = graph.insertNode(graph.createClone(cat, [](Value *v) { return v; }));
  clone->replaceInput(0, joined->output());
  clone->replaceInput(1, front);
  clone->output()->setType(c10::TensorType::get());
  return std::make_pair(cat, Sunk{clone, moved.dim});
}

/// `t[i]` of \p list = [i], i moved from the front to d: the gather is
/// elementwise in i (its result has i's dimensions, then t's after the
/// first), so it is `t[s].movedim(0, d)` of i's source s (PyG's relabelling
/// `node_idx[edge_index]` of `edge_index[:, mask]`).
std::optional<std::pair<Node *, Sunk>> sinkPastGather(Graph &graph, Node *list,
                                                      const Moved &moved) {
  if (list->kind() != c10::prim::ListConstruct || list->inputs().size() != 1 ||
      list->output()->uses().size() != 1)
    return std::nullopt;
  Node *index = list->output()->uses()[0].user;
  if (index->kind() != c10::aten::index || index->inputs().size() != 2 ||
      list->output()->uses()[0].offset != 1 || movedFromFront(index->input(0)))
    return std::nullopt;
  torch::jit::WithInsertPoint guard(index);
  Node *sources = graph.insertNode(graph.createList(
      c10::OptionalType::ofTensor(), {moved.source}));
  Node *clone = graph.insertNode(graph.createClone(index, [](Value *v) { return v; }));
  clone->replaceInput(1, sources->output());
  clone->output()->setType(c10::TensorType::get());
  return std::make_pair(index, Sunk{clone, moved.dim});
}

/// A selection to move and where it selects.
struct Candidate {
  Node *node;
  AlongDim along;
};

/// Moves \p candidates, selections of \p graph along a dimension >= 1, to
/// dimension 0 and sinks the moves back (\p analysis: \p graph's, before).
void moveSelections(Graph &graph, PassContext &ctx,
                    const AnalysisResult &analysis,
                    const std::vector<Candidate> &candidates) {
  std::deque<Node *> moves;
  for (const Candidate &c : candidates)
    moves.push_back(moveToFront(graph, c.node, c.along, ctx));
  // Each sunk consumer's results are moves back in their turn: a chain of
  // consumers is followed to its end, each rewritten once.
  while (!moves.empty()) {
    Node *move = moves.front();
    moves.pop_front();
    std::optional<Moved> moved = movedFromFront(move->output());
    if (!moved)
      continue;
    std::vector<Node *> users;
    for (const torch::jit::Use &u : move->output()->uses())
      if (std::find(users.begin(), users.end(), u.user) == users.end())
        users.push_back(u.user);
    for (Node *use : users) {
      auto joined = sinkPastCat(graph, use, *moved, analysis);
      if (!joined)
        joined = sinkPastGather(graph, use, *moved);
      if (joined) {
        auto [original, sunk] = *joined;
        torch::jit::WithInsertPoint guard(original);
        Value *out = emitMove(graph, sunk.clone->output(), 0, *sunk.backDim, original);
        moves.push_back(out->node());
        original->output()->replaceAllUsesWith(out);
        ctx.rewrote(original, kRule);
        original->destroy();
        use->destroy();
        continue;
      }
      std::optional<Sunk> sunk = sinkPast(graph, use, *moved, analysis);
      if (!sunk)
        continue;
      torch::jit::WithInsertPoint guard(use);
      for (size_t i = 0; i < use->outputs().size(); ++i) {
        Value *out = sunk->clone->output(i);
        if (sunk->backDim && *sunk->backDim > 0) {
          out = emitMove(graph, out, 0, *sunk->backDim, use);
          moves.push_back(out->node());
        }
        use->output(i)->replaceAllUsesWith(out);
      }
      ctx.rewrote(use, kRule);
      use->destroy();
    }
    eraseIfDead(move, ctx, kRule);
  }
}

/// The passes after this one up to bound, in pipeline order: the rules that
/// take a selection along dimension 0 further.
std::vector<std::string> takers() {
  std::vector<std::string> names;
  bool after = false;
  for (const PassInfo &p : registeredPasses()) {
    if (after)
      names.push_back(p.name);
    after |= p.name == kRule;
    if (p.name == "bound")
      break;
  }
  return names;
}

} // namespace

bool leadingSelections(std::shared_ptr<Graph> &graph, PassContext &ctx) {
  const AnalysisResult &analysis = ctx.facts.analysis(graph);
  std::vector<Candidate> candidates;
  for (Node *node : analysis.nodesWhere([](c10::Symbol op) {
         return op == c10::aten::index || op == c10::aten::index_select;
       }))
    if (std::optional<AlongDim> along = selectionAlongDim(node, analysis, ctx))
      candidates.push_back({node, *along});
  if (candidates.empty())
    return false;
  // The moves cost two views each and gain only where a rule for dimension
  // 0 takes the selection further: tried on copies, with and without them,
  // through the passes that would, and kept only for fewer sync points.
  RewriteTrial with(*graph, ctx);
  std::vector<Candidate> twins;
  for (const Candidate &c : candidates)
    twins.push_back({with.counterpart(c.node),
                     {c.along.dim, with.counterpart(c.along.index)}});
  moveSelections(*with.graph(), with.ctx(),
                 with.ctx().facts.analysis(with.graph()), twins);
  with.ctx().facts.invalidate();
  with.runPasses(takers());
  RewriteTrial without(*graph, ctx);
  without.runPasses(takers());
  if (with.cost().syncPoints >= without.cost().syncPoints) {
    for (const Candidate &c : candidates)
      ctx.declined(c.node, kRule,
                   "along dimension 0 no rule takes it further: the graph "
                   "would reach the host as often");
    return false;
  }
  moveSelections(*graph, ctx, analysis, candidates);
  return true;
}

} // namespace staticify
