//===- BoundedForms.h - The static TorchScript the bound pass inserts -----===//
//
// The bounded forms (nonzero, x[mask], unique, randperm(n)[:k], cat of
// bounded tensors...) are written once, as TorchScript source, in
// passes/forms/bounded_forms.py: readable, reviewable, testable from Python,
// and checked static by staticify's own analysis. The bound pass inserts
// their graphs where it rewrites an op.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <vector>

namespace staticify {

/// The runtime library's kernel for the `nms` form (runtime/Nms.cpp),
/// which bound emits instead with --runtime-ops once the library is loaded.
inline constexpr const char *kNmsKernel = "staticify::nms_padded";
/// The same walk as a mask of the rows it keeps (runtime/Nms.cpp): the
/// batched-nms pass's replacement for batched_nms's per-class loop.
inline constexpr const char *kNmsMaskKernel = "staticify::nms_kept_mask";
/// The valid rows of a bounded value on the CPU, every padded row elsewhere,
/// and back to the padded rows (runtime/ValidRows.cpp): an op batched on
/// rows between them computes the valid rows only where that is free.
inline constexpr const char *kValidRowsKernel = "staticify::valid_rows";
inline constexpr const char *kPaddedRowsKernel = "staticify::padded_rows";
/// x[index] = values for a bounded index (runtime/ValidRows.cpp): the
/// original index_put_ on the valid rows on the CPU.
inline constexpr const char *kPutValidRowsKernel = "staticify::put_valid_rows";

/// Names of every form in bounded_forms.py.
std::vector<std::string> boundedFormNames();

/// The graph of form \p name, inlined, with tuple results flattened into
/// several outputs. Throws std::out_of_range for an unknown name.
std::shared_ptr<torch::jit::Graph> boundedFormGraph(const std::string &name);

/// Inserts form \p name at \p graph's insertion point on \p inputs and
/// returns its results; every inserted node takes \p anchor's source range,
/// so that diagnostics keep pointing at the user's line.
std::vector<torch::jit::Value *>
insertForm(torch::jit::Graph &graph, const std::string &name,
           const std::vector<torch::jit::Value *> &inputs,
           const torch::jit::Node *anchor);

/// Form random_below for randint(low, high, size, dtype, device) with a 0-d
/// tensor \p high: a null or None \p dtype is int64 (randint's default), a
/// null or None \p device is \p high's.
torch::jit::Value *insertRandomBelow(torch::jit::Graph &graph, int64_t low,
                                     torch::jit::Value *high,
                                     torch::jit::Value *size,
                                     torch::jit::Value *dtype,
                                     torch::jit::Value *device,
                                     const torch::jit::Node *anchor);

} // namespace staticify
