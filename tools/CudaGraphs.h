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

/// What became of one outlined region.
struct RegionOutcome {
  size_t region = 0; // Segment::number
  bool graphed = false;
  std::string reason; // why not, when not
};

/// For each outlined region whose inputs and results are tensors: a
/// `torch.classes.staticify.RegionRunner` attribute `_staticify_region_<k>`
/// holding the region's graph, and the call replaced by
/// `runner.run([inputs, the module's tensors it reads])` (ModuleAttributes.h:
/// the parameters are inputs of the capture, copied in before each replay;
/// bool, int and float attributes compiled in, the call as it was when one
/// has changed). The runtime library must be loaded.
std::vector<RegionOutcome>
runRegionsWithCudaGraphs(torch::jit::Module &module, torch::jit::Graph &graph,
                         const std::vector<OutlinedRegion> &regions);

} // namespace staticify
