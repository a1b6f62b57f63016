//===- GpuPasses.cpp - Host/device split for the CUDA target ----*- C++ -*-===//
//
// Two passes of the CUDA pipeline (lower/CudaTarget.cpp), on buffers:
// staticify-gpu-serial-regions moves the host code that touches device
// memory into one-thread kernels, or refuses when that code would decide
// something on the host (a sync); staticify-gpu-launch-to-runtime replaces
// MLIR's host-side launch (its own stream, a synchronize after each launch)
// by calls into staticify's runtime, which launches on PyTorch's stream.
//
//===----------------------------------------------------------------------===//
#include "staticify/StaticifyDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"

namespace staticify::mlir_dialect {
#define GEN_PASS_DEF_STATICIFYGPUSERIALREGIONS
#define GEN_PASS_DEF_STATICIFYPARALLELDIMSFIRST
#define GEN_PASS_DEF_STATICIFYGPULAUNCHTORUNTIME
#include "staticify/Passes.h.inc"
} // namespace staticify::mlir_dialect

using namespace mlir;

namespace {

//===----------------------------------------------------------------------===//
// Where memory lives
//===----------------------------------------------------------------------===//

/// Whether \p buffer is host memory: an argument marked `staticify.host`,
/// a `memref.alloca`, or a view of one. Every other buffer of a function
/// that launches kernels is device memory.
bool isHostMemory(Value buffer) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(buffer)) {
      auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
      return fn && arg.getOwner()->isEntryBlock() &&
             fn.getArgAttr(arg.getArgNumber(), "staticify.host");
    }
    Operation *def = buffer.getDefiningOp();
    if (isa<memref::AllocaOp>(def))
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
      buffer = view.getViewSource();
      continue;
    }
    if (auto cast = dyn_cast<memref::CastOp>(def)) {
      buffer = cast.getSource();
      continue;
    }
    return false;
  }
}

/// Whether \p op reads or writes device memory itself (not counting what
/// its regions do).
bool accessesDevice(Operation *op) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return !isHostMemory(load.getMemRef());
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return !isHostMemory(store.getMemRef());
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return !isHostMemory(copy.getSource()) || !isHostMemory(copy.getTarget());
  return false;
}

/// Whether \p op or an op nested in it accesses device memory outside the
/// device code already there (scf.parallel loops, gpu.launch bodies).
bool touchesDevice(Operation *op) {
  if (isa<scf::ParallelOp, gpu::LaunchOp>(op))
    return false;
  bool found = false;
  op->walk<WalkOrder::PreOrder>([&](Operation *inner) {
    if (inner != op && isa<scf::ParallelOp, gpu::LaunchOp>(inner))
      return WalkResult::skip();
    if (accessesDevice(inner)) {
      found = true;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

bool containsDeviceCode(Operation *op) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (inner != op && isa<scf::ParallelOp, gpu::LaunchOp>(inner))
      found = true;
  });
  return found;
}

/// The buffer \p buffer is a view of: an allocation or a function argument.
Value rootOf(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      buffer = view.getViewSource();
    else if (auto cast = dyn_cast<memref::CastOp>(def))
      buffer = cast.getSource();
    else if (auto reshape = dyn_cast<memref::ReshapeOp>(def))
      buffer = reshape.getSource();
    else
      break;
  }
  return buffer;
}

/// Whether two roots may be the same memory: an allocation in this
/// function is only itself; anything else (an argument, a branch's or a
/// loop's result, a global) may be any other such root.
bool mayAlias(Value a, Value b) {
  if (a == b)
    return true;
  auto fresh = [](Value v) {
    return v.getDefiningOp<memref::AllocOp>() ||
           v.getDefiningOp<memref::AllocaOp>();
  };
  return !fresh(a) && !fresh(b);
}

/// The roots of the buffers \p op (or an op nested in it) reads, or writes.
void accessedRoots(Operation *op, SmallVectorImpl<Value> &reads,
                   SmallVectorImpl<Value> &writes) {
  op->walk([&](Operation *inner) {
    if (auto load = dyn_cast<memref::LoadOp>(inner))
      reads.push_back(rootOf(load.getMemRef()));
    else if (auto store = dyn_cast<memref::StoreOp>(inner))
      writes.push_back(rootOf(store.getMemRef()));
    else if (auto copy = dyn_cast<memref::CopyOp>(inner)) {
      reads.push_back(rootOf(copy.getSource()));
      writes.push_back(rootOf(copy.getTarget()));
    }
  });
}

/// Whether the loads and stores of \p members may move past \p op: it
/// neither writes what they read or write, nor reads what they write, nor
/// frees anything; an op whose effects are unknown may not be crossed.
bool commutesWith(Operation *op, ArrayRef<Operation *> members) {
  if (isMemoryEffectFree(op))
    return true;
  bool known = isa<scf::ParallelOp, gpu::LaunchOp, scf::ForOp>(op);
  if (auto effects = dyn_cast<MemoryEffectOpInterface>(op);
      effects && !op->getNumRegions()) {
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    if (llvm::all_of(list, [](const MemoryEffects::EffectInstance &e) {
          return isa<MemoryEffects::Allocate>(e.getEffect());
        }))
      return true;
    known = isa<memref::LoadOp, memref::StoreOp, memref::CopyOp>(op);
  }
  if (!known)
    return false;
  // Inside a loop or kernel, anything touching memory other than a load,
  // store or copy (a call, an atomic, a free) has effects not modelled here.
  bool unmodelled = false;
  op->walk([&](Operation *inner) {
    if (inner == op || isMemoryEffectFree(inner) ||
        isa<memref::LoadOp, memref::StoreOp, memref::CopyOp, scf::ParallelOp,
            scf::ForOp, scf::IfOp, scf::ReduceOp, scf::ReduceReturnOp,
            scf::YieldOp, gpu::LaunchOp, gpu::TerminatorOp>(inner))
      return;
    unmodelled = true;
  });
  if (unmodelled)
    return false;
  SmallVector<Value> opReads, opWrites, reads, writes;
  accessedRoots(op, opReads, opWrites);
  for (Operation *m : members)
    accessedRoots(m, reads, writes);
  auto conflict = [](ArrayRef<Value> xs, ArrayRef<Value> ys) {
    for (Value x : xs)
      for (Value y : ys)
        if (mayAlias(x, y))
          return true;
    return false;
  };
  return !conflict(opWrites, reads) && !conflict(opWrites, writes) &&
         !conflict(opReads, writes);
}

std::string describe(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << op->getName();
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
    os << " at " << loc.getFilename() << ":" << loc.getLine();
  return text;
}

//===----------------------------------------------------------------------===//
// staticify-parallel-dims-first
//===----------------------------------------------------------------------===//

struct ParallelDimsFirst
    : staticify::mlir_dialect::impl::StaticifyParallelDimsFirstBase<
          ParallelDimsFirst> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> generics;
    getOperation()->walk([&](linalg::GenericOp op) { generics.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : generics) {
      SmallVector<unsigned> order;
      auto iterators = op.getIteratorTypesArray();
      // Parallel dimensions innermost first: the first loop of the
      // scf.parallel maps to threads x, so adjacent threads touch adjacent
      // elements, and the outer dimensions go to the grid's y and z.
      for (unsigned d = iterators.size(); d-- > 0;)
        if (linalg::isParallelIterator(iterators[d]))
          order.push_back(d);
      for (unsigned d = 0; d < iterators.size(); ++d)
        if (!linalg::isParallelIterator(iterators[d]))
          order.push_back(d);
      bool identity = true;
      for (unsigned d = 0; d < order.size(); ++d)
        identity &= order[d] == d;
      if (identity)
        continue;
      rewriter.setInsertionPoint(op);
      if (failed(linalg::interchangeGenericOp(rewriter, op, order)))
        return signalPassFailure();
    }
  }
};

//===----------------------------------------------------------------------===//
// staticify-gpu-serial-regions
//===----------------------------------------------------------------------===//

struct GpuSerialRegions
    : staticify::mlir_dialect::impl::StaticifyGpuSerialRegionsBase<
          GpuSerialRegions> {
  void runOnOperation() override {
    shapeBuffersOnHost();
    expandCopies();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (fn->hasAttr("staticify.host_only")) {
        WalkResult r = fn.walk([&](Operation *op) {
          if (accessesDevice(op)) {
            op->emitError("the shape function reads device memory: ")
                << describe(op);
            return WalkResult::interrupt();
          }
          return WalkResult::advance();
        });
        if (r.wasInterrupted())
          return signalPassFailure();
        continue;
      }
      if (failed(processBlock(fn.getBody().front())))
        return signalPassFailure();
      if (failed(checkDeviceCode(fn)))
        return signalPassFailure();
    }
  }

  /// Device code (parallel loops, one-thread kernels) may not touch host
  /// memory: a global (a constant tensor bufferization placed in host
  /// memory), an alloca, the seed.
  LogicalResult checkDeviceCode(func::FuncOp fn) {
    WalkResult r = fn.walk([&](Operation *op) {
      if (!isa<scf::ParallelOp, gpu::LaunchOp>(op))
        return WalkResult::advance();
      WalkResult inner = op->walk([&](Operation *access) {
        Value buffer;
        if (auto load = dyn_cast<memref::LoadOp>(access))
          buffer = load.getMemRef();
        else if (auto store = dyn_cast<memref::StoreOp>(access))
          buffer = store.getMemRef();
        if (buffer && (isHostMemory(buffer) ||
                       rootOf(buffer).getDefiningOp<memref::GetGlobalOp>())) {
          access->emitError("device code reads host memory (a constant or "
                            "host buffer): ")
              << describe(access);
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
      return inner.wasInterrupted() ? WalkResult::interrupt()
                                    : WalkResult::skip();
    });
    return failure(r.wasInterrupted());
  }

  /// A buffer that holds the shape of a memref.reshape is read on the host
  /// (the reshape builds its descriptor there): it becomes a memref.alloca.
  void shapeBuffersOnHost() {
    llvm::SetVector<memref::AllocOp> shapes; // one may shape several
    getOperation().walk([&](memref::ReshapeOp reshape) {
      if (auto alloc = reshape.getShape().getDefiningOp<memref::AllocOp>())
        shapes.insert(alloc);
    });
    for (memref::AllocOp alloc : shapes) {
      if (!alloc.getType().hasStaticShape())
        continue;
      OpBuilder b(alloc);
      auto alloca =
          memref::AllocaOp::create(b, alloc.getLoc(), alloc.getType());
      alloc.getResult().replaceAllUsesWith(alloca.getResult());
      alloc.erase();
    }
  }

  /// Each memref.copy that touches device memory becomes a parallel loop
  /// nest of loads and stores (a rank-0 copy: one load and one store), so
  /// it maps to the GPU like the rest.
  void expandCopies() {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp op) {
      if (accessesDevice(op) && !op->getParentOfType<scf::ParallelOp>() &&
          !op->getParentOfType<gpu::LaunchOp>())
        copies.push_back(op);
    });
    for (memref::CopyOp copy : copies) {
      ImplicitLocOpBuilder b(copy.getLoc(), copy);
      Value src = copy.getSource(), dst = copy.getTarget();
      auto type = cast<MemRefType>(src.getType());
      if (type.getRank() == 0) {
        memref::StoreOp::create(b, memref::LoadOp::create(b, src), dst);
      } else {
        // Innermost dimension first (threads x), as parallel-dims-first.
        SmallVector<Value> lbs, ubs, steps;
        Value zero = arith::ConstantIndexOp::create(b, 0);
        Value one = arith::ConstantIndexOp::create(b, 1);
        for (int64_t d = type.getRank(); d-- > 0;) {
          lbs.push_back(zero);
          ubs.push_back(memref::DimOp::create(b, src, d));
          steps.push_back(one);
        }
        scf::ParallelOp::create(
            b, lbs, ubs, steps,
            [&](OpBuilder &nb, Location loc, ValueRange ivs) {
              SmallVector<Value> at(llvm::reverse(ivs));
              Value v = memref::LoadOp::create(nb, loc, src, at);
              memref::StoreOp::create(nb, loc, v, dst, at);
            });
      }
      copy.erase();
    }
  }

  LogicalResult processBlock(Block &block) {
    // Host branches (on sizes) hold host code of their own.
    for (Operation &op : block)
      if (auto ifOp = dyn_cast<scf::IfOp>(op))
        for (Region &r : ifOp->getRegions())
          if (!r.empty() && failed(processBlock(r.front())))
            return failure();

    // The ops that touch device memory, and everything in this block that
    // uses what they compute.
    llvm::SetVector<Operation *> group;
    for (Operation &op : block)
      if (!isa<scf::IfOp>(op) && touchesDevice(&op)) {
        if (containsDeviceCode(&op))
          return op.emitError("a host loop around device code reads device "
                              "memory: ")
                 << describe(&op);
        group.insert(&op);
      }
    for (size_t i = 0; i < group.size(); ++i)
      for (Value v : group[i]->getResults())
        for (Operation *user : v.getUsers()) {
          Operation *at = block.findAncestorOpInBlock(*user);
          if (!at)
            continue;
          if (!isMemoryEffectFree(at) && !touchesDevice(at))
            return at->emitError("a value read from device memory decides ")
                   << describe(at)
                   << " on the host (a host-device sync): not lowered";
          if (isa<scf::IfOp>(at))
            return at->emitError("a branch on a value read from device memory "
                                 "(a host-device sync): ")
                   << describe(at);
          group.insert(at);
        }
    if (group.empty())
      return success();

    // Connected by values: each component becomes one kernel.
    llvm::EquivalenceClasses<Operation *> components;
    for (Operation *op : group) {
      components.insert(op);
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (Operation *at = block.findAncestorOpInBlock(*def);
              at && group.contains(at))
            components.unionSets(op, at);
      op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (Operation *def = operand.getDefiningOp())
            if (Operation *at = block.findAncestorOpInBlock(*def);
                at && at != op && group.contains(at))
              components.unionSets(op, at);
      });
    }
    for (auto it = components.begin(); it != components.end(); ++it) {
      if (!(*it)->isLeader())
        continue;
      SmallVector<Operation *> members(components.member_begin(**it),
                                       components.member_end());
      llvm::sort(members, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      llvm::SmallPtrSet<Operation *, 16> inGroup(members.begin(),
                                                 members.end());
      // Members move down to the last one: nothing between may write
      // memory they read, or free it.
      for (Operation *op = members.front(); op != members.back();
           op = op->getNextNode())
        if (!inGroup.contains(op) && !commutesWith(op, members))
          return op->emitError("device code around ")
                 << describe(op)
                 << " cannot be grouped into one kernel: not lowered";
      Operation *last = members.back();
      OpBuilder b(last);
      b.setInsertionPointAfter(last);
      Value one = arith::ConstantIndexOp::create(b, last->getLoc(), 1);
      auto launch = gpu::LaunchOp::create(b, last->getLoc(), one, one, one, one,
                                          one, one);
      Block &body = launch.getBody().front();
      b.setInsertionPointToEnd(&body);
      auto terminator = gpu::TerminatorOp::create(b, last->getLoc());
      for (Operation *op : members)
        op->moveBefore(terminator);
    }
    return success();
  }
};

//===----------------------------------------------------------------------===//
// staticify-gpu-launch-to-runtime
//===----------------------------------------------------------------------===//

struct GpuLaunchToRuntime
    : staticify::mlir_dialect::impl::StaticifyGpuLaunchToRuntimeBase<
          GpuLaunchToRuntime> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<gpu::GPUModuleOp> kernelModules(
        module.getOps<gpu::GPUModuleOp>());
    SmallVector<gpu::LaunchFuncOp> launches;
    module.walk([&](gpu::LaunchFuncOp op) { launches.push_back(op); });
    if (kernelModules.empty())
      return;

    // One gpu.module holding every kernel, each under a unique name.
    OpBuilder mb(ctx);
    mb.setInsertionPoint(kernelModules.front());
    auto merged =
        gpu::GPUModuleOp::create(mb, module.getLoc(), "staticify_kernels");
    llvm::StringMap<int64_t> kernelIndex; // "module::func" -> index
    SmallVector<Attribute> names;
    size_t others = 0;
    for (gpu::GPUModuleOp km : kernelModules) {
      // Every symbol renamed (uses included) before the move: two outlined
      // modules may hold a kernel or a global of one name.
      for (Operation &op :
           llvm::make_early_inc_range(km.getBody()->without_terminator())) {
        StringAttr symbol = SymbolTable::getSymbolName(&op);
        if (!symbol)
          continue;
        bool kernel = isa<gpu::GPUFuncOp>(op);
        std::string newName = kernel
                                  ? "staticify_k" + std::to_string(names.size())
                                  : "staticify_s" + std::to_string(others++);
        if (kernel) {
          kernelIndex[(km.getName() + "::" + symbol.getValue()).str()] =
              names.size();
          names.push_back(StringAttr::get(ctx, newName));
        }
        if (failed(SymbolTable::replaceAllSymbolUses(
                &op, StringAttr::get(ctx, newName), km))) {
          op.emitError("cannot rename symbol ") << symbol;
          return signalPassFailure();
        }
        SymbolTable::setSymbolName(&op, newName);
      }
      for (Operation &op :
           llvm::make_early_inc_range(km.getBody()->without_terminator()))
        op.moveBefore(merged.getBody(), merged.getBody()->end());
      km.erase();
    }
    module->setAttr("staticify.cuda_kernels", ArrayAttr::get(ctx, names));

    // The launch entry point the runtime provides.
    auto i64 = IntegerType::get(ctx, 64);
    auto slotsType = MemRefType::get({ShapedType::kDynamic}, i64);
    SmallVector<Type> argTypes(8, i64);
    argTypes.push_back(slotsType);
    OpBuilder db(ctx);
    db.setInsertionPointToStart(module.getBody());
    auto launchFn =
        func::FuncOp::create(db, module.getLoc(), "staticify_cuda_launch",
                             FunctionType::get(ctx, argTypes, {}));
    launchFn.setPrivate();

    for (gpu::LaunchFuncOp launch : launches) {
      std::string key = (launch.getKernelModuleName().getValue() +
                         "::" + launch.getKernelName().getValue())
                            .str();
      auto found = kernelIndex.find(key);
      if (found == kernelIndex.end()) {
        launch.emitError("launch of an unknown kernel ") << key;
        return signalPassFailure();
      }
      ImplicitLocOpBuilder b(launch.getLoc(), launch);
      auto asI64 = [&](Value v) -> Value {
        Type t = v.getType();
        if (t.isIndex())
          return arith::IndexCastOp::create(b, i64, v);
        if (auto f = dyn_cast<FloatType>(t))
          v = arith::BitcastOp::create(b, IntegerType::get(ctx, f.getWidth()),
                                       v);
        unsigned width = v.getType().getIntOrFloatBitWidth();
        if (width < 64)
          return arith::ExtUIOp::create(b, i64, v);
        return v;
      };
      SmallVector<Value> slots;
      for (Value operand : launch.getKernelOperands()) {
        auto type = dyn_cast<MemRefType>(operand.getType());
        if (!type) {
          if (!operand.getType().isIntOrIndexOrFloat()) {
            launch.emitError("a kernel parameter of type ")
                << operand.getType() << " has no runtime slot";
            return signalPassFailure();
          }
          slots.push_back(asI64(operand));
          continue;
        }
        // convert-gpu-to-nvvm's expansion of a memref parameter: allocated
        // and aligned pointers, offset, sizes, strides. The kernel never
        // frees, so the aligned pointer serves as both.
        Value ptr =
            asI64(memref::ExtractAlignedPointerAsIndexOp::create(b, operand));
        auto meta = memref::ExtractStridedMetadataOp::create(b, operand);
        slots.push_back(ptr);
        slots.push_back(ptr);
        slots.push_back(asI64(meta.getOffset()));
        for (Value s : meta.getSizes())
          slots.push_back(asI64(s));
        for (Value s : meta.getStrides())
          slots.push_back(asI64(s));
      }
      auto bufferType =
          MemRefType::get({int64_t(std::max<size_t>(slots.size(), 1))}, i64);
      Value buffer = memref::AllocaOp::create(b, bufferType);
      for (auto [i, v] : llvm::enumerate(slots))
        memref::StoreOp::create(
            b, v, buffer, ValueRange{arith::ConstantIndexOp::create(b, i)});
      Value dynamic = memref::CastOp::create(b, slotsType, buffer);
      gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
      gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
      Value shared = launch.getDynamicSharedMemorySize();
      SmallVector<Value> args{
          arith::ConstantIntOp::create(b, i64, found->second),
          asI64(grid.x),
          asI64(grid.y),
          asI64(grid.z),
          asI64(block.x),
          asI64(block.y),
          asI64(block.z),
          shared ? asI64(shared) : arith::ConstantIntOp::create(b, i64, 0),
          dynamic};
      func::CallOp::create(b, launchFn, args);
      launch.erase();
    }
  }
};

} // namespace
