"""Transfers of ops that read the order of a bounded value's live rows, through
the real binary, in programs written the way other projects write them (not
in the idiom corpus): the best of a
selection by argmax, a median and a quantile of selected values, a ranking
metric's running hit count (cumsum), and class counts by one_hot. Each must
reach the host at no point, and give the original's outputs on inputs whose
selections keep nothing, one, some or everything, with NaN where the op's
NaN rules matter."""
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from conftest import sync_points
from test_specialize_ranks import compiled, same


class BestOfSelected(torch.nn.Module):
    """The box of the highest score above a threshold (tracking, SAM's best mask)."""

    def forward(self, scores: Tensor, boxes: Tensor) -> Tensor:
        keep = scores > 0.3
        best = scores[keep].argmax()
        return boxes[keep][best]


class RobustStats(torch.nn.Module):
    """Median and quantiles of the valid values (robust normalisation)."""

    def forward(self, x: Tensor) -> Tensor:
        valid = ~(x < -0.5)  # NaN is valid
        v = x[valid]
        return torch.stack([v.median(), torch.quantile(v, 0.25), torch.quantile(v, 0.9),
                            torch.nanquantile(v, 0.5), v.nanmedian()])


class RunningHits(torch.nn.Module):
    """Precision at each retrieved relevant item, from a cumsum of the hits."""

    def forward(self, scores: Tensor, relevant: Tensor) -> Tensor:
        keep = scores > 0.2
        hits = relevant[keep].float().cumsum(0)
        return hits.max(0)[0] + hits.sum()


class ClassCounts(torch.nn.Module):
    """Per-class counts of the confident predictions, by one_hot."""

    def forward(self, logits: Tensor) -> Tensor:
        conf, pred = logits.softmax(-1).max(-1)
        return F.one_hot(pred[conf > 0.4], 5).sum(0)


def inputs(gen, shape, keep):
    """Values in [-1, 1) where a fraction `keep` (about) passes each program's
    threshold, with NaN in some of them."""
    x = torch.rand(*shape, generator=gen) * 2 - 1
    if keep is not None:
        x = torch.where(torch.rand(*shape, generator=gen) < keep, x.abs() * 0.5 + 0.45, -x.abs() - 0.55)
    return x


def test_best_of_selected_is_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, BestOfSelected())
    assert sync_points(report)[1] == 0
    gen = torch.Generator().manual_seed(0)
    for keep in (0.1, 0.5, 1.0):
        scores = inputs(gen, (12,), keep)
        scores[3] = scores[7] = 0.97  # a tie: the first one wins
        same(original, result, scores, torch.randn(12, 4, generator=gen))


def test_robust_stats_are_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, RobustStats())
    assert sync_points(report) == (1, 0)
    gen = torch.Generator().manual_seed(0)
    for n in (1, 2, 9, 40):
        for keep in (0.0, 0.3, 1.0):
            x = inputs(gen, (n,), keep)
            x[0] = 0.7  # one valid at least: quantile raises on none
            same(original, result, x)
            x[n // 2] = float("nan")  # a valid NaN: median and quantile NaN, the nan- forms not
            same(original, result, x)


def test_running_hits_are_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, RunningHits())
    assert sync_points(report)[1] == 0
    gen = torch.Generator().manual_seed(0)
    for keep in (0.1, 0.5, 1.0):
        scores = inputs(gen, (15,), keep)
        scores[0] = 0.9  # one kept at least: max(0) raises on none
        relevant = torch.rand(15, generator=gen) < 0.5
        same(original, result, scores, relevant)


def test_class_counts_are_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, ClassCounts())
    assert sync_points(report) == (1, 0)
    gen = torch.Generator().manual_seed(0)
    for scale in (0.0, 1.0, 3.0, 30.0):  # from none confident to all
        same(original, result, torch.randn(10, 5, generator=gen) * scale)
