//===- LoweredMethod.cpp - A method compiled to a CPU kernel, with fallback
//===//
#include "runtime/LoweredMethod.h"
#include "runtime/CudaImages.h"
#include "runtime/KernelAbi.h"
#include "runtime/RunModule.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/grad_mode.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace staticify {

using abi::callN;
using abi::descriptor;
using abi::kMaxArgs;

namespace {

/// Signatures as `staticify --lower` writes them: "f32[?], i64[?,4]".
std::vector<std::pair<c10::ScalarType, std::vector<int64_t>>>
parseArgs(const std::string &text) {
  static const std::pair<const char *, c10::ScalarType> dtypes[] = {
      {"f16", c10::ScalarType::Half},  {"bf16", c10::ScalarType::BFloat16},
      {"f32", c10::ScalarType::Float}, {"f64", c10::ScalarType::Double},
      {"i8", c10::ScalarType::Char},   {"i16", c10::ScalarType::Short},
      {"i32", c10::ScalarType::Int},   {"i64", c10::ScalarType::Long},
      {"b8", c10::ScalarType::Bool}};
  std::vector<std::pair<c10::ScalarType, std::vector<int64_t>>> out;
  std::istringstream in(text);
  std::string item;
  // Items are separated by "], ": split on ']'.
  while (std::getline(in, item, ']')) {
    size_t start = item.find_first_not_of(", ");
    if (start == std::string::npos)
      continue;
    item = item.substr(start);
    size_t open = item.find('[');
    if (open == std::string::npos)
      throw std::invalid_argument("LoweredMethod: bad signature '" + text +
                                  "'");
    std::string name = item.substr(0, open);
    bool found = false;
    c10::ScalarType dtype = c10::ScalarType::Undefined;
    for (const auto &[n, t] : dtypes)
      if (name == n) {
        dtype = t;
        found = true;
      }
    if (!found)
      throw std::invalid_argument("LoweredMethod: bad dtype in '" + text + "'");
    std::vector<int64_t> sizes;
    std::istringstream dims(item.substr(open + 1));
    std::string d;
    while (std::getline(dims, d, ','))
      if (!d.empty())
        sizes.push_back(d == "?" ? -1 : std::stoll(d));
    out.emplace_back(dtype, std::move(sizes));
  }
  return out;
}

} // namespace

namespace {

/// --lower=cuda's images: records of name, NUL, decimal size, NUL, bytes.
std::vector<std::pair<std::string, std::string>>
parseImages(const std::string &blob) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while (at < blob.size()) {
    size_t nameEnd = blob.find('\0', at);
    size_t sizeEnd =
        nameEnd == std::string::npos ? nameEnd : blob.find('\0', nameEnd + 1);
    if (sizeEnd == std::string::npos)
      throw std::invalid_argument("LoweredMethod: damaged CUDA images");
    std::string name = blob.substr(at, nameEnd - at);
    std::string digits = blob.substr(nameEnd + 1, sizeEnd - nameEnd - 1);
    if (digits.empty() || digits.size() > 12 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("LoweredMethod: damaged CUDA images");
    size_t size = std::stoull(digits);
    if (size > blob.size() - sizeEnd - 1)
      throw std::invalid_argument("LoweredMethod: damaged CUDA images");
    std::string bytes = blob.substr(sizeEnd + 1, size);
    at = sizeEnd + 1 + size;
    // A device image the driver would misread is dropped (that GPU then
    // runs the TorchScript): the driver reads a cubin without its length.
    bool ptx = false;
    if (cuda_images::archOf(name, ptx) >= 0 &&
        !(ptx ? cuda_images::wellFormedPtx(bytes)
              : cuda_images::wellFormedCubin(bytes)))
      continue;
    out.emplace_back(name, std::move(bytes));
  }
  return out;
}

} // namespace

LoweredMethod::LoweredMethod(std::string module, std::string name,
                             std::string kernel, std::string signature,
                             std::string results, std::string mlir,
                             std::string flags, std::string cuda)
    : module_(std::move(module)), name_(std::move(name)),
      kernel_(std::move(kernel)), signature_(std::move(signature)),
      results_(std::move(results)), mlir_(std::move(mlir)),
      flags_(std::move(flags)), cuda_(std::move(cuda)) {
  std::istringstream in(module_);
  fallback_ = torch::jit::load(in);
  for (auto &[t, s] : parseArgs(signature_))
    inputs_.push_back({t, s});
  for (auto &[t, s] : parseArgs(results_))
    outputs_.push_back({t, s});
  if (inputs_.size() + outputs_.size() + 2 > kMaxArgs)
    throw std::invalid_argument("LoweredMethod: over 30 inputs and results");
  cudaImages_ = parseImages(cuda_);
  cudaState_ = makeCudaState();
}

// The shared objects are loaded on the first call, not when the object is
// made: loading a saved module (staticify itself does, to rewrite it) runs
// none of the native code it carries.
void LoweredMethod::loadCpuKernel() {
  std::call_once(cpuLoaded_, [this] {
    // A kernel that does not load (another architecture, a damaged
    // archive) leaves the TorchScript path.
    if (!kernel_.empty())
      std::tie(handle_, fd_) = abi::loadFromMemory(kernel_, name_);
    if (!handle_)
      return;
    shapeFn_ = dlsym(handle_, ("_mlir_ciface_" + name_ + "_shape").c_str());
    kernelFn_ = dlsym(handle_, ("_mlir_ciface_" + name_).c_str());
    if (!shapeFn_ || !kernelFn_) {
      abi::unload(handle_, fd_);
      handle_ = shapeFn_ = kernelFn_ = nullptr;
      fd_ = -1;
    }
  });
}

LoweredMethod::~LoweredMethod() {
  abi::unload(handle_, fd_);
  abi::unload(cudaHandle_, cudaFd_);
}

namespace abi {

std::pair<void *, int> loadFromMemory(const std::string &bytes,
                                      const std::string &name) {
  int fd = memfd_create(("staticify-" + name).c_str(), MFD_CLOEXEC);
  if (fd < 0)
    return {nullptr, -1};
  void *handle = nullptr;
  if (write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size())) {
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) {
    close(fd);
    return {nullptr, -1};
  }
  return {handle, fd};
}

void unload(void *handle, int fd) {
  if (handle)
    dlclose(handle);
  if (fd >= 0)
    close(fd);
}

} // namespace abi

const std::string *
LoweredMethod::cudaImageBytes(const std::string &name) const {
  for (const auto &[n, bytes] : cudaImages_)
    if (n == name)
      return &bytes;
  return nullptr;
}

std::vector<std::string> LoweredMethod::cudaImageNames() const {
  std::vector<std::string> names;
  for (const auto &image : cudaImages_)
    names.push_back(image.first);
  return names;
}

at::Tensor LoweredMethod::cudaImage(const std::string &name) const {
  const std::string *bytes = cudaImageBytes(name);
  if (!bytes)
    throw std::invalid_argument("LoweredMethod: no CUDA image '" + name + "'");
  at::Tensor t = at::empty({int64_t(bytes->size())}, at::kByte);
  std::memcpy(t.data_ptr(), bytes->data(), bytes->size());
  return t;
}

void LoweredMethod::contiguous(std::vector<at::Tensor> &inputs) {
  // The kernels take dense row-major buffers; a view (a column, a
  // transpose) is copied. A kernel never writes its inputs (the bridge
  // lowers no in-place op on them), so the copy is seen by nothing else.
  for (at::Tensor &t : inputs)
    if (!t.is_contiguous())
      t = t.contiguous();
}

bool LoweredMethod::accepts(const std::vector<at::Tensor> &inputs) {
  loadCpuKernel();
  return kernelFn_ && matchesSignature(inputs, c10::Device(c10::kCPU));
}

bool LoweredMethod::matchesSignature(const std::vector<at::Tensor> &inputs,
                                     c10::Device device) const {
  if (inputs.size() != inputs_.size())
    return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor &t = inputs[i];
    const Arg &a = inputs_[i];
    if (!t.defined() || t.device() != device || t.scalar_type() != a.dtype ||
        t.dim() != int64_t(a.sizes.size()) || t.is_neg() || t.is_conj() || t.layout() != c10::kStrided ||
        (t.requires_grad() && at::GradMode::is_enabled()))
      return false;
    for (size_t d = 0; d < a.sizes.size(); ++d)
      if (a.sizes[d] >= 0 && t.size(d) != a.sizes[d])
        return false;
  }
  return true;
}

std::vector<at::Tensor>
LoweredMethod::runFallback(const std::vector<at::Tensor> &inputs) {
  ++fallbackCalls_;
  return runForward(fallback_, inputs);
}

bool LoweredMethod::prepareCall(void *shapeFn,
                                const std::vector<at::Tensor> &inputs,
                                int64_t *seed, c10::Device device,
                                std::vector<std::vector<int64_t>> &descs,
                                std::vector<at::Tensor> &results) const {
  descs.reserve(inputs.size() + outputs_.size() + 2);
  for (const at::Tensor &t : inputs)
    descs.push_back(descriptor(t.data_ptr(), t.sizes(), t.strides()));
  descs.push_back(descriptor(seed, {}, {}));
  // The shape function: whether the kernel applies, and the results' sizes.
  size_t resultDims = 0;
  for (const Arg &a : outputs_)
    resultDims += a.sizes.size();
  std::vector<int64_t> sizes(1 + resultDims, 0);
  int64_t n = static_cast<int64_t>(sizes.size()), one = 1;
  descs.push_back(descriptor(sizes.data(), c10::IntArrayRef(&n, 1),
                             c10::IntArrayRef(&one, 1)));
  std::vector<void *> args;
  for (auto &d : descs)
    args.push_back(d.data());
  callN<kMaxArgs>(shapeFn, args);
  descs.pop_back();
  if (sizes[0] != 1)
    return false;
  size_t at = 1;
  for (const Arg &a : outputs_) {
    std::vector<int64_t> shape(sizes.begin() + at,
                               sizes.begin() + at + a.sizes.size());
    at += a.sizes.size();
    results.push_back(
        at::empty(shape, at::TensorOptions().dtype(a.dtype).device(device)));
    descs.push_back(descriptor(results.back().data_ptr(),
                               results.back().sizes(),
                               results.back().strides()));
  }
  return true;
}

std::vector<at::Tensor> LoweredMethod::run(std::vector<at::Tensor> inputs) {
  if (!inputs.empty() && inputs[0].defined() && inputs[0].is_cuda())
    return runCuda(inputs);
  if (!accepts(inputs))
    return runFallback(inputs);
  contiguous(inputs);
  // The seed of this call's random draws, from the generator the original's
  // random ops would use (so torch.manual_seed makes runs repeatable).
  int64_t seed = 0, status = 0;
  if (flags_ == "random") {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    seed = static_cast<int64_t>(
        at::check_generator<at::CPUGeneratorImpl>(gen)->random64());
  }
  std::vector<std::vector<int64_t>> descs;
  std::vector<at::Tensor> results;
  if (!prepareCall(shapeFn_, inputs, &seed, c10::Device(c10::kCPU), descs,
                   results)) {
    ++rejectedShapes_;
    return runFallback(inputs);
  }
  std::vector<void *> args;
  descs.push_back(descriptor(&status, {}, {}));
  for (auto &d : descs)
    args.push_back(d.data());
  callN<kMaxArgs>(kernelFn_, args);
  if (status != 1) { // a value PyTorch rejects (an index out of range)
    ++rejectedValues_;
    return runFallback(inputs);
  }
  ++kernelCalls_;
  return results;
}

} // namespace staticify

TORCH_LIBRARY_FRAGMENT(staticify, m) {
  m.class_<staticify::LoweredMethod>("LoweredMethod")
      .def(torch::init<std::string, std::string, std::string, std::string,
                       std::string, std::string, std::string, std::string>())
      .def("run", &staticify::LoweredMethod::run)
      .def("counts", &staticify::LoweredMethod::counts)
      .def("mlir", &staticify::LoweredMethod::mlir)
      .def("signature", &staticify::LoweredMethod::signature)
      .def("cuda_image_names", &staticify::LoweredMethod::cudaImageNames)
      .def("cuda_image", &staticify::LoweredMethod::cudaImage)
      .def("cuda_calls", &staticify::LoweredMethod::cudaCalls)
      .def_pickle(
          [](const c10::intrusive_ptr<staticify::LoweredMethod> &self) {
            return self->state();
          },
          [](std::vector<std::string> s) {
            // 7 fields: saved before --lower=cuda existed.
            if (s.size() != 7 && s.size() != 8)
              throw std::invalid_argument("LoweredMethod: a saved state of " +
                                          std::to_string(s.size()) +
                                          " fields, expected 8");
            return c10::make_intrusive<staticify::LoweredMethod>(
                s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                s.size() == 8 ? s[7] : std::string());
          });
}
