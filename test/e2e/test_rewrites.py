"""Every corpus program runs through the command (in this process,
conftest.InProcess; the other tests here run the binary); the output must
match the original on random inputs, empty and full masks included, and the
report must say what was rewritten (or why not)."""
import pytest
import torch

from conftest import findings
from corpus import CASES

TRIALS = 40

# The rule the report must name for some finding of these programs.
EXPECTED_RULES = {
    "sum-mask": "masked-reduce", "mean-mask": "masked-reduce",
    "masked-select-sum": "masked-reduce", "store-scalar": "mask-store",
    "chain-same-mask": "mask-propagate", "nested-masks": "mask-propagate",
    "different-bases-guarded": "bound", "different-ranks-fallback": "bound",
    "cross-entropy-weighted": "bound", "cross-entropy-probabilities": "bound",
    "nll-loss-rows": "bound", "full-of-count": "bound",
    "log-softmax-rows": "bound", "log-softmax-vector-fallback": "bound",
    "if-shapes-guarded": "if-convert", "if-shapes-guarded-fallback": "if-convert",
    "gather-two-bases-2d-mask": "index-to-mask", "if-on-tensor": "if-convert",
    "if-elif-chain": "if-convert", "lift-int-arithmetic": "lift-scalars",
    "lift-counts-through-ifs": "lift-scalars",
}


def assert_same(a, b):
    if isinstance(a, (tuple, list)):
        assert type(a) == type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            assert_same(p, q)
        return
    if not isinstance(a, torch.Tensor):
        assert a == b
        return
    assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
    if a.dtype.is_floating_point:
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
    else:
        assert torch.equal(a, b), (a, b)


def run_safely(module, args):
    try:
        return module(*args), None
    except Exception as e:  # noqa: BLE001 - the original may raise
        return None, type(e).__name__


@pytest.mark.parametrize("name,module,inputs,expect", CASES, ids=[c[0] for c in CASES])
def test_corpus(staticify_in_process, save, tmp_path, name, module, inputs, expect):
    staticify = staticify_in_process  # the corpus runs the command 85 times
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    # A rule that keeps or materializes leaves the method reaching the host
    # as often as before: without --static-forms the pipeline then leaves it
    # as it was (test_equal_syncs.py), with it the rule's own decision shows.
    flags = ["--static-forms"] if expect == "materialized" or expect.startswith("kept:") else []
    if flags:
        compare_outputs(torch.jit.load(str(path)), torch.jit.load(str(out)), inputs, TRIALS,
                        name)
        staticify(path, "-o", out, *flags)
    report = staticify.report(path, *flags)
    method = report["methods"][0]
    after = method["after"]["counts"]["total"]
    if expect == "static":
        assert findings(report), "nothing was found: the case tests nothing"
        assert after == 0, findings(report)
        assert all(f["action"] == "rewritten" and f["rule"] for f in findings(report))
        if name in EXPECTED_RULES:
            assert EXPECTED_RULES[name] in {f["rule"] for f in findings(report)}
        assert method["after"]["static"] is True
    elif expect == "safe":
        pass  # only the numbers below are checked
    elif expect == "materialized":
        # Bounded, then cut to its count where a use has no bounded form:
        # the one sync left is reported with its reason.
        assert after > 0
        assert all(f["action"] != "kept" or f["reason"]
                   for f in findings(report))
        assert any(f["action"] == "introduced" and
                   (f["reason"] or "").startswith("bound: materialized: ")
                   for f in findings(report)), findings(report)
    elif expect == "untouched":
        assert findings(report) == [] and after == 0
    else:
        rule = expect.split(":", 1)[1]
        assert after > 0
        assert not any(f["rule"] == rule for f in findings(report))
        # The report says why the rule left it alone.
        assert any((f["reason"] or "").startswith(rule + ": ")
                   for f in findings(report)), findings(report)

    compared = compare_outputs(torch.jit.load(str(path)), torch.jit.load(str(out)), inputs,
                               TRIALS, name)
    assert compared >= TRIALS // 2, (name, "the original raised on most inputs", compared)


def compare_outputs(original, result, inputs, trials, name):
    """Runs both on `trials` inputs (selections keeping nothing, everything,
    then some): equal outputs wherever the original runs (where PyTorch
    raises, the rewrite may not: documented). Returns how many compared."""
    gen = torch.Generator().manual_seed(0)
    compared = 0
    for trial in range(trials):
        kind = ("none", "all", "random")[trial % 3] if trial < 6 else "random"
        args = inputs(gen, kind)
        a, a_err = run_safely(original, [t.clone() for t in args])
        if a_err:
            continue
        b, b_err = run_safely(result, [t.clone() for t in args])
        assert b_err is None, (name, kind, b_err)
        assert_same(a, b)
        compared += 1
    return compared


def test_drop_data_asserts(staticify, save, tmp_path):
    from corpus import DataAssertKept
    path = save(DataAssertKept())
    kept = staticify.report(path)
    assert kept["methods"][0]["after"]["static"] is False
    out = tmp_path / "dropped.pt"
    staticify(path, "-o", out, "--drop-data-asserts")
    dropped = staticify.report(path, "--drop-data-asserts")
    assert dropped["methods"][0]["after"]["static"] is True
    assert {f["rule"] for f in findings(dropped)} == {"drop-data-asserts"}
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    x, t = torch.randn(6), torch.randn(6)
    assert torch.equal(original(x, t), result(x, t))
    # Where the original raises, the dropped check no longer does (documented).
    with pytest.raises(Exception):
        original(x, t + 100.0)
    assert torch.equal(result(x, t + 100.0), x * 2.0)


class FormattedAssertInBranch(torch.nn.Module):
    """torch.ao's MinMaxObserver check: an assert whose message formats the
    tensors it checks, inside a branch of an if on data."""

    def forward(self, lo: torch.Tensor, hi: torch.Tensor, x: torch.Tensor):
        if bool(lo == float("inf")):
            y = x.relu()
        else:
            assert bool(torch.all(lo <= hi)), "min {} should be less than max {}".format(lo, hi)
            y = -x
        return y


def test_dropped_assert_frees_the_if_around_it(staticify, save, tmp_path):
    path = save(FormattedAssertInBranch())
    kept = staticify.report(path)
    assert kept["methods"][0]["after"]["sync_points"] == 2
    out = tmp_path / "dropped.pt"
    staticify(path, "-o", out, "--drop-data-asserts")
    dropped = staticify.report(path, "--drop-data-asserts")
    assert dropped["methods"][0]["after"]["sync_points"] == 0
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    x = torch.randn(5)
    for lo, hi in [(torch.tensor(float("inf")), torch.tensor(float("-inf"))),
                   (torch.tensor(-1.0), torch.tensor(2.0))]:
        assert torch.equal(original(lo, hi, x), result(lo, hi, x))


def test_mean_of_half_accumulates_in_float32(staticify, save, tmp_path):
    """mean(x[m]) must not become a float16 sum / count: 2,000 values of 100
    sum to 200,000 > 65,504, which overflows float16. The rewrite
    accumulates in float32 and casts back, as PyTorch's CUDA mean does (its
    CPU mean in 1.13 overflows here itself: both are within the contract's
    summation-order tolerance, and a finite mean is the useful one)."""

    class MeanHalf(torch.nn.Module):
        def forward(self, x, t):
            m = t > 0
            return x.to(torch.float16)[m].mean()

    path = save(MeanHalf())
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    assert staticify.report(path)["methods"][0]["after"]["static"] is True
    result = torch.jit.load(str(out))
    x, t = torch.full((2000,), 100.0), torch.ones(2000)
    assert torch.full((2000,), 100.0, dtype=torch.float16).sum().isinf()
    y = result(x, t)
    assert y.dtype == torch.float16 and y.item() == 100.0


def test_in_place_activations_stay_in_place(staticify, save, tmp_path):
    """A head's conv -> ReLU(inplace=True) -> conv -> ReLU(inplace=True),
    then a selection staticify rewrites: the output computes the same and
    keeps the program's in-place activations (none turned into an
    allocating relu), as many as the original has."""

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(
                torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(inplace=True),
                torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ReLU(inplace=True))

        def forward(self, x):
            y = self.body(x).flatten()
            return y[y > 0.1].sum()

    path = save(Head().eval())
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert staticify.report(path)["methods"][0]["after"]["static"] is True

    def relus(module):
        graph = str(module.inlined_graph)
        return graph.count("aten::relu_("), graph.count("aten::relu(")

    assert relus(original) == (2, 0)
    assert relus(result) == (2, 0)
    for seed in range(5):
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        assert torch.allclose(original(x), result(x), rtol=1e-5, atol=1e-5)
