"""Segment ids whose length a later op fixes, through the binary against the
original (pinned-sizes): `repeat_interleave` by a tensor of lengths, read by
`index_add_`/`index_copy`, which raise unless the ids have their source's
rows; and padding masks `arange(int(lengths.max()))`, whose width
broadcasting against the padded batch fixes. The rewrite computes them at that length with no host read; where the
lengths do not sum to the source's rows PyTorch raises, and the rewrite's
result is not compared (DESIGN.md's contract). The inputs make the sum
right mostly and wrong sometimes; empty segments and no segments included."""

from typing import Optional

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


class MaskedMean(torch.nn.Module):
    """Speech and NLP pooling: a padding mask from lengths over a (B, T, D) batch."""

    def forward(self, x: Tensor, lengths: Tensor):
        max_len = int(lengths.max())
        mask = torch.arange(max_len, device=x.device)[None, :] < lengths[:, None]
        return (x * mask.unsqueeze(-1)).sum(1) / lengths.clamp(min=1)[:, None]


class MaskScoresInPlace(torch.nn.Module):
    """Attention scores (B, T) masked in place past each length (fairseq style)."""

    def forward(self, scores: Tensor, lengths: Tensor):
        max_len = lengths.max().item()
        pad = torch.arange(0, max_len, device=lengths.device, dtype=lengths.dtype)
        mask = (pad < lengths.unsqueeze(1)).byte()
        scores.masked_fill_(torch.le(mask, 0), -1e4)
        return scores.softmax(-1)


class MaskedDecoderSteps(torch.nn.Module):
    """Tacotron2's decoder: the mask made once, applied at every step."""

    def forward(self, memory: Tensor, lengths: Tensor, steps: int):
        n = int(torch.max(lengths).item())
        mask = torch.arange(n, device=lengths.device).expand(lengths.size(0), n) >= \
            lengths.unsqueeze(1)
        out = torch.zeros_like(memory)
        for _ in range(steps):
            scores = (memory + out).sum(-1).masked_fill(mask, float("-inf"))
            out = out + scores.softmax(-1).unsqueeze(-1) * memory
        return out


class OptionalMask(torch.nn.Module):
    """torchaudio's Emformer: the mask made in one if (None for one row),
    tested and applied in another."""

    def forward(self, scores: Tensor, lengths: Tensor):
        b = scores.size(0)
        if b == 1:
            mask: Optional[Tensor] = None
        else:
            n = int(torch.max(lengths).item())
            mask = torch.arange(n, dtype=lengths.dtype).expand(b, n) >= lengths.unsqueeze(1)
        scores = scores * 2.0
        if mask is not None:
            scores = scores.masked_fill(mask, -1e4)
        return scores.softmax(-1)


class MaskReturned(torch.nn.Module):
    """Must not touch: the mask itself is returned, its width the data's."""

    def forward(self, x: Tensor, lengths: Tensor):
        mask = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
        return x * mask.unsqueeze(-1), mask


def padded_batch(gen, inner=(3,), width=None):
    """Lengths whose longest is the batch's width mostly, 1 sometimes (a
    width of 1 broadcasts in the original), shorter sometimes (it raises)."""
    b = int(torch.randint(1, 5, (1,), generator=gen))
    t = width if width is not None else int(torch.randint(1, 7, (1,), generator=gen))
    lengths = torch.randint(0, t + 1, (b,), generator=gen)
    kind = int(torch.randint(0, 6, (1,), generator=gen))
    if kind < 4:
        lengths[int(torch.randint(0, b, (1,), generator=gen))] = t
    elif kind == 4:
        lengths = torch.randint(0, 2, (b,), generator=gen)
        lengths[0] = 1
    return torch.randn(b, t, *inner, generator=gen), lengths


def decoder_inputs(gen):
    memory, lengths = padded_batch(gen)
    return memory, lengths, int(torch.randint(0, 3, (1,), generator=gen))


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
    ("masked-mean", MaskedMean(), padded_batch, (1, 0)),
    ("mask-scores-in-place", MaskScoresInPlace(), lambda g: padded_batch(g, inner=()),
     (1, 0)),
    ("masked-decoder-steps", MaskedDecoderSteps(), decoder_inputs, (1, 0)),
    ("optional-mask", OptionalMask(), lambda g: padded_batch(g, inner=()), (1, 0)),
    ("mask-returned", MaskReturned(), padded_batch, (1, 1)),
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
            # A row with no valid position softmaxes to NaN in both.
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5, equal_nan=True)
    assert ran > TRIALS // 2, ran
