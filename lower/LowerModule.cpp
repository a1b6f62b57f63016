//===- LowerModule.cpp - `staticify --lower` on a module's methods -------===//
#include "lower/LowerModule.h"

#include "lower/CpuTarget.h"
#include "lower/CudaTarget.h"
#include "passes/GraphUtils.h"
#include "passes/ModuleAttributes.h"
#include "tools/ModuleIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/remove_mutation.h>
#include <torch/custom_class.h>

#include <chrono>
#include <sstream>

namespace staticify::lower {

using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

/// A name the kernel's symbols can carry.
std::string symbolName(const std::string &method) {
  std::string out = "staticify_";
  for (char c : method)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

/// The bridge's functions for one device, verified.
struct Bridged {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  BridgeResult result;
  std::string mlir; // printed
  std::string reason;
};

Bridged bridge(mlir::MLIRContext &ctx, const Graph &graph,
               const std::vector<TensorSignature> &signature,
               const std::string &name, KernelDevice device) {
  Bridged out;
  out.module = mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  out.result = buildFunctions(graph, /*hasSelf=*/true, signature, name,
                              *out.module, device);
  if (!out.result.unsupported.empty()) {
    out.reason = out.result.unsupported;
    return out;
  }
  llvm::raw_string_ostream s(out.mlir);
  out.module->print(s);
  std::string error;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (error.empty())
      error = d.str();
    return mlir::success();
  });
  if (mlir::failed(mlir::verify(*out.module)))
    out.reason = "the bridge built invalid MLIR (a staticify bug): " + error;
  return out;
}

/// The CUDA images as the runtime reads them: records of name, NUL,
/// decimal size, NUL, bytes (LoweredMethod.cpp).
std::string cudaRecords(const CompiledCuda &cuda, LoweringOutcome &out) {
  std::string images;
  auto record = [&](const std::string &name, const std::string &bytes) {
    images += name + '\0' + std::to_string(bytes.size()) + '\0' + bytes;
  };
  record("host", cuda.hostObject);
  std::string names;
  for (const std::string &k : cuda.kernels)
    names += k + "\n";
  record("kernels", names);
  for (const auto &[name, bytes] : cuda.images) {
    record(name, bytes);
    out.cudaImages.emplace_back(name, bytes.size());
  }
  return images;
}

/// The call of the runner: self.<attr>.run([inputs, attributes]), its
/// results packed as the method returns them.
Value *runnerCall(Graph &body, Value *self, const std::vector<Value *> &inputs,
                  const std::string &attr, const LiftedAttributes &lifted,
                  size_t results, const c10::TypePtr &returned) {
  std::vector<Value *> outs =
      insertRunnerCall(body, self, attr, inputs, lifted, results);
  if (returned->kind() == c10::TypeKind::TupleType)
    return body.insertNode(body.createTuple(outs))->output();
  return outs.at(0);
}

/// The method's new body: the runner's call; where attributes were compiled
/// in, only while they keep their values (else the method as it was).
std::shared_ptr<Graph> callRunner(Graph &method, const std::string &attr,
                                  const LiftedAttributes &lifted,
                                  size_t results) {
  auto body = std::make_shared<Graph>();
  Value *self = body->addInput("self")->setType(method.inputs()[0]->type());
  std::vector<Value *> inputs, all{self};
  for (size_t i = 1; i < method.inputs().size(); ++i) {
    Value *in = method.inputs()[i];
    inputs.push_back(body->addInput(in->hasDebugName() ? in->debugName() : "")
                         ->setType(in->type()));
    all.push_back(inputs.back());
  }
  c10::TypePtr returned = method.outputs()[0]->type();
  Value *hold = guardsHold(*body, self, lifted);
  if (!hold) {
    body->registerOutput(runnerCall(*body, self, inputs, attr, lifted, results,
                                    returned));
    return body;
  }
  Node *branch = body->insertNode(body->create(c10::prim::If, {hold}, 1));
  branch->output()->setType(returned);
  torch::jit::Block *kernel = branch->addBlock(), *as = branch->addBlock();
  {
    torch::jit::WithInsertPoint guard(kernel);
    kernel->registerOutput(runnerCall(*body, self, inputs, attr, lifted,
                                      results, returned));
  }
  {
    torch::jit::WithInsertPoint guard(as);
    as->registerOutput(torch::jit::insertGraph(*body, method, all).at(0));
  }
  body->registerOutput(branch->output());
  return body;
}

} // namespace

LoweringOutcome lowerMethod(torch::jit::Module &module,
                            const std::string &method,
                            const std::vector<TensorSignature> &signature,
                            const LoweringTargets &targets) {
  auto start = std::chrono::steady_clock::now();
  LoweringOutcome out;
  out.method = method;
  auto fn = module.find_method(method);
  if (!fn) {
    out.reason = "no method '" + method + "'";
    return out;
  }
  std::shared_ptr<Graph> graph = torch::jit::toGraphFunction(fn->function()).graph();
  for (size_t i = 1; i < graph->inputs().size(); ++i)
    if (graph->inputs()[i]->type()->kind() != c10::TypeKind::TensorType) {
      out.reason =
          "input '" + graph->inputs()[i]->debugName() + "' is not a tensor";
      return out;
    }
  // The bridge sees the method with its calls inlined (a method staticify
  // left as it was still calls its functions and submodules) and the
  // module's tensors it reads as inputs after the method's.
  std::shared_ptr<Graph> lowered = graph->copy();
  torch::jit::Inline(*lowered);
  // The bridge's values are SSA tensors: an in-place op on a tensor nothing
  // else sees (a form's own ranks) becomes its functional twin.
  torch::jit::RemoveTensorMutation(lowered);
  LiftedAttributes lifted = liftAttributes(*lowered, module);
  if (!lifted.reason.empty()) {
    out.reason = lifted.reason;
    return out;
  }
  // Each tensor attribute with its dtype and sizes now (another tensor put
  // there later takes the TorchScript).
  std::vector<TensorSignature> kernelSignature = signature;
  for (size_t i = 0; i < lifted.tensors.size(); ++i) {
    const at::Tensor &t = lifted.tensors[i];
    if (dtypeName(t.scalar_type()).empty() || t.device().type() != c10::kCPU) {
      out.reason = "attribute '" + attributeName(lifted.paths[i]) +
                   "' is not a CPU tensor of a dtype the bridge takes";
      return out;
    }
    kernelSignature.push_back({t.scalar_type(), t.sizes().vec()});
  }
  mlir::DialectRegistry registry;
  registerLoweringDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::string name = symbolName(method);
  std::string cpuObject, cudaImages;
  BridgeResult bridged;
  // One bridge per device: `x.is_cuda` and host reads of values differ.
  for (KernelDevice device : {KernelDevice::Cpu, KernelDevice::Cuda}) {
    bool cuda = device == KernelDevice::Cuda;
    if (!(cuda ? targets.cuda : targets.cpu))
      continue;
    Bridged b = bridge(ctx, *lowered, kernelSignature, name, device);
    std::string &reason = cuda && targets.cpu ? out.cudaReason : out.reason;
    if (!b.reason.empty()) {
      reason = b.reason;
      continue;
    }
    if (out.mlir.empty())
      out.mlir = b.mlir;
    bridged = b.result;
    if (!cuda) {
      CompiledObject object = compileForCpu(*b.module);
      out.reason = object.error;
      cpuObject = std::move(object.sharedObject);
      out.kernelBytes = cpuObject.size();
      continue;
    }
    CompiledCuda compiled =
        compileForCuda(*b.module, name, kernelSignature.size());
    out.cudaLowered = !compiled.hostObject.empty();
    out.cudaReason = compiled.error;
    out.cudaKernels = compiled.kernels.size();
    if (out.cudaLowered)
      cudaImages = cudaRecords(compiled, out);
  }
  if (cpuObject.empty() && !out.cudaLowered) {
    if (out.reason.empty())
      out.reason = out.cudaReason;
    return out;
  }

  // The runtime object, built by its own constructor: the kernels, and the
  // lowered graph as TorchScript for any other input.
  c10::ClassTypePtr type =
      torch::getCustomClass("__torch__.torch.classes.staticify.LoweredMethod");
  if (!type) {
    out.reason = "the staticify runtime library is not loaded";
    return out;
  }
  auto object_ = c10::ivalue::Object::create(c10::StrongTypePtr(nullptr, type),
                                             type->numAttributes());
  type->getMethod("__init__")(
      {c10::IValue(object_),
       c10::IValue(saveGraphAsModule(*lowered, "__torch__.staticify.lowered_" +
                                                   symbolName(method))),
       c10::IValue(name), c10::IValue(cpuObject),
       c10::IValue(formatSignature(kernelSignature)),
       c10::IValue(formatSignature(bridged.results)), c10::IValue(out.mlir),
       c10::IValue(std::string(bridged.random ? "random" : "")),
       c10::IValue(cudaImages)});
  std::string attr = "_staticify_lowered_" + method;
  if (module.hasattr(attr))
    module._ivalue()->setAttr(attr, c10::IValue(object_));
  else
    module.register_attribute(attr, type, c10::IValue(object_));
  replaceGraphContents(
      *graph, *callRunner(*graph, attr, lifted, bridged.results.size()));
  out.lowered = true;
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return out;
}

} // namespace staticify::lower
