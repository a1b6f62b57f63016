#!/usr/bin/env bash
# Run here (Debian, with scripts/setup.sh done and build/ built): packs into
# .gpu/ what the GPU machine lacks and cannot download (it has no package
# registry): lit, FileCheck, not and split-file (with the one library FileCheck needs
# that is not in every glibc system), GoogleTest's sources, and models
# scripted by Debian's PyTorch and rewritten by the Debian build, for the
# cross-version check, and what only a build with MLIR makes: the sampler and
# the idioms lowered to CUDA kernels (scripts/gpu/lower_here.py). The device tool carries .gpu/ (it is git-ignored);
# scripts/gpu/validate.sh uses it there.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .gpu && mkdir -p .gpu/bin .gpu/libexec .gpu/lib
cp /usr/lib/llvm-22/bin/FileCheck /usr/lib/llvm-22/bin/not /usr/lib/llvm-22/bin/split-file .gpu/libexec/
cp /lib/x86_64-linux-gnu/libz3.so.4 .gpu/lib/
for tool in FileCheck not split-file; do
  cat > .gpu/bin/$tool <<EOS
#!/bin/sh
here=\$(dirname "\$0")
LD_LIBRARY_PATH="\$here/../lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/../libexec/$tool" "\$@"
EOS
  chmod +x .gpu/bin/$tool
done
cp -r /usr/lib/llvm-22/utils/lit .gpu/lit
cat > .gpu/bin/lit <<'EOS'
#!/usr/bin/env python3
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lit"))
from lit.main import main
main()
EOS
chmod +x .gpu/bin/lit
cp -r /usr/src/googletest .gpu/googletest
/usr/bin/python3 test/e2e/cross_version.py write .gpu/models --bin build/bin
/usr/bin/python3 scripts/gpu/lower_here.py .gpu/lowered --bin build/bin
du -sh .gpu
