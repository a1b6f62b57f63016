//===- StaticifyModule.cpp - staticify on a loaded module -----------------===//

#include "tools/StaticifyModule.h"

#include "passes/Batch.h"

#include "passes/GraphUtils.h"
#include "passes/Outline.h"
#include "passes/Pipeline.h"
#include "tools/CudaGraphs.h"
#include "tools/ModuleIO.h"

#ifdef STATICIFY_WITH_MLIR
#include "lower/LowerModule.h"
#include "lower/LowerRegions.h"
#endif

#include <torch/csrc/jit/api/function_impl.h>

#include <algorithm>
#include <memory>
#include <set>

namespace staticify {

using torch::jit::Graph;

namespace {

/// --padded-outputs may change what a method returns: its schema follows.
void updateReturnType(torch::jit::GraphFunction &fn, const Graph &graph) {
  const c10::FunctionSchema &schema = fn.getSchema();
  if (schema.returns().size() == 1 && graph.outputs().size() == 1 &&
      *schema.returns()[0].type() != *graph.outputs()[0]->type())
    fn.setSchema(schema.cloneWithReturns(
        {c10::Argument("", graph.outputs()[0]->type())}));
}

/// Each --assume-none name is an Optional argument of \p schema.
void checkAssumedNone(const c10::FunctionSchema &schema,
                      const std::vector<std::string> &names) {
  for (const std::string &name : names) {
    auto at = std::find_if(
        schema.arguments().begin(), schema.arguments().end(),
        [&](const c10::Argument &a) { return a.name() == name; });
    if (at == schema.arguments().end()) {
      std::string known;
      for (const c10::Argument &a : schema.arguments())
        if (a.name() != "self")
          known += (known.empty() ? "" : ", ") + a.name();
      throw UserError("--assume-none " + name + ": method '" + schema.name() +
                      "' has no argument '" + name + "'; its arguments are: " +
                      (known.empty() ? "none" : known));
    }
    if (at->type()->kind() != c10::TypeKind::OptionalType)
      throw UserError("--assume-none " + name + ": argument '" + name +
                      "' of '" + schema.name() + "' is " +
                      at->type()->annotation_str() +
                      ", not Optional; only an argument that may be None "
                      "can be assumed None");
  }
}

/// The Optional arguments of \p schema whose default is None.
std::vector<std::string> defaultNoneArguments(const c10::FunctionSchema &schema) {
  std::vector<std::string> names;
  for (const c10::Argument &a : schema.arguments())
    if (a.type()->kind() == c10::TypeKind::OptionalType &&
        a.default_value() && a.default_value()->isNone())
      names.push_back(a.name());
  return names;
}

/// The attributes (class, name) some method of \p module or its submodules
/// stores to (prim::SetAttr).
std::set<std::pair<const c10::ClassType *, std::string>>
storedAttributes(const torch::jit::Module &module) {
  std::set<std::pair<const c10::ClassType *, std::string>> stored;
  for (const torch::jit::Module &m : module.modules())
    for (const torch::jit::Method &method : m.get_methods())
      for (const torch::jit::Node *node :
           collectNodes(torch::jit::toGraphFunction(method.function())
                            .graph()
                            ->block()))
        if (node->kind() == c10::prim::SetAttr)
          if (auto cls = node->input(0)->type()->cast<c10::ClassType>())
            stored.emplace(cls.get(), node->s(c10::attr::name));
  return stored;
}

/// PassOptions::attributeFacts over \p module: a tensor attribute's dtype
/// and rank, unless a method stores to it.
std::function<std::optional<PassOptions::TensorFacts>(const std::vector<std::string> &)>
attributeFacts(const torch::jit::Module &module) {
  auto stored = std::make_shared<
      std::optional<std::set<std::pair<const c10::ClassType *, std::string>>>>();
  return [module, stored](const std::vector<std::string> &path)
             -> std::optional<PassOptions::TensorFacts> {
    if (path.empty())
      return std::nullopt;
    torch::jit::Module owner = module;
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      if (!owner.hasattr(path[i]) || !owner.attr(path[i]).isModule())
        return std::nullopt;
      owner = owner.attr(path[i]).toModule();
    }
    if (!owner.hasattr(path.back()))
      return std::nullopt;
    c10::IValue value = owner.attr(path.back());
    if (!value.isTensor() || !value.toTensor().defined())
      return std::nullopt;
    if (!*stored)
      *stored = storedAttributes(module);
    if ((*stored)->count({owner.type().get(), path.back()}))
      return std::nullopt;
    return PassOptions::TensorFacts{value.toTensor().scalar_type(),
                                    value.toTensor().dim()};
  };
}

} // namespace

StaticifyResult staticifyModule(torch::jit::Module &module,
                                const StaticifyOptions &options) {
  StaticifyResult out;
  std::vector<std::string> passes = options.passes;
  if (passes.empty())
    passes = defaultPipeline(/*inlineCalls=*/true);
  PassOptions passOptions = options.passOptions;
  if (options.specializeTraining) {
    if (std::find(passes.begin(), passes.end(), "specialize-training") ==
        passes.end()) {
      auto at = std::find(passes.begin(), passes.end(), "inline");
      passes.insert(at == passes.end() ? passes.begin() : at + 1,
                    "specialize-training");
    }
    passOptions.savedTraining = [&module](const std::vector<std::string> &path)
        -> std::optional<bool> {
      torch::jit::Module m = module;
      for (const std::string &name : path) {
        if (!m.hasattr(name) || !m.attr(name).isModule())
          return std::nullopt;
        m = m.attr(name).toModule();
      }
      return m.is_training();
    };
    out.notes.push_back(std::string("specialized on the saved training "
                                    "flags (the module is in ") +
                        (module.is_training() ? "training" : "eval") +
                        " mode): the other mode's branches are removed");
  }
  if ((!options.assumeNone.empty() || options.assumeDefaultNone) &&
      std::find(passes.begin(), passes.end(), "assume-none") == passes.end())
    passes.insert(passes.begin(), "assume-none");
  passOptions.attributeFacts = attributeFacts(module);
  bool outline = options.outline || options.cudaGraphs;
  for (const std::string &name : options.methods) {
    auto method = module.find_method(name);
    if (!method) {
      std::string known;
      for (const std::string &m : methodNames(module))
        known += (known.empty() ? "" : ", ") + m;
      throw UserError("the module has no method '" + name +
                      "'; its methods are: " + known);
    }
    auto &fn = torch::jit::toGraphFunction(method->function());
    checkAssumedNone(fn.getSchema(), options.assumeNone);
    std::vector<std::string> assumed = options.assumeNone;
    if (options.assumeDefaultNone)
      for (const std::string &arg : defaultNoneArguments(fn.getSchema()))
        if (std::find(assumed.begin(), assumed.end(), arg) == assumed.end())
          assumed.push_back(arg);
    passOptions.assumeNone = assumed;
    // The pipeline runs once, on a copy (the report's value numbers are the
    // copy's); the method's graph takes the result only when it differs in
    // what the report describes (or with outline), so a static model is
    // written back exactly as it came.
    std::shared_ptr<Graph> graph = fn.graph()->copy();
    PipelineResult result =
        runPipeline(graph, name, passes, passOptions, fn.graph().get());
    out.boundsMatched.insert(result.boundsMatched.begin(),
                             result.boundsMatched.end());
    out.dot = result.dot;
    for (const auto &[step, seconds] : result.seconds)
      out.seconds.emplace_back(name + ": " + step, seconds);
    if (result.rewritten || result.droppedDeadDynamicOps || outline) {
      updateReturnType(fn, *graph);
      if (outline) {
        auto outlined = outlineRegions(module, name, *graph, result.partition);
        for (const OutlinedRegion &r : outlined)
          out.notes.push_back(name + ": static region " +
                              std::to_string(r.region) + " is now method '" +
                              r.method + "'");
        if (options.cudaGraphs)
          for (const RegionOutcome &r :
               runRegionsWithCudaGraphs(module, *graph, outlined))
            out.notes.push_back(
                name + ": static region " + std::to_string(r.region) +
                (r.graphed ? " runs through staticify::RegionRunner (CUDA "
                             "graphs on GPU)"
                           : " is not graphed: " + r.reason));
      }
      replaceGraphContents(*fn.graph(), *graph);
    }
    if (!options.lowerTarget.empty()) {
      MethodReport::Lowering &l = result.report.lowering;
      l.target = options.lowerTarget;
      l.signature = options.inputTypes;
#ifdef STATICIFY_WITH_MLIR
      lower::LoweringTargets targets;
      targets.cpu = options.lowerTarget.find("cpu") != std::string::npos;
      targets.cuda = options.lowerTarget.find("cuda") != std::string::npos;
      std::vector<lower::TensorSignature> signature =
          lower::parseSignature(options.inputTypes);
      lower::LoweringOutcome lowered = lower::lowerMethod(
          module, name, signature, targets);
      l.lowered = lowered.lowered;
      l.reason = lowered.reason;
      l.kernelBytes = lowered.kernelBytes;
      l.cudaLowered = lowered.cudaLowered;
      l.cudaReason = lowered.cudaReason;
      l.cudaKernels = lowered.cudaKernels;
      l.cudaImages = lowered.cudaImages;
      if (!lowered.lowered) {
        // Not whole: its static regions, each on its own.
        for (const lower::RegionLowering &r : lower::lowerRegions(
                 module, name, signature, targets, l.regionsReason)) {
          l.regions.push_back({r.region, r.method, r.outcome.lowered,
                               r.outcome.reason, r.outcome.kernelBytes});
          if (r.outcome.lowered)
            out.notes.push_back(name + ": static region " +
                                std::to_string(r.region) +
                                " lowered to a CPU kernel (method '" +
                                r.method + "')");
        }
      }
      out.seconds.emplace_back(name + ": lower (" + options.lowerTarget + ")", lowered.seconds);
      if (targets.cpu)
        out.notes.push_back(name + (lowered.kernelBytes ? ": lowered to a CPU kernel"
                                                        : ": not lowered: " + lowered.reason));
      if (targets.cuda)
        out.notes.push_back(name + (lowered.cudaLowered
                                        ? ": lowered to CUDA kernels"
                                        : ": not lowered for CUDA: " +
                                              (lowered.cudaReason.empty()
                                                   ? lowered.reason
                                                   : lowered.cudaReason)));
#else
      throw UserError("--lower needs a staticify built with MLIR (libmlir-22-dev)");
#endif
    }
    if (options.batch) {
      BatchOutcome batched =
          addBatchedMethod(module, name, parseSignature(options.inputTypes));
      result.report.batch = {true, batched.method, batched.reason};
      out.notes.push_back(name + (batched.method.empty()
                                      ? ": not batched: " + batched.reason
                                      : ": batched as method '" +
                                            batched.method + "'"));
    }
    result.report.assumedNone = std::move(assumed);
    out.methods.push_back(std::move(result.report));
  }
  return out;
}

} // namespace staticify
