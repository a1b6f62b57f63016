"""torchvision's mask and keypoint heads (MaskRCNNHeads, MaskRCNNPredictor,
KeypointRCNNHeads, KeypointRCNNPredictor: the modules themselves, with
their in-place ReLUs) on the RoIs a data-dependent selection keeps, through
the real binary. Each head is batched: row r of its result comes from RoI r
alone (convolutions, a transposed one, bilinear upsampling), so the padded
rows go through it (bound's per-sample rule), and `mask_logits[arange(n),
labels]` picks one mask per RoI row by row (gather_rows_at): no host read
is left between the selection and the loss, or the returned heatmaps.

The must-not-touch cases: a batched op whose input's rank the program does
not fix, which for a vector (linear) or an unbatched image (conv2d) mixes
the rows, is left as it was, and equals the original on both ranks."""
from typing import List

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from conftest import findings, sync_points

mask_rcnn = pytest.importorskip("torchvision.models.detection.mask_rcnn")
keypoint_rcnn = pytest.importorskip("torchvision.models.detection.keypoint_rcnn")
ops = pytest.importorskip("torchvision.ops")


def rois_of(proposals: Tensor) -> Tensor:
    """One image's proposals as roi_align's rows (image 0)."""
    return torch.cat([torch.zeros_like(proposals[:, :1]), proposals], 1)


class MaskLossOnPositives(torch.nn.Module):
    """RoIHeads' mask branch in training (torchvision roi_heads.py): the
    positive proposals pooled, the mask head and predictor on them, then
    maskrcnn_loss's one mask per RoI, of its class."""

    def __init__(self):
        super().__init__()
        self.mask_head = mask_rcnn.MaskRCNNHeads(8, (8, 8), 1)
        self.mask_predictor = mask_rcnn.MaskRCNNPredictor(8, 8, 4)

    def forward(self, features: Tensor, proposals: Tensor, labels: Tensor,
                mask_targets: Tensor) -> Tensor:
        labels = labels.to(dtype=torch.int64)  # as assign_targets_to_proposals
        pos = torch.where(labels > 0)[0]
        x = ops.roi_align(features, rois_of(proposals)[pos], (14, 14), 0.5, 2, False)
        mask_logits = self.mask_predictor(self.mask_head(x))
        pos_labels = labels[pos]
        picked = mask_logits[torch.arange(pos_labels.shape[0], device=labels.device),
                             pos_labels]
        return F.binary_cross_entropy_with_logits(picked, mask_targets[pos])


class KeypointHeatmapsOfKept(torch.nn.Module):
    """Keypoint R-CNN's branch at inference (torchvision roi_heads.py): the
    detections kept by score pooled, the keypoint head and predictor on
    them; the heatmaps are returned."""

    def __init__(self):
        super().__init__()
        self.keypoint_head = keypoint_rcnn.KeypointRCNNHeads(8, (8, 8))
        self.keypoint_predictor = keypoint_rcnn.KeypointRCNNPredictor(8, 3)

    def forward(self, features: Tensor, boxes: Tensor, scores: Tensor) -> Tensor:
        keep = torch.where(scores > 0.5)[0]
        x = ops.roi_align(features, rois_of(boxes)[keep], (14, 14), 0.5, 2, False)
        return self.keypoint_predictor(self.keypoint_head(x))


def proposals(gen, n):
    xy = torch.rand(n, 2, generator=gen) * 48
    return torch.cat([xy, xy + 4 + torch.rand(n, 2, generator=gen) * 12], 1)


def keep(gen, n, kind):
    """A selection that keeps none, all, or some of n rows."""
    frac = {"none": 0.0, "all": 1.0}.get(kind, 0.5)
    return torch.rand(n, generator=gen) < frac


def mask_inputs(gen, n, kind):
    labels = torch.randint(1, 4, (n,), generator=gen) * keep(gen, n, kind)
    return (torch.randn(1, 8, 32, 32, generator=gen), proposals(gen, n),
            labels.to(torch.int32), torch.rand(n, 28, 28, generator=gen))


def keypoint_inputs(gen, n, kind):
    scores = torch.rand(n, generator=gen) * 0.5 + 0.5 * keep(gen, n, kind)
    return torch.randn(1, 8, 32, 32, generator=gen), proposals(gen, n), scores


def roots_left(report):
    return [f for f in findings(report) if f["role"] == "root" and
            f["action"] in ("kept", "introduced")]


def compare(original, static, inputs, padded=False):
    gen = torch.Generator().manual_seed(5)
    for n in [0, 1, 3, 12]:
        for kind in ["none", "all", "random"]:
            args = inputs(gen, n, kind)
            want, got = original(*args), static(*args)
            if padded:
                got, count = got
                got = got[:int(count)]
            assert got.shape == want.shape, (n, kind)
            torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-6)


def test_mask_head_and_loss_on_the_positives_are_static(
        staticify, save, tmp_path, torchvision_library):
    path = save(MaskLossOnPositives().eval())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--load-library", torchvision_library)
    before, after = sync_points(report)
    assert (before, after) == (1, 0), roots_left(report)
    compare(torch.jit.load(str(path)), torch.jit.load(str(out)), mask_inputs)


def test_keypoint_head_on_kept_rois_keeps_its_rows_padded(
        staticify, save, tmp_path, torchvision_library):
    path = save(KeypointHeatmapsOfKept().eval())
    cut, padded = tmp_path / "cut.pt", tmp_path / "padded.pt"
    # The heads run on the padded rows: the one read left cuts the
    # returned heatmaps, not the head's input (as often as the original
    # reads: staticify keeps the forms when asked, --static-forms).
    report = staticify.report(path, "-o", cut, "--load-library", torchvision_library,
                              "--static-forms")
    left = roots_left(report)
    assert sync_points(report) == (1, 1) and len(left) == 1, left
    assert "returned" in left[0]["reason"], left
    report = staticify.report(path, "-o", padded, "--padded-outputs",
                              "--load-library", torchvision_library)
    assert sync_points(report) == (1, 0), roots_left(report)
    original = torch.jit.load(str(path))
    compare(original, torch.jit.load(str(cut)), keypoint_inputs)
    compare(original, torch.jit.load(str(padded)), keypoint_inputs, padded=True)


class LinearOfRows(torch.nn.Module):
    def forward(self, x: Tensor, m: Tensor, w: Tensor) -> Tensor:
        return F.linear(x[torch.where(m)[0]], w).sum()


class Conv2dOfRows(torch.nn.Module):
    def forward(self, x: Tensor, m: Tensor, w: Tensor) -> Tensor:
        return F.conv2d(x[torch.where(m)[0]], w).sum()


@pytest.mark.parametrize("module,cases", [
    # x of rank 2: rows of tokens; of rank 1, linear contracts the selected
    # elements (as many as w's columns) into w's rows.
    (LinearOfRows, [([5, 3], [7, 3]), ([5], [7, 3])]),
    # x of rank 4: a batch of images; of rank 3 an unbatched image, whose
    # selected rows conv2d takes as channels.
    (Conv2dOfRows, [([5, 2, 6, 6], [4, 2, 3, 3]), ([5, 6, 6], [4, 3, 3, 3])]),
], ids=["linear", "conv2d"])
def test_batched_op_of_an_unknown_rank_is_left_alone(staticify, save, tmp_path,
                                                     module, cases):
    path = save(module())
    out = tmp_path / "static.pt"
    # As often as the original: what bound would do shows with --static-forms.
    report = staticify.report(path, "-o", out, "--static-forms")
    assert sync_points(report) == (1, 1)
    # The report names the op the selected rows stop at.
    op = "aten::linear" if module is LinearOfRows else "aten::conv2d"
    reasons = " ".join(f.get("reason") or "" for f in findings(report))
    assert f"materialize: '{op}' 1" in reasons, reasons
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    m = torch.tensor([True, True, True, False, False])
    for x_shape, w_shape in cases:
        args = (torch.randn(x_shape, generator=gen), m, torch.randn(w_shape, generator=gen))
        torch.testing.assert_close(static(*args), original(*args))


class LinearThenSoftmax(torch.nn.Module):
    """linear of selected token rows by a weight the program does not fix
    the rank of: a matrix keeps the rows' rank, a vector drops the last dim
    (then softmax(-1) runs across the rows, not within each)."""

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        tokens = x.reshape(-1, 4)
        y = F.linear(tokens[tokens.sum(1) > 0], w)
        return y.softmax(-1).sum(0)


def test_linear_by_a_weight_of_unknown_rank(staticify, save, tmp_path):
    """The rewrite checks the weight is a matrix on the host; a vector takes
    the guard's fallback, and softmax(-1) then runs across the rows."""
    path = save(LinearThenSoftmax())
    out = tmp_path / "static.pt"
    before, after = sync_points(staticify.report(path, "-o", out))
    assert after < before, (before, after)  # rewritten
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(2)
    for w_shape in [(5, 4), (4,)]:
        args = (torch.randn(6, 4, generator=gen), torch.randn(w_shape, generator=gen))
        torch.testing.assert_close(static(*args), original(*args))
