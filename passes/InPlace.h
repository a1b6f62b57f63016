//===- InPlace.h - In-place ops and their out-of-place twins ---------------===//
//
// An in-place op (`y.add_(v)`) writes y's values; its out-of-place twin
// (`y.add(v)`, same overload and arguments) computes them into new memory.
// Where nothing else reads y (a fresh value), or where the write moves
// (branch-writes), the twin computes what the write would have left in y,
// cast to y's dtype as the in-place op casts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <optional>

namespace staticify {

/// The out-of-place twin of in-place \p node (`aten::add_` -> `aten::add`),
/// of the same overload and arguments, if one is registered.
std::optional<c10::Symbol> twinOf(const torch::jit::Node *node);

/// Whether \p node writes only its tensor's values (not its shape, strides
/// or autograd state: squeeze_, resize_, detach_, requires_grad_ change what
/// a copy of the values back cannot) and has an out-of-place form (its twin,
/// or copy_ and zero_).
bool computableOutOfPlace(const torch::jit::Node *node);

/// \p write's op computed out of place on \p now, the written value's
/// current version, with the result in its dtype (an in-place op casts to
/// self's); inserted before \p write.
torch::jit::Value *outOfPlace(torch::jit::Graph &graph, torch::jit::Node *write,
                              torch::jit::Value *now);

/// libtorch's InplaceToFunctionalActivation (`relu_(x)` -> `relu(x)` where
/// nothing else sees the write: the analysis and the rewrites see a fresh
/// value), each activation it made marked for restoreInPlaceActivations.
bool functionalActivations(std::shared_ptr<torch::jit::Graph> &graph);

/// The marked activations in place again where their input is a fresh value
/// that nothing else reads (libtorch's FunctionalToInplaceActivation's
/// test), so the output allocates no more than the program did: a
/// torchvision head's conv -> relu_ pairs. Activations the program wrote
/// out of place stay so: in place, one could overwrite a value autograd
/// saved.
bool restoreInPlaceActivations(std::shared_ptr<torch::jit::Graph> &graph);

} // namespace staticify
