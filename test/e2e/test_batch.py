"""`--batch`: each static method M gains M_batched, whose tensor arguments
and results have a leading batch dimension, row b being what M computes on
row b (passes/Batch.h).

- The idioms of real projects (idioms.py), batched for the dtypes and ranks
  of their inputs: where M_batched is added, it equals a loop of the
  *original* module over the rows, on rows that differ (each tensor's rows
  reordered per row, so indices stay in range), on inputs whose selections
  keep nothing, everything or some. Idioms that draw random numbers are run,
  and their rows held to differ where their inputs do not.
- Where it is not added, the report names why.
- The seed sampler: each row of forward_batched is a valid sample of its own
  row (every picked row is in that row's input, with its label, once), the
  class counts the article's rule gives, and each row's picks are uniform
  (a chi-square bound over many rows) and independent of the other rows'."""
import json

import pytest
import torch

from idioms import IDIOMS
from test_lower_corpus import DTYPES
from test_rewrites import run_safely

pytestmark = pytest.mark.xdist_group("batch-corpus")

ROWS = 4
TRIALS = 6
# The idioms that batch today: a change that batches fewer fails here.
MIN_BATCHED = 25
batched_names = []


def signature(args):
    """The inputs' dtypes and sizes: the example run takes these sizes."""
    return ", ".join(f"{DTYPES[a.dtype]}[{','.join(map(str, a.shape))}]" for a in args)


def row_variants(args, gen, rows):
    """`rows` versions of args, each tensor's elements reordered along its
    first dimension (a different permutation per row and tensor)."""
    out = []
    for b in range(rows):
        row = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.dim() >= 1 and a.size(0) > 1 and b > 0:
                a = a[torch.randperm(a.size(0), generator=gen)]
            row.append(a)
        out.append(row)
    return out


def stacked(variants):
    return [torch.stack([v[i] for v in variants]) for i in range(len(variants[0]))]


def draws_random(module, args):
    torch.manual_seed(1)
    a = module(*[t.clone() for t in args])
    torch.manual_seed(2)
    b = module(*[t.clone() for t in args])
    return not equal(a, b)


def equal(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(equal(p, q) for p, q in zip(a, b))
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.is_floating_point:
            return torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        return torch.equal(a, b)
    return a == b


def rows_of(result, b):
    if isinstance(result, (tuple, list)):
        return type(result)(rows_of(r, b) for r in result)
    return result[b] if isinstance(result, torch.Tensor) else result


@pytest.mark.parametrize("name,source,module,inputs", IDIOMS, ids=[i[0] for i in IDIOMS])
def test_batched_idiom_equals_a_loop_over_rows(staticify, save, tmp_path, name, source,
                                               module, inputs):
    path = save(module)
    out, report = tmp_path / "batched.pt", tmp_path / "report.json"
    first = inputs(torch.Generator().manual_seed(0), "random")
    if not all(isinstance(a, torch.Tensor) and a.dtype in DTYPES for a in first):
        pytest.skip("an input that is not a tensor of a signature dtype")
    staticify(path, "-o", out, "--batch", "--input-types", signature(first),
              "--report-json", report)
    batch = json.loads(report.read_text())["methods"][0]["batch"]
    if batch["method"] is None:
        assert batch["reason"], name  # it says why
        pytest.skip(f"not batched: {batch['reason']}")
    assert batch["method"] == "forward_batched"
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    random = draws_random(original, first)
    compared = 0
    for trial in range(TRIALS):
        args = inputs(gen, ("none", "all", "random")[trial % 3])
        variants = row_variants(args, gen, ROWS)
        expected = [run_safely(original, [t.clone() for t in v]) for v in variants]
        if any(error for _, error in expected):
            continue  # the original raises on some row
        got = static.forward_batched(*stacked(variants))
        if random:
            # The same row twice draws twice.
            same = static.forward_batched(*stacked([variants[0], variants[0]]))
            assert not equal(rows_of(same, 0), rows_of(same, 1)), name
        else:
            for b in range(ROWS):
                assert equal(rows_of(got, b), expected[b][0]), (name, trial, b)
        compared += 1
    assert compared >= 1, name
    batched_names.append(name)


def test_enough_idioms_batch():
    """Runs after the parametrized tests above (file order)."""
    if not batched_names:
        pytest.skip("run with the idiom tests")
    assert len(batched_names) >= MIN_BATCHED, sorted(batched_names)


def test_batch_needs_input_types(staticify, save, tmp_path):
    path = save(IDIOMS[0][2])
    proc = staticify(path, "-o", tmp_path / "out.pt", "--batch", check=False)
    assert proc.returncode == 2 and "--batch needs --input-types" in proc.stderr
    assert not (tmp_path / "out.pt").exists()


class NotStatic(torch.nn.Module):
    def forward(self, x):
        return x.new_zeros(int(x.sum()))  # a size read from data


def test_a_method_that_is_not_static_is_not_batched(staticify, save, tmp_path):
    path = save(NotStatic())
    report = tmp_path / "report.json"
    staticify(path, "-o", tmp_path / "out.pt", "--batch", "--input-types", "f32[?]",
              "--report-json", report)
    batch = json.loads(report.read_text())["methods"][0]["batch"]
    assert batch["method"] is None and "not static" in batch["reason"]
    assert not hasattr(torch.jit.load(str(tmp_path / "out.pt")), "forward_batched")


class OutVariant(torch.nn.Module):
    """`torch.gt(x, 0.0, out=m)` into a tensor made with no input: the
    batched form would write every row into one shared tensor (the batch
    fuzzer's seed 5202, program 694)."""

    def forward(self, x):
        m = torch.zeros(0, dtype=torch.bool)
        torch.gt(x, 0.0, out=m)
        return m


def test_an_out_variant_is_not_batched(staticify, save, tmp_path):
    path = save(OutVariant())
    report = tmp_path / "report.json"
    staticify(path, "-o", tmp_path / "out.pt", "--batch", "--input-types", "f32[8]",
              "--report-json", report)
    batch = json.loads(report.read_text())["methods"][0]["batch"]
    assert batch["method"] is None and "out=" in batch["reason"]
    static = torch.jit.load(str(tmp_path / "out.pt"))
    x = torch.randn(8)
    assert torch.equal(static(x), x > 0)


# --- the seed sampler -----------------------------------------------------------------


@pytest.fixture(scope="module")
def batched_sampler(tmp_path_factory):
    import pathlib
    import subprocess
    import sys
    from conftest import _bin_dir
    root = pathlib.Path(__file__).resolve().parents[2]
    tmp = tmp_path_factory.mktemp("sampler")
    subprocess.run([sys.executable, str(root / "examples" / "sampler.py"),
                    str(tmp / "sampler.pt")], check=True)
    subprocess.run([str(_bin_dir() / "staticify"), str(tmp / "sampler.pt"), "-o",
                    str(tmp / "batched.pt"), "--batch", "--input-types",
                    "f32[?,16], i64[?]"], check=True, capture_output=True)
    return torch.jit.load(str(tmp / "batched.pt"))


def test_sampler_rows_are_valid_samples_of_their_own_rows(batched_sampler):
    gen = torch.Generator().manual_seed(0)
    for n, p in ((3000, 0.3), (3000, 0.1), (1500, 0.5), (2500, 0.05)):
        rows = 8
        x = torch.randn(rows, n, 16, generator=gen)
        labels = (torch.rand(rows, n, generator=gen) < p).long()
        xs, ls = batched_sampler.forward_batched(x, labels)
        assert xs.shape == (rows, 1000, 16) and ls.shape == (rows, 1000)
        for b in range(rows):
            picked = torch.cdist(xs[b], x[b]).argmin(1)
            assert torch.equal(x[b][picked], xs[b])          # rows of its own input
            assert torch.equal(labels[b][picked], ls[b])      # with their labels
            assert picked.unique().numel() == 1000            # each once
            pos, neg = int(labels[b].sum()), n - int(labels[b].sum())
            want_pos = min(pos, 500) if neg >= 500 else 1000 - neg
            assert int(ls[b].sum()) == want_pos, (n, p, b)


def test_sampler_rows_draw_uniformly_and_independently(batched_sampler):
    """Of 1,200 labels, 100 positive: the article's rule keeps all 100
    positives and 900 of the 1,100 negatives (1,000 in all). Over 400 rows
    of one input each negative is kept about 400 * 9/11 times (chi-square
    over the 1,100, 1,099 degrees of freedom: below 1,300 at p < 1e-5), and
    two rows share about 900 * 9/11 of their negatives, as two independent
    draws do (identical rows would share all 900)."""
    torch.manual_seed(0)
    n, rows = 1200, 400
    labels = torch.zeros(n, dtype=torch.long)
    labels[torch.randperm(n)[:100]] = 1
    x = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 16)
    xs, ls = batched_sampler.forward_batched(x.expand(rows, n, 16).contiguous(),
                                             labels.expand(rows, n).contiguous())
    picked = xs[:, :, 0].long()
    assert bool((ls.sum(1) == 100).all())
    counts = torch.zeros(n).index_add_(0, picked.reshape(-1), torch.ones(picked.numel()))
    assert bool((counts[labels == 1] == rows).all())
    negatives = counts[labels == 0]
    expected = rows * 900 / 1100
    chi2 = float(((negatives - expected) ** 2 / expected).sum())
    assert chi2 < 1300, chi2
    sets = [set(r.tolist()) for r in picked[:40]]
    shared = [len(sets[i] & sets[i + 1]) - 100 for i in range(39)]
    mean = sum(shared) / len(shared)
    assert abs(mean - 900 * 900 / 1100) < 10, mean


# --- ops whose dims shift -----------------------------------------------------------

class FlattenAndPickAlongColumns(torch.nn.Module):
    """flatten over leading dims (end_dim >= 0) and index_select along
    dim 1 by indices computed per row: both move one dim over in the
    batched method."""

    def forward(self, x, i):
        picked = torch.index_select(x, 1, i.argsort())
        return picked.flatten(0, 1) * 2.0


def test_flatten_and_columns_batch(staticify, save, tmp_path):
    module = FlattenAndPickAlongColumns()
    path, out = save(module), tmp_path / "out.pt"
    staticify(path, "-o", out, "--batch", "--input-types", "f32[3,5], f32[5]")
    batched = torch.jit.load(str(out)).forward_batched
    gen = torch.Generator().manual_seed(0)
    xs, idx = torch.randn(4, 3, 5, generator=gen), torch.randn(4, 5, generator=gen)
    got = batched(xs, idx)
    want = torch.stack([module(xs[b], idx[b]) for b in range(4)])
    assert got.shape == want.shape and torch.equal(got, want)
