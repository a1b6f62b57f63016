#!/usr/bin/env bash
# README command one: set up, build, script seed 000's balanced sampler
# (examples/sampler.py), and run staticify on it: the report, then -o.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh >/dev/null
BUILD_DIR=${BUILD_DIR:-build}
mkdir -p "$BUILD_DIR/examples"
model="$BUILD_DIR/examples/sampler.pt"
/usr/bin/python3 examples/sampler.py "$model"
echo "\$ staticify $model --report=full"
"$BUILD_DIR/bin/staticify" "$model" --report=full
echo
echo "\$ staticify $model -o $BUILD_DIR/examples/sampler_static.pt --report-json $BUILD_DIR/examples/sampler_report.json"
"$BUILD_DIR/bin/staticify" "$model" -o "$BUILD_DIR/examples/sampler_static.pt" \
  --report-json "$BUILD_DIR/examples/sampler_report.json"
