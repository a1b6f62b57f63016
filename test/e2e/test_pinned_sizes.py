"""Segment ids whose length a later op fixes, through the binary against the
original (pinned-sizes): `repeat_interleave` by a tensor of lengths, read by
`index_add_`/`index_copy`, which raise unless the ids have their source's
rows. The rewrite computes them at that length with no host read; where the
lengths do not sum to the source's rows PyTorch raises, and the rewrite's
result is not compared (DESIGN.md's contract). The inputs make the sum
right mostly and wrong sometimes; empty segments and no segments included."""

import pytest
import torch
from torch import Tensor

from test_rewrites import run_safely

TRIALS = 120


class JaggedSumPool(torch.nn.Module):
    """torchrec-style pooling of jagged values by their lengths."""

    def forward(self, lengths: Tensor, values: Tensor, weights: Tensor):
        b = lengths.numel()
        ids = torch.repeat_interleave(torch.arange(b, device=values.device), lengths)
        pooled = torch.zeros(b, values.size(1), dtype=values.dtype).index_add_(
            0, ids, values * weights.unsqueeze(1))
        return pooled


class SegmentMean(torch.nn.Module):
    """PyG-style mean per graph, ids from the repeats alone, cast on the way."""

    def forward(self, counts: Tensor, x: Tensor):
        batch = torch.repeat_interleave(counts).long()
        sums = torch.zeros(counts.size(0), x.size(1)).index_add(0, batch, x)
        return sums / counts.clamp(min=1).unsqueeze(1), batch


class OffsetToBatch(torch.nn.Module):
    """Pointcept's offset2batch, pooled; the ids returned as well."""

    def forward(self, offset: Tensor, feat: Tensor):
        counts = torch.diff(offset, prepend=torch.zeros(1, dtype=torch.long))
        batch = torch.arange(counts.numel()).repeat_interleave(counts)
        pooled = torch.zeros(counts.numel(), feat.size(1)).index_add_(0, batch, feat)
        return pooled, batch


class IdsReadFirst(torch.nn.Module):
    """Must not touch: the ids are summed before index_add_ checks them."""

    def forward(self, lengths: Tensor, values: Tensor):
        ids = torch.repeat_interleave(lengths)
        total = ids.sum()
        return values.index_add(0, ids.clamp(max=values.size(0) - 1), values), total


def lengths_and_rows(gen, width=3):
    b = int(torch.randint(0, 5, (1,), generator=gen))
    lengths = torch.randint(0, 4, (b,), generator=gen)
    n = int(lengths.sum())
    if int(torch.randint(0, 5, (1,), generator=gen)) == 0:
        n += 1  # the sum is wrong: PyTorch raises
    return lengths, torch.randn(n, width, generator=gen)


def jagged_inputs(gen):
    lengths, values = lengths_and_rows(gen)
    return lengths, values, torch.randn(values.size(0), generator=gen)


def offset_inputs(gen):
    lengths, feat = lengths_and_rows(gen)
    return lengths.cumsum(0), feat


def read_first_inputs(gen):
    lengths, values = lengths_and_rows(gen)
    return lengths, values if values.size(0) else torch.randn(1, 3, generator=gen)


CASES = [
    # name, module, inputs, sync points (before, after)
    ("jagged-sum-pool", JaggedSumPool(), jagged_inputs, (1, 0)),
    ("segment-mean", SegmentMean(), lambda g: lengths_and_rows(g), (1, 0)),
    ("offset-to-batch", OffsetToBatch(), offset_inputs, (1, 0)),
    ("ids-read-first", IdsReadFirst(), read_first_inputs, (1, 1)),
]


def flat(out):
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name,module,inputs,syncs", CASES, ids=[c[0] for c in CASES])
def test_pinned_length_equals_original(staticify, save, tmp_path, name, module, inputs,
                                       syncs):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--static-forms")
    method = staticify.report(path, "--static-forms")["methods"][0]
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == syncs
    original, rewritten = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    ran = 0
    for _ in range(TRIALS):
        args = inputs(gen)
        want, want_error = run_safely(original, args)
        if want_error:
            continue  # the lengths do not sum to the rows: the contract's case
        got, got_error = run_safely(rewritten, args)
        assert got_error is None, (name, args, got_error)
        ran += 1
        for g, w in zip(flat(got), flat(want)):
            assert g.dtype == w.dtype and g.shape == w.shape, (name, args, w, g)
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
    assert ran > TRIALS // 2, ran
