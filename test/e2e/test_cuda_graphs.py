"""`--cuda-graphs`: the static regions run through the runtime library's
RegionRunner. Here (no GPU) the CPU fallback path: the output loads with the
library, runs the sampler correctly, and fails clearly without it."""
import subprocess
import sys

import torch

import sampler
from conftest import RUNTIME



def test_sampler_with_cuda_graphs_runs_on_cpu_through_the_runtime(staticify, save, tmp_path):
    path = save(sampler.BalancedSampler())
    out = tmp_path / "graphed.pt"
    proc = staticify(path, "-o", out, "--cuda-graphs")
    assert "runs through staticify::RegionRunner" in proc.stderr
    torch.ops.load_library(str(RUNTIME))
    model = torch.jit.load(str(out))
    assert "_staticify_region_1" in model.code and ".run(" in model.code
    x = torch.arange(4000.0).unsqueeze(1).repeat(1, 16)
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        labels = (torch.rand(4000, generator=gen) < 0.3).long()
        rows, out_labels = model(x, labels)
        ids = rows[:, 0].long()
        assert rows.shape == (1000, 16) and torch.equal(rows, x[ids])
        assert torch.equal(out_labels, labels[ids]) and ids.unique().numel() == 1000
        assert int(out_labels.sum()) == 500


def test_missing_runtime_library_is_a_clear_error(staticify, save, tmp_path):
    path = save(sampler.BalancedSampler())
    out = tmp_path / "graphed.pt"
    staticify(path, "-o", out, "--cuda-graphs")
    # A fresh interpreter, without the library: PyTorch names the class.
    proc = subprocess.run([sys.executable, "-c", f"import torch; torch.jit.load({str(out)!r})"],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "staticify.RegionRunner" in proc.stderr
    # staticify itself, pointed at a missing library: one line, no output.
    bad = tmp_path / "bad.pt"
    proc = staticify(path, "-o", bad, "--cuda-graphs", "--runtime", tmp_path / "none.so",
                     check=False)
    assert proc.returncode == 1 and not bad.exists()
    assert proc.stderr.count("\n") == 1 and "--runtime PATH" in proc.stderr
    # staticify on the graphed output without the library names the class
    # and the remedy, and with it reads the output.
    again = tmp_path / "again.pt"
    proc = staticify(out, "-o", again, check=False)
    assert proc.returncode == 1 and not again.exists()
    assert proc.stderr == (f"staticify: error: '{out}' uses the custom class "
                           "'staticify.RegionRunner', which no loaded library registers; "
                           "load the library that registers it with --load-library PATH "
                           "(for staticify's own classes: libstaticify_runtime.so)\n")
    staticify(out, "-o", again, "--load-library", RUNTIME)
    assert again.exists()


def test_default_output_needs_no_runtime(staticify, save, tmp_path):
    path = save(sampler.BalancedSampler())
    out = tmp_path / "plain.pt"
    staticify(path, "-o", out)
    proc = subprocess.run([sys.executable, "-c",
                           f"import torch; m = torch.jit.load({str(out)!r}); "
                           "print(m(torch.randn(3000, 16), torch.randint(0, 2, (3000,)))[0].shape)"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "torch.Size([1000, 16])" in proc.stdout
