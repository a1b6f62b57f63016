//===- CudaGraphs.cpp - Outlined regions run by the runtime's RegionRunner ===//

#include "tools/CudaGraphs.h"

#include "passes/GraphUtils.h"
#include "passes/ModuleAttributes.h"
#include "tools/ModuleIO.h"

#include <torch/custom_class.h>

#include <climits>
#include <dlfcn.h>
#include <sstream>
#include <stdlib.h>
#include <unistd.h>

namespace staticify {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

std::string defaultRuntimeLibrary() {
  // The file holding this code: the staticify program (bin/), or the Python
  // package's native module (python/staticify/), both in one build tree
  // with the runtime in lib/.
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&defaultRuntimeLibrary), &info) ||
      !info.dli_fname)
    return "";
  char resolved[PATH_MAX];
  std::string self =
      realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
  std::string dir = self.substr(0, self.rfind('/'));
  const char *const name = "libstaticify_runtime.so";
  std::string next = dir + "/../lib/" + name;
  for (const std::string &candidate : {next, dir + "/../../lib/" + name})
    if (access(candidate.c_str(), R_OK) == 0)
      return candidate;
  return next;
}

static bool allTensors(const std::vector<c10::TypePtr> &types) {
  for (const c10::TypePtr &t : types)
    if (t->kind() != c10::TypeKind::TensorType)
      return false;
  return !types.empty();
}

/// The tensors of a region's one result that is a tuple of tensors (what a
/// method returning `(a, b)` has), or 0.
static size_t tupleOfTensors(const std::vector<c10::TypePtr> &types) {
  if (types.size() != 1)
    return 0;
  auto tuple = types[0]->cast<c10::TupleType>();
  if (!tuple || !allTensors(tuple->elements().vec()))
    return 0;
  return tuple->elements().size();
}

/// Replaces \p call's result by \p elements: the tuple rebuilt, the one
/// tensor, or each unpacked element.
static void replaceCallResults(Graph &graph, Node *call,
                               const std::vector<Value *> &elements,
                               bool tupled) {
  if (tupled) {
    torch::jit::WithInsertPoint guard(call);
    call->output()->replaceAllUsesWith(
        graph.insertNode(graph.createTuple(elements))->output());
  } else if (call->outputs().size() == 1 &&
             call->output()->type()->kind() == c10::TypeKind::TensorType) {
    call->output()->replaceAllUsesWith(elements.at(0));
  } else {
    // The caller unpacks the call's tuple: each element from the list.
    std::vector<torch::jit::Use> uses = call->output()->uses();
    for (const torch::jit::Use &use : uses) {
      Node *unpack = use.user;
      for (size_t i = 0; i < unpack->outputs().size(); ++i)
        unpack->output(i)->replaceAllUsesWith(elements.at(i));
      unpack->destroy();
    }
  }
}

std::vector<RegionOutcome>
runRegionsWithCudaGraphs(torch::jit::Module &module, Graph &graph,
                         const std::vector<OutlinedRegion> &regions) {
  c10::ClassTypePtr runnerType =
      torch::getCustomClass("__torch__.torch.classes.staticify.RegionRunner");
  if (!runnerType)
    throw std::runtime_error("the staticify runtime library is not loaded");
  std::vector<RegionOutcome> outcomes;
  for (const OutlinedRegion &r : regions) {
    RegionOutcome &outcome = outcomes.emplace_back();
    outcome.region = r.region;
    size_t tupled = tupleOfTensors(r.outputs);
    if (!allTensors(r.inputs) || (!allTensors(r.outputs) && !tupled)) {
      outcome.reason = "it takes or gives values other than tensors";
      continue;
    }
    // The module's tensors the region reads become the runner's inputs
    // after the region's own; its scalars are compiled in and guarded.
    std::shared_ptr<Graph> lowered = r.graph->copy();
    LiftedAttributes lifted = liftAttributes(*lowered, module);
    if (!lifted.reason.empty()) {
      outcome.reason = lifted.reason;
      continue;
    }
    // The region as a module of its own, saved into the runner's state.
    std::string bytes =
        saveGraphAsModule(*lowered, "__torch__.staticify." + r.method);
    // The runner object, built by the class's own constructor.
    auto object = c10::ivalue::Object::create(
        c10::StrongTypePtr(nullptr, runnerType), runnerType->numAttributes());
    runnerType->getMethod("__init__")(
        {c10::IValue(object), c10::IValue(bytes), c10::IValue(r.method)});
    std::string attr = "_staticify_region_" + std::to_string(r.region);
    module.register_attribute(attr, runnerType, c10::IValue(object));

    // self._staticify_region_k.run([inputs]) in place of the method call;
    // where scalars were compiled in, only while they hold (else the call
    // as it was).
    Node *call = r.call;
    size_t results = tupled ? tupled : r.outputs.size();
    torch::jit::WithInsertPoint guard(call);
    std::vector<Value *> args(call->inputs().begin() + 1, call->inputs().end());
    Value *hold = guardsHold(graph, graph.inputs()[0], lifted);
    std::vector<Value *> elements;
    if (!hold) {
      elements = insertRunnerCall(graph, graph.inputs()[0], attr, args,
                                  lifted, results);
    } else {
      Node *branch =
          graph.insertNode(graph.create(c10::prim::If, {hold}, results));
      torch::jit::Block *captured = branch->addBlock(), *plain = branch->addBlock();
      {
        torch::jit::WithInsertPoint inside(captured);
        for (Value *v : insertRunnerCall(graph, graph.inputs()[0], attr, args,
                                         lifted, results))
          captured->registerOutput(v);
      }
      Node *again = graph.createClone(call, [](Value *v) { return v; });
      plain->appendNode(again);
      {
        torch::jit::WithInsertPoint inside(plain);
        if (tupled || r.outputs.size() > 1) {
          Node *unpack = graph.insertNode(
              graph.create(c10::prim::TupleUnpack, {again->output()}, results));
          for (size_t i = 0; i < results; ++i)
            plain->registerOutput(unpack->output(i)->setType(c10::TensorType::get()));
        } else {
          plain->registerOutput(again->output());
        }
      }
      for (size_t i = 0; i < results; ++i)
        elements.push_back(branch->output(i)->setType(c10::TensorType::get()));
    }
    replaceCallResults(graph, call, elements, tupled);
    call->destroy();
    outcome.graphed = true;
  }
  return outcomes;
}

} // namespace staticify
