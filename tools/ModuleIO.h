//===- ModuleIO.h - Loading and saving TorchScript modules safely
//----------===//
//
// Every way an input can be wrong becomes a one-line UserError naming the
// problem and the fix; saving goes through a temporary file and a rename, so a
// failure never leaves a partial output and the input is never overwritten.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace staticify {

/// A problem with what the user gave us: printed as one line, exit code 1.
class UserError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The first non-empty line of an exception text, without trailing
/// punctuation: libtorch messages start with a newline and end in a backtrace.
std::string firstLine(const std::string &text);

/// dlopen()s a custom-op library (torchvision's _C.so for torchvision::nms).
void loadLibrary(const std::string &path);

/// Checks that \p path can be read and is a TorchScript archive; throws
/// UserError otherwise. Cheap: reads only the zip directory.
void checkTorchScriptArchive(const std::string &path);

struct LoadedModule {
  torch::jit::Module module;
  /// Every extra file of the archive (kept in the output).
  torch::jit::ExtraFilesMap extraFiles;
};

/// Loads \p path as TorchScript with all its extra files.
LoadedModule loadModule(const std::string &path);

/// Checks that \p output can be written and is not \p input.
void checkOutputPath(const std::string &output, const std::string &input);

/// Writes \p contents to \p path through a temporary file and a rename.
void writeFileAtomically(const std::string &path, const std::string &contents);

/// Saves \p module to \p path through a temporary file and a rename.
void saveModuleAtomically(const torch::jit::Module &module,
                          const std::string &path,
                          const torch::jit::ExtraFilesMap &extraFiles);

/// The names of the module's methods, for "unknown method" messages.
std::vector<std::string> methodNames(const torch::jit::Module &module);

} // namespace staticify
