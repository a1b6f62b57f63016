//===- StaticifyModule.h - staticify on a loaded module, as a library -----===//
//
// What `staticify IN -o OUT` does between loading and saving: the pipeline
// on each method, in place, and, when asked, outlining static regions into
// methods and running them through the CUDA-graph runner. The command line
// (tools/staticify.cpp) and the Python API call this; staticify-opt calls
// runPipeline (passes/Pipeline.h) on one graph.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/PassContext.h"
#include "passes/Report.h"

#include <torch/csrc/jit/api/module.h>

#include <set>
#include <string>
#include <vector>

namespace staticify {

struct StaticifyOptions {
  std::vector<std::string> methods{"forward"};
  /// Pass names (passes/Pipeline.h); empty: the default pipeline.
  std::vector<std::string> passes;
  PassOptions passOptions;
  /// Outline each static region of a rewritten method into a method.
  bool outline = false;
  /// Run outlined regions through staticify::RegionRunner (implies outline;
  /// the runtime library must be loaded).
  bool cudaGraphs = false;
  /// Treat each submodule's saved `training` flag as a constant
  /// (the specialize-training pass, after inlining).
  bool specializeTraining = false;
  /// Optional arguments of every method that callers never pass (the
  /// assume-none pass, first): each must name an Optional argument.
  std::vector<std::string> assumeNone;
  /// Also assume None every Optional argument that defaults to None
  /// (--inference): callers of an eval export do not pass them.
  bool assumeDefaultNone = false;
  /// --lower=cpu: compile each method, after rewriting, into a CPU kernel for
  /// inputs of this signature (lower/LowerModule.h); "" for no lowering.
  std::string lowerTarget;
  /// --input-types: the methods' tensor inputs (passes/Signature.h), for
  /// --lower and --batch.
  std::string inputTypes;
  /// --batch: add `<method>_batched` to each static method (passes/Batch.h).
  bool batch = false;
};

struct StaticifyResult {
  std::vector<MethodReport> methods;
  /// The `--bound` keys that named a value in some method.
  std::set<std::string> boundsMatched;
  /// The last method's final graph as Graphviz DOT, with
  /// PassOptions::renderDot.
  std::string dot;
  /// One line each on what changed beyond the report (outlined regions).
  std::vector<std::string> notes;
  /// Wall time of each pipeline step, "method: step" (--time-passes).
  std::vector<std::pair<std::string, double>> seconds;
};

/// Runs the pipeline on each method of \p module, once. A method's graph is
/// replaced only when the rewrites changed what the report describes (or
/// with outline); a static method keeps its graph exactly. Throws UserError
/// for a method the module does not have, naming those it has.
StaticifyResult staticifyModule(torch::jit::Module &module,
                                const StaticifyOptions &options);

} // namespace staticify
