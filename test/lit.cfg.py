# lit configuration for staticify's pass and analysis tests.
import os

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
