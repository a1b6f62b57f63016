//===- LowerModule.cpp - `staticify --lower` on a module's methods -------===//
#include "lower/LowerModule.h"

#include "lower/CpuTarget.h"
#include "lower/CudaTarget.h"
#include "passes/GraphUtils.h"
#include "tools/ModuleIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/custom_class.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
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

/// The module's tensors a method reads (parameters, buffers, tensor
/// attributes), by attribute path from `self`: kernel arguments after the
/// method's own inputs.
struct LiftedAttributes {
  std::vector<std::vector<std::string>> paths;
  std::vector<TensorSignature> signature; // each one's dtype and sizes
  /// The bool, int and float attributes read (a submodule's `training`,
  /// say), compiled in as constants: the method takes the kernel only while
  /// each still has its value.
  std::vector<std::pair<std::vector<std::string>, c10::IValue>> guards;
  std::string reason; // why the method cannot be lowered; empty if it can
};

/// The attribute path of \p v from \p self (a chain of prim::GetAttr), or
/// none.
std::optional<std::vector<std::string>> attributePath(Value *v, Value *self) {
  std::vector<std::string> path;
  while (v != self) {
    Node *n = v->node();
    if (n->kind() != c10::prim::GetAttr)
      return std::nullopt;
    path.insert(path.begin(), n->s(c10::attr::name));
    v = n->input(0);
  }
  return path;
}

c10::IValue attributeValue(const torch::jit::Module &module,
                           const std::vector<std::string> &path) {
  c10::IValue v = module._ivalue();
  for (const std::string &name : path)
    v = v.toObject()->getAttr(name);
  return v;
}

std::string joined(const std::vector<std::string> &path) {
  std::string out;
  for (const std::string &p : path)
    out += (out.empty() ? "" : ".") + p;
  return out;
}

/// Replaces, in \p graph (a method of \p module with its calls inlined),
/// each read of a tensor attribute by a new graph input, of a bool, int or
/// float attribute by its value (a guard), and of an attribute whose type
/// is None by None; afterwards nothing may read `self`.
LiftedAttributes liftAttributes(Graph &graph,
                                const torch::jit::Module &module) {
  LiftedAttributes out;
  Value *self = graph.inputs()[0];
  std::map<std::vector<std::string>, Value *> inputs;
  std::vector<Node *> reads;
  std::function<void(torch::jit::Block *)> collect =
      [&](torch::jit::Block *block) {
        for (Node *n : block->nodes()) {
          if (n->kind() == c10::prim::GetAttr)
            reads.push_back(n);
          for (torch::jit::Block *b : n->blocks())
            collect(b);
        }
      };
  collect(graph.block());
  for (Node *n : reads) {
    auto path = attributePath(n->output(), self);
    if (!path)
      continue;
    c10::IValue value = attributeValue(module, *path);
    bool none = n->output()->type()->kind() == c10::TypeKind::NoneType;
    if (none || value.isBool() || value.isInt() || value.isDouble()) {
      torch::jit::WithInsertPoint guard(n);
      n->output()->replaceAllUsesWith(
          graph.insertConstant(none ? c10::IValue() : value));
      if (!none)
        out.guards.emplace_back(*path, value);
      continue;
    }
    if (!value.isTensor())
      continue; // a submodule (its reads are handled), or left to the check
    at::Tensor t = value.toTensor();
    if (dtypeName(t.scalar_type()).empty() || t.device().type() != c10::kCPU) {
      out.reason = "attribute '" + joined(*path) +
                   "' is not a CPU tensor of a dtype the bridge takes";
      return out;
    }
    auto [it, fresh] = inputs.emplace(*path, nullptr);
    if (fresh) {
      it->second = graph.addInput(symbolName(joined(*path)))
                       ->setType(c10::TensorType::get());
      out.paths.push_back(*path);
      out.signature.push_back({t.scalar_type(), t.sizes().vec()});
    }
    n->output()->replaceAllUsesWith(it->second);
  }
  // Attribute reads now unused, innermost first.
  for (auto it = reads.rbegin(); it != reads.rend(); ++it)
    if (!(*it)->output()->hasUses())
      (*it)->destroy();
  for (const torch::jit::Use &use : self->uses()) {
    Node *n = use.user;
    out.reason =
        n->kind() == c10::prim::GetAttr
            ? "the method reads attribute '" + n->s(c10::attr::name) +
                  "', which is not a tensor (make it Final to compile it "
                  "in)"
            : std::string("the method passes the module to ") +
                  n->kind().toQualString();
    return out;
  }
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

Value *readAttribute(Graph &g, Value *self,
                     const std::vector<std::string> &path) {
  Value *v = self;
  for (const std::string &name : path)
    v = g.insertGetAttr(v, name);
  return v;
}

/// Whether every guarded attribute still has its value: a bool, or none
/// when there is no guard.
Value *guardsHold(Graph &g, Value *self, const LiftedAttributes &lifted) {
  Value *all = nullptr;
  for (const auto &[path, value] : lifted.guards) {
    Value *same = g.insert(c10::aten::eq, {readAttribute(g, self, path),
                                           g.insertConstant(value)});
    all = all ? g.insert(c10::aten::__and__, {all, same}) : same;
  }
  return all;
}

/// The call of the runner: self.<attr>.run([inputs, attributes]), its
/// results packed as the method returns them.
Value *runnerCall(Graph &body, Value *self, const std::vector<Value *> &inputs,
                  const std::string &attr, const LiftedAttributes &lifted,
                  size_t results, const c10::TypePtr &returned) {
  std::vector<Value *> args = inputs;
  for (const std::vector<std::string> &path : lifted.paths)
    args.push_back(readAttribute(body, self, path));
  Value *runner = body.insertGetAttr(self, attr);
  Value *list = body.insertNode(body.createList(c10::TensorType::get(), args))
                    ->output();
  Node *run =
      body.insertNode(body.create(c10::prim::CallMethod, {runner, list}, 1));
  run->s_(c10::attr::name, "run");
  run->output()->setType(c10::ListType::ofTensors());
  std::vector<Value *> outs;
  for (size_t i = 0; i < results; ++i)
    outs.push_back(
        body.insert(c10::aten::__getitem__, {run->output(), int64_t(i)}));
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
    inputs.push_back(body->addInput(method.inputs()[i]->debugName())
                         ->setType(method.inputs()[i]->type()));
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
  LiftedAttributes lifted = liftAttributes(*lowered, module);
  if (!lifted.reason.empty()) {
    out.reason = lifted.reason;
    return out;
  }
  std::vector<TensorSignature> kernelSignature = signature;
  kernelSignature.insert(kernelSignature.end(), lifted.signature.begin(),
                         lifted.signature.end());
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
