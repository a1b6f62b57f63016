#!/usr/bin/env bash
# README command two: set up, build, and run every test (lit + FileCheck,
# GoogleTest, pytest end-to-end, the fuzzers' smoke runs).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
cmake --build "${BUILD_DIR:-build}" --target check-all
# The libFuzzer target over the loader and the pipeline (clang, ASan +
# UBSan, its own build tree): a short run; docs/reliability.md has the long.
./scripts/fuzz.sh smoke
