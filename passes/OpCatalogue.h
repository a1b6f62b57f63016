//===- OpCatalogue.h - What staticify knows about each TorchScript op
//------===//
//
// The one table of op knowledge (DESIGN §3) shared by the analysis and the
// rewrites: which ops create data-dependent shapes, which read device data to
// the host, which only move values around, and which arguments decide a
// result's shape.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>

namespace staticify {

enum class OpRole {
  /// Returns a tensor whose shape depends on its inputs' data (`nonzero`...).
  DynamicShapeRoot,
  /// Copies device data to the host (`item`, `int(t)`...), when fed a tensor.
  SyncRead,
  /// Reads the shape of a tensor (`numel`, `size`, `len`): free on a
  /// host-static shape, data-dependent on a data-dependent one.
  ShapeRead,
  /// Reads tensor metadata that never depends on data (`dim`, `device`...).
  MetadataRead,
  /// Moves values around without computing (lists, tuples, casts of types):
  /// propagates classes and never produces a finding of its own.
  Plumbing,
  /// A reduction whose result shape ignores the input's shape when no `dim`
  /// is given (`sum`, `mean`, `amax`...).
  Reduction,
  /// Elementwise and dimension-0-preserving ops: a data-dependent leading
  /// dimension stays the only data-dependent one.
  LeadingPreserving,
  Other,
};

OpRole opRole(const torch::jit::Node *node);

/// For a DynamicShapeRoot: why the shape depends on data, in a few words.
std::string dynamicShapeReason(const torch::jit::Node *node);

/// Whether input \p index of \p node can change the shape of its results
/// (`n` of randperm, `end` of slice, `size` of zeros) rather than only values
/// (`other` of add, `index` of select). Conservative: true when unknown.
bool inputAffectsShape(const torch::jit::Node *node, size_t index);

/// The name of input \p index in \p node's schema, if it has one.
std::optional<std::string> inputName(const torch::jit::Node *node,
                                     size_t index);

/// How many of \p node's inputs are tensors (max(a, b) has two, max(a) one).
size_t countTensorInputs(const torch::jit::Node *node);

/// Whether the node writes to its first input (`append`, `index_put_`...).
bool mutatesFirstInput(const torch::jit::Node *node);

/// Whether \p node can run on values it would never have seen in the
/// original program (unselected elements, the branch not taken) without
/// raising: elementwise ops other than integer division/remainder/pow,
/// casts, sums and means, list plumbing, metadata, host int arithmetic
/// other than division. Conservative: false when unknown.
bool neverRaisesOnValues(const torch::jit::Node *node);

} // namespace staticify
