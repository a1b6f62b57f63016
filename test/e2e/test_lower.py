"""`--lower=cpu`: a rewritten method compiled through MLIR and LLVM into a CPU
kernel, kept in the output with the method's TorchScript. Each test runs the
real binary on a real model and compares the output's numbers with the
original's, on inputs whose masks keep nothing, everything and some."""
import json
from typing import Final, List, Optional

import pytest
import torch

import models
from conftest import RUNTIME

torch.ops.load_library(str(RUNTIME))


class MaskedTokenMean(torch.nn.Module):
    """Hugging Face style: the mean of per-token losses over the tokens the
    attention mask keeps, per sequence (batch, seq) and overall, with the
    boolean-indexed form the rewrite turns static."""

    def forward(self, losses: torch.Tensor, attention_mask: torch.Tensor):
        keep = attention_mask != 0
        per_sequence = (losses * keep.float()).sum(dim=1, keepdim=True) / \
            keep.float().sum(dim=1, keepdim=True).clamp_min(1.0)
        overall = losses[keep].sum() / keep.sum().clamp(min=1)
        return per_sequence, overall


class RankScores(torch.nn.Module):
    """An op the bridge does not take yet (argsort, as torchmetrics ranks
    predictions for its retrieval metrics)."""

    def forward(self, scores: torch.Tensor):
        return torch.argsort(scores * (scores > 0), dim=0)


def lower(staticify, path, out, types, *extra):
    report = out.with_suffix(".json")
    proc = staticify(path, "-o", out, "--lower=cpu", "--input-types", types,
                     "--report-json", report, *extra)
    return proc, json.loads(report.read_text())["methods"][0]["lowering"]


def counts(model):
    """Calls the kernel answered, and calls that ran the TorchScript."""
    return model._staticify_lowered_forward.counts()[:2]


def masks(n, gen):
    """Masks of n elements that keep nothing, everything, and about half."""
    return [torch.zeros(n, dtype=torch.bool), torch.ones(n, dtype=torch.bool),
            torch.rand(n, generator=gen) < 0.5]


@pytest.mark.parametrize("n", [0, 1, 7, 4096])
def test_seed002_example1_lowered_equals_original(staticify, save, tmp_path, n):
    path = save(models.Seed002Example1())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?], i64[?]")
    assert lowering == {"target": "cpu", "inputs": "f32[?], i64[?]", "lowered": True,
                        "reason": None, "kernel_bytes": lowering["kernel_bytes"]}
    assert lowering["kernel_bytes"] > 0
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(n)
    for keep in masks(n, gen):
        loss = torch.randn(n, generator=gen)
        targets = torch.where(keep, torch.randint(1, 9, (n,), generator=gen), 0)
        expected, got = original(loss, targets), lowered(loss, targets)
        # The kernel sums in order; PyTorch vectorizes: float tolerance.
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4 * max(1, n) ** 0.5)
    assert counts(lowered) == [3, 0]


def test_seed002_example2_lowered_equals_original(staticify, save, tmp_path):
    path = save(models.Seed002Example2())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?], f32[?], i64[?]")
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    calls = 0
    for n in [0, 1, 5, 1000]:
        for keep in masks(n, gen):
            a, b = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
            c = torch.where(keep, 3, -1)
            torch.testing.assert_close(lowered(a, b, c), original(a, b, c),
                                       rtol=1e-5, atol=1e-4)
            calls += 1
    assert counts(lowered) == [calls, 0]


def test_two_dimensional_reductions_with_keepdim(staticify, save, tmp_path):
    path = save(MaskedTokenMean())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,?], i64[?,?]")
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(1)
    for batch, seq in [(1, 1), (3, 17), (8, 128), (0, 5), (4, 0)]:
        for p in [0.0, 1.0, 0.6]:
            losses = torch.rand(batch, seq, generator=gen) * 5
            mask = (torch.rand(batch, seq, generator=gen) < p).long()
            for got, expected in zip(lowered(losses, mask), original(losses, mask)):
                assert got.shape == expected.shape and got.dtype == expected.dtype
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert counts(lowered)[1] == 0


def test_other_inputs_run_the_torchscript(staticify, save, tmp_path):
    """Another dtype: the kernel is not called and the TorchScript gives the
    original's result; a strided view takes the kernel (copied to a dense
    buffer first), with the original's result too. Sizes the original does not
    check either (A and B of different lengths) give what the staticified
    TorchScript gives."""
    path = save(models.Seed002Example2())
    out, static = tmp_path / "lowered.pt", tmp_path / "static.pt"
    lower(staticify, path, out, "f32[?], f32[?], i64[?]")
    staticify(path, "-o", static)
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    # The static form sums masked products where the original sums the
    # selected ones: equal up to float rounding.
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(10, dtype=torch.float64, generator=gen)
    b = torch.randn(10, dtype=torch.float64, generator=gen)
    c = torch.tensor([1, -1] * 5)
    torch.testing.assert_close(lowered(a, b, c), original(a, b, c))
    strided = torch.randn(20, generator=gen)[::2]
    torch.testing.assert_close(lowered(strided, b.float(), c), original(strided, b.float(), c))
    assert counts(lowered) == [1, 1]
    ragged = torch.randn(3), torch.randn(4), torch.tensor([1, 1, -1])
    torch.testing.assert_close(lowered(*ragged), torch.jit.load(str(static))(*ragged))


def test_an_op_the_bridge_does_not_take_is_named_and_the_output_runs(staticify, save, tmp_path):
    path = save(RankScores())
    out = tmp_path / "lowered.pt"
    proc, lowering = lower(staticify, path, out, "f32[?]", "--report")
    assert not lowering["lowered"]
    assert lowering["reason"].startswith("aten::argsort at test_lower.py:")
    assert "not lowered: aten::argsort" in proc.stdout
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert "_staticify_lowered_forward" not in result.code
    x = torch.randn(100)
    assert torch.equal(result(x), original(x))


@pytest.mark.parametrize("args, message", [
    (["--lower=cpu"], "--lower=cpu needs --input-types"),
    (["--input-types", "f32[?]"], "--input-types is for --lower"),
    (["--lower=gpu", "--input-types", "f32[?]"], "--lower=gpu: the targets are: cpu"),
    (["--lower=cpu", "--input-types", "float[?]"], "unknown dtype 'float'"),
    (["--lower=cpu", "--input-types", "f32[?"], "']' expected"),
    # Found once the module is loaded: still a command-line error.
    (["--lower=cpu", "--input-types", "f32[?]"],
     "--input-types 'f32[?]' gives 1 input type, but method 'forward' takes 2"),
    (["--lower=cpu", "--input-types", "list[f32[?]], i64[?]"],
     "input 1 of method 'forward' ('smooth_loss') is a Tensor, not a list"),
    (["--lower=cpu", "--input-types", "list[f32[?], i64[?]"], "']' expected to close list["),
])
def test_bad_lowering_options_are_command_line_errors(staticify, save, tmp_path, args, message):
    path = save(models.Seed002Example1())
    out = tmp_path / "never.pt"
    proc = staticify(path, "-o", out, *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("case", ["mixed", "all-positive", "exactly-500", "n-1000"])
def test_lowered_sampler_keeps_its_distribution(staticify, save, tmp_path, case):
    """Seed 000's sampler through the kernel (random keys from a per-call
    seed, top-k and permutation ukernels): every output row an input row of
    the right class, the counts of the article, each member of a class picked
    equally often and the output order random (the z-tests of
    test_bounded.py), all calls answered by the kernel."""
    from test_bounded import CALLS, SAMPLER_CASES, Z_LIMIT, chi_square_z, expected_counts
    import math
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,16], i64[?]")
    assert lowering["lowered"], lowering["reason"]
    model = torch.jit.load(str(out))
    n, build = SAMPLER_CASES[case]
    gen = torch.Generator().manual_seed(1)
    labels = build(gen)
    x = torch.arange(n, dtype=torch.float32).unsqueeze(1).repeat(1, 16)
    num_pos, num_neg = expected_counts(int(labels.sum()), int((labels == 0).sum()))
    picks = torch.zeros(n, dtype=torch.long)
    first_is_pos = 0
    for _ in range(CALLS):
        rows, out_labels = model(x, labels)
        ids = rows[:, 0].long()
        assert rows.shape == (1000, 16) and torch.equal(rows, x[ids])
        assert torch.equal(out_labels, labels[ids]) and ids.unique().numel() == 1000
        assert int(out_labels.sum()) == num_pos and int((out_labels == 0).sum()) == num_neg
        picks[ids] += 1
        first_is_pos += int(out_labels[0])
    p = num_pos / 1000
    if 0 < p < 1:
        z = (first_is_pos - CALLS * p) / math.sqrt(CALLS * p * (1 - p))
        assert abs(z) < Z_LIMIT, z
    for cls, k in ((1, num_pos), (0, num_neg)):
        members = picks[labels == cls]
        if 0 < k < members.numel():
            z = chi_square_z(members, CALLS * k / members.numel())
            assert z < Z_LIMIT, (cls, z)
        elif k:
            assert torch.all(members == CALLS)
    assert counts(model) == [CALLS, 0]


def test_lowered_sampler_follows_torch_manual_seed(staticify, save, tmp_path):
    """The kernel's seed comes from PyTorch's default generator: the same
    torch.manual_seed gives the same sample, another seed another."""
    import sampler
    path = save(sampler.BalancedSampler())
    out = tmp_path / "lowered.pt"
    lower(staticify, path, out, "f32[?,16], i64[?]")
    model = torch.jit.load(str(out))
    x, labels = torch.randn(3000, 16), torch.randint(0, 2, (3000,))
    torch.manual_seed(5)
    a = model(x, labels)[0]
    torch.manual_seed(5)
    b = model(x, labels)[0]
    torch.manual_seed(6)
    c = model(x, labels)[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_kernel_frees_what_it_allocates(staticify, save, tmp_path):
    """Seed 002's example 2 allocates temporaries (its cat): after warm-up,
    hundreds of calls on a million elements leave the process's peak memory
    where it was (before the deallocation passes: +4.8 GB)."""
    import resource
    path = save(models.Seed002Example2())
    out = tmp_path / "lowered.pt"
    lower(staticify, path, out, "f32[?], f32[?], i64[?]")
    model = torch.jit.load(str(out))
    n = 1_000_000
    a, b = torch.randn(n), torch.randn(n)
    c = torch.where(torch.rand(n) < 0.5, 1, -1)
    for _ in range(20):
        model(a, b, c)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for i in range(200):
        model(a[:n - i], b[:n - i], c[:n - i])
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 64, f"peak memory grew by {grown_mb:.0f} MB over 200 calls"
    assert counts(model)[0] == 220


class TopKOf(torch.nn.Module):
    """torch.topk of a vector, k given by the length of a second input (a
    host value, as the sampler's bounded k is)."""
    largest: Final[bool]

    def __init__(self, largest: bool):
        super().__init__()
        self.largest = largest

    def forward(self, x: torch.Tensor, k_of: torch.Tensor):
        k = min(k_of.size(0), x.size(0))
        return torch.topk(x, k, largest=self.largest)


def topk_keys(n, gen, dtype):
    """Keys with what breaks selections: many ties, NaN, infinities, signed
    zeros, a constant vector."""
    kind = int(torch.randint(0, 5, (), generator=gen))
    if kind == 0:
        x = torch.rand(n, generator=gen, dtype=torch.float64)
    elif kind == 1:  # few distinct values: ties everywhere
        x = torch.randint(0, 4, (n,), generator=gen).double() - 1.5
    elif kind == 2:  # the sampler's keys: random, masked to -1
        x = torch.where(torch.rand(n, generator=gen) < 0.5,
                        torch.rand(n, generator=gen, dtype=torch.float64), -1.0)
    elif kind == 3:
        x = torch.full((n,), 0.25, dtype=torch.float64)
    else:
        x = torch.randn(n, generator=gen, dtype=torch.float64) * 1e3
        specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0],
                                dtype=torch.float64)
        at = torch.rand(n, generator=gen) < 0.1
        x[at] = specials[torch.randint(0, 5, (int(at.sum()),), generator=gen)]
    return x.to(dtype)


@pytest.mark.parametrize("dtype,largest", [(torch.float32, True), (torch.float32, False),
                                           (torch.float64, True), (torch.float64, False),
                                           (torch.int64, True), (torch.int64, False)])
def test_topk_ukernel_equals_a_stable_sort(staticify, save, tmp_path, dtype, largest):
    """3,000 cases over the six kernels: values equal torch.topk's, and the
    indices are the first k of a stable sort (ties in index order, NaN
    largest); sizes up to 5,000 (radix select) and a few over 2^16 (heap)."""
    path = save(TopKOf(largest))
    out = tmp_path / "lowered.pt"
    name = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}[dtype]
    _, lowering = lower(staticify, path, out, f"{name}[?], f32[?]")
    assert lowering["lowered"], lowering["reason"]
    model = torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(3 + largest)
    cases = 500
    for case in range(cases):
        n = 70_000 + case if case % 100 == 0 else int(torch.randint(0, 5001, (), generator=gen))
        x = topk_keys(n, gen, dtype)
        k = int(torch.randint(0, n + 1, (), generator=gen)) if n else 0
        values, indices = model(x, torch.empty(k))
        reference = torch.sort(x, descending=largest, stable=True)[1][:k]
        assert torch.equal(indices, reference), (case, n, k)
        expected = torch.topk(x, k, largest=largest)[0]
        assert torch.equal(values.isnan(), expected.isnan())
        assert torch.equal(values.nan_to_num(), expected.nan_to_num()), (case, n, k)
    assert counts(model) == [cases, 0]


def test_two_lowered_models_in_one_process_keep_their_own_kernels(staticify, save, tmp_path):
    """Kernels are loaded from memory: two modules alive together (and a
    third loaded after one is gone) each call their own."""
    import gc
    paths = {}
    for name, module, types in (("one", models.Seed002Example1(), "f32[?], i64[?]"),
                                ("two", MaskedTokenMean(), "f32[?,?], i64[?,?]")):
        path = save(module, f"{name}.pt")
        out = tmp_path / f"{name}_lowered.pt"
        lower(staticify, path, out, types)
        paths[name] = (path, out)
    one = torch.jit.load(str(paths["one"][1]))
    two = torch.jit.load(str(paths["two"][1]))
    x, t = torch.rand(50), torch.randint(0, 3, (50,))
    losses, mask = torch.rand(4, 9), torch.randint(0, 2, (4, 9))
    for _ in range(2):
        torch.testing.assert_close(one(x, t), torch.jit.load(str(paths["one"][0]))(x, t))
        for got, expected in zip(two(losses, mask),
                                 torch.jit.load(str(paths["two"][0]))(losses, mask)):
            torch.testing.assert_close(got, expected)
        del one
        gc.collect()
        one = torch.jit.load(str(paths["one"][1]))  # loaded again, beside `two`
    assert counts(two) == [2, 0]


class Remainders(torch.nn.Module):
    """Python's modulo (the divisor's sign) and C's fmod, on both signs."""

    def forward(self, i: torch.Tensor, x: torch.Tensor):
        return torch.remainder(i, 3), torch.remainder(i, -4), torch.remainder(x, 2.5), \
            torch.remainder(x, -2.5), torch.fmod(x, 2.0)


def test_remainder_and_fmod_take_pytorchs_signs(staticify, save, tmp_path):
    path = save(Remainders())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "i64[?], f32[?]")
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    i = torch.arange(-50, 51)
    x = torch.linspace(-20, 20, 101)
    for got, expected in zip(lowered(i, x), original(i, x)):
        assert got.dtype == expected.dtype and torch.equal(got, expected), (got, expected)
    assert counts(lowered) == [1, 0]


class LayeredHead(torch.nn.Module):
    """A classification head with weights: Linear, ReLU, LayerNorm, Dropout,
    Linear, and the cross entropy of the rows whose label is not -1 (the
    boolean-indexed loss the rewrite turns static)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.drop = torch.nn.Dropout(0.1)
        self.out = torch.nn.Linear(32, 5)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        logits = self.out(self.drop(self.norm(torch.relu(self.fc(x)))))
        valid = y >= 0
        return torch.nn.functional.cross_entropy(logits[valid], y[valid])


def test_a_head_with_weights_lowers_and_equals_the_original(staticify, save, tmp_path):
    """The module's parameters become kernel inputs: under no_grad the kernel
    answers and equals the original (rows 0..300, labels -1..4); with
    gradients on, the TorchScript runs and the gradients equal the
    original's; after .train(), dropout's `training` (compiled in) no longer
    holds, and the method runs as it was (equal under one seed)."""
    torch.manual_seed(0)
    path = save(LayeredHead().eval())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,16], i64[?]")
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n in [0, 1, 2, 7, 64, 300]:
            x = torch.randn(n, 16, generator=gen)
            y = torch.randint(-1, 5, (n,), generator=gen)
            torch.testing.assert_close(lowered(x, y), original(x, y), rtol=1e-5, atol=1e-5,
                                       equal_nan=True)
    assert counts(lowered) == [6, 0]
    x, y = torch.randn(9, 16, generator=gen), torch.randint(0, 5, (9,), generator=gen)
    got, expected = lowered(x, y), original(x, y)
    got.backward()
    expected.backward()
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(lowered.fc.weight.grad, original.fc.weight.grad)
    assert counts(lowered) == [6, 1]
    lowered.train()
    original.train()
    torch.manual_seed(5)
    expected = original(x, y)
    torch.manual_seed(5)
    got = lowered(x, y)
    torch.testing.assert_close(got, expected)
    assert counts(lowered) == [6, 1]  # the method as it was: no runner call


class ScaledTopK(torch.nn.Module):
    """Reads a tensor buffer and a plain int attribute (not Final)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([2.0, 0.5, 1.0, 3.0]))
        self.k = 2

    def forward(self, x: torch.Tensor):
        return torch.topk((x * self.scale).sum(1), self.k)[0]


def test_attributes_are_kernel_inputs_and_guards(staticify, save, tmp_path):
    """A buffer is passed to the kernel on each call (changed in place, the
    kernel sees the change); an int attribute is compiled in and guarded
    (set to another value, the method runs as it was)."""
    path = save(ScaledTopK())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,4]")
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    x = torch.randn(10, 4)
    assert torch.equal(lowered(x), original(x))
    with torch.no_grad():
        lowered.scale.mul_(-1)
        original.scale.mul_(-1)
    assert torch.equal(lowered(x), original(x))
    assert counts(lowered) == [2, 0]
    lowered.k = 5
    original.k = 5
    assert torch.equal(lowered(x), original(x))
    assert counts(lowered) == [2, 0]


class SortAndRowTopK(torch.nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor):
        order, perm = ids.sort(descending=True, stable=True)
        rows = torch.topk(x, min(3, x.size(1)), dim=1)
        return order, perm, rows[0], rows[1]


def test_sort_of_integers_and_topk_of_rows(staticify, save, tmp_path):
    """sort of an i64 vector equals PyTorch's stable sort (ties in index
    order); topk along the rows of a matrix equals PyTorch's on keys
    without ties."""
    path = save(SortAndRowTopK())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,?], i64[?]")
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(2)
    for rows, cols, n in [(0, 3, 0), (1, 3, 1), (5, 7, 100), (64, 200, 5000)]:
        x = torch.randperm(rows * cols, generator=gen).float().reshape(rows, cols)
        ids = torch.randint(-3, 4, (n,), generator=gen)
        for a, b in zip(lowered(x, ids), original(x, ids)):
            assert torch.equal(a, b)
    assert counts(lowered) == [4, 0]


class ConvThenHead(torch.nn.Module):
    """A convolution (not in the bridge: it stays an ATen call) feeding a
    head with a masked loss: lowered by regions around it."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor, y: torch.Tensor):
        h = torch.relu(self.conv(x)).mean(2)
        logits = self.fc(h)
        valid = y >= 0
        loss = torch.nn.functional.cross_entropy(logits[valid], y[valid])
        return logits.softmax(1), loss


def test_a_method_that_does_not_lower_whole_lowers_by_regions(staticify, save, tmp_path):
    """The convolution stops the whole method; the region after it (the
    layer, the softmax, the masked loss) becomes a method with its own
    kernel, the convolution stays an ATen call between, and the output
    equals the original (0, 1 and 9 rows), the region's kernel answering."""
    torch.manual_seed(0)
    path = save(ConvThenHead().eval())
    out = tmp_path / "lowered.pt"
    proc, lowering = lower(staticify, path, out, "f32[?,4,?], i64[?]", "--report")
    assert not lowering["lowered"] and "aten::conv1d" in lowering["reason"]
    regions = [r for r in lowering["regions"] if r["lowered"]]
    assert len(regions) == 1 and regions[0]["kernel_bytes"] > 0, lowering
    assert f"static region {regions[0]['region']}: lowered" in proc.stdout
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert "torch.conv1d(" in lowered.code
    runner = getattr(lowered, f"_staticify_lowered_{regions[0]['method']}")
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n in [0, 1, 9]:
            x = torch.randn(n, 4, 6, generator=gen)
            y = torch.randint(-1, 5, (n,), generator=gen)
            for a, b in zip(lowered(x, y), original(x, y)):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert runner.counts()[:2] == [3, 0]


def test_regions_whose_example_run_raises_are_not_lowered(staticify, save, tmp_path):
    """Regions are typed by one run on inputs of the signature (each ? size
    8): a signature the model cannot run says so, and nothing changes."""
    path = save(ConvThenHead().eval())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,3,?], i64[?]")
    assert not lowering["lowered"] and not any(r["lowered"] for r in lowering["regions"])
    assert all("example run (each ? size 8) raised: RuntimeError:" in r["reason"]
               for r in lowering["regions"]), lowering
    x, y = torch.randn(2, 4, 6), torch.tensor([1, -1])
    for a, b in zip(torch.jit.load(str(out))(x, y), torch.jit.load(str(path))(x, y)):
        assert torch.equal(a, b)


class PerImageScores(torch.nn.Module):
    def forward(self, images: List[torch.Tensor]):
        return [(im.sigmoid() * 2 - 1).sum(0).softmax(-1) for im in images]


def test_a_list_input_takes_a_list_type(staticify, save, tmp_path):
    """`list[f32[3,?,?]]` for a List[Tensor] argument: accepted and reported
    as given; no kernel takes a list, so the method is lowered by regions,
    here the body of the loop over the images (typed by the example run's
    first image), called once per image; a tensor type for the list is a
    command-line error. The output equals the original."""
    path = save(PerImageScores())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "list[f32[3,?,?]]")
    assert lowering["inputs"] == "list[f32[3,?,?]]" and not lowering["lowered"]
    assert "is not a tensor" in lowering["reason"]
    regions = [r for r in lowering["regions"] if r["lowered"]]
    assert len(regions) == 1, lowering
    lowered = torch.jit.load(str(out))
    assert "for " in lowered.code and f"forward_region_{regions[0]['region']}(" in lowered.code
    images = [torch.randn(3, 4, 5), torch.randn(3, 2, 2), torch.randn(3, 1, 9)]
    for a, b in zip(lowered(images), torch.jit.load(str(path))(images)):
        torch.testing.assert_close(a, b)
    runner = getattr(lowered, f"_staticify_lowered_{regions[0]['method']}")
    assert runner.counts()[:2] == [3, 0]
    proc = staticify(path, "-o", tmp_path / "never.pt", "--lower=cpu", "--input-types",
                     "f32[3,?,?]", check=False)
    assert proc.returncode == 2 and "('images') is a List[Tensor]; give it as " \
        "list[DTYPE[SIZES]]" in proc.stderr, proc.stderr


class OptionalTarget(torch.nn.Module):
    def forward(self, x: torch.Tensor, target: Optional[torch.Tensor] = None):
        y = (x * 2).relu().sum(0)
        if target is not None:
            y = y - target
        return y


def test_arguments_with_defaults_may_be_left_out(staticify, save, tmp_path):
    """Types for the leading arguments only, where the rest have defaults (a
    detector's `targets=None`): accepted (the example run passes the
    defaults; here the one region reads the Optional argument, so no kernel
    takes it, and the report says so); the output runs as the original;
    fewer types than the arguments without defaults is a command-line
    error."""
    path = save(OptionalTarget())
    out = tmp_path / "lowered.pt"
    _, lowering = lower(staticify, path, out, "f32[?,?]")
    assert not lowering["lowered"] and "'target" in lowering["reason"], lowering
    assert lowering["regions"] and not any(r["lowered"] for r in lowering["regions"])
    x = torch.randn(5, 3)
    lowered, original = torch.jit.load(str(out)), torch.jit.load(str(path))
    torch.testing.assert_close(lowered(x), original(x))
    t = torch.randn(3)
    torch.testing.assert_close(lowered(x, t), original(x, t))
    proc = staticify(save(models.Seed002Example1()), "-o", tmp_path / "never.pt",
                     "--lower=cpu", "--input-types", "f32[?]", check=False)
    assert proc.returncode == 2 and "those with defaults may be left out" in proc.stderr
