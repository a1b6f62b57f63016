//===- LowerModule.cpp - `staticify --lower` on a module's methods -------===//
#include "lower/LowerModule.h"

#include "lower/CpuTarget.h"
#include "lower/CudaTarget.h"
#include "passes/GraphUtils.h"
#include "tools/ModuleIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>
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
  auto &graphFn = torch::jit::toGraphFunction(fn->function());
  std::shared_ptr<Graph> graph = graphFn.graph();
  if (graph->inputs()[0]->hasUses()) {
    out.reason = "the method reads the module's attributes or parameters "
                 "(not supported by the bridge yet)";
    return out;
  }
  for (size_t i = 1; i < graph->inputs().size(); ++i)
    if (graph->inputs()[i]->type()->kind() != c10::TypeKind::TensorType) {
      out.reason =
          "input '" + graph->inputs()[i]->debugName() + "' is not a tensor";
      return out;
    }
  mlir::DialectRegistry registry;
  registerLoweringDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> mod =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&ctx));
  std::string name = symbolName(method);
  // The bridge sees the method with its calls inlined (a method staticify
  // left as it was still calls its functions and submodules).
  std::shared_ptr<Graph> inlined = graph->copy();
  torch::jit::Inline(*inlined);
  BridgeResult bridged =
      buildFunctions(*inlined, /*hasSelf=*/true, signature, name, *mod);
  if (!bridged.unsupported.empty()) {
    out.reason = bridged.unsupported;
    return out;
  }
  {
    llvm::raw_string_ostream s(out.mlir);
    mod->print(s);
  }
  if (mlir::failed(mlir::verify(*mod))) {
    out.reason = "the bridge built invalid MLIR (a staticify bug): " + out.mlir;
    return out;
  }
  std::string cpuObject, cudaImages;
  if (targets.cpu) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(mod->clone());
    CompiledObject object = compileForCpu(*copy);
    if (object.sharedObject.empty())
      out.reason = object.error;
    cpuObject = std::move(object.sharedObject);
    out.kernelBytes = cpuObject.size();
  }
  if (targets.cuda) {
    CompiledCuda cuda = compileForCuda(*mod, name, signature.size());
    out.cudaLowered = !cuda.hostObject.empty();
    out.cudaReason = cuda.error;
    out.cudaKernels = cuda.kernels.size();
    // Records of name, NUL, decimal size, NUL, bytes (LoweredMethod.cpp).
    auto record = [&](const std::string &name, const std::string &bytes) {
      cudaImages += name + '\0' + std::to_string(bytes.size()) + '\0' + bytes;
    };
    if (out.cudaLowered) {
      record("host", cuda.hostObject);
      std::string names;
      for (const std::string &k : cuda.kernels)
        names += k + "\n";
      record("kernels", names);
      for (const auto &[name, bytes] : cuda.images) {
        record(name, bytes);
        out.cudaImages.emplace_back(name, bytes.size());
      }
    }
  }
  if (cpuObject.empty() && !out.cudaLowered) {
    if (out.reason.empty())
      out.reason = out.cudaReason;
    return out;
  }

  // The runtime object, built by its own constructor.
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
       c10::IValue(saveGraphAsModule(*graph, "__torch__.staticify.lowered_" +
                                                 symbolName(method))),
       c10::IValue(name), c10::IValue(cpuObject),
       c10::IValue(formatSignature(signature)),
       c10::IValue(formatSignature(bridged.results)), c10::IValue(out.mlir),
       c10::IValue(std::string(bridged.random ? "random" : "")),
       c10::IValue(cudaImages)});
  std::string attr = "_staticify_lowered_" + method;
  if (module.hasattr(attr))
    module._ivalue()->setAttr(attr, c10::IValue(object_));
  else
    module.register_attribute(attr, type, c10::IValue(object_));

  // The method: self.<attr>.run([inputs]), its results unpacked.
  auto body = std::make_shared<Graph>();
  Value *self = body->addInput("self")->setType(graph->inputs()[0]->type());
  std::vector<Value *> args;
  for (size_t i = 1; i < graph->inputs().size(); ++i)
    args.push_back(body->addInput(graph->inputs()[i]->debugName())
                       ->setType(graph->inputs()[i]->type()));
  Value *runner = body->insertGetAttr(self, attr);
  Value *list = body->insertNode(body->createList(c10::TensorType::get(), args))
                    ->output();
  Node *run =
      body->insertNode(body->create(c10::prim::CallMethod, {runner, list}, 1));
  run->s_(c10::attr::name, "run");
  run->output()->setType(c10::ListType::ofTensors());
  std::vector<Value *> results;
  for (size_t i = 0; i < bridged.results.size(); ++i)
    results.push_back(
        body->insert(c10::aten::__getitem__, {run->output(), int64_t(i)}));
  c10::TypePtr returned = graph->outputs()[0]->type();
  if (returned->kind() == c10::TypeKind::TupleType)
    body->registerOutput(
        body->insertNode(body->createTuple(results))->output());
  else
    body->registerOutput(results.at(0));
  replaceGraphContents(*graph, *body);
  out.lowered = true;
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return out;
}

} // namespace staticify::lower
