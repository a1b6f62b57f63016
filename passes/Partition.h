//===- Partition.h - Static regions and dynamic islands (DESIGN §2) -------===//
//
// After rewriting, what is still data-dependent forms *dynamic islands*
// (nodes joined by def-use edges); the rest forms *static regions*: maximal
// runs of static nodes in program order, so that a region can be lifted out
// as it is (outlined, captured, compiled) without reordering anything. A
// node with blocks (an if, a loop) belongs to one segment as a whole; it is
// dynamic when anything inside it is.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Analysis.h"
#include "passes/GraphUtils.h"
#include "passes/Report.h"

#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace staticify {

struct PartitionResult {
  std::vector<Segment> segments;
  /// Top-level node -> index into segments (constants have none).
  NodeIndex segmentOf;
};

/// The node of \p block that \p node is, or is nested in (a block's return
/// node counts as its owner's); null when \p node is outside \p block.
const torch::jit::Node *topLevel(const torch::jit::Node *node,
                                 const torch::jit::Block *block);

PartitionResult partitionGraph(const torch::jit::Graph &graph,
                               const AnalysisResult &analysis);

/// Graphviz DOT of \p graph: one cluster per segment (static regions green,
/// dynamic islands red), materialization points (\p isCut) orange, a
/// legend; boxes show the op and its source line; constants are left out
/// and a node with blocks is one box. \p name titles the picture.
std::string
renderDot(const torch::jit::Graph &graph, const PartitionResult &partition,
          const std::string &name,
          const std::function<bool(const torch::jit::Node *)> &isCut);

} // namespace staticify
