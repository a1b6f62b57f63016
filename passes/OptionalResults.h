//===- OptionalResults.h - an if's Optional result read where it is set ---===//
//
// torchaudio's Emformer makes its padding mask in one if and reads it in
// another:
//
//   mask = None if B == 1 else _lengths_to_padding_mask(lengths)  # a read
//   ...
//   if mask is not None:
//       scores = scores.masked_fill(mask.unsqueeze(1).unsqueeze(2), -inf)
//
// A rule that follows the mask from where it is made to where it is used
// (pinned-sizes: the op that fixes its width) stops at the first if's
// result. Where every use of such a result is a test against None or a
// cast in a branch that runs only where it is set, the tests become the
// producing if's condition (a tensor is never None) and each cast the
// value, computed where the cast is: the first if's branch computed it
// exactly when the second one's runs, from values nothing writes in
// between. Only values whose computation reads the device move (the rest
// stays where the program put it); nothing with effects, writes, random
// draws or blocks of its own moves. Runs that raise may raise later.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// The rewrite above; returns whether it changed the graph (the producing
/// if's result is then dead).
bool forwardOptionalResults(std::shared_ptr<torch::jit::Graph> &graph);

} // namespace staticify
