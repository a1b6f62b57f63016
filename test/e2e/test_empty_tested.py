"""Reads and stores at selected rows under a test that there are any
(empty-tested-branches), and the coordinates of a 1-D mask squeezed with
no dim (normalize: where(m)[0] where no use reads the rank), through the
real binary against the original: mmdetection's MaxIoUAssigner tail, with
no, one (squeeze() makes it 0-d) and many positives, as it is spelled and
with len()/size(0) tests. A branch that reduces the rows keeps its if."""
import pytest
import torch
from torch import Tensor
from typing import Final, Tuple

from conftest import RUNTIME, sync_points


class AssignLabels(torch.nn.Module):
    """MaxIoUAssigner.assign_wrt_overlaps without the low-quality loop."""
    test: Final[str]

    def __init__(self, test: str = "numel"):
        super().__init__()
        self.test = test

    def forward(self, overlaps: Tensor, gt_labels: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        num_bboxes = overlaps.size(1)
        assigned_gt_inds = overlaps.new_full((num_bboxes,), -1, dtype=torch.long)
        max_overlaps, argmax_overlaps = overlaps.max(dim=0)
        assigned_gt_inds[(max_overlaps >= 0) & (max_overlaps < 0.4)] = 0
        pos = max_overlaps >= 0.5
        assigned_gt_inds[pos] = argmax_overlaps[pos] + 1
        assigned_labels = assigned_gt_inds.new_full((num_bboxes,), -1)
        # squeeze() as mmdetection writes it; len() and size(0) of its 0-d
        # result (one positive) would raise, so those tests take squeeze(1).
        if self.test == "numel":
            pos_inds = torch.nonzero(assigned_gt_inds > 0).squeeze()
            if pos_inds.numel() > 0:
                assigned_labels[pos_inds] = gt_labels[assigned_gt_inds[pos_inds] - 1]
        elif self.test == "len":
            pos_inds = torch.nonzero(assigned_gt_inds > 0).squeeze(1)
            if len(pos_inds) != 0:
                assigned_labels[pos_inds] = gt_labels[assigned_gt_inds[pos_inds] - 1]
        else:
            pos_inds = torch.nonzero(assigned_gt_inds > 0).squeeze(1)
            if pos_inds.size(0) >= 1:
                assigned_labels[pos_inds] = gt_labels[assigned_gt_inds[pos_inds] - 1]
        return assigned_gt_inds, max_overlaps, assigned_labels


class ReducedUnderTest(torch.nn.Module):
    """Must keep its if: max() of no rows raises where the test skipped it."""

    def forward(self, scores: Tensor, out: Tensor) -> Tensor:
        pos_inds = torch.where(scores > 0.5)[0]
        if pos_inds.numel() > 0:
            out[pos_inds] = scores[pos_inds] / scores[pos_inds].max()
        return out


def overlaps_with(positives: int, gen: torch.Generator) -> Tuple[Tensor, Tensor]:
    """IoUs of 3 gt boxes against 12 boxes, `positives` of them >= 0.5."""
    overlaps = torch.rand(3, 12, generator=gen) * 0.45
    cols = torch.randperm(12, generator=gen)[:positives]
    rows = torch.randint(0, 3, (positives,), generator=gen)
    overlaps[rows, cols] = 0.5 + 0.5 * torch.rand(positives, generator=gen)
    return overlaps, torch.randint(0, 80, (3,), generator=gen)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("test", ["numel", "len", "size"])
def test_assigner_labels_need_no_sync(staticify, save, tmp_path, test):
    path = save(AssignLabels(test))
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert before >= 3 and after == 0, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for positives in [0, 1, 1, 2, 5, 12]:
        overlaps, labels = overlaps_with(positives, gen)
        got, want = static(overlaps, labels), original(overlaps, labels)
        assert same(got, want), positives
        assert int((want[2] >= 0).sum()) == positives


def test_the_runtime_kernels_store_alike(staticify, save, tmp_path):
    """--inference takes the runtime's put_valid_rows for the store."""
    torch.ops.load_library(str(RUNTIME))
    path = save(AssignLabels().eval())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out, "--inference")
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(1)
    for positives in [0, 1, 4]:
        overlaps, labels = overlaps_with(positives, gen)
        assert same(static(overlaps, labels), original(overlaps, labels)), positives


def test_a_reduction_of_the_rows_keeps_its_if(staticify, save, tmp_path):
    path = save(ReducedUnderTest())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    assert sync_points(report) == (1, 1)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    for scores in [torch.zeros(6), torch.tensor([0.9, 0.1, 0.7, 0.2, 0.3, 0.6])]:
        assert torch.equal(static(scores, torch.zeros(6)), original(scores, torch.zeros(6)))
