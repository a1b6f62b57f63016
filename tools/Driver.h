//===- Driver.h - The staticify command, as a library ----------------------===//
//
// `staticify ARGS...` as a function: the command-line tool's main and the
// Python API (python/staticify) call it with the same arguments, so that both
// write the same files and print the same report.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace staticify {

/// Runs the staticify command on \p args (without the program name), writing
/// what the tool prints to \p out and \p err; returns its exit status (0
/// success, 1 bad input or output, 2 bad command line). \p supervised runs
/// the work in a forked child (tools/Supervisor.h), as the tool does; the
/// Python API runs in its own process, which must not fork.
int runCommand(const std::vector<std::string> &args, std::ostream &out,
               std::ostream &err, bool supervised);

} // namespace staticify
