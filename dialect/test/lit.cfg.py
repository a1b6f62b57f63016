# lit configuration for the staticify MLIR dialect's tests.
import os

import lit.formats

config.name = "staticify-dialect"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.staticify_bin_dir, "..", "test", "dialect")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in"]
config.environment["PATH"] = os.pathsep.join(
    [config.staticify_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
# MLIR's runner libraries (mlir-runner --shared-libs), for tests that run code.
config.substitutions.append(
    ("%mlir_lib_dir", os.path.join(config.llvm_tools_dir, "..", "lib")))
