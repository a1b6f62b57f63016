//===- LoweredCuda.cpp - Running `--lower=cuda` kernels on PyTorch's stream
//-===//
//
// The host code `staticify --lower=cuda` compiled (a shared object, loaded
// from memory) sizes the results, allocates, and launches the kernels
// through the table below: buffers from PyTorch's caching allocator on the
// current stream, kernels with the driver's cuLaunchKernel on that stream,
// top-k and randperm as PyTorch's own CUDA ops on it. Nothing reads device
// memory on the host and nothing synchronizes: the kernel's value checks
// (an index in range) end in an asynchronous device assertion, as
// PyTorch's own CUDA indexing does. Without a GPU build (Debian's libtorch)
// only the fallback is compiled.
//
//===----------------------------------------------------------------------===//
#include "runtime/CudaHostAbi.h"
#include "runtime/CudaImages.h"
#include "runtime/KernelAbi.h"
#include "runtime/LoweredMethod.h"
#include "runtime/RunModule.h"

#ifdef STATICIFY_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <sstream>
#endif

namespace staticify {

#ifndef STATICIFY_WITH_CUDA

struct LoweredMethod::CudaState {};

std::shared_ptr<LoweredMethod::CudaState> LoweredMethod::makeCudaState() {
  return nullptr;
}

std::vector<at::Tensor>
LoweredMethod::runCuda(const std::vector<at::Tensor> &inputs) {
  return runFallback(inputs);
}

#else

namespace {

/// The driver API, from the libcuda PyTorch loaded (no link-time
/// dependency; CUresult as int, handles as pointers).
struct Driver {
  int (*moduleLoadData)(void **module, const void *image) = nullptr;
  int (*moduleGetFunction)(void **function, void *module,
                           const char *name) = nullptr;
  int (*launchKernel)(void *f, unsigned gx, unsigned gy, unsigned gz,
                      unsigned bx, unsigned by, unsigned bz, unsigned shared,
                      cudaStream_t stream, void **params,
                      void **extra) = nullptr;
  int (*ctxGetCurrent)(void **context) = nullptr;
  bool ok = false;

  static const Driver &get() {
    static Driver d = [] {
      Driver d;
      void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (!lib)
        lib = dlopen("libcuda.so.1", RTLD_NOW);
      if (!lib)
        return d;
      d.moduleLoadData = reinterpret_cast<decltype(d.moduleLoadData)>(
          dlsym(lib, "cuModuleLoadData"));
      d.moduleGetFunction = reinterpret_cast<decltype(d.moduleGetFunction)>(
          dlsym(lib, "cuModuleGetFunction"));
      d.launchKernel = reinterpret_cast<decltype(d.launchKernel)>(
          dlsym(lib, "cuLaunchKernel"));
      d.ctxGetCurrent = reinterpret_cast<decltype(d.ctxGetCurrent)>(
          dlsym(lib, "cuCtxGetCurrent"));
      d.ok = d.moduleLoadData && d.moduleGetFunction && d.launchKernel &&
             d.ctxGetCurrent;
      return d;
    }();
    return d;
  }
};

using RuntimeTable = StaticifyCudaRuntime;

struct Call {
  c10::Device device;
  cudaStream_t stream;
  const std::vector<void *> *functions;
  std::vector<void *> buffers;
  std::string error;
};

void *allocate(void *c, int64_t bytes) {
  auto *call = static_cast<Call *>(c);
  void *p = c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(
      size_t(std::max<int64_t>(bytes, 1)), call->stream);
  call->buffers.push_back(p);
  return p;
}

void launch(void *c, int64_t kernel, const int64_t *grid, const int64_t *block,
            int64_t sharedBytes, const int64_t *params, int64_t count) {
  auto *call = static_cast<Call *>(c);
  if (!call->error.empty())
    return;
  if (grid[0] <= 0 || grid[1] <= 0 || grid[2] <= 0)
    return; // a loop over nothing
  // The hardware's limits (every GPU since sm_30): a launch past them
  // fails; the call then runs the TorchScript.
  if (grid[0] > 0x7fffffff || grid[1] > 65535 || grid[2] > 65535 ||
      block[0] * block[1] * block[2] > 1024) {
    call->error = "a launch past the grid's limits";
    return;
  }
  if (kernel < 0 || size_t(kernel) >= call->functions->size()) {
    call->error = "a launch of unknown kernel " + std::to_string(kernel);
    return;
  }
  std::vector<void *> args(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    args[i] = const_cast<int64_t *>(params + i);
  int r = Driver::get().launchKernel(
      (*call->functions)[kernel], unsigned(grid[0]), unsigned(grid[1]),
      unsigned(grid[2]), unsigned(block[0]), unsigned(block[1]),
      unsigned(block[2]), unsigned(sharedBytes), call->stream, args.data(),
      nullptr);
  if (r != 0)
    call->error = "cuLaunchKernel failed with CUresult " + std::to_string(r);
}

at::TensorOptions on(const Call &call, c10::ScalarType dtype) {
  return at::TensorOptions().device(call.device).dtype(dtype);
}

void topk(void *c, int dtype, const void *keys, int64_t n, int64_t keyStride,
          void *values, void *indices, int64_t k, int64_t largest) {
  auto *call = static_cast<Call *>(c);
  c10::ScalarType t = dtype ? at::kDouble : at::kFloat;
  at::Tensor kt =
      at::from_blob(const_cast<void *>(keys), {n}, {keyStride}, on(*call, t));
  at::Tensor vt = at::from_blob(values, {k}, on(*call, t));
  at::Tensor it = at::from_blob(indices, {k}, on(*call, at::kLong));
  at::topk_out(vt, it, kt, k, 0, largest != 0, /*sorted=*/true);
}

void randperm(void *c, int64_t *out, int64_t n, int64_t seed) {
  auto *call = static_cast<Call *>(c);
  at::Generator gen =
      at::make_generator<at::CUDAGeneratorImpl>(call->device.index());
  gen.set_current_seed(uint64_t(seed));
  at::Tensor t = at::from_blob(out, {n}, on(*call, at::kLong));
  at::randperm_out(t, n, gen);
}

const RuntimeTable kTable{allocate, launch, topk, randperm};

} // namespace

struct LoweredMethod::CudaState {
  struct Loaded {
    std::string error; // empty: loaded
    std::vector<void *> functions;
  };
  std::mutex mutex;
  std::map<int, Loaded> devices;
};

std::shared_ptr<LoweredMethod::CudaState> LoweredMethod::makeCudaState() {
  return std::make_shared<CudaState>();
}

std::vector<at::Tensor>
LoweredMethod::runCuda(const std::vector<at::Tensor> &given) {
  std::vector<at::Tensor> inputs = given;
  std::call_once(cudaLoaded_, [this] {
    if (const std::string *host = cudaImageBytes("host"))
      std::tie(cudaHandle_, cudaFd_) =
          abi::loadFromMemory(*host, name_ + "-cuda");
    if (!cudaHandle_)
      return;
    cudaShapeFn_ =
        dlsym(cudaHandle_, ("_mlir_ciface_" + name_ + "_shape").c_str());
    cudaKernelFn_ = dlsym(cudaHandle_, ("_mlir_ciface_" + name_).c_str());
    cudaEnter_ = dlsym(cudaHandle_, "staticify_cuda_enter");
  });
  if (!cudaShapeFn_ || !cudaKernelFn_ || !cudaEnter_ || !Driver::get().ok)
    return runFallback(inputs);
  c10::Device device = inputs[0].device();
  if (!matchesSignature(inputs, device))
    return runFallback(inputs);
  contiguous(inputs);
  c10::cuda::CUDAGuard guard(device);
  // The driver calls need the device's context current on this thread;
  // the CUDA runtime makes its primary context current (as PyTorch does
  // before its own driver calls). No synchronization.
  void *context = nullptr;
  if (Driver::get().ctxGetCurrent(&context) != 0 || !context) {
    (void)cudaFree(nullptr);
    if (Driver::get().ctxGetCurrent(&context) != 0 || !context)
      return runFallback(inputs);
  }
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();

  // The module, once per device.
  const CudaState::Loaded *loaded = nullptr;
  {
    std::lock_guard<std::mutex> lock(cudaState_->mutex);
    auto [it, fresh] = cudaState_->devices.try_emplace(device.index());
    CudaState::Loaded &l = it->second;
    if (fresh) {
      const cudaDeviceProp *props =
          at::cuda::getDeviceProperties(device.index());
      std::string name =
          cuda_images::choose(cudaImageNames(), props->major, props->minor);
      const std::string *image = name.empty() ? nullptr : cudaImageBytes(name);
      const std::string *kernels = cudaImageBytes("kernels");
      void *module = nullptr;
      if (!image || !kernels)
        l.error = "no image for this GPU's architecture";
      else if (Driver::get().moduleLoadData(&module, image->c_str()) != 0)
        l.error = "cuModuleLoadData failed";
      std::istringstream names(kernels ? *kernels : std::string());
      for (std::string kernel;
           l.error.empty() && std::getline(names, kernel);) {
        void *f = nullptr;
        if (Driver::get().moduleGetFunction(&f, module, kernel.c_str()) != 0)
          l.error = "no kernel " + kernel + " in the image";
        l.functions.push_back(f);
      }
    }
    loaded = &l;
  }
  if (!loaded->error.empty())
    return runFallback(inputs);

  // The seed: from the CUDA generator, as the original's random ops would
  // draw. A capture would need it on the device: run the TorchScript then.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess)
    return runFallback(inputs);
  int64_t seed = 0;
  if (flags_ == "random") {
    if (capture != cudaStreamCaptureStatusNone)
      return runFallback(inputs);
    at::Generator gen =
        at::cuda::detail::getDefaultCUDAGenerator(device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto [s, offset] =
        at::check_generator<at::CUDAGeneratorImpl>(gen)->philox_engine_inputs(
            4);
    seed = int64_t(s ^ (offset * 0x9E3779B97F4A7C15ull));
  }

  auto enter =
      reinterpret_cast<void (*)(const RuntimeTable *, void *)>(cudaEnter_);
  std::vector<std::vector<int64_t>> descs;
  std::vector<at::Tensor> results;
  if (!prepareCall(cudaShapeFn_, inputs, &seed, device, descs, results)) {
    ++rejectedShapes_;
    return runFallback(inputs);
  }
  at::Tensor status =
      at::empty({}, at::TensorOptions().dtype(at::kLong).device(device));
  descs.push_back(abi::descriptor(status.data_ptr(), {}, {}));
  std::vector<void *> args;
  for (auto &d : descs)
    args.push_back(d.data());
  Call call{device, stream, &loaded->functions, {}, {}};
  enter(&kTable, &call);
  try {
    abi::callN<abi::kMaxArgs>(cudaKernelFn_, args);
  } catch (...) {
    enter(nullptr, nullptr);
    for (void *p : call.buffers)
      c10::cuda::CUDACachingAllocator::raw_delete(p);
    throw;
  }
  enter(nullptr, nullptr);
  // Stream-ordered: the caching allocator hands these to later work on
  // this stream only, after the kernels that use them.
  for (void *p : call.buffers)
    c10::cuda::CUDACachingAllocator::raw_delete(p);
  // A launch that failed (past the grid's limits): the kernels write only
  // buffers of this call, never the inputs, so the TorchScript can run.
  if (!call.error.empty())
    return runFallback(inputs);
  // A value PyTorch rejects (an index out of range): a device-side assert,
  // asynchronous, as PyTorch's CUDA indexing reports it.
  at::_assert_async(status);
  ++kernelCalls_;
  ++cudaCalls_;
  return results;
}

#endif

} // namespace staticify
