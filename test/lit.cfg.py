# lit configuration for staticify's pass and analysis tests.
import os
import subprocess

import lit.formats

config.name = "staticify"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".ir"]
config.test_source_root = os.path.join(os.path.dirname(__file__), "lit")
config.test_exec_root = os.path.join(config.staticify_bin_dir, "..", "test", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.staticify_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
# Captured names must not leak between CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
config.substitutions.append(("%python", config.python))

# torchvision's ops, where staticify-opt can load them (Debian's build can; a
# pip wheel's _C.so is a Python extension that loads only inside Python):
# tests of rules on torchvision::nms say `REQUIRES: torchvision`.
if config.torchvision_ops and subprocess.run(
        [os.path.join(config.staticify_bin_dir, "staticify-opt"), "--load-library",
         config.torchvision_ops, "--help"], capture_output=True).returncode == 0:
    config.available_features.add("torchvision")
    config.substitutions.append(("%torchvision_ops", config.torchvision_ops))

# The runtime library (its kernels, for rules that emit them with
# --runtime-ops): built with the tools, always there.
config.substitutions.append(("%runtime_library", config.runtime_library))

# The bridge's tests (staticify-opt --emit-mlir) need a build with MLIR.
if config.have_mlir in ("1", "ON", "TRUE", "True"):
    config.available_features.add("mlir")
