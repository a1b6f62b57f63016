//===- TorchToMlir.cpp - A TorchScript graph as MLIR functions on tensors -===//
//
// An abstract evaluation of the graph (Evaluator.h): each TorchScript value
// becomes a `Sym` (a tensor with its dtype and per-dimension sizes, a host
// scalar, a list, a device...). Host scalars known while building are
// constants and decide branches and loops; the others are index
// arithmetic. Tensors are linalg/tensor ops. Size checks the graph implies
// (two operands of an elementwise op have equal sizes, a reshape keeps the
// element count) are collected as i1 values: the shape function reports
// whether they all hold, and the kernel assumes they do.
//
// The graph is evaluated twice, once into each function; canonicalization
// then removes from the shape function the tensor computations it does not
// need (the ops are pure; the staticify dialect's too).
//
//===----------------------------------------------------------------------===//
#include "lower/Evaluator.h"

namespace staticify::lower {

using namespace bridge;

//===----------------------------------------------------------------------===//
// The two functions
//===----------------------------------------------------------------------===//

static mlir::MemRefType memrefType(mlir::MLIRContext *ctx,
                                   const TensorSignature &sig) {
  llvm::SmallVector<int64_t> shape;
  for (int64_t n : sig.sizes)
    shape.push_back(n < 0 ? mlir::ShapedType::kDynamic : n);
  return mlir::MemRefType::get(shape, elementType(ctx, sig.dtype));
}

/// The graph's results as a flat list of tensors (a tuple of tensors is
/// flattened), or throws.
static std::vector<Tensor> resultTensors(const std::vector<Sym> &outputs) {
  std::vector<Tensor> out;
  for (const Sym &s : outputs) {
    if (auto *t = std::get_if<Tensor>(&s)) {
      out.push_back(*t);
    } else if (auto *tu = std::get_if<std::shared_ptr<Tuple>>(&s)) {
      for (const Sym &e : (*tu)->elements) {
        auto *t = std::get_if<Tensor>(&e);
        if (!t)
          throw Unsupported("a result that is not a tensor");
        out.push_back(*t);
      }
    } else {
      throw Unsupported("a result that is not a tensor");
    }
  }
  return out;
}

BridgeResult buildFunctions(const torch::jit::Graph &graph, bool hasSelf,
                            const std::vector<TensorSignature> &signature,
                            const std::string &name, mlir::ModuleOp module,
                            KernelDevice device) {
  bool cuda = device == KernelDevice::Cuda;
  mlir::MLIRContext *ctx = module.getContext();
  BridgeResult result;
  mlir::Location loc = mlir::NameLoc::get(mlir::StringAttr::get(ctx, name));
  ImplicitLocOpBuilder b(loc, ctx);
  llvm::SmallVector<Type> inputTypes;
  try {
    for (const TensorSignature &sig : signature)
      inputTypes.push_back(memrefType(ctx, sig));
  } catch (const Unsupported &e) {
    result.unsupported = e.what();
    return result;
  }
  // Evaluates the graph at the builder's point, on the function's first
  // signature.size() arguments; the next is the seed of random draws.
  auto evaluate = [&](mlir::func::FuncOp fn, Evaluator &ev) {
    ev.setSeed(mlir::memref::LoadOp::create(b, fn.getArgument(signature.size()),
                                            mlir::ValueRange{}));
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < signature.size(); ++i) {
      Value m = fn.getArgument(i);
      auto mt = mlir::cast<mlir::MemRefType>(m.getType());
      auto tt = mlir::RankedTensorType::get(mt.getShape(), mt.getElementType());
      Value t =
          mlir::bufferization::ToTensorOp::create(b, tt, m, /*restrict=*/true);
      Tensor x{t, signature[i].dtype, {}};
      for (int64_t d = 0; d < mt.getRank(); ++d)
        x.sizes.push_back(
            mt.isDynamicDim(d)
                ? Host{Host::Int, Value(tensor::DimOp::create(b, t, d)), {}, {}}
                : Host::constInt(mt.getDimSize(d)));
      inputs.push_back(std::move(x));
    }
    return resultTensors(ev.run(graph, inputs));
  };
  auto attachBody = [&](mlir::func::FuncOp fn) {
    fn->setAttr("llvm.emit_c_interface", mlir::UnitAttr::get(ctx));
    b.setInsertionPointToStart(fn.addEntryBlock());
  };
  mlir::OpBuilder mb(ctx);
  mb.setInsertionPointToEnd(module.getBody());
  // The seed and the kernel's status: rank-0 i64 buffers.
  auto scalarType = mlir::MemRefType::get({}, b.getI64Type());
  try {
    // The shape function, first: it also tells the result signature.
    size_t resultDims = 0;
    std::vector<Tensor> results;
    {
      // Sized after the evaluation; built with a placeholder then retyped.
      auto sizesType =
          mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getI64Type());
      llvm::SmallVector<Type> args(inputTypes);
      args.push_back(scalarType);
      args.push_back(sizesType);
      auto fn = mlir::func::FuncOp::create(
          mb, loc, name + "_shape", mlir::FunctionType::get(ctx, args, {}));
      attachBody(fn);
      Evaluator ev(b, hasSelf, module, cuda);
      results = evaluate(fn, ev);
      Value sizes = fn.getArguments().back();
      auto store = [&](Value v) {
        Value i64 =
            v.getType().isIndex()
                ? Value(arith::IndexCastOp::create(b, b.getI64Type(), v))
                : Value(arith::ExtUIOp::create(b, b.getI64Type(), v));
        mlir::memref::StoreOp::create(
            b, i64, sizes,
            mlir::ValueRange{arith::ConstantIndexOp::create(b, resultDims++)});
      };
      store(ev.allChecks());
      for (const Tensor &t : results)
        for (const Host &h : t.sizes)
          store(ev.index(h));
      mlir::func::ReturnOp::create(b);
    }
    for (const Tensor &t : results)
      result.results.push_back({t.dtype, std::vector<int64_t>(t.rank(), -1)});
    {
      llvm::SmallVector<Type> args(inputTypes);
      args.push_back(scalarType);
      for (const TensorSignature &r : result.results)
        args.push_back(memrefType(ctx, r));
      args.push_back(scalarType);
      auto fn = mlir::func::FuncOp::create(
          mb, loc, name, mlir::FunctionType::get(ctx, args, {}));
      attachBody(fn);
      Evaluator ev(b, hasSelf, module, cuda);
      std::vector<Tensor> outs = evaluate(fn, ev);
      result.random = ev.usesRandom();
      for (size_t i = 0; i < outs.size(); ++i) {
        Value dest = fn.getArgument(signature.size() + 1 + i);
        auto destType = mlir::cast<mlir::MemRefType>(dest.getType());
        auto tt = mlir::RankedTensorType::get(destType.getShape(),
                                              destType.getElementType());
        Value v = outs[i].value.getType() == tt
                      ? outs[i].value
                      : Value(tensor::CastOp::create(b, tt, outs[i].value));
        mlir::bufferization::MaterializeInDestinationOp::create(
            b, mlir::TypeRange{}, v, dest, /*restrict=*/true,
            /*writable=*/true);
      }
      // The status: 1 if every check on values held (an index in range),
      // else 0 and the caller runs the TorchScript. Computed and written
      // as a tensor: on a GPU it never passes through the host.
      Value status = ev.valueStatus();
      mlir::bufferization::MaterializeInDestinationOp::create(
          b, mlir::TypeRange{}, status, fn.getArguments().back(),
          /*restrict=*/true, /*writable=*/true);
      mlir::func::ReturnOp::create(b);
    }
  } catch (const Unsupported &e) {
    result.unsupported = e.what();
    result.results.clear();
  }
  return result;
}

} // namespace staticify::lower
