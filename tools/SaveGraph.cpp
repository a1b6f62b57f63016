//===- SaveGraph.cpp - A graph saved as a module of its own ---------------===//
//
// Apart from ModuleIO.cpp, which the sanitizer-built fuzzers compile on their
// own: building a module's type drags in type information that Debian's
// libtorch does not export to UBSan's checks.
//
//===----------------------------------------------------------------------===//
#include "tools/ModuleIO.h"

#include <torch/csrc/jit/api/module.h>

#include <sstream>

namespace staticify {

std::string saveGraphAsModule(torch::jit::Graph &graph,
                              const std::string &qualifiedName) {
  torch::jit::Module module(qualifiedName);
  std::shared_ptr<torch::jit::Graph> body = graph.copy();
  body->inputs()[0]->setType(module.type());
  auto *fn = module.type()->compilation_unit()->create_function(
      c10::QualifiedName(*module.type()->name(), "forward"), body);
  module.type()->addMethod(fn);
  std::ostringstream bytes;
  module.save(bytes);
  return bytes.str();
}

} // namespace staticify
