#!/usr/bin/env bash
# README command two: set up, build, and run every test (lit + FileCheck,
# GoogleTest, pytest end-to-end with the fuzzers' smoke runs).
# STATICIFY_TESTS=all adds the slow tier: the whole detector and real-code
# sets (test/e2e/conftest.py: FULL) and the libFuzzer target's smoke run,
# which builds the loader and the passes a second time with clang, ASan and
# UBSan in build-fuzz/ (docs/reliability.md has the long runs).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
cmake --build "${BUILD_DIR:-build}" --target check-all
if [ "${STATICIFY_TESTS:-}" = "all" ]; then
  ./scripts/fuzz.sh smoke
fi
