//===- CudaGraphs.cpp - Outlined regions run by the runtime's RegionRunner ===//

#include "tools/CudaGraphs.h"

#include "passes/GraphUtils.h"
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

std::vector<size_t>
runRegionsWithCudaGraphs(torch::jit::Module &module, Graph &graph,
                         const std::vector<OutlinedRegion> &regions) {
  c10::ClassTypePtr runnerType =
      torch::getCustomClass("__torch__.torch.classes.staticify.RegionRunner");
  if (!runnerType)
    throw std::runtime_error("the staticify runtime library is not loaded");
  std::vector<size_t> converted;
  for (const OutlinedRegion &r : regions) {
    size_t tupled = tupleOfTensors(r.outputs);
    if (!allTensors(r.inputs) || (!allTensors(r.outputs) && !tupled) ||
        r.graph->inputs()[0]->hasUses())
      continue; // a region reading parameters or passing non-tensors stays
    // The region as a module of its own, saved into the runner's state.
    std::string bytes =
        saveGraphAsModule(*r.graph, "__torch__.staticify." + r.method);
    // The runner object, built by the class's own constructor.
    auto object = c10::ivalue::Object::create(
        c10::StrongTypePtr(nullptr, runnerType), runnerType->numAttributes());
    runnerType->getMethod("__init__")(
        {c10::IValue(object), c10::IValue(bytes), c10::IValue(r.method)});
    std::string attr = "_staticify_region_" + std::to_string(r.region);
    module.register_attribute(attr, runnerType, c10::IValue(object));

    // self._staticify_region_k.run([inputs]) in place of the method call.
    Node *call = r.call;
    torch::jit::WithInsertPoint guard(call);
    Value *runner = graph.insertGetAttr(graph.inputs()[0], attr);
    std::vector<Value *> args(call->inputs().begin() + 1, call->inputs().end());
    Value *list =
        graph.insertNode(graph.createList(c10::TensorType::get(), args))
            ->output();
    Node *run = graph.insertNode(
        graph.create(c10::prim::CallMethod, {runner, list}, 1));
    run->s_(c10::attr::name, "run");
    run->output()->setType(c10::ListType::ofTensors());
    auto element = [&](int64_t i) {
      return emit(graph, "aten::__getitem__", {run->output(), i}, call);
    };
    if (tupled) { // the runner returns the tuple's elements: rebuild it
      std::vector<Value *> elements;
      for (size_t i = 0; i < tupled; ++i)
        elements.push_back(element(static_cast<int64_t>(i)));
      call->output()->replaceAllUsesWith(
          graph.insertNode(graph.createTuple(elements))->output());
    } else if (r.outputs.size() == 1) {
      call->output()->replaceAllUsesWith(element(0));
    } else {
      // The caller unpacks the call's tuple: each element from the list.
      std::vector<torch::jit::Use> uses = call->output()->uses();
      for (const torch::jit::Use &use : uses) {
        Node *unpack = use.user;
        for (size_t i = 0; i < unpack->outputs().size(); ++i)
          unpack->output(i)->replaceAllUsesWith(
              element(static_cast<int64_t>(i)));
        unpack->destroy();
      }
    }
    call->destroy();
    converted.push_back(r.region);
  }
  return converted;
}

} // namespace staticify
