"""Fixtures for the end-to-end tests: the real staticify binary on real
TorchScript modules scripted here by PyTorch."""
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The slow tier: `STATICIFY_TESTS=all` runs every detector and the heavy
# real-code entries; without it the suite keeps a representative of each
# (under 25 minutes on two cores with the build).
FULL = os.environ.get("STATICIFY_TESTS") == "all"
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def _bin_dir():
    return pathlib.Path(os.environ.get("STATICIFY_BIN", ROOT / "build" / "bin"))


# The Python package of the same build (python/staticify, built into
# build/python), ahead of any installed one.
sys.path.insert(0, str(_bin_dir().resolve().parent / "python"))

# The runtime library the --cuda-graphs outputs and the staticify:: ops need.
RUNTIME = _bin_dir().resolve().parent / "lib" / "libstaticify_runtime.so"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "xdist_group(name): tests that share module state, run in one "
        "pytest-xdist worker (--dist loadgroup)")


class Staticify:
    """Runs the staticify binary and reads what it wrote."""

    def __init__(self, path):
        self.path = path

    def __call__(self, *args, check=True):
        proc = subprocess.run([str(self.path), *map(str, args)],
                              capture_output=True, text=True, timeout=300)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"staticify {' '.join(map(str, args))} exited {proc.returncode}:\n"
                f"{proc.stderr}")
        return proc

    def report(self, model_path, *args):
        """The JSON report of analysing model_path."""
        out = pathlib.Path(str(model_path) + ".report.json")
        self(model_path, "--report-json", out, *args)
        return json.loads(out.read_text())

    def rewritten(self, model_path, out, *args):
        """model_path staticified to out with args: its first method's
        report, the original loaded and the output loaded."""
        self(model_path, "-o", out, *args)
        method = self.report(model_path, *args)["methods"][0]
        return method, torch.jit.load(str(model_path)), torch.jit.load(str(out))


class InProcess(Staticify):
    """The same command run in this process: `staticify.run`, the binary's
    driver (tools/Driver.cpp) through the Python extension of the same
    build, whose files are the binary's byte for byte
    (test_python_api.py). No process start and libtorch load per call
    (0.8 s of a small model's 0.85): for the suites that run the command on
    hundreds of programs (spellings, the op matrix, the idiom corpus, grad
    mode, the corpus-wide sync check), whose subject is the engine, not the
    command line."""

    def __call__(self, *args, check=True):
        try:
            import staticify as api  # build/python, first on sys.path above
        except ImportError:  # a build without the Python extension
            return super().__call__(*args, check=check)
        argv = [str(a) for a in args]
        status, out, err = api.run(argv)
        proc = subprocess.CompletedProcess([str(self.path), *argv], status, out, err)
        if check and status != 0:
            raise AssertionError(f"staticify {' '.join(argv)} exited {status}:\n{err}")
        return proc


@pytest.fixture(scope="session")
def staticify():
    path = _bin_dir() / "staticify"
    if not path.exists():
        pytest.fail(f"{path} is missing: build first (see README)")
    return Staticify(path)


@pytest.fixture(scope="session")
def staticify_in_process(staticify):
    return InProcess(staticify.path)


@pytest.fixture
def save(tmp_path):
    """Scripts a module (or takes a ScriptModule) and saves it under tmp_path."""

    def _save(module, name="model.pt", extra_files=None):
        scripted = module if isinstance(module, torch.jit.ScriptModule) \
            else torch.jit.script(module)
        path = tmp_path / name
        scripted.save(str(path), _extra_files=extra_files or {})
        return path

    return _save


def findings(report, method="forward"):
    for m in report["methods"]:
        if m["name"] == method:
            return m["findings"]
    raise KeyError(method)


def left_reasons(method):
    """Why each root sync point of a method's report (one entry of its
    "methods") is left: the reasons of those kept or introduced."""
    return [f.get("reason") or "" for f in method["findings"]
            if f["role"] == "root" and f["action"] in ("kept", "introduced")]


def sync_points(report, method="forward"):
    """Root sync points (before, after): before, those the original has;
    after, those kept or introduced by a rewrite."""
    roots = [f for f in findings(report, method) if f["role"] == "root"]
    before = sum(1 for f in roots if f["action"] != "introduced")
    after = sum(1 for f in roots if f["action"] in ("kept", "introduced"))
    return before, after


def lines_of(source_file, *snippets):
    """1-based line numbers of the lines of source_file containing each
    snippet (each must occur exactly once)."""
    text = pathlib.Path(source_file).read_text().splitlines()
    result = []
    for snippet in snippets:
        hits = [i + 1 for i, line in enumerate(text) if snippet in line]
        assert len(hits) == 1, (snippet, hits)
        result.append(hits[0])
    return result


def archive_names(path):
    with zipfile.ZipFile(path) as z:
        return z.namelist()


@pytest.fixture(scope="session")
def torchvision_library(staticify, tmp_path_factory):
    """torchvision's op library, as --load-library takes it. A pip wheel's
    _C.so is a Python extension (it needs libtorch_python.so) that loads only
    inside Python: there the tests that need it are skipped, with
    staticify's own message as the reason."""
    torchvision = pytest.importorskip("torchvision")
    lib = next(pathlib.Path(torchvision.__file__).parent.glob("_C*.so"))
    path = tmp_path_factory.mktemp("tv") / "identity.pt"
    torch.jit.script(torch.nn.Identity()).save(str(path))
    proc = staticify(path, "--report", "--load-library", lib, check=False)
    if proc.returncode != 0:
        if "Python extension module" in proc.stderr:
            pytest.skip(proc.stderr.strip())
        pytest.fail(proc.stderr)
    return lib
