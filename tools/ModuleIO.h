//===- ModuleIO.h - Loading and saving TorchScript modules safely ---------===//
//
// Every way an input can be wrong becomes a one-line UserError naming the
// file, the problem and the fix; libtorch's own text goes only to --verbose.
// An archive is checked (tools/ArchiveGuard.h) before libtorch parses it.
// Outputs are written to temporary files and renamed together at the end, so
// a failure never leaves a partial or stray file and the input is never
// overwritten.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/ArchiveGuard.h"

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

/// \p text with control characters and bytes that are not UTF-8 written as
/// \xNN, so that a message stays one readable line whatever a file or record
/// name holds (\p keepNewlines: several lines, for --verbose notes).
std::string printable(const std::string &text, bool keepNewlines = false);

/// The text of an exception libtorch threw, without its backtrace.
std::string libtorchText(const std::exception &e);

/// dlopen()s a custom-op library (torchvision's _C.so for torchvision::nms);
/// \p fixIfNotFound ends the message when it cannot be loaded.
void loadLibrary(const std::string &path,
                 const std::string &fixIfNotFound =
                     "check the path given to --load-library");

struct LoadOptions {
  ArchiveLimits limits;
  /// Print libtorch's own text for a failed load (--verbose).
  bool verbose = false;
};

struct LoadedModule {
  torch::jit::Module module;
  /// Every extra file of the archive (kept in the output).
  torch::jit::ExtraFilesMap extraFiles;
  /// What was wrong but could be worked around (unusable source locations),
  /// one line each, for `staticify: warning:`.
  std::vector<std::string> warnings;
};

/// Loads the TorchScript archive at \p path with all its extra files; throws
/// UserError. Refuses what is not a regular file before opening it for long.
LoadedModule loadModule(const std::string &path,
                        const LoadOptions &options = {});

/// Loads an archive held in memory; \p name stands for it in messages.
LoadedModule loadModuleFromBytes(std::string bytes, const std::string &name,
                                 const LoadOptions &options = {});

/// Checks that \p output (given to option \p option) can be written and is
/// not \p input.
void checkOutputPath(const std::string &output, const std::string &input,
                     const std::string &option = "-o");

/// The files a run writes, made all at once: each is written to a temporary
/// file next to it as it is added, and commit() renames them all into place.
/// Destroying it without commit() removes every temporary file.
class OutputFiles {
public:
  /// \p verbose: print libtorch's text when saving fails.
  explicit OutputFiles(bool verbose = false) : verbose(verbose) {}
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;
  ~OutputFiles();

  void addText(const std::string &path, const std::string &contents);
  void addModule(const std::string &path, const torch::jit::Module &module,
                 const torch::jit::ExtraFilesMap &extraFiles);
  void commit();

  /// The temporary path a file is written to before its rename, for
  /// process \p pid (the supervisor removes a crashed child's).
  static std::string temporaryPath(const std::string &path, long pid);

private:
  struct Pending {
    std::string temporary, path;
  };
  std::vector<Pending> pending;
  bool verbose;
};

/// The names of the module's methods, for "unknown method" messages.
std::vector<std::string> methodNames(const torch::jit::Module &module);

/// \p graph (whose first input is the module) as the forward of a module of
/// its own, class \p qualifiedName, saved to bytes: what the runtime's
/// classes keep to run a region or a method as TorchScript.
std::string saveGraphAsModule(torch::jit::Graph &graph,
                              const std::string &qualifiedName);

} // namespace staticify
