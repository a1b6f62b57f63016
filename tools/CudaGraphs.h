//===- CudaGraphs.h - Outlined regions run by the runtime's RegionRunner --===//
#pragma once

#include "passes/Outline.h"

#include <torch/csrc/jit/api/module.h>

#include <string>
#include <vector>

namespace staticify {

/// The runtime library of the build tree this code is in: ../lib next to
/// the staticify program, ../../lib next to the Python package's native
/// module (the first that exists; else the first), or "".
std::string defaultRuntimeLibrary();

/// For each outlined region whose inputs and results are tensors and that
/// does not read the module: a `torch.classes.staticify.RegionRunner`
/// attribute `_staticify_region_<k>` holding the region's graph, and the
/// call replaced by `runner.run([inputs])`. The runtime library must be
/// loaded. Returns the regions it converted.
std::vector<size_t>
runRegionsWithCudaGraphs(torch::jit::Module &module, torch::jit::Graph &graph,
                         const std::vector<OutlinedRegion> &regions);

} // namespace staticify
