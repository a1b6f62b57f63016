//===- GraphCheckpoint.h - Undo a rewrite without copying the graph -------===//
//
// A rewrite tried on a copy of the graph (RewriteTrial) costs a Graph::copy
// and the destruction of one of the two graphs: at 120k nodes about 300 ms
// each, far more than the rewrite. A checkpoint records the graph's
// structure instead, in one walk and a few flat arrays: every node's block
// and place in it, its inputs, its results' types, and the values' debug
// names. restore() puts that structure back: the inputs and places of the
// nodes that were there (a block's results are its return node's inputs),
// their results' types and names, and it destroys every node made since.
//
// The contract: between the checkpoint and restore() no node that was there
// is destroyed, none loses results, and none gains block parameters; a node
// may gain results (an `if` that returns a count more), which restore()
// erases. A
// rewrite under a checkpoint leaves the nodes it replaces in place (dead,
// or in a list of its own to destroy) until it is kept; only then does dead
// code go. restore() checks what it can of the contract and throws
// std::logic_error where it finds it broken.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <cstdint>
#include <string>
#include <utility>
#include <unordered_set>
#include <vector>

namespace staticify {

class GraphCheckpoint {
public:
  explicit GraphCheckpoint(torch::jit::Graph &graph);

  /// Whether \p node was in the graph at the checkpoint.
  bool holds(const torch::jit::Node *node) const { return known.count(node); }

  /// Puts the graph back as it was at the checkpoint.
  void restore();

private:
  void record(torch::jit::Block *block);

  torch::jit::Graph &graph;
  /// Every node (return nodes included) in pre-order, with its inputs in
  /// `inputs[inputStart[i], inputStart[i + 1])` and its results' types in
  /// `types[typeStart[i], typeStart[i + 1])`.
  std::vector<torch::jit::Node *> nodes;
  std::vector<uint32_t> inputStart, typeStart;
  std::vector<torch::jit::Value *> inputs;
  std::vector<c10::TypePtr> types;
  /// Each block with the range of `nodes` that holds its nodes, in order
  /// (its return node last).
  struct BlockNodes {
    torch::jit::Block *block;
    uint32_t begin, end;
  };
  std::vector<BlockNodes> blocks;
  /// The debug names of the values that had one (a value made since with
  /// a name in use renames the value that held it).
  std::vector<std::pair<torch::jit::Value *, std::string>> names;
  std::unordered_set<const torch::jit::Node *> known;
};

} // namespace staticify
