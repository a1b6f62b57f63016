"""The functional losses on selected rows, as detectors' box losses call them
(torchvision's RetinaNet and Fast R-CNN heads, detectron2's box regression):
`F.smooth_l1_loss(pred[fg], target[fg], reduction="sum") / max(1, n)`, and
l1_loss and mse_loss likewise. Inlined, each compares the two sizes, warns
when they differ, and broadcasts the two tensors: staticified, they run on
padded rows with no host read, and give the original's loss."""
import pytest
import torch
import torch.nn.functional as F

from conftest import sync_points


class SmoothL1(torch.nn.Module):
    def forward(self, pred: torch.Tensor, target: torch.Tensor, matched: torch.Tensor):
        fg = torch.where(matched >= 0)[0]
        loss = F.smooth_l1_loss(pred[fg], target[fg], beta=1.0 / 9, reduction="sum")
        return loss / max(1, fg.numel())


class L1(torch.nn.Module):
    def forward(self, pred: torch.Tensor, target: torch.Tensor, matched: torch.Tensor):
        fg = matched >= 0
        return F.l1_loss(pred[fg], target[fg], reduction="sum")


class Mse(torch.nn.Module):
    def forward(self, pred: torch.Tensor, target: torch.Tensor, matched: torch.Tensor):
        fg = torch.where(matched > 0)[0]
        return F.mse_loss(pred[fg], target[fg], reduction="sum")


class RowsAndSums(torch.nn.Module):
    """A selection broadcast against its own row sums: one count, two ranks
    (valid only when the count is 1 or the rows' width). The ranks are a
    host fact here: the guard's fallback takes the valid rows."""

    def forward(self, x: torch.Tensor, m: torch.Tensor):
        a = x[m]
        a2, s2 = torch.broadcast_tensors(a, a.sum(1))
        return (a2 * s2).sum()


# Sync points before: the where(fg), or each boolean-mask selection.
@pytest.mark.parametrize("model,before", [(SmoothL1, 1), (L1, 2), (Mse, 1)])
def test_losses_on_selected_rows_are_static_and_equal(staticify, save, tmp_path, model,
                                                      before):
    path = save(model())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    assert sync_points(report) == (before, 0), sync_points(report)
    assert report["methods"][0]["after"]["sync_points"] == 0
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for keep in ("none", "all", "some"):
        for _ in range(10):
            pred, target = torch.randn(12, 4, generator=gen), torch.randn(12, 4, generator=gen)
            matched = torch.randint(-1, 3, (12,), generator=gen)
            if keep == "none":
                matched.fill_(-1)
            elif keep == "all":
                matched.fill_(1)
            want, got = original(pred, target, matched), static(pred, target, matched)
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (keep, got, want)


def test_rows_against_their_sums_take_the_fallback(staticify, save, tmp_path):
    path = save(RowsAndSums())
    out = tmp_path / "static.pt"
    staticify.report(path, "-o", out)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    x = torch.randn(6, 4)
    for rows in ([2], [0, 1, 2, 3]):  # a count of 1, and of the width
        m = torch.zeros(6, dtype=torch.bool)
        m[rows] = True
        assert torch.allclose(static(x, m), original(x, m))
    m = torch.zeros(6, dtype=torch.bool)
    m[[0, 1]] = True  # 2 rows against a width of 4: both raise
    with pytest.raises(Exception):
        original(x, m)
    with pytest.raises(Exception):
        static(x, m)
