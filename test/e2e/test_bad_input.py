"""Every bad input: a one-line message naming problem and fix, exit code 1,
no output file, the input untouched."""
import os
import pathlib
import shutil
import subprocess

import pytest
import torch

import models


def assert_clean_failure(proc, tmp_path, message, out=None):
    assert proc.returncode == 1, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("staticify: error: "), lines[0]
    assert message in lines[0], lines[0]
    assert "Exception raised from" not in proc.stderr and "Traceback" not in proc.stderr
    if out is not None:
        assert not pathlib.Path(out).exists()
        leftovers = [p.name for p in pathlib.Path(out).parent.glob("*.tmp.*")]
        assert leftovers == []


@pytest.fixture
def good_model(save):
    return save(models.Seed002Example2())


def test_missing_file(staticify, tmp_path):
    out = tmp_path / "out.pt"
    proc = staticify(tmp_path / "nope.pt", "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "cannot open", out)
    assert "No such file or directory; check the path" in proc.stderr


def test_directory_is_not_a_file(staticify, tmp_path):
    out = tmp_path / "out.pt"
    proc = staticify(tmp_path, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "is a directory; give the path of a TorchScript .pt file", out)


def test_unreadable_file(staticify, good_model, tmp_path):
    """A file without read permission. Root reads anything, so as root the
    binary runs as `nobody` (setpriv), in a directory nobody can enter."""
    import tempfile
    work = pathlib.Path(tempfile.mkdtemp())
    work.chmod(0o777)
    model = work / "model.pt"
    shutil.copy(good_model, model)
    model.chmod(0)
    out = work / "out.pt"
    args = [staticify.path, model, "-o", out]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv")
        args = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + args
    import subprocess
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert_clean_failure(proc, work, "cannot read", out)
    assert "Permission denied; check its permissions" in proc.stderr
    shutil.rmtree(work)


def test_not_a_zip(staticify, tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_text("def forward(x): return x\n")
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "is not a TorchScript archive (not a zip file); "
                         "export it with torch.jit.script(model).save(path)", out)


def test_legacy_pickle(staticify, tmp_path):
    bad = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, str(bad), _use_new_zipfile_serialization=False)
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "(a legacy torch.save pickle)", out)


def test_truncated_zip(staticify, good_model, tmp_path):
    data = good_model.read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out.pt"
    proc = staticify(cut, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "is truncated or corrupt", out)


def test_zip_that_is_not_torchscript(staticify, tmp_path):
    bad = tmp_path / "weights.pt"
    torch.save(models.SmallCNN().state_dict(), str(bad))
    out = tmp_path / "out.pt"
    proc = staticify(bad, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "is a zip archive but not a TorchScript module "
                         "(it looks like a torch.save checkpoint)", out)


def test_unknown_method(staticify, good_model, tmp_path):
    out = tmp_path / "out.pt"
    proc = staticify(good_model, "--method", "sample", "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "has no method 'sample'; its methods are: forward", out)


def test_unknown_custom_op_suggests_load_library(staticify, save, tmp_path):
    torchvision = pytest.importorskip("torchvision")

    class Detector(torch.nn.Module):
        def forward(self, boxes: torch.Tensor, scores: torch.Tensor):
            return torchvision.ops.nms(boxes, scores, 0.5)

    path = save(Detector())
    out = tmp_path / "out.pt"
    proc = staticify(path, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "uses the unknown custom op 'torchvision::nms'; "
                         "load torchvision's _C.so with --load-library PATH", out)


def test_bad_load_library(staticify, good_model, tmp_path):
    out = tmp_path / "out.pt"
    proc = staticify(good_model, "--load-library", tmp_path / "libnope.so", "-o", out,
                     check=False)
    assert_clean_failure(proc, tmp_path, "cannot load library", out)
    assert "check the path given to --load-library" in proc.stderr


def test_python_extension_load_library(staticify, good_model, tmp_path):
    """A pip wheel's op library (torchvision/_C.so) needs libtorch_python.so,
    so it loads only inside Python: the message says so and names the fix.
    Built here as a library that needs a libtorch_python.so that is gone."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "python.c").write_text("int python_symbol(void) { return 1; }\n")
    (tmp_path / "ext.c").write_text("int python_symbol(void);\n"
                                    "int ext(void) { return python_symbol(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", tmp_path / "libtorch_python.so",
                    tmp_path / "python.c"], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-o", tmp_path / "_C.so", tmp_path / "ext.c",
                    "-L", tmp_path, "-ltorch_python"], check=True)
    (tmp_path / "libtorch_python.so").unlink()
    out = tmp_path / "out.pt"
    proc = staticify(good_model, "--load-library", tmp_path / "_C.so", "-o", out,
                     check=False)
    assert_clean_failure(proc, tmp_path, "libtorch_python.so", out)
    assert "is a Python extension module, which loads only inside Python; give " \
           "--load-library a C++ build of the ops" in proc.stderr


def test_output_in_missing_directory(staticify, good_model, tmp_path):
    out = tmp_path / "no" / "such" / "out.pt"
    proc = staticify(good_model, "-o", out, check=False)
    assert_clean_failure(proc, tmp_path, "does not exist; create it first", out)


def test_never_overwrites_the_input(staticify, good_model, tmp_path):
    before = good_model.read_bytes()
    alias = tmp_path / "alias.pt"
    os.link(good_model, alias)  # the same file under another name
    for target in (good_model, alias):
        proc = staticify(good_model, "-o", target, check=False)
        assert_clean_failure(proc, tmp_path, "refusing to overwrite the input")
    assert good_model.read_bytes() == before


def test_bad_command_lines_exit_2(staticify, good_model):
    for args in (["--frobnicate"], [], [good_model, good_model], [good_model, "-o"]):
        proc = staticify(*args, check=False)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("staticify: error: ") and \
            proc.stderr.strip().endswith("see 'staticify --help'"), proc.stderr
