//===- Outline.h - Static regions as separate methods ---------------------===//
//
// `--outline`: every static region of a method (passes/Partition.h) with at
// least a few nodes becomes a method of the module of its own,
// `<method>_region_<k>`, and the method calls it in its place. A region is a
// run of nodes in program order, so the call runs exactly what ran there;
// tensors and lists are passed by reference, so writes inside reach the
// caller as before. Each region can then be compiled or captured on its own.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Partition.h"

#include <torch/csrc/jit/api/module.h>

#include <optional>
#include <string>
#include <vector>

namespace staticify {

struct OutlinedRegion {
  std::string method;                // the new method's name
  size_t region = 0;                 // Segment::number
  std::vector<c10::TypePtr> inputs;  // after self
  std::vector<c10::TypePtr> outputs; // what the call returns, flattened
  std::shared_ptr<torch::jit::Graph> graph;
  torch::jit::Node *call = nullptr; // the prim::CallMethod in the caller
};

/// Outlines \p nodes, a run in program order of nodes of \p block (a block
/// of \p graph, the graph of a method of \p module), as method \p name of
/// the module, called where they were; none when no result is used after
/// them. \p number is the region's number in the result.
std::optional<OutlinedRegion>
outlineNodes(torch::jit::Module &module, torch::jit::Graph &graph,
             torch::jit::Block *block,
             const std::vector<torch::jit::Node *> &nodes,
             const std::string &name, size_t number);

/// Outlines the static regions of \p graph (the graph of \p module's method
/// \p method, partitioned as \p partition) that have at least \p minNodes
/// nodes and a result the rest of the graph uses.
std::vector<OutlinedRegion> outlineRegions(torch::jit::Module &module,
                                           const std::string &method,
                                           torch::jit::Graph &graph,
                                           const PartitionResult &partition,
                                           size_t minNodes = 3);

} // namespace staticify
