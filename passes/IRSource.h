//===- IRSource.h - Textual TorchScript IR with source locations
//-----------===//
//
// `parseIR` drops locations: this reader gives each node the range of its op
// name in the IR text, so that findings on a lit test's IR read
// `test.ir:5:14: warning: ...` like findings on Python do.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>

namespace staticify {

/// Parses \p text (the format of torch::jit::parseIR), attaches locations in
/// \p filename to every node and restores the value names parseIR drops.
/// Throws what parseIR throws on bad IR.
std::shared_ptr<torch::jit::Graph>
parseIRWithLocations(const std::string &text, const std::string &filename);

} // namespace staticify
