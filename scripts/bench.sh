#!/usr/bin/env bash
# Sets up (with the plotting package), builds, and runs the benchmarks that
# docs/benchmarks.md reports: the seed 000 table and plot (CPU, or the GPU
# when one is visible), the compiler's time on generated graphs, and on
# torchvision's Faster R-CNN.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --bench
./scripts/build.sh >/dev/null
device=cpu
/usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' && device=cuda
/usr/bin/python3 bench/seed000.py --device "$device" --out bench/results --docs docs
/usr/bin/python3 bench/compiler_time.py --docs docs --runs 3
