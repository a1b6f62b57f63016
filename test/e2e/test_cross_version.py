"""cross_version.py, both halves under this PyTorch: the script the GPU
machine runs on models written here must itself work (and fail when a
rewritten model is wrong)."""
import os
import pathlib
import subprocess
import sys

import torch

from test_bounded import EXACT_CASES

SCRIPT = pathlib.Path(__file__).resolve().parent / "cross_version.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def test_write_then_check(staticify, tmp_path):
    bin_dir = staticify.path.parent
    assert run("write", tmp_path, "--bin", bin_dir).returncode == 0
    proc = run("check", tmp_path, "--devices", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    models = 1 + len(EXACT_CASES)  # the sampler and the exact models
    assert proc.stdout.count("ok  ") == models and f"{models} models, 0 failure(s)" in proc.stdout


def test_check_catches_a_wrong_model(staticify, tmp_path):
    bin_dir = staticify.path.parent
    assert run("write", tmp_path, "--bin", bin_dir).returncode == 0
    # Swap in a model that computes something else under the same name.
    wrong = torch.jit.script(torch.nn.Identity())
    wrong.save(str(tmp_path / "unique-values" / "static.pt"))
    proc = run("check", tmp_path, "--devices", "cpu")
    assert proc.returncode == 1
    assert "FAIL unique-values" in proc.stdout and "1 failure(s)" in proc.stdout
    assert os.path.exists(tmp_path / "sampler" / "static.pt")
