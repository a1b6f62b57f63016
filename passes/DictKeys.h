//===- DictKeys.h - `key in d` folded where the keys are known ------------===//
//
// torchvision's detectors build their per-image results as dicts with
// constant keys (`{"boxes": b, "scores": s, "labels": l}`) and test them
// later (`if "masks" in pred:` in GeneralizedRCNNTransform.postprocess).
// The test is a host value the program could know, but TorchScript keeps
// the branch, so a detector without masks carries paste_masks_in_image and
// its ten host reads of box coordinates. normalize folds such a test when
// every dict it may see was built in the graph and is only read, or written
// at constant keys, by ops whose effect on the keys is known; constant
// propagation then removes the dead branch.
//
// The analysis is a flow-insensitive points-to over the dicts and the lists
// of dicts made in the graph (their construct nodes are the objects): a
// value may hold the objects its definitions give it (lists' elements,
// ifs' and loops' results joined). Any use it does not model (a dict passed
// to an op, stored in a tuple or as another dict's value, a list of dicts
// extended or copied) marks what that value may hold as escaped: a test
// that may see an escaped dict, or one from the graph's inputs, is left
// alone. No modelled op removes a key, so a key a dict was built with is in
// it for good. A key it was built without stays out if every write of that
// key that may reach it sits in the then-branch of an `if key in d` on dicts
// all built without it (torchvision's `if "masks" in pred: ...
// result[i]["masks"] = masks`): the first such write would need its test to
// have seen the key already.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <set>
#include <vector>

namespace staticify {

/// Replaces each `aten::__contains__(d, "k")` whose answer the dicts \p d
/// may be decide by a constant bool. \p nodes are the graph's nodes in
/// program order (collectNodes); a folded test is destroyed, so they are
/// stale when this returns true. Returns whether it folded any.
bool foldDictMembership(torch::jit::Graph &graph,
                        const std::vector<torch::jit::Node *> &nodes);

/// The same points-to facts, for passes that change what dicts hold
/// (bound's padded dicts, passes/bound/ContainerRules.cpp): which dicts of
/// the graph (their construct nodes) a value may be.
class DictObjects {
public:
  /// Solved over \p nodes, the graph's nodes in program order.
  DictObjects(const torch::jit::Graph &graph,
              const std::vector<torch::jit::Node *> &nodes);
  ~DictObjects();

  /// Whether \p dict (a prim::DictConstruct) is built with constant keys
  /// and never reaches a use the analysis does not model.
  bool known(const torch::jit::Node *dict) const;
  /// The values that may be \p dict itself (not lists of it), in no fixed
  /// order.
  std::vector<const torch::jit::Value *>
  holders(const torch::jit::Node *dict) const;
  /// The dicts \p v may be, and whether it may also be one made elsewhere.
  std::set<const torch::jit::Node *> dictsOf(const torch::jit::Value *v,
                                             bool *unknown) const;
  /// Whether \p v (a dict, or a list of dicts: its elements) may hold
  /// \p dict.
  bool mayHold(const torch::jit::Value *v,
               const torch::jit::Node *dict) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace staticify
