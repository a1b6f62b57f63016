//===- Supervisor.cpp - Runs the work in a child process ------------------===//

#include "tools/Supervisor.h"

#include "tools/ModuleIO.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace staticify {

int runSupervised(const std::function<int()> &work, const std::string &input,
                  const std::vector<std::string> &outputs) {
  const char *noFork = std::getenv("STATICIFY_NO_FORK");
  if (noFork && *noFork && std::strcmp(noFork, "0") != 0)
    return work();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child < 0)
    return work(); // no process to spare: run unsupervised
  if (child == 0) {
    int code = work();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    // Skip static destructors: the parent owns the exit.
    ::_exit(code);
  }
  // The terminal sends an interrupt to both; the parent waits for the
  // child's end to clean up after it.
  std::signal(SIGINT, SIG_IGN);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  for (const std::string &out : outputs)
    if (!out.empty())
      std::remove(OutputFiles::temporaryPath(out, child).c_str());
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  std::cerr << "staticify: error: internal error: staticify crashed (signal "
            << sig << ", " << (sig ? strsignal(sig) : "unknown")
            << ") while processing '" << input
            << "'; nothing was written; please report it with the input file\n";
  return 1;
}

} // namespace staticify
