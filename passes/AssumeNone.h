//===- AssumeNone.h - Optional arguments the caller never passes ----------===//
//
// `--assume-none targets`: the method is exported for calls without
// `targets` (a detector's inference export: torchvision's forward checks the
// targets' boxes on the host whenever they are given, in eval mode too). The
// argument's uses become None, so normalize removes the branches that test
// it, and the method's first statement raises when a caller passes one
// anyway: the assumption is checked on the host (an Optional's tag, not
// tensor data), never trusted. Not in the default pipeline; the report lists
// the pass when it ran.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"

#include <torch/csrc/jit/ir/ir.h>

#include <memory>

namespace staticify {

/// Replaces each graph input named in PassOptions::assumeNone (an Optional;
/// the name without its numeric suffix) by None after a check that raises
/// when the caller passed one. Returns whether the graph changed.
bool assumeNone(std::shared_ptr<torch::jit::Graph> &graph, PassContext &ctx);

/// The message the staticified method raises when \p name is passed.
std::string assumeNoneMessage(const std::string &name);

} // namespace staticify
