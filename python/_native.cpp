//===- _native.cpp - staticify._native: the command, in a Python process ---===//
//
// One function, `run(args) -> (status, stdout, stderr)`: the staticify
// command (tools/Driver.h) in-process, so that the Python API writes exactly
// what the CLI writes. Modules cross as files the Python side saves and
// loads; nothing here touches Python objects, so the GIL is released while it
// runs.
//
//===----------------------------------------------------------------------===//

#include "tools/CudaGraphs.h"
#include "tools/Driver.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <tuple>

namespace py = pybind11;

namespace {

std::tuple<int, std::string, std::string>
run(const std::vector<std::string> &args) {
  std::ostringstream out, err;
  int status;
  {
    py::gil_scoped_release release;
    // In-process: a Python process with threads must not fork.
    status = staticify::runCommand(args, out, err, /*supervised=*/false);
  }
  return {status, out.str(), err.str()};
}

} // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "The staticify command, run in this process.";
  m.def("run", &run, py::arg("args"),
        "Runs `staticify ARGS...`; returns (exit status, stdout, stderr).");
  m.def("runtime_library", &staticify::defaultRuntimeLibrary,
        "The path of libstaticify_runtime.so in the build tree this module "
        "belongs to (it may not exist).");
}
