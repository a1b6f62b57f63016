#!/usr/bin/env bash
# Run on the GPU machine (a PyTorch 2.x wheel with CUDA, nvcc, CMake and
# Ninja; no package registry), from the repository root, with .gpu/ carried
# in (scripts/gpu/bundle.sh makes it here):
#
#   scripts/gpu/validate.sh [--dry-run] [build] [test] [gpu-tests] [lowered] [bench]
#                           [profile] [detectors] [sync-sites]   (default: build test bench)
#
#  --dry-run  rehearses here, on the CPU, before a GPU is lent: the stages run
#         with the Debian build (build/) instead of build-gpu/, PyTorch on the CPU
#         and small sizes, so a broken path or argument shows before a lease is
#         spent on it (`build` is skipped; nothing needs a GPU).
#
#  build  configures and builds build-gpu/ against the wheel's libtorch, CUDA
#         on, GoogleTest from .gpu/googletest (BUILD_TARGETS: the ninja targets,
#         default `all staticify-unittests`); with PACK_BUILD=1 packs the
#         binaries into $OUT/gpu-build.tar.gz (a later call can carry them back
#         in instead of rebuilding: unpack to build-gpu/ and skip `build`).
#  test   lit + FileCheck, the GoogleTest units, the pytest suite (its GPU
#         tests run here), then the cross-version check of the models that
#         Debian's PyTorch scripted and the Debian build rewrote.
#  gpu-tests  only the pytest files whose tests need a GPU (a short check).
#  lowered  test/e2e/test_lowered_carried.py: the kernels lowered here by the
#         Debian build (.gpu/lowered, scripts/gpu/lower_here.py via bundle.sh)
#         against their modules, no sync, a CUDA graph capture; log in
#         $OUT/lowered-tests.log.
#  bench  bench/seed000.py --device cuda (with the carried lowered sampler when
#         .gpu/lowered exists), results under $OUT/bench.
#  profile  bench/sampler_profile.py: the sampler's variants per op at N=1e6,
#         into $OUT/sampler-profile-cuda.json.
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
DRY=""
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; shift; fi
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
ROOT=$PWD
TOOLS=$ROOT/.gpu
LOWERED=$TOOLS/lowered
PY=$(command -v python3)
BUILD=$ROOT/build-gpu
DEVICE=cuda
if [[ -n "$DRY" ]]; then
  # Here: the Debian build and Python, the CPU, small sizes.
  PY=/usr/bin/python3 BUILD=$ROOT/build DEVICE=cpu
  export STATICIFY_DRY_RUN=1
  BENCH_ARGS=${BENCH_ARGS:-"--sizes 1e5 --batches 1 --seconds 0.2"}
  DETECTOR_ARGS=${DETECTOR_ARGS:-"--models fcos_resnet50_fpn --images 1 --reps 1"}
  PROFILE_ARGS=${PROFILE_ARGS:-"--size 1e5 --calls 3"}
fi
stages=${*:-build test bench}
summary=$OUT/summary.txt
note() { echo "$*" | tee -a "$summary"; }

{
  date -u
  git log -1 --format='commit %h %ad' --date=short 2>/dev/null
  [[ -n "$DRY" ]] && echo "dry run on the CPU (no GPU)" || nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version(),
"device", torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")'
  nvcc --version | tail -2
  cmake --version | head -1; echo "ninja $(ninja --version)"; g++ --version | head -1
  "$PY" --version; nproc
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if [[ " $stages " == *" build "* && -z "$DRY" ]]; then
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
  timeout ${BUILD_SECONDS:-420} ninja -C build-gpu -k 0 ${BUILD_TARGETS:-all staticify-unittests} \
      >>"$OUT/build.log" 2>&1 \
    && note "build: ok in $(( $(date +%s) - start )) s" \
    || note "build: FAILED after $(( $(date +%s) - start )) s (build.log)"
  grep -E "error|FAILED" "$OUT/build.log" | head -40
  grep -E "staticify runtime:|libstdc\+\+:" "$OUT/build.log"
  # One libstdc++ in the process: ours must be libtorch's shared one.
  readelf -d build-gpu/lib/libstaticify_runtime.so | grep -q 'libstdc++' \
    && note "libstdc++: shared" || note "libstdc++: STATIC in the runtime library (CMakeLists.txt)"
  [ -n "${PACK_BUILD:-}" ] && tar -C build-gpu -czf "$OUT/gpu-build.tar.gz" bin lib 2>/dev/null
fi

if [[ " $stages " == *" test "* ]]; then
  export PATH=$TOOLS/bin:$PATH
  timeout 120 lit -sv $BUILD/test >"$OUT/test.log" 2>&1 \
    && note "lit: ok" || note "lit: FAILED"
  tail -4 "$OUT/test.log"
  timeout 120 $BUILD/bin/staticify-unittests --gtest_brief=1 >>"$OUT/test.log" 2>&1 \
    && note "gtest: ok" || note "gtest: FAILED"
  xdist=$("$PY" -c 'import xdist' 2>/dev/null && echo "-n 8")
  STATICIFY_BIN=$BUILD/bin timeout 480 "$PY" -m pytest -q -rfEs $xdist \
      -p no:cacheprovider test/e2e >>"$OUT/test.log" 2>&1 \
    && note "pytest: ok" || note "pytest: FAILED"
  grep -E "passed|failed|^FAILED|^ERROR|SKIPPED" "$OUT/test.log" | tail -40
  timeout 300 "$PY" test/e2e/cross_version.py check "$TOOLS/models" \
      >"$OUT/cross-version.log" 2>&1 \
    && note "cross-version: ok" || note "cross-version: FAILED"
  cat "$OUT/cross-version.log" | tail -25
fi

if [[ " $stages " == *" gpu-tests "* ]]; then
  STATICIFY_BIN=$BUILD/bin timeout ${GPU_TEST_SECONDS:-200} "$PY" -m pytest -q -rfEs \
      -p no:cacheprovider test/e2e/test_gpu.py test/e2e/test_runtime_ops.py \
      test/e2e/test_nms.py test/e2e/test_cuda_graphs.py test/e2e/test_hidden_reads.py \
      test/e2e/test_uploads.py >"$OUT/gpu-tests.log" 2>&1 \
    && note "gpu-tests: ok" || note "gpu-tests: FAILED"
  grep -E "passed|failed|^FAILED|^ERROR|SKIPPED" "$OUT/gpu-tests.log" | tail -20
fi

if [[ " $stages " == *" lowered "* ]]; then
  if [ -d "$LOWERED" ]; then
    STATICIFY_BIN=$BUILD/bin STATICIFY_CARRIED_LOWERED=$LOWERED \
        timeout ${LOWERED_SECONDS:-150} "$PY" -m pytest -v -rfEs -p no:cacheprovider \
        test/e2e/test_lowered_carried.py >"$OUT/lowered-tests.log" 2>&1 \
      && note "lowered: ok" || note "lowered: FAILED"
    grep -E "passed|failed|^FAILED|^ERROR|SKIPPED" "$OUT/lowered-tests.log" | tail -20
  else
    note "lowered: FAILED ($LOWERED missing: run scripts/gpu/bundle.sh here)"
  fi
fi

carried=""
[ -d "$LOWERED" ] && carried="--lowered $LOWERED"

if [[ " $stages " == *" bench "* ]]; then
  PYTHONUNBUFFERED=1 timeout "${BENCH_SECONDS:-540}" "$PY" bench/seed000.py --device $DEVICE \
      --bin $BUILD/bin --out "$OUT/bench" $carried ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" \
    | tail -60
  ls "$OUT"/bench/sampler-*.json >/dev/null 2>&1 && note "bench: ok" || note "bench: FAILED"
fi

if [[ " $stages " == *" profile "* ]]; then
  PYTHONUNBUFFERED=1 timeout "${PROFILE_SECONDS:-90}" "$PY" bench/sampler_profile.py \
      --device $DEVICE --bin $BUILD/bin $carried --json "$OUT/sampler-profile-$DEVICE.json" \
      ${PROFILE_ARGS:---size 1e6} >"$OUT/profile.log" 2>&1
  tail -45 "$OUT/profile.log"
  [ -f "$OUT/sampler-profile-$DEVICE.json" ] && note "profile: ok" || note "profile: FAILED"
fi
if [[ " $stages " == *" detectors "* ]]; then
  PYTHONUNBUFFERED=1 PYTHONPATH=$BUILD/python timeout ${DETECTOR_SECONDS:-300} \
      "$PY" bench/detector_inference.py --device $DEVICE --via api \
      --json "$OUT/detectors-$DEVICE.json" ${DETECTOR_ARGS:-} 2>&1 | tee "$OUT/detectors.log" \
    | tail -30
  [ -f "$OUT/detectors-$DEVICE.json" ] && note "detectors: ok" || note "detectors: FAILED"
fi

if [[ " $stages " == *" sync-sites "* ]]; then
  PYTHONUNBUFFERED=1 PYTHONPATH=$BUILD/python timeout ${SITES_SECONDS:-200} \
      "$PY" bench/sync_sites.py --out "$OUT/sync-sites.json" ${SITES_ARGS:-} 2>&1 \
    | grep -v Warning | tail -40
  [ -f "$OUT/sync-sites.json" ] && note "sync-sites: ok" || note "sync-sites: FAILED"
fi

cat "$summary"
