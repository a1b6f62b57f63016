"""What a run writes and which archives it takes (issue 45): duplicate zip
records are refused; records libtorch never reads (another top folder, a
mobile bytecode.pkl) and genuine exports that compress well are accepted; a
signal ends the worker with the command, so no output appears later; and a
failed final rename leaves none of the outputs, the files they replaced
restored."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import zipfile

import pytest
import torch

import models
from conftest import sync_points
from test_bad_input import assert_clean_failure


class Weighted(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(float(n)))

    def forward(self, x):
        return x + self.w.sum()


def copy_archive(src, dst, add=()):
    """dst: every record of src, then the (name, bytes) pairs of add."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as w:
        for info in z.infolist():
            w.writestr(info.filename, z.read(info.filename), compress_type=info.compress_type)
        for name, data in add:
            w.writestr(name, data)
    return dst


def top_folder(path):
    with zipfile.ZipFile(path) as z:
        return z.namelist()[0].split("/")[0]


def run(staticify, model, tmp_path, *extra):
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    proc = staticify(model, "-o", out, "--report-json", report, *extra, check=False)
    return proc, out, report


@pytest.mark.parametrize("elements", [25, 4 << 20])
def test_duplicate_records_are_refused(staticify, save, tmp_path, elements):
    """libtorch's binary search may read either of two records of one name;
    the guard checked the first. A second, 4-byte data/0 used to give an
    output holding staticify's heap (and a crash at 16 MiB)."""
    model = save(Weighted(elements))
    data = f"{top_folder(model)}/data/0"
    hostile = copy_archive(model, tmp_path / "dup.pt", [(data, b"\0" * 4)])
    proc, out, report = run(staticify, hostile, tmp_path)
    assert_clean_failure(proc, tmp_path, "appears twice", out)
    assert "internal error" not in proc.stderr
    assert not report.exists()


def test_names_differing_in_case_are_duplicates(staticify, save, tmp_path):
    model = save(Weighted(25))
    name = f"{top_folder(model)}/DATA/0"
    hostile = copy_archive(model, tmp_path / "dup.pt", [(name, b"\0" * 4)])
    proc, out, _ = run(staticify, hostile, tmp_path)
    assert_clean_failure(proc, tmp_path, "appears twice", out)


def _import_source(tmp_path, name, text):
    """The module `name` made of text (TorchScript needs a source file)."""
    (tmp_path / f"{name}.py").write_text(text)
    sys.path.insert(0, str(tmp_path))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(tmp_path))


def _same_outputs(original, out, x):
    assert torch.equal(torch.jit.load(str(out))(x), torch.jit.load(str(original))(x))


@pytest.mark.parametrize("name,data", [
    ("other/code/__torch__.py.debug_pkl", b"garbage"),  # another top folder
    ("{top}/bytecode.pkl", b"garbage"),                  # the mobile format's
    ("{top}/extra/notes.pkl", b"not a pickle"),          # an extra file
])
def test_records_libtorch_never_reads_are_not_refused(staticify, save, tmp_path, name, data):
    model = save(Weighted(25))
    odd = copy_archive(model, tmp_path / "odd.pt",
                       [(name.format(top=top_folder(model)), data)])
    torch.jit.load(str(odd))  # torch reads it
    proc, out, _ = run(staticify, odd, tmp_path)
    assert proc.returncode == 0, proc.stderr
    _same_outputs(odd, out, torch.randn(25))


class ParameterTables(torch.nn.Module):
    """Parameters held in an nn.ParameterList, whose class torch.jit.save
    writes with an untyped `__annotations__ = []` (torchrec-style tables)."""

    def __init__(self):
        super().__init__()
        self.tables = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(25)) for _ in range(2)])

    def forward(self, x):
        for t in self.tables:
            x = x + t
        return x[x > 0].sum()


def test_a_parameter_list_module_is_taken(staticify, save, tmp_path):
    model = save(ParameterTables().eval())
    proc, out, report = run(staticify, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    for seed in range(3):
        x = torch.randn(25, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(torch.jit.load(str(out))(x),
                                   torch.jit.load(str(model))(x))
    assert sync_points(json.loads(report.read_text())) == (1, 0)


def test_a_long_constant_list_is_not_a_zip_bomb(staticify, tmp_path):
    """torch.jit.save deflates code: a literal list of 6,000 zeros inflates
    150 times (208 -> 18 KB), which the ratio refused with no size floor."""
    zeros_src = _import_source(tmp_path, "zeros_src", (
        "import torch\n\n\ndef f(x):\n    return x + torch.tensor(["
        + ", ".join(["0"] * 6000) + "]).sum()\n"))

    class Zeros(torch.nn.Module):
        def forward(self, x):
            return zeros_src.f(x)

    model = tmp_path / "zeros.pt"
    torch.jit.script(Zeros()).save(str(model))
    with zipfile.ZipFile(model) as z:
        assert max(i.file_size / max(i.compress_size, 1) for i in z.infolist()) > 64
    proc, out, _ = run(staticify, model, tmp_path)
    assert proc.returncode == 0, proc.stderr
    _same_outputs(model, out, torch.randn(3))


def _long_model(tmp_path):
    """A program whose run takes seconds: 1,500 ops on a selection."""
    body = "".join(f"        y = torch.where(y > {i % 7}.0, y * 1.5, y - 0.25)\n"
                   for i in range(1500))
    module = _import_source(tmp_path, "long_src", (
        "import torch\n\n\nclass Long(torch.nn.Module):\n"
        "    def forward(self, x, m):\n        y = x[m]\n" + body + "        return y.sum()\n"))
    path = tmp_path / "long.pt"
    torch.jit.script(module.Long()).save(str(path))
    return path


def test_no_output_after_a_signal(staticify, tmp_path):
    """kill -TERM at five points of a run of about 2 s: the command ends with
    the signal's status only after its worker has, and nothing appears
    afterwards (the worker used to write -o and the report seconds later)."""
    model = _long_model(tmp_path)
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    args = [str(staticify.path), str(model), "-o", str(out), "--report-json", str(report)]
    start = time.monotonic()
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    full = time.monotonic() - start
    out.unlink()
    report.unlink()
    for fraction in (0.02, 0.2, 0.5, 0.8, 0.95):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(full * fraction)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        ended = {p.name for p in tmp_path.iterdir()}
        time.sleep(min(full, 3.0) + 0.5)
        later = {p.name for p in tmp_path.iterdir()}
        assert later == ended, (fraction, ended, later)
        assert not any(".tmp." in name for name in later), later
        if proc.returncode == 0:  # it finished before the signal: both written
            assert {"out.pt", "report.json"} <= later
            out.unlink()
            report.unlink()
        else:
            assert proc.returncode == -signal.SIGTERM, proc.returncode
            assert not ({"out.pt", "report.json"} & later), later


FAIL_RENAME = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
int rename(const char *from, const char *to) {
  const char *target = getenv("FAIL_RENAME_TO");
  size_t n = target ? strlen(target) : 0, m = strlen(to);
  if (n && m >= n && strcmp(to + m - n, target) == 0) {
    errno = EACCES;
    return -1;
  }
  int (*real)(const char *, const char *) =
      (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  return real(from, to);
}
"""


@pytest.fixture(scope="module")
def fail_rename(tmp_path_factory):
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(FAIL_RENAME)
    lib = d / "fail_rename.so"
    try:
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(d / "shim.c"), "-ldl"],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"no C compiler for the rename shim: {e}")
    return lib


@pytest.mark.parametrize("failing", ["out.pt", "report.json"])
def test_a_failed_rename_leaves_no_output(staticify, save, tmp_path, fail_rename, failing):
    """The final renames are one step: whichever fails, the outputs renamed
    before it are rolled back (a file they replaced comes back) and the
    message names the path."""
    model = save(models.Seed002Example2())
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    report.write_text("the previous report")
    env = dict(os.environ, LD_PRELOAD=str(fail_rename), FAIL_RENAME_TO=failing)
    proc = subprocess.run([str(staticify.path), str(model), "-o", str(out),
                           "--report-json", str(report)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert_clean_failure(proc, tmp_path, f"cannot write '{tmp_path / failing}'", out)
    assert "nothing was written" in proc.stderr
    assert report.read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt", "report.json"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root renames over another user's file")
def test_a_sticky_directory_refusal_names_the_file(staticify, save, tmp_path):
    """-o names a file another user owns in a sticky directory (/tmp's
    kind): rename(2) is refused there, and nothing else is written."""
    sticky = pathlib.Path("/tmp")
    others = [p for p in sticky.iterdir()
              if p.is_file() and not p.is_symlink() and p.stat().st_uid != os.geteuid()]
    if not others:
        pytest.skip("no file of another user in /tmp")
    model = save(models.Seed002Example2())
    report = tmp_path / "report.json"
    proc = staticify(model, "-o", others[0], "--report-json", report, check=False)
    assert proc.returncode == 1
    assert str(others[0]) in proc.stderr
    assert not report.exists()
