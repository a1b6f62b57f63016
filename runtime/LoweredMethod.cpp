//===- LoweredMethod.cpp - A method compiled to a CPU kernel, with fallback
//===//
#include "runtime/LoweredMethod.h"
#include "runtime/RunModule.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace staticify {

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

/// A memref descriptor as MLIR's C interface takes it: base and aligned
/// pointers, offset, then sizes and strides (rank of each).
std::vector<int64_t> descriptor(void *data, c10::IntArrayRef sizes,
                                c10::IntArrayRef strides) {
  std::vector<int64_t> d(3 + 2 * sizes.size());
  d[0] = reinterpret_cast<int64_t>(data);
  d[1] = reinterpret_cast<int64_t>(data);
  d[2] = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    d[3 + i] = sizes[i];
    d[3 + sizes.size() + i] = strides[i];
  }
  return d;
}

/// Calls a C-interface function of N descriptor pointers.
template <size_t... I>
void callWith(void *fn, std::vector<void *> &args, std::index_sequence<I...>) {
  using F = void (*)(decltype(I, (void *)nullptr)...);
  reinterpret_cast<F>(fn)(args[I]...);
}
template <size_t N> void callN(void *fn, std::vector<void *> &args) {
  if constexpr (N == 0) {
    throw std::runtime_error("LoweredMethod: too many arguments");
  } else {
    if (args.size() == N)
      return callWith(fn, args, std::make_index_sequence<N>());
    callN<N - 1>(fn, args);
  }
}
constexpr size_t kMaxArgs = 32;

} // namespace

LoweredMethod::LoweredMethod(std::string module, std::string name,
                             std::string kernel, std::string signature,
                             std::string results, std::string mlir,
                             std::string flags)
    : module_(std::move(module)), name_(std::move(name)),
      kernel_(std::move(kernel)), signature_(std::move(signature)),
      results_(std::move(results)), mlir_(std::move(mlir)),
      flags_(std::move(flags)) {
  std::istringstream in(module_);
  fallback_ = torch::jit::load(in);
  for (auto &[t, s] : parseArgs(signature_))
    inputs_.push_back({t, s});
  for (auto &[t, s] : parseArgs(results_))
    outputs_.push_back({t, s});
  if (inputs_.size() + outputs_.size() + 2 > kMaxArgs)
    throw std::invalid_argument("LoweredMethod: over 30 inputs and results");
  // The kernel from memory: no file, no LLVM. A kernel that does not load
  // (another architecture, a damaged archive) leaves the TorchScript path.
  // The file stays open while the kernel is loaded: dlopen knows a library
  // by its path, and a closed descriptor's number (so its /proc/self/fd
  // path) would be reused by the next kernel, which dlopen would then take
  // for this one.
  fd_ = memfd_create(("staticify-" + name_).c_str(), MFD_CLOEXEC);
  if (fd_ < 0)
    return;
  bool written =
      write(fd_, kernel_.data(), kernel_.size()) == ssize_t(kernel_.size());
  if (written) {
    std::string path = "/proc/self/fd/" + std::to_string(fd_);
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle_) {
    close(fd_);
    fd_ = -1;
    return;
  }
  shapeFn_ = dlsym(handle_, ("_mlir_ciface_" + name_ + "_shape").c_str());
  kernelFn_ = dlsym(handle_, ("_mlir_ciface_" + name_).c_str());
  if (!shapeFn_ || !kernelFn_) {
    dlclose(handle_);
    handle_ = shapeFn_ = kernelFn_ = nullptr;
  }
}

LoweredMethod::~LoweredMethod() {
  if (handle_)
    dlclose(handle_);
  if (fd_ >= 0)
    close(fd_);
}

bool LoweredMethod::accepts(const std::vector<at::Tensor> &inputs) const {
  if (!kernelFn_ || inputs.size() != inputs_.size())
    return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor &t = inputs[i];
    const Arg &a = inputs_[i];
    if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != a.dtype ||
        t.dim() != int64_t(a.sizes.size()) || !t.is_contiguous() ||
        t.is_neg() || t.is_conj() || t.layout() != c10::kStrided ||
        t.requires_grad())
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

std::vector<at::Tensor> LoweredMethod::run(std::vector<at::Tensor> inputs) {
  if (!accepts(inputs))
    return runFallback(inputs);
  std::vector<std::vector<int64_t>> descs;
  descs.reserve(inputs.size() + outputs_.size() + 1);
  for (at::Tensor &t : inputs)
    descs.push_back(descriptor(t.data_ptr(), t.sizes(), t.strides()));
  // The seed of this call's random draws, from the generator the original's
  // random ops would use (so torch.manual_seed makes runs repeatable).
  int64_t seed = 0, status = 0;
  if (flags_ == "random") {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    seed = static_cast<int64_t>(
        at::check_generator<at::CPUGeneratorImpl>(gen)->random64());
  }
  descs.push_back(descriptor(&seed, {}, {}));
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
  callN<kMaxArgs>(shapeFn_, args);
  if (sizes[0] != 1) {
    ++rejectedShapes_;
    return runFallback(inputs);
  }
  descs.pop_back();
  std::vector<at::Tensor> results;
  size_t at = 1;
  for (const Arg &a : outputs_) {
    std::vector<int64_t> shape(sizes.begin() + at,
                               sizes.begin() + at + a.sizes.size());
    at += a.sizes.size();
    results.push_back(at::empty(shape, at::TensorOptions().dtype(a.dtype)));
    descs.push_back(descriptor(results.back().data_ptr(),
                               results.back().sizes(),
                               results.back().strides()));
  }
  descs.push_back(descriptor(&status, {}, {}));
  args.clear();
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
                       std::string, std::string, std::string>())
      .def("run", &staticify::LoweredMethod::run)
      .def("counts", &staticify::LoweredMethod::counts)
      .def("mlir", &staticify::LoweredMethod::mlir)
      .def("signature", &staticify::LoweredMethod::signature)
      .def_pickle(
          [](const c10::intrusive_ptr<staticify::LoweredMethod> &self) {
            return self->state();
          },
          [](std::vector<std::string> s) {
            if (s.size() != 7)
              throw std::invalid_argument("LoweredMethod: a saved state of " +
                                          std::to_string(s.size()) +
                                          " fields, expected 7");
            return c10::make_intrusive<staticify::LoweredMethod>(
                s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
          });
}
