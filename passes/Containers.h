//===- Containers.h - What a list or dict of tensors may hold -------------===//
//
// TorchScript keeps per-level and per-image tensors in lists and dicts
// (`r.append(top_n_idx + offset)`, `torch.cat(r)`), and records nothing of
// their elements but the type `Tensor`. A fact about what a container holds
// (its tensors' rank, their dtype) is the join of that fact over everything
// the container may hold. heldTensors() finds all of it, where the graph
// shows all of it; the facts are joined by their owners (knownRank in
// Selection.cpp, the analysis's dtypes).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <vector>

namespace staticify {

/// Everything a container of tensors may hold.
struct HeldTensors {
  /// Tensors it is built from or that are stored in it (construct elements,
  /// appends, item writes), at any depth of nesting.
  std::vector<const torch::jit::Value *> stored;
  /// Ops whose tensor results it is (split, chunk, unbind of their first
  /// input), at any depth of nesting.
  std::vector<const torch::jit::Node *> parts;
  /// Containers made by an op whose own rule describes their elements
  /// (`where(m)`, `nonzero_numpy`), at any depth of nesting.
  std::vector<const torch::jit::Value *> produced;
  /// Tensors read out of it or out of a container that holds it: an op that
  /// changes one in place changes what the container holds.
  std::vector<const torch::jit::Value *> reads;
};

/// Whether \p type is a tensor, or a list or string-keyed dict holding
/// tensors at some depth.
bool holdsTensors(const c10::TypePtr &type);

/// Whether \p node's tensor results are the parts of its first input:
/// split, split_with_sizes, unsafe_split, chunk, tensor_split, unbind.
bool splitsInput(const torch::jit::Node *node);

/// What container \p c may hold: what it is built from (a construct's
/// elements, a split's parts, an op's result, a copy's source, the
/// containers a container of containers holds) and what every use stores in it (appends and item
/// writes, also through the containers read out of it and those it is
/// stored in). None where a use may store something unseen (`extend`, a
/// call) or where it comes from is out of sight (an input, a loop carry) or the graph nests deeper than any program needs.
/// With \p key, of a string-keyed dict of tensors (or containers of such
/// dicts) only the entries under that key: what `d["labels"]` may be, not
/// what `d["boxes"]` may.
std::optional<HeldTensors> heldTensors(const torch::jit::Value *c,
                                       const std::string *key = nullptr);

/// The constant key tensor \p v is read at out of a string-keyed dict
/// (`d["labels"]`), if it is one.
std::optional<std::string> readKey(const torch::jit::Value *v);

/// The container tensor \p v is read out of (`xs[i]`, `a, b = xs`,
/// `d["k"]`), or nullptr.
const torch::jit::Value *containerOf(const torch::jit::Value *v);

} // namespace staticify
