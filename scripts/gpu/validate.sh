#!/usr/bin/env bash
# Run on the GPU machine (a PyTorch 2.x wheel with CUDA, nvcc, CMake and
# Ninja; no package registry), from the repository root, with .gpu/ carried
# in (scripts/gpu/bundle.sh makes it here):
#
#   scripts/gpu/validate.sh [build] [test] [gpu-tests] [bench] [detectors] [sync-sites]
#                                          (default: build test bench)
#
#  build  configures and builds build-gpu/ against the wheel's libtorch, CUDA
#         on, GoogleTest from .gpu/googletest; packs the binaries into
#         $OUT/gpu-build.tar.gz (a later call can carry them back in instead
#         of rebuilding: unpack to build-gpu/ and skip `build`).
#  test   lit + FileCheck, the GoogleTest units, the pytest suite (its GPU
#         tests run here), then the cross-version check of the models that
#         Debian's PyTorch scripted and the Debian build rewrote.
#  gpu-tests  only the pytest files whose tests need a GPU (a short check).
#  bench  bench/seed000.py --device cuda, results under $OUT/bench.
#  detectors  bench/detector_inference.py --device cuda: torchvision's
#         detectors scripted there, rewritten in process by the Python package
#         (the CLI cannot load pip torchvision's _C.so), GPU time per image
#         and host syncs per forward, into $OUT/detectors-cuda.json.
#  sync-sites  bench/sync_sites.py: which ops of a detector's forward
#         synchronize (torch.profiler), into $OUT/sync-sites.json.
#
# Logs and results go to $OUT (default gpu-out/); $OUT/summary.txt says what
# passed. Each stage runs under a time limit so the whole fits one call.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
ROOT=$PWD
TOOLS=$ROOT/.gpu
PY=$(command -v python3)
stages=${*:-build test bench}
summary=$OUT/summary.txt
note() { echo "$*" | tee -a "$summary"; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version(), "device", torch.cuda.get_device_name())'
  nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; g++ --version | head -1
  "$PY" --version; nproc
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [[ " $stages " == *" build "* ]]; then
  prefix=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if timeout 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CUDA_COMPILER="$nvcc" \
      -DTORCH_CUDA_ARCH_LIST=9.0 -DSTATICIFY_PYTHON="$PY" \
      -DLLVM_TOOLS_DIR="$TOOLS/bin" -DSTATICIFY_GTEST_SOURCE="$TOOLS/googletest" \
      -Dpybind11_DIR="$("$PY" -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null)" \
      >"$OUT/build.log" 2>&1; then
    note "configure: ok"
  else
    note "configure: FAILED (build.log)"
  fi
  start=$(date +%s)
  timeout ${BUILD_SECONDS:-420} ninja -C build-gpu -k 0 all staticify-unittests >>"$OUT/build.log" 2>&1 \
    && note "build: ok in $(( $(date +%s) - start )) s" \
    || note "build: FAILED after $(( $(date +%s) - start )) s (build.log)"
  grep -E "error|FAILED" "$OUT/build.log" | head -40
  grep -E "staticify runtime:|libstdc\+\+:" "$OUT/build.log"
  # One libstdc++ in the process: ours must be libtorch's shared one.
  readelf -d build-gpu/lib/libstaticify_runtime.so | grep -q 'libstdc++' \
    && note "libstdc++: shared" || note "libstdc++: STATIC in the runtime library (CMakeLists.txt)"
  tar -C build-gpu -czf "$OUT/gpu-build.tar.gz" bin lib 2>/dev/null
fi

if [[ " $stages " == *" test "* ]]; then
  export PATH=$TOOLS/bin:$PATH
  timeout 120 lit -sv build-gpu/test >"$OUT/test.log" 2>&1 \
    && note "lit: ok" || note "lit: FAILED"
  tail -4 "$OUT/test.log"
  timeout 120 build-gpu/bin/staticify-unittests --gtest_brief=1 >>"$OUT/test.log" 2>&1 \
    && note "gtest: ok" || note "gtest: FAILED"
  xdist=$("$PY" -c 'import xdist' 2>/dev/null && echo "-n 8")
  STATICIFY_BIN=$ROOT/build-gpu/bin timeout 480 "$PY" -m pytest -q -rfEs $xdist \
      -p no:cacheprovider test/e2e >>"$OUT/test.log" 2>&1 \
    && note "pytest: ok" || note "pytest: FAILED"
  grep -E "passed|failed|^FAILED|^ERROR|SKIPPED" "$OUT/test.log" | tail -40
  timeout 300 "$PY" test/e2e/cross_version.py check "$TOOLS/models" \
      >"$OUT/cross-version.log" 2>&1 \
    && note "cross-version: ok" || note "cross-version: FAILED"
  cat "$OUT/cross-version.log" | tail -25
fi

if [[ " $stages " == *" gpu-tests "* ]]; then
  STATICIFY_BIN=$ROOT/build-gpu/bin timeout ${GPU_TEST_SECONDS:-200} "$PY" -m pytest -q -rfEs \
      -p no:cacheprovider test/e2e/test_gpu.py test/e2e/test_runtime_ops.py \
      test/e2e/test_nms.py test/e2e/test_cuda_graphs.py test/e2e/test_hidden_reads.py \
      test/e2e/test_uploads.py >"$OUT/gpu-tests.log" 2>&1 \
    && note "gpu-tests: ok" || note "gpu-tests: FAILED"
  grep -E "passed|failed|^FAILED|^ERROR|SKIPPED" "$OUT/gpu-tests.log" | tail -20
fi

if [[ " $stages " == *" detectors "* ]]; then
  PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT/build-gpu/python timeout ${DETECTOR_SECONDS:-300} \
      "$PY" bench/detector_inference.py --device cuda --via api \
      --json "$OUT/detectors-cuda.json" ${DETECTOR_ARGS:-} 2>&1 | tee "$OUT/detectors.log" \
    | tail -30
  [ -f "$OUT/detectors-cuda.json" ] && note "detectors: ok" || note "detectors: FAILED"
fi

if [[ " $stages " == *" sync-sites "* ]]; then
  PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT/build-gpu/python timeout ${SITES_SECONDS:-200} \
      "$PY" bench/sync_sites.py --out "$OUT/sync-sites.json" ${SITES_ARGS:-} 2>&1 \
    | grep -v Warning | tail -40
  [ -f "$OUT/sync-sites.json" ] && note "sync-sites: ok" || note "sync-sites: FAILED"
fi

if [[ " $stages " == *" bench "* ]]; then
  PYTHONUNBUFFERED=1 timeout "${BENCH_SECONDS:-540}" "$PY" bench/seed000.py --device cuda \
      --bin build-gpu/bin --out "$OUT/bench" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" \
    | tail -60
  [ -f "$OUT/bench/sampler-cuda.json" ] && note "bench: ok" || note "bench: FAILED"
fi
cat "$summary"
