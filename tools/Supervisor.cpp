//===- Supervisor.cpp - Runs the work in a child process ------------------===//

#include "tools/Supervisor.h"

#include "tools/ModuleIO.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace staticify {

namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

volatile sig_atomic_t worker = 0;

/// The parent's handler: the worker gets the signal, and the parent, still
/// waiting for it, ends only after it (so no output appears afterwards).
void forwardToWorker(int sig) {
  if (worker > 0)
    ::kill(worker, sig);
}

} // namespace

int runSupervised(const std::function<int()> &work, const std::string &input,
                  const std::vector<std::string> &outputs) {
  const char *noFork = std::getenv("STATICIFY_NO_FORK");
  if (noFork && *noFork && std::strcmp(noFork, "0") != 0)
    return work();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // A signal that arrives around the fork waits until the parent forwards
  // it: blocked here, delivered after the handlers are in place.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  for (int sig : kForwarded)
    sigaddset(&forwarded, sig);
  ::sigprocmask(SIG_BLOCK, &forwarded, &previous);
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return work(); // no process to spare: run unsupervised
  }
  if (child == 0) {
    // A parent killed outright (SIGKILL) takes the worker with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(1);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    int code = work();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    // Skip static destructors: the parent owns the exit.
    ::_exit(code);
  }
  worker = child;
  struct sigaction forward = {};
  forward.sa_handler = forwardToWorker;
  sigemptyset(&forward.sa_mask);
  for (int sig : kForwarded)
    ::sigaction(sig, &forward, nullptr);
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR)
    ;
  worker = 0;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  for (const std::string &out : outputs)
    if (!out.empty()) {
      std::string temporary = OutputFiles::temporaryPath(out, child);
      std::remove(temporary.c_str());
      std::remove((temporary + ".old").c_str());
    }
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
