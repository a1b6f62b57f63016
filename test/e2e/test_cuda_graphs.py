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


class TinyLM(torch.nn.Module):
    """A small language model as a new user brings one: embeddings, a
    layer with dropout, logits, and the loss of the non-pad tokens."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.fc = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.drop = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, tokens: torch.Tensor):
        h = self.drop(self.norm(torch.relu(self.fc(self.emb(tokens)))))
        logits = self.head(h)
        keep = tokens != 0
        loss = torch.nn.functional.cross_entropy(logits[keep], tokens[keep])
        return logits, loss


def test_a_model_with_weights_gets_its_region_runners(staticify, save, tmp_path):
    """The regions that read parameters run through RegionRunner (the
    parameters passed as inputs), each region's outcome is reported, and the
    CPU fallback equals the original: in evaluation, with gradients (equal
    gradients), and after .train() (dropout's flag, compiled in, no longer
    holds: the region's method runs as it was; equal under one seed)."""
    torch.manual_seed(0)
    path = save(TinyLM().eval())
    out = tmp_path / "graphed.pt"
    proc = staticify(path, "-o", out, "--cuda-graphs")
    graphed = [line for line in proc.stderr.splitlines() if "RegionRunner" in line]
    assert graphed, proc.stderr
    assert "is not graphed" not in proc.stderr, proc.stderr
    torch.ops.load_library(str(RUNTIME))
    original, model = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert "_staticify_region_" in model.code and ".run(" in model.code
    gen = torch.Generator().manual_seed(1)
    for n in [1, 5, 40]:
        tokens = torch.randint(0, 50, (2, n), generator=gen)
        tokens[0, 0] = 0
        with torch.no_grad():
            for a, b in zip(model(tokens), original(tokens)):
                torch.testing.assert_close(a, b)
    tokens = torch.randint(1, 50, (3, 7), generator=gen)
    got, expected = model(tokens)[1], original(tokens)[1]
    got.backward()
    expected.backward()
    torch.testing.assert_close(model.fc.weight.grad, original.fc.weight.grad)
    model.train()
    original.train()
    torch.manual_seed(3)
    expected = original(tokens)
    torch.manual_seed(3)
    got = model(tokens)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


class ListScaled(torch.nn.Module):
    """Reads a list attribute in a static region: not graphed, and said."""

    def __init__(self):
        super().__init__()
        self.scales = [2.0, 3.0]

    def forward(self, x: torch.Tensor):
        y = (x * self.scales[0] + self.scales[1]).relu().cumsum(0)
        return y[y > 1].sum() + y.mean()


def test_a_region_that_is_not_graphed_is_reported(staticify, save, tmp_path):
    path = save(ListScaled())
    out = tmp_path / "graphed.pt"
    proc = staticify(path, "-o", out, "--cuda-graphs")
    assert "is not graphed: the method reads attribute 'scales' (float[])" in proc.stderr, \
        proc.stderr
    torch.ops.load_library(str(RUNTIME))
    x = torch.randn(100, generator=torch.Generator().manual_seed(0))
    # A masked sum against the selection's: equal up to summation order
    # (docs/passes.md's contract), not bit for bit.
    torch.testing.assert_close(torch.jit.load(str(out))(x), torch.jit.load(str(path))(x))
