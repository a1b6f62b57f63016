"""A selection made only where something is filtered, as detection code
writes it (detectron2's find_top_rpn_proposals):

    if not valid_mask.all():
        boxes, scores = boxes[valid_mask], scores[valid_mask]

For a bool vector m of x's rows, x[m] is x where every element holds, so
staticify selects whichever way the test goes and drops its read
(all-tested-selections, behind a host guard on the mask's dtype, rank and
rows). Through the real binary: the spellings of the test all lose their
sync point, and outputs equal the original's where every box is valid,
where some are and where none is, and, in the guard's fallback, for a
uint8 mask and for a mask broadcast to other rows than the boxes'."""
import pytest
import torch
from torch import Tensor

from conftest import sync_points


class NotAll(torch.nn.Module):
    def forward(self, boxes: Tensor, scores: Tensor):
        valid = torch.isfinite(boxes).all(dim=1) & torch.isfinite(scores)
        if not valid.all():
            boxes = boxes[valid]
            scores = scores[valid]
        widths = boxes[:, 2] - boxes[:, 0]
        return (boxes.sum(0), (scores * widths).sum())


class CountAgainstRows(torch.nn.Module):
    def forward(self, boxes: Tensor, scores: Tensor):
        keep = (boxes[:, 2] - boxes[:, 0] > 1.0) & (boxes[:, 3] - boxes[:, 1] > 1.0)
        if keep.sum().item() != len(boxes):
            boxes, scores = boxes[keep], scores[keep]
        return boxes.mean(0), scores.sum()


class AnyInvalid(torch.nn.Module):
    def forward(self, x: Tensor, m: Tensor):
        if (~m).any():
            x = x[m]
        return x.sum(0)


class Uint8Mask(torch.nn.Module):
    """The guard's fallback: a uint8 mask indexes as a bool one does."""

    def forward(self, x: Tensor, s: Tensor):
        m = (s > 0).to(torch.uint8)
        if not m.all():
            x = x[m]
        return x.sum(0)


def boxes(n, gen, invalid=0.0, small=0.0):
    xy = torch.rand(n, 2, generator=gen) * 50
    wh = torch.rand(n, 2, generator=gen) * 10 + 2
    wh[torch.rand(n, generator=gen) < small] = 0.5
    b = torch.cat([xy, xy + wh], dim=1)
    b[torch.rand(n, generator=gen) < invalid, 1] = float("inf")
    return b


CASES = {
    "not-all": (NotAll(), lambda n, g, p: (boxes(n, g, invalid=p), torch.rand(n, generator=g))),
    "count": (CountAgainstRows(), lambda n, g, p: (boxes(n, g, small=p), torch.rand(n, generator=g))),
    "any-invalid": (AnyInvalid(), lambda n, g, p: (torch.randn(n, 3, generator=g),
                                                  torch.rand(n, generator=g) >= p)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_test_loses_its_read_and_outputs_equal(staticify, save, tmp_path, name):
    module, inputs = CASES[name]
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert before >= 1 and after == 0, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    # Every row kept, some, none; sizes with no row and one.
    for p in (0.0, 0.3, 1.0):
        for n in (0, 1, 7, 40):
            args = inputs(n, gen, p)
            try:
                want = original(*args)
            except RuntimeError:
                continue  # a max of nothing: the original raises
            got = static(*args)
            for w, g in zip(want, got) if isinstance(want, tuple) else [(want, got)]:
                assert w.shape == g.shape and torch.allclose(w, g, equal_nan=True), (name, p, n)


def test_fallbacks_run_the_original(staticify, save, tmp_path):
    """A uint8 mask (the guard checks for bool) and a mask of other rows
    than x's (broadcast from scores of one row) take the fallback, which
    runs the if as it was: outputs equal, the read counted apart."""
    path = save(Uint8Mask())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(1)
    for n in (0, 1, 9):
        x, s = torch.randn(n, 3, generator=gen), torch.randn(n, generator=gen)
        assert torch.equal(original(x, s), static(x, s))
    x = torch.randn(9, 3, generator=gen)
    assert torch.equal(original(x, torch.ones(9)), static(x, torch.ones(9)))

    path = save(NotAll(), "broadcast.pt")
    out = tmp_path / "broadcast_static.pt"
    staticify(path, "-o", out)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    # One box, five finite scores: the mask has five rows, the boxes one;
    # every element holds, so the original passes both on.
    one_box, five_scores = boxes(1, gen), torch.rand(5, generator=gen)
    want, got = original(one_box, five_scores), static(one_box, five_scores)
    assert all(torch.equal(w, g) for w, g in zip(want, got))
