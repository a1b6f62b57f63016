//===- Partition.cpp - Static regions and dynamic islands -----------------===//

#include "passes/Partition.h"

#include "passes/GraphUtils.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_set>

namespace staticify {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

const Node *topLevel(const Node *node, const Block *block) {
  while (node && node->owningBlock() != block)
    node = node->owningBlock()->owningNode();
  return node;
}

namespace {

/// Read from the census in order, nodes are fetched this many ahead so that
/// the reads overlap: walking the node lists would wait on each in turn,
/// and a large graph is not in cache.
void prefetchAhead(const std::vector<Node *> &census, size_t i) {
  constexpr size_t kAhead = 8;
  if (i + kAhead < census.size())
    __builtin_prefetch(census[i + kAhead]);
}

/// Widens \p seg's lines to take in those of census[from, to).
void widenSpan(Segment &seg, const std::vector<Node *> &census, size_t from,
               size_t to) {
  for (size_t i = from; i < to; ++i) {
    prefetchAhead(census, i);
    std::optional<Location> loc = locationOf(census[i]);
    if (!loc)
      continue;
    if (!seg.firstLine) {
      seg.file = loc->file;
      seg.firstLine = seg.lastLine = loc->line;
    } else if (loc->file == seg.file) {
      seg.firstLine = std::min(seg.firstLine, loc->line);
      seg.lastLine = std::max(seg.lastLine, loc->line);
    }
  }
}

} // namespace

PartitionResult partitionGraph(const Graph &graph,
                               const AnalysisResult &analysis) {
  const std::vector<Node *> &census = analysis.nodes;
  std::unordered_set<const Node *> found(analysis.findingNodes.begin(),
                                         analysis.findingNodes.end());
  // Whether each node is a finding's or has a data-dependent result (a
  // value's class is final only once the analysis is done: a later write
  // can make it data-dependent).
  std::vector<bool> dynamicNode(census.size());
  for (size_t i = 0; i < census.size(); ++i) {
    prefetchAhead(census, i);
    const Node *n = census[i];
    // A consumer of a tensor of data-dependent shape is the island's too,
    // whatever its result: `out.index_add(0, i[m], w[m])` is static, and
    // joins the two selections that bound rewrites together.
    dynamicNode[i] =
        found.count(n) ||
        std::any_of(n->outputs().begin(), n->outputs().end(),
                    [&](const Value *v) {
                      return analysis.info(v).isDataDependent();
                    }) ||
        std::any_of(n->inputs().begin(), n->inputs().end(),
                    [&](const Value *v) {
                      return v->type()->kind() == c10::TypeKind::TensorType &&
                             analysis.info(v).isDataDependent() &&
                             analysis.info(v).shape != ShapeDep::Static;
                    });
  }
  const Block *top = graph.block();
  // The analysis's census holds every node in program order, a node before
  // its blocks' nodes: a top-level node and what it holds are one run of
  // positions, and whether it is dynamic is whether one of them is.
  std::vector<bool> constant(census.size());
  if (auto it = analysis.positionsOfOp.find(c10::prim::Constant);
      it != analysis.positionsOfOp.end())
    for (uint32_t at : it->second)
      constant[at] = true;
  std::vector<const Node *> nodes;
  std::vector<bool> dynamic;
  // Whether a dynamic node's run has dynamic nodes outside guards'
  // fallbacks (those run only where the host facts a guard checks fail).
  std::vector<bool> unguarded;
  // Each node's run of census positions: it and its blocks' nodes.
  std::vector<std::pair<size_t, size_t>> runs;
  // The dynamic nodes' positions: the only producers islands join through.
  std::unordered_map<const Node *, size_t> dynamicAt;
  const std::vector<uint32_t> &tops = analysis.topLevel;
  nodes.reserve(tops.size());
  dynamic.reserve(tops.size());
  runs.reserve(tops.size());
  for (size_t k = 0; k < tops.size(); ++k) {
    size_t at = tops[k];
    if (constant[at])
      continue;
    size_t end = k + 1 < tops.size() ? tops[k + 1] : census.size();
    bool isDyn = false, outsideFallbacks = false;
    for (size_t i = at; i < end && !outsideFallbacks; ++i)
      if (dynamicNode[i]) {
        isDyn = true;
        outsideFallbacks = !inGuardFallback(census[i]);
      }
    if (isDyn)
      dynamicAt.emplace(census[at], nodes.size());
    nodes.push_back(census[at]);
    dynamic.push_back(isDyn);
    unguarded.push_back(outsideFallbacks);
    runs.emplace_back(at, end);
  }

  // Islands: dynamic nodes joined by def-use edges (uses from inside a
  // node's blocks count as its own).
  std::vector<size_t> parent(nodes.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::function<size_t(size_t)> find = [&](size_t i) {
    return parent[i] == i ? i : parent[i] = find(parent[i]);
  };
  std::function<void(const Node *, size_t)> joinInputs = [&](const Node *n,
                                                             size_t owner) {
    for (const Value *in : n->inputs()) {
      auto at = dynamicAt.find(topLevel(in->node(), top));
      if (at != dynamicAt.end())
        parent[find(owner)] = find(at->second);
    }
    for (const Block *b : n->blocks())
      for (const Node *inner : b->nodes())
        joinInputs(inner, owner);
  };
  for (size_t i = 0; i < nodes.size(); ++i)
    if (dynamic[i])
      joinInputs(nodes[i], i);

  PartitionResult result;
  std::vector<std::pair<const Node *, size_t>> segmentOf(nodes.size());
  std::unordered_map<size_t, size_t> islandOf; // union root -> segment
  size_t regions = 0, islands = 0;
  bool inRegion = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    size_t seg;
    if (dynamic[i]) {
      inRegion = false;
      auto [it, added] = islandOf.emplace(find(i), result.segments.size());
      if (added) {
        Segment s;
        s.kind = Segment::Kind::DynamicIsland;
        s.number = ++islands;
        s.guardedOnly = true;
        result.segments.push_back(s);
      }
      seg = it->second;
      if (unguarded[i])
        result.segments[seg].guardedOnly = false;
      if (dynamicNode[runs[i].first]) { // itself, not its blocks
        std::string op = nodes[i]->kind().toQualString();
        auto &ops = result.segments[seg].ops;
        if (std::find(ops.begin(), ops.end(), op) == ops.end())
          ops.push_back(op);
      }
    } else {
      if (!inRegion) {
        Segment s;
        s.kind = Segment::Kind::StaticRegion;
        s.number = ++regions;
        result.segments.push_back(s);
        inRegion = true;
      }
      seg = result.segments.size() - 1;
    }
    segmentOf[i] = {nodes[i], seg};
    auto [from, to] = runs[i];
    result.segments[seg].numNodes += to - from;
    widenSpan(result.segments[seg], census, from, to);
  }
  result.segmentOf = NodeIndex(std::move(segmentOf));
  return result;
}

//===----------------------------------------------------------------------===//
// DOT
//===----------------------------------------------------------------------===//

namespace {

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

std::string labelOf(const Node *node) {
  std::string label = node->kind().toQualString();
  size_t inner = countNodes(node) - 1;
  if (inner)
    label += " (" + std::to_string(inner) + " inside)";
  if (std::optional<Location> loc = locationOf(node))
    label += "\nline " + std::to_string(loc->line);
  return label;
}

} // namespace

std::string renderDot(const Graph &graph, const PartitionResult &partition,
                      const std::string &name,
                      const std::function<bool(const Node *)> &isCut) {
  const Block *top = graph.block();
  std::ostringstream os;
  os << "digraph \"" << escape(name) << "\" {\n"
     << "  label=\"" << escape(name)
     << "\"; labelloc=t; fontname=\"Helvetica\"; rankdir=TB;\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
        "fontsize=10, fillcolor=white];\n"
     << "  edge [color=\"#777777\", arrowsize=0.6];\n";
  // Legend.
  os << "  subgraph cluster_legend {\n    label=\"legend\"; fontsize=10; "
        "style=dashed;\n"
     << "    legend_static [label=\"static region\", fillcolor=\"#d9f2d9\"];\n"
     << "    legend_dynamic [label=\"dynamic island\", "
        "fillcolor=\"#f8d0d0\"];\n"
     << "    legend_cut [label=\"materialization (sync)\", "
        "fillcolor=\"#ffd08a\"];\n"
     << "    legend_static -> legend_dynamic -> legend_cut [style=invis];\n"
     << "  }\n";
  os << "  inputs [shape=ellipse, label=\"inputs\", fillcolor=\"#eeeeee\"];\n"
     << "  outputs [shape=ellipse, label=\"outputs\", "
        "fillcolor=\"#eeeeee\"];\n";
  std::unordered_map<const Node *, size_t> id;
  std::vector<std::vector<const Node *>> members(partition.segments.size());
  for (const Node *n : top->nodes())
    if (std::optional<size_t> seg = partition.segmentOf.find(n)) {
      id.emplace(n, id.size());
      members[*seg].push_back(n);
    }
  for (size_t s = 0; s < partition.segments.size(); ++s) {
    const Segment &seg = partition.segments[s];
    bool island = seg.kind == Segment::Kind::DynamicIsland;
    os << "  subgraph cluster_" << s << " {\n    label=\""
       << (island ? "dynamic island " : "static region ") << seg.number << " ("
       << seg.numNodes << " nodes";
    if (seg.firstLine)
      os << ", lines " << seg.firstLine << "-" << seg.lastLine;
    os << ")\"; fontsize=11; style=\"rounded,filled\"; fillcolor=\""
       << (island ? "#fdecec" : "#eef8ee") << "\"; color=\""
       << (island ? "#d04040" : "#40a040") << "\";\n";
    for (const Node *n : members[s]) {
      std::string fill = isCut(n) ? "#ffd08a" : island ? "#f8d0d0" : "#d9f2d9";
      os << "    n" << id.at(n) << " [label=\"" << escape(labelOf(n))
         << "\", fillcolor=\"" << fill << "\"];\n";
    }
    os << "  }\n";
  }
  // Edges between top-level nodes (a value used inside a block counts as a
  // use by the node owning the block); constants are left out.
  std::set<std::pair<std::string, std::string>> edges;
  std::function<void(const Node *, const std::string &)> addEdges =
      [&](const Node *n, const std::string &to) {
        for (const Value *in : n->inputs()) {
          const Node *producer = topLevel(in->node(), top);
          if (!producer)
            continue;
          if (producer->kind() == c10::prim::Param)
            edges.emplace("inputs", to);
          else if (id.count(producer) && producer != n)
            edges.emplace("n" + std::to_string(id.at(producer)), to);
        }
        for (const Block *b : n->blocks())
          for (const Node *inner : b->nodes())
            addEdges(inner, to);
      };
  for (const Node *n : top->nodes())
    if (id.count(n))
      addEdges(n, "n" + std::to_string(id.at(n)));
  addEdges(top->return_node(), "outputs");
  for (const auto &[from, to] : edges)
    if (from != to)
      os << "  " << from << " -> " << to << ";\n";
  os << "}\n";
  return os.str();
}

} // namespace staticify
