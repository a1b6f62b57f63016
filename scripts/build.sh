#!/usr/bin/env bash
# Installs the dependencies (scripts/setup.sh), then configures and builds
# staticify into build/ with Ninja and ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTATICIFY_REQUIRE_MLIR=ON
fi
cmake --build "$BUILD_DIR"

# `import staticify` for /usr/bin/python3: a .pth file naming the built package
# (build/python). In a virtual environment, write the same line into its
# site-packages instead (docs/python.md).
if [ -d "$BUILD_DIR/python/staticify" ]; then
  site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
  line=$(cd "$BUILD_DIR/python" && pwd)
  if [ "$(cat "$site/staticify.pth" 2>/dev/null)" != "$line" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO mkdir -p "$site"
    echo "$line" | $SUDO tee "$site/staticify.pth" >/dev/null
    echo "build: /usr/bin/python3 imports staticify from $line ($site/staticify.pth)"
  fi
fi
