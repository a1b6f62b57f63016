"""Per-image lists of selected rows, as torchvision's two-stage detectors
keep their proposals: each image's boxes above a score threshold are
appended to a list (RPN.filter_proposals), which torchvision's own
MultiScaleRoIAlign pools (`_convert_to_roi_format`: a cat of the list and
a cat of per-image ids built by a loop over it, joined along dim 1), a
linear head reads, and torchvision's own BoxCoder.decode turns into boxes
(`[b.size(0) for b in boxes]`, their sum by a loop, `reshape(box_sum, -1)`
and `reshape(box_sum, -1, 4)` behind `if box_sum > 0`: [0, 4 * classes]
where there is no box at all), which are split back per image by those
sizes, clipped, cut of their background class and reshaped to one box per
row (RoIHeads.postprocess_detections). bound keeps the lists padded with a
list of counts beside each (passes/bound/ListRules.cpp), and lets the then
branch's rows stand for the else's where the postprocess cannot tell their
empty shapes apart (EmptyShapes.cpp): no host read in the whole chain.
Through the real binary: outputs equal the original's for images with no
box, some and all, none in any image, one image and several."""
from typing import Dict, List, Tuple

import pytest
import torch
from torch import Tensor

from conftest import sync_points

torchvision = pytest.importorskip("torchvision")
from torchvision.models.detection._utils import BoxCoder  # noqa: E402


class PerImageHeads(torch.nn.Module):
    """RPN.filter_proposals' per-image lists through RoIHeads' pooler, box
    head, BoxCoder.decode and postprocess split."""

    def __init__(self):
        super().__init__()
        self.pool = torchvision.ops.MultiScaleRoIAlign(["0"], 3, 2)
        self.head = torch.nn.Linear(4 * 3 * 3, 4 * 3)
        self.box_coder = BoxCoder((10.0, 10.0, 5.0, 5.0))

    def forward(self, features: Dict[str, Tensor], boxes: Tensor, scores: Tensor,
                image_shapes: List[Tuple[int, int]]):
        proposals: List[Tensor] = []
        for b, s in zip(boxes, scores):
            keep = torch.where(s > 0.5)[0]
            proposals.append(b[keep])
        x = self.pool(features, proposals, image_shapes)
        deltas = self.head(x.flatten(1))
        # BoxCoder.decode, whole: its second `if box_sum > 0` reshapes to
        # [n, classes, 4], where the else branch keeps [0, 4 * classes]; the
        # postprocess below cannot tell those empty tensors apart
        # (passes/bound/EmptyShapes.cpp).
        pred = self.box_coder.decode(deltas, proposals)
        boxes_per_image = [p.shape[0] for p in proposals]
        out: List[Tensor] = []
        for part, shape in zip(pred.split(boxes_per_image, 0), image_shapes):
            # RoIHeads.postprocess_detections: clipped, the background
            # class dropped, one box per row.
            part = torchvision.ops.boxes.clip_boxes_to_image(part, shape)
            part = part[:, 1:]
            out.append(part.reshape(-1, 4).sum(0))
        return torch.stack(out)


def random_inputs(gen, trial):
    images = 1 + trial % 3
    k = 20
    xy = torch.rand(images, k, 2, generator=gen) * 40
    wh = torch.rand(images, k, 2, generator=gen) * 20 + 1
    boxes = torch.cat([xy, xy + wh], 2)
    scores = torch.rand(images, k, generator=gen)
    if trial % 4 == 1:
        scores[0] = 0.0  # an image with no proposal
    if trial % 4 == 2:
        scores[:] = 1.0  # every box
    if trial % 8 == 3:
        scores[:] = 0.0  # none in any image
    features = {"0": torch.rand(images, 4, 16, 16, generator=gen)}
    return features, boxes, scores, [(64, 64)] * images


@pytest.fixture
def staticified(staticify, save, tmp_path, torchvision_library):
    torch.manual_seed(0)
    path = save(PerImageHeads())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--load-library", torchvision_library)
    return report, torch.jit.load(str(path)), torch.jit.load(str(out))


def test_no_host_read_in_the_chain(staticified):
    report, _, _ = staticified
    before, after = sync_points(report)
    assert after == 0 < before, (before, after)


def test_equals_the_original(staticified):
    _, original, static = staticified
    gen = torch.Generator().manual_seed(5)
    for trial in range(16):
        inputs = random_inputs(gen, trial)
        want = original(*inputs)
        got = static(*inputs)
        assert got.shape == want.shape, trial
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4, msg=str(trial))
