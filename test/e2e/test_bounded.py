"""The bound pass through the real binary: the seed sampler and its library
variants become static and keep their distribution; bounded forms followed
by a materializing output equal the original exactly."""
import math
import re

import pytest
import torch

import bounded_models as bm
import sampler
from conftest import findings

CALLS = 2000        # calls per statistical case
Z_LIMIT = 4.0       # |z| above this fails: p < 1e-4 under the null hypothesis
# The rewritten programs run where the inputs are: on the GPU machine the
# same checks run on CUDA tensors too.
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def static_output(staticify, save, tmp_path, module, *args):
    """Scripts module, staticifies it, checks the report says static."""
    path = save(module)
    out = tmp_path / "static.pt"
    staticify(path, "-o", out, *args)
    report = staticify.report(path, *args)
    method = report["methods"][0]
    return path, out, method


def original_and_static(staticify, save, tmp_path, module, found):
    """Scripts and staticifies module, checks that its report finds `found`
    before and nothing after; the original and the staticified modules."""
    path, out, method = static_output(staticify, save, tmp_path, module)
    assert method["before"]["counts"][found] > 0
    assert method["after"]["static"] is True, method["after"]
    return torch.jit.load(str(path)), torch.jit.load(str(out))


def expected_counts(num_pos_avail, num_neg_avail, sub=1000):
    """sample_data's class counts, computed as the seed computes them."""
    num_pos = min(num_pos_avail, sub // 2)
    num_neg = min(num_neg_avail, sub // 2)
    if num_neg < sub // 2:
        num_pos = sub - num_neg
    elif num_pos < sub // 2:
        num_neg = sub - num_pos
    return num_pos, num_neg


def chi_square_z(counts, expected):
    """The chi-square statistic of counts against one expected count, as a
    z-score (normal approximation, df = len(counts) - 1). Sampling without
    replacement makes the statistic smaller than a chi-square: conservative."""
    df = len(counts) - 1
    chi2 = float(((counts.double() - expected) ** 2).sum() / expected)
    return (chi2 - df) / math.sqrt(2 * df)


SAMPLER_CASES = {
    # name: (N, labels builder)
    "mixed": (4000, lambda g: (torch.rand(4000, generator=g) < 0.3).long()),
    "all-positive": (4000, lambda g: torch.ones(4000, dtype=torch.long)),
    "all-negative": (4000, lambda g: torch.zeros(4000, dtype=torch.long)),
    "exactly-500": (4000, lambda g: (torch.randperm(4000, generator=g) < 500).long()),
    "n-1000": (1000, lambda g: (torch.rand(1000, generator=g) < 0.35).long()),
}


def test_sampler_graph_is_static(staticify, save, tmp_path):
    _, out, method = static_output(staticify, save, tmp_path, sampler.BalancedSampler())
    assert method["after"]["static"] is True and method["after"]["counts"]["total"] == 0
    assert method["before"]["counts"]["total"] == len(findings({"methods": [method]}))
    # No materialization point: nothing introduced, everything rewritten.
    assert all(f["action"] == "rewritten" for f in method["findings"])
    graph = str(torch.jit.load(str(out)).forward.graph)
    for op in ("aten::nonzero", "aten::Int", "aten::item", "aten::Bool"):
        assert op not in graph, op
    assert not re.search(r"aten::where\(%[\w.]+\)", graph)  # where(cond)
    # Both classes' picks are the first of theirs in one random order of the
    # labels (randperm(N): labels == 1 and labels == 0 are disjoint), beside
    # the original's randperm(1000): no sort, no top-k.
    assert graph.count("aten::randperm(") == 2
    assert "aten::topk" not in graph and "aten::sort" not in graph


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(SAMPLER_CASES))
def test_sampler_keeps_its_distribution(staticify, save, tmp_path, case, device):
    n, build = SAMPLER_CASES[case]
    _, out, _ = static_output(staticify, save, tmp_path, sampler.BalancedSampler())
    original, result = torch.jit.load(str(save(sampler.BalancedSampler(), "o.pt"))), \
        torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(1)
    labels = build(gen).to(device)
    x = torch.arange(n, dtype=torch.float32, device=device).unsqueeze(1).repeat(1, 16)
    num_pos, num_neg = expected_counts(int(labels.sum()), int((labels == 0).sum()))
    z = {}
    for name, model in (("original", original), ("staticified", result)):
        torch.manual_seed(7)
        picks = torch.zeros(n, dtype=torch.long, device=device)
        first_is_pos = 0
        for _ in range(CALLS):
            rows, out_labels = model(x, labels)
            assert rows.shape == (1000, 16) and out_labels.shape == (1000,)
            ids = rows[:, 0].long()
            assert torch.equal(rows, x[ids]), "an output row is not an input row"
            assert torch.equal(out_labels, labels[ids])
            assert ids.unique().numel() == 1000, "a row was picked twice"
            assert int(out_labels.sum()) == num_pos and int((out_labels == 0).sum()) == num_neg
            picks[ids] += 1
            first_is_pos += int(out_labels[0])
        # Output order is random: the first row is positive num_pos/1000 of
        # the time (a binomial z-test).
        p = num_pos / 1000
        if 0 < p < 1:
            z_order = (first_is_pos - CALLS * p) / math.sqrt(CALLS * p * (1 - p))
            assert abs(z_order) < Z_LIMIT, (name, z_order)
        # Every row of a class is picked equally often.
        for cls, k in ((1, num_pos), (0, num_neg)):
            members = picks[labels == cls]
            if 0 < k < members.numel():
                z[name, cls] = chi_square_z(members, CALLS * k / members.numel())
                assert z[name, cls] < Z_LIMIT, (name, cls, z[name, cls])
            elif k:
                assert torch.all(members == CALLS)  # every member, every call


def test_sampler_with_too_few_rows_fails_like_the_original(staticify, save, tmp_path):
    """N < 1000: the original raises (rand_perm indexes past the end); the
    rewrite returns padding rows instead (docs/passes.md, bound)."""
    _, out, _ = static_output(staticify, save, tmp_path, sampler.BalancedSampler())
    x, labels = torch.randn(600, 16), torch.randint(0, 2, (600,))
    with pytest.raises(Exception):
        torch.jit.load(str(save(sampler.BalancedSampler(), "o.pt")))(x, labels)
    rows, out_labels = torch.jit.load(str(out))(x, labels)
    assert rows.shape == (1000, 16)


def random_images(gen, count, low=0):
    """count label tensors in {-1, 0, 1, 2} of random lengths in [low, 200)."""
    sizes = torch.randint(low, 200, (count,), generator=gen).tolist()
    return [torch.randint(-1, 3, (s,), generator=gen) for s in sizes]


def test_torchvision_mask_sampler_is_static(staticify, save, tmp_path):
    _, out, method = static_output(staticify, save, tmp_path, bm.MaskSampler())
    assert method["after"]["static"] is True
    result = torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(3)
    for _ in range(200):
        images = random_images(gen, 3)
        pos, neg = result(images)
        for labels, p, q in zip(images, pos, neg):
            assert p.shape == labels.shape and p.dtype == torch.uint8
            n_pos = min(int((labels >= 1).sum()), 16)
            n_neg = min(int((labels == 0).sum()), 64 - n_pos)
            assert int(p.sum()) == n_pos and int(q.sum()) == n_neg
            assert torch.all(labels[p.bool()] >= 1) and torch.all(labels[q.bool()] == 0)


def test_seed_idiom_per_image_returns_static_index_tensors(staticify, save, tmp_path):
    _, out, method = static_output(staticify, save, tmp_path, bm.IndexSampler())
    assert method["after"]["static"] is True
    result = torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(4)
    for _ in range(200):
        images = random_images(gen, 3, low=40)
        for labels, idx in zip(images, result(images)):
            n_pos, n_neg = expected_counts(int((labels >= 1).sum()),
                                           int((labels == 0).sum()), 32)
            if n_pos > int((labels >= 1).sum()) or n_neg > int((labels == 0).sum()):
                continue  # the original raises: too few candidates
            assert idx.shape == (32,) and idx.unique().numel() == 32
            assert int((labels[idx] >= 1).sum()) == n_pos
            assert int((labels[idx] == 0).sum()) == n_neg


def mask_input(gen, shape, kind):
    if kind == "none":
        return -torch.ones(shape)
    if kind == "all":
        return torch.ones(shape)
    return torch.randn(shape, generator=gen)


EXACT_CASES = {
    "nonzero-1d": (bm.Nonzero1D, lambda g, k: (mask_input(g, (17,), k),)),
    "argwhere-3d": (bm.NonzeroND, lambda g, k: (mask_input(g, (3, 4, 5), k),)),
    "where-coords": (bm.WhereCoords, lambda g, k: (mask_input(g, (6, 7), k),)),
    "masked-select": (bm.MaskedSelect,
                      lambda g, k: (torch.randn(5, 6, generator=g), mask_input(g, (6,), k))),
    "bool-index": (bm.BoolIndex,
                   lambda g, k: (torch.randn(4, 5, 3, generator=g),
                                 mask_input(g, (4, 5), k) > 0)),
    "unique": (bm.Unique, lambda g, k: (torch.randint(0, 9, (4, 6), generator=g),)),
    "unique-values": (bm.UniqueValues, lambda g, k: (torch.randint(-3, 3, (25,), generator=g),)),
    "unique-consecutive": (bm.UniqueConsecutive,
                           lambda g, k: (torch.randint(0, 3, (30,), generator=g),)),
    "unique-dim": (bm.UniqueDim, lambda g, k: (torch.randint(0, 2, (12, 3), generator=g),)),
    "count-after-nonzero": (bm.CountAfterNonzero, lambda g, k: (mask_input(g, (9, 2), k),)),
    # Distinct scores (no ties: PyTorch's sort is not stable unless asked).
    "sort-selection": (bm.SortSelection,
                       lambda g, k: (mask_input(g, (12,), k) + torch.arange(12) * 1e-3,
                                     torch.randn(12, 4, generator=g))),
    "row-ops": (bm.RowOps, lambda g, k: (torch.randn(12, 4, generator=g),
                                         mask_input(g, (12,), k))),
    # Top-k of selections, over the unselected scores where the mask holds.
    "level-topk": (bm.LevelTopk,
                   lambda g, k: ((mask_input(g, (24,), k) + torch.arange(24) * 1e-3).view(8, 3),
                                 torch.randn(8, 4, generator=g))),
    # Row 2 scores -inf, rows of a random third NaN: the top 4 of fewer
    # than 4 finite scores take row 2, never a NaN row left out.
    "class-topk": (bm.ClassTopk,
                   lambda g, k: ((mask_input(g, (10,), k) + torch.arange(10) * 1e-3).masked_fill(
                                     torch.rand(10, generator=g) < 0.7, math.nan).index_fill(
                                     0, torch.tensor([2]), -math.inf),
                                 torch.randn(10, 4, generator=g))),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(EXACT_CASES))
def test_bounded_forms_then_materialized_equal_the_original(staticify, save, tmp_path,
                                                            case, device):
    cls, inputs = EXACT_CASES[case]
    # Each returns what it selects, cut on the host either way: the forms
    # reach the host as often as the original, so staticify keeps them only
    # when asked (--static-forms), which is what this checks.
    path, out, method = static_output(staticify, save, tmp_path, cls(), "--static-forms")
    roots = [f for f in method["findings"]
             if f["role"] == "root" and f["action"] != "introduced"]
    assert roots and all(f["action"] == "rewritten" and f["rule"] for f in roots), roots
    cuts = [f for f in method["findings"] if f["action"] == "introduced"]
    assert cuts, "the returned value must be materialized, and reported"
    for f in cuts:
        assert f["reason"].startswith("bound: materialized: it is returned"), f
        assert f["location"] and f["location"]["line"] > 0
    # The reference is the module run eagerly, not its scripted original: on
    # CUDA, PyTorch 2.11's TorchScript fuser (NNC) gives the scripted RowOps
    # int32 softmax and sort values for an empty selection from its fourth
    # call on (measured on an H100, docs/benchmarks.md); eager PyTorch and the
    # staticified program give float32.
    original, result = cls(), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(5)
    for trial in range(1000):
        kind = ("none", "all", "random")[trial % 3] if trial < 6 else "random"
        args = [t.to(device) for t in inputs(gen, kind)]
        a, b = original(*args), result(*args)
        for p, q in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            if isinstance(p, torch.Tensor):
                assert p.dtype == q.dtype and torch.equal(p, q), (case, args, p, q)
            else:
                assert p == q


def test_padded_outputs_return_padded_and_count(staticify, save, tmp_path):
    path, out, method = static_output(staticify, save, tmp_path, bm.BoolIndex(),
                                      "--padded-outputs")
    assert method["after"]["static"] is True
    result = torch.jit.load(str(out))
    x, m = torch.randn(4, 5, 3), torch.randn(4, 5) > 0
    padded, count = result(x, m)
    assert padded.shape == (20, 3) and count.dim() == 0
    assert torch.equal(padded[:int(count)], x[m].abs())
    assert int(count) < 20 and torch.equal(padded[int(count):], torch.zeros(20 - int(count), 3))


class RemoveSelfLoops(torch.nn.Module):
    """PyG's remove_self_loops on a [2, E] edge list: a selection of
    columns, returned."""

    def forward(self, e: torch.Tensor, attr: torch.Tensor):
        edge_index = e.view(2, -1)
        mask = edge_index[0] != edge_index[1]
        return edge_index[:, mask], attr.view(-1)[mask]


def test_padded_outputs_pad_a_column_selection_along_its_dim(staticify, save, tmp_path):
    """`edge_index[:, mask]` comes back padded along dim 1, with its count:
    no sync left (the session-start binary cut it, one sync)."""
    path, out, method = static_output(staticify, save, tmp_path, RemoveSelfLoops(),
                                      "--padded-outputs")
    assert method["after"]["static"] is True
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for trial in range(12):
        e = torch.randint(0, 4, (2, 10), generator=gen)
        if trial % 3 == 0:
            e[1] = e[0]  # every edge a self loop: nothing kept
        attr = torch.randn(10, generator=gen)
        want_index, want_attr = original(e, attr)
        (index, count), (attrs, attr_count) = static(e, attr)
        assert index.shape == (2, 10) and int(count) == want_index.size(1) == int(attr_count)
        assert torch.equal(index[:, :int(count)], want_index)
        assert torch.equal(attrs[:int(attr_count)], want_attr)


class SelectByAnInput(torch.nn.Module):
    """x[m] with m a graph input: a mask or indices, as its dtype says."""

    def forward(self, x: torch.Tensor, m: torch.Tensor):
        return x[m] * 2.0, x.sum()


def test_padded_outputs_behind_a_dtype_guard(staticify, save, tmp_path):
    """With --padded-outputs a method versioned on an input's dtype returns
    (padded, count) from every version: the bool version padded, the
    fallback (int64 indices) its whole result with its size as the count."""
    path, out, method = static_output(staticify, save, tmp_path, SelectByAnInput(),
                                      "--padded-outputs")
    assert method["after"]["static"] is True
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=gen)
    for m in (torch.randn(6, generator=gen) > 0, torch.zeros(6, dtype=torch.bool),
              torch.tensor([4, 0, 4, 1])):
        (want, want_sum), ((rows, count), total) = original(x, m), static(x, m)
        assert int(count) == want.size(0) and count.dtype == torch.int64
        assert torch.equal(rows[:int(count)], want) and torch.equal(total, want_sum)
        assert rows.size(0) == (6 if m.dtype == torch.bool else 4)


class Detections(torch.nn.Module):
    def forward(self, scores: torch.Tensor, labels: torch.Tensor, boxes: torch.Tensor):
        keep = scores > 0.5
        d = {"scores": scores[keep], "labels": labels[keep], "boxes": boxes[keep]}
        return d, torch.where(keep)[0], keep[keep]


def test_padding_rows_hold_no_real_row(staticify, save, tmp_path):
    """Rows past the count are neutral: scores and boxes 0, labels and
    indices -1 (no real label or index), bools False."""
    path = save(Detections())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out, "--padded-outputs")
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for n in (0, 1, 7):
        scores, labels = torch.rand(n, generator=gen), torch.randint(0, 5, (n,), generator=gen)
        boxes = torch.rand(n, 4, generator=gen)
        scores[:1] = 0.9  # at least one detection where there is a row
        (want, want_idx, want_keep) = original(scores, labels, boxes)
        (got, (idx, idx_count), (kept, kept_count)) = static(scores, labels, boxes)
        k = int(got["scores_count"])
        assert k == want["scores"].numel() == int(idx_count) == int(kept_count)
        for key in ("scores", "labels", "boxes"):
            assert torch.equal(got[key][:k], want[key])
        assert torch.equal(idx[:k], want_idx) and torch.equal(kept[:k], want_keep)
        assert (got["scores"][k:] == 0).all() and (got["boxes"][k:] == 0).all()
        assert (got["labels"][k:] == -1).all() and (idx[k:] == -1).all()
        assert not kept[k:].any()
        assert n == 0 or k < n or n == 1


def test_narrow_by_a_count_is_static_and_exact(staticify, save, tmp_path):
    original, result = original_and_static(staticify, save, tmp_path, bm.NarrowByCount(),
                                           "host-sync")
    gen = torch.Generator().manual_seed(9)
    for trial in range(300):
        x = torch.randn(int(torch.randint(0, 9, (), generator=gen)), 3, generator=gen)
        t = torch.randn(int(torch.randint(0, 12, (), generator=gen)), generator=gen)
        assert torch.allclose(original(x, t), result(x, t), atol=1e-6), trial


def test_bound_hint_bounds_a_length_read_from_data(staticify, save, tmp_path):
    path = save(bm.HintedArange())
    plain = staticify.report(path)
    assert plain["methods"][0]["after"]["counts"]["total"] > 0
    _, out, method = static_output(staticify, save, tmp_path, bm.HintedArange(),
                                   "--bound", "k=8", "--padded-outputs")
    assert method["after"]["static"] is True
    padded, count = torch.jit.load(str(out))(torch.tensor([2.0, 3.0]))
    assert padded.shape == (8,) and int(count) == 5
    assert torch.equal(padded[:5], torch.arange(5) * 2)


def test_bad_bound_option_is_a_usage_error(staticify, save):
    path = save(bm.HintedArange())
    for bad in ("k", "k=", "=3", "k=-1", "k=3x"):
        proc = staticify(path, "--bound", bad, check=False)
        assert proc.returncode == 2 and "--bound" in proc.stderr, bad


def tied_quality(gen):
    """A (gts, preds) match-quality matrix of a few levels: many ties, so a
    prediction is often the best match of several ground truths."""
    gts, preds = (int(s) for s in torch.randint(1, 7, (2,), generator=gen))
    return torch.randint(0, 3, (gts, preds), generator=gen).float() / 2


def test_write_at_bounded_rows_is_static_and_exact(staticify, save, tmp_path):
    """x[i] = v[...] at bounded indices: a masked write, the last of repeated
    indices winning as on PyTorch's CPU kernel. Quality matrices with ties
    (integers in a small range) make many repeats."""
    original, result = original_and_static(staticify, save, tmp_path, bm.WriteGathered(),
                                           "dynamic-shape")
    gen = torch.Generator().manual_seed(11)
    for trial in range(300):
        quality = tied_quality(gen)
        gts, preds = quality.shape
        matches = torch.randint(0, gts, (preds,), generator=gen)
        want, got = original(quality, matches), result(quality, matches)
        assert all(torch.equal(a, b) for a, b in zip(want, got)), (trial, quality)


def test_index_add_at_bounded_rows_is_static_and_exact(staticify, save, tmp_path):
    """index_add(_) of rows at bounded indices: the live rows add to x's rows
    in their order, as PyTorch's CPU kernel adds them, so the sums are equal
    bit for bit, repeats included."""
    original, result = original_and_static(staticify, save, tmp_path, bm.AddAtBoundedRows(),
                                           "dynamic-shape")
    gen = torch.Generator().manual_seed(13)
    for trial in range(300):
        quality = tied_quality(gen)
        x = torch.randn(quality.size(1), 3, generator=gen)
        want, got = original(quality, x), result(quality, x)
        assert all(torch.equal(a, b) for a, b in zip(want, got)), (trial, quality)
