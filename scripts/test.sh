#!/usr/bin/env bash
# README command two: set up, build, and run every test (lit + FileCheck,
# GoogleTest, pytest end-to-end).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
cmake --build "${BUILD_DIR:-build}" --target check-all
