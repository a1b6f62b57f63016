#!/usr/bin/env bash
# Builds the libFuzzer target in build-fuzz/ (clang, ASan + UBSan) and runs it.
#   scripts/fuzz.sh smoke          a short run (the test suite's)
#   scripts/fuzz.sh run [ARGS...]  a long run; ARGS go to libFuzzer, e.g.
#                                  -runs=100000 or -max_total_time=3600
# Seeds: valid archives scripted by test/fuzz/make_seeds.py, plus one input
# per structured mode (a record of the built-in template replaced).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_DIR=${FUZZ_DIR:-build-fuzz}
if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  CXX=clang++ cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTATICIFY_BUILD_TESTS=OFF -DSTATICIFY_FUZZERS=ON
fi
cmake --build "$FUZZ_DIR" --target staticify-archive-fuzzer
seeds="$FUZZ_DIR/seeds"
if [ ! -d "$seeds" ]; then
  mkdir -p "$seeds.tmp"
  /usr/bin/python3 test/fuzz/make_seeds.py "$seeds.tmp"
  mv "$seeds.tmp" "$seeds"
fi
corpus="$FUZZ_DIR/corpus"
mkdir -p "$corpus" "$FUZZ_DIR/crashes"
fuzzer="$FUZZ_DIR/bin/staticify-archive-fuzzer"
# ASan: libtorch is not instrumented, its allocations are not ours to judge.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:alloc_dealloc_mismatch=0}
common=(-rss_limit_mb=4096 -timeout=20 -max_len=262144
        -artifact_prefix="$FUZZ_DIR/crashes/")
case "${1:-smoke}" in
  smoke) exec "$fuzzer" "${common[@]}" -runs=3000 -seed=1 "$corpus" "$seeds" ;;
  run) shift; exec "$fuzzer" "${common[@]}" "$@" "$corpus" "$seeds" ;;
  *) echo "usage: scripts/fuzz.sh [smoke | run LIBFUZZER-ARGS...]" >&2; exit 2 ;;
esac
