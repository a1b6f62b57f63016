//===- ModuleAttributes.h - A method's reads of its module, lifted ---------===//
//
// What a compiled region (a lowered method, a CUDA graph's capture) cannot
// do is read `self`: it gets tensors and nothing else. liftAttributes turns a
// graph's reads of the module's tensors (parameters, buffers, tensor
// attributes, its submodules' too) into graph inputs after its own, and its
// reads of bool, int and float attributes (a Dropout's `training`) into
// constants the caller guards: the compiled form runs while each still has
// the value it was compiled with.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <utility>
#include <vector>

namespace staticify {

struct LiftedAttributes {
  /// The tensors read, by attribute path from `self` ({"fc", "weight"}), in
  /// the order of the graph inputs added for them, and their values now.
  std::vector<std::vector<std::string>> paths;
  std::vector<at::Tensor> tensors;
  /// Whether each is declared Optional[Tensor] (a convolution's bias): the
  /// caller guards that it is still not None.
  std::vector<bool> optional;
  /// The bool, int and float attributes read, compiled in as constants.
  std::vector<std::pair<std::vector<std::string>, c10::IValue>> guards;
  /// Why the graph still needs `self` (an attribute of another type read, a
  /// submodule passed to a call); empty when nothing reads it.
  std::string reason;
};

/// Rewrites \p graph, whose first input is \p module's `self`, as above; an
/// attribute whose type is None becomes None. On a non-empty reason the
/// graph is left partly rewritten: work on a copy.
LiftedAttributes liftAttributes(torch::jit::Graph &graph,
                                const torch::jit::Module &module);

/// `self.a.b` for path {"a", "b"}, read at \p g's insertion point.
torch::jit::Value *readAttribute(torch::jit::Graph &g, torch::jit::Value *self,
                                 const std::vector<std::string> &path);

/// The lifted tensor \p i of \p lifted read from `self` (as a Tensor, where
/// it is declared Optional[Tensor]: guardsHold checks it is not None).
torch::jit::Value *readLiftedTensor(torch::jit::Graph &g,
                                    torch::jit::Value *self,
                                    const LiftedAttributes &lifted, size_t i);

/// Whether every guarded attribute of \p lifted still has its value and
/// every optional tensor is still a tensor (a bool computed at \p g's
/// insertion point), or null when there is no guard.
torch::jit::Value *guardsHold(torch::jit::Graph &g, torch::jit::Value *self,
                              const LiftedAttributes &lifted);

/// `self.<attr>.run([inputs, the lifted tensors])` of a runtime runner
/// attribute (a LoweredMethod, a RegionRunner) at \p g's insertion point:
/// the first \p results elements of the list it returns.
std::vector<torch::jit::Value *>
insertRunnerCall(torch::jit::Graph &g, torch::jit::Value *self,
                 const std::string &attr,
                 std::vector<torch::jit::Value *> inputs,
                 const LiftedAttributes &lifted, size_t results);

/// Whether \p block, or a block nested in it, writes an attribute.
bool writesAttributes(torch::jit::Block *block);

/// "fc.weight" for {"fc", "weight"}.
std::string attributeName(const std::vector<std::string> &path);

} // namespace staticify
