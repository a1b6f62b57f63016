//===- Supervisor.h - Runs the work in a child process --------------------===//
//
// libtorch's parsers trust their input; ArchiveGuard bounds what we know can
// hurt them, and this is the net below it: the work runs in a forked child,
// so that whatever still crashes costs one line naming the input, not a core
// dump, and the child's temporary output files are removed. Set
// STATICIFY_NO_FORK=1 to run in-process (for a debugger).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace staticify {

/// Runs \p work and returns its exit code. When the child dies by a signal,
/// removes the temporary files it may have left next to each of \p outputs,
/// prints one error line naming \p input, and returns 1 (or re-raises an
/// interrupt: SIGINT, SIGTERM, SIGHUP).
int runSupervised(const std::function<int()> &work, const std::string &input,
                  const std::vector<std::string> &outputs);

} // namespace staticify
