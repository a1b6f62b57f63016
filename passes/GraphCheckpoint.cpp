//===- GraphCheckpoint.cpp - Undo a rewrite without copying the graph -----===//

#include "passes/GraphCheckpoint.h"

#include <algorithm>

#include <stdexcept>

namespace staticify {

using torch::jit::Block;
using torch::jit::Node;
using torch::jit::Value;

GraphCheckpoint::GraphCheckpoint(torch::jit::Graph &graph) : graph(graph) {
  record(graph.block());
  inputStart.push_back(static_cast<uint32_t>(inputs.size()));
  typeStart.push_back(static_cast<uint32_t>(types.size()));
  known.reserve(nodes.size());
  known.insert(nodes.begin(), nodes.end());
}

void GraphCheckpoint::record(Block *block) {
  // A block's nodes are contiguous in `nodes`; nested blocks come after.
  uint32_t begin = static_cast<uint32_t>(nodes.size());
  auto add = [&](Node *node) {
    nodes.push_back(node);
    inputStart.push_back(static_cast<uint32_t>(inputs.size()));
    typeStart.push_back(static_cast<uint32_t>(types.size()));
    inputs.insert(inputs.end(), node->inputs().begin(), node->inputs().end());
    for (Value *out : node->outputs()) {
      types.push_back(out->type());
      if (out->hasDebugName())
        names.emplace_back(out, out->debugName());
    }
  };
  for (Value *in : block->inputs())
    if (in->hasDebugName())
      names.emplace_back(in, in->debugName());
  for (Node *node : block->nodes())
    add(node);
  add(block->return_node());
  uint32_t end = static_cast<uint32_t>(nodes.size());
  blocks.push_back({block, begin, end});
  for (uint32_t i = begin; i + 1 < end; ++i)
    for (Block *b : nodes[i]->blocks())
      record(b);
}

void GraphCheckpoint::restore() {
  // 1. Inputs (a block's results included): afterwards no node that was
  //    there uses a value made since.
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node *node = nodes[i];
    if (node->outputs().size() < typeStart[i + 1] - typeStart[i])
      throw std::logic_error("GraphCheckpoint: a node lost results");
    auto saved = torch::jit::ArrayRef<Value *>(inputs).slice(
        inputStart[i], inputStart[i + 1] - inputStart[i]);
    if (node->inputs() == saved)
      continue;
    node->removeAllInputs();
    for (Value *v : saved)
      node->addInput(v);
  }
  // 2. Places: a block whose nodes that were there are not all in it, in
  //    their order, takes them back (at its end, before nodes made since).
  for (const BlockNodes &b : blocks) {
    uint32_t next = b.begin, last = b.end - 1; // b.end - 1: the return node
    bool inPlace = true;
    for (Node *node : b.block->nodes()) {
      if (!known.count(node))
        continue;
      if (next == last || nodes[next] != node) {
        inPlace = false;
        break;
      }
      ++next;
    }
    if (inPlace && next == last)
      continue;
    for (uint32_t i = b.begin; i < last; ++i)
      nodes[i]->moveBefore(b.block->return_node());
  }
  // 3. The nodes made since, users before their producers (reverse
  //    program order; a node made since takes its blocks with it).
  std::vector<Node *> made;
  std::vector<Block *> pending = {graph.block()};
  while (!pending.empty()) {
    Block *block = pending.back();
    pending.pop_back();
    for (Node *node : block->nodes()) {
      if (!known.count(node)) {
        made.push_back(node);
        continue;
      }
      for (Block *b : node->blocks())
        pending.push_back(b);
    }
  }
  // Users before their producers: in reverse program order within a block,
  // and a block's new values are used in it or in blocks nested in it, which
  // come later. A node moved back into a block (step 2) can put a use of a
  // value before it in this order, so what still has uses waits for another
  // pass; a pass that destroys nothing means a node that was there uses one.
  while (!made.empty()) {
    std::vector<Node *> waiting;
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      Node *node = *it;
      bool used = std::any_of(node->outputs().begin(), node->outputs().end(),
                              [](const Value *out) { return out->hasUses(); });
      if (used)
        waiting.push_back(node);
      else
        node->destroy();
    }
    if (waiting.size() == made.size())
      throw std::logic_error(
          "GraphCheckpoint: a value made since is used by a node that "
          "was there");
    made.assign(waiting.rbegin(), waiting.rend());
  }
  // 4. Results gained since: their users were made since (gone) or had
  //    their inputs put back (step 1).
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node *node = nodes[i];
    size_t had = typeStart[i + 1] - typeStart[i];
    while (node->outputs().size() > had) {
      if (node->outputs().back()->hasUses())
        throw std::logic_error(
            "GraphCheckpoint: a result gained since is still used");
      node->eraseOutput(node->outputs().size() - 1);
    }
  }
  // 5. Names (those made since are gone with their values) and types.
  for (auto &[value, name] : names)
    if (value->debugName() != name)
      value->setDebugName(name);
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node *node = nodes[i];
    for (size_t k = 0; k < node->outputs().size(); ++k) {
      const c10::TypePtr &type = types[typeStart[i] + k];
      if (node->output(k)->type() != type)
        node->output(k)->setType(type);
    }
  }
}

} // namespace staticify
