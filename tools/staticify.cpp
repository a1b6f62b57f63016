//===- staticify.cpp - The staticify command-line tool ---------------------===//
//
// staticify IN.pt -o OUT.pt   rewrite a TorchScript module into static form
// staticify IN.pt --report    analyse only: what is data-dependent, and where
//
// The command itself is tools/Driver.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/Driver.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

/// jemalloc's options, read when it starts (before main). The command's
/// memory is touched once and soon: loading a detector fills 170 MB of
/// tensor records and builds its graphs, then the archive is written out. On
/// a machine where a page fault is dear (a virtual machine: a third of the
/// command's time) huge pages take 1/512th of the faults. "always" is jemalloc
/// asking with madvise, so the kernel's own setting still decides.
extern "C" {
const char *malloc_conf = "thp:always,metadata_thp:always";
}

int main(int argc, char **argv) {
  // A file too large for RLIMIT_FSIZE is a write error to report, not a
  // signal that kills the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // A reader that closed the pipe (`staticify ... --report | head -1`) ends
  // the report, not the run: writes to it fail and are dropped, and the
  // outputs are finished as they would have been.
  std::signal(SIGPIPE, SIG_IGN);
  int code = staticify::runCommand({argv + 1, argv + argc}, std::cout,
                                   std::cerr, /*supervised=*/true);
  // Every file is written and renamed by now; what is left are the static
  // destructors of libtorch and its ~290 libraries, a quarter of a second
  // of an identity model's run. Flush and leave without them.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}
