"""normalize folds `key in d` where every dict d may be is built in the graph
with known keys (passes/DictKeys.h), on torchvision's own
GeneralizedRCNNTransform.postprocess: it tests `"masks" in pred` and
`"keypoints" in pred` of the per-image dicts a detector's head built. A head
that writes boxes and scores only (RetinaNet, FCOS, SSD, Faster R-CNN) makes
both tests false, and paste_masks_in_image's host reads of box coordinates
leave the graph; a head that writes masks (Mask R-CNN) keeps them, and so does
a postprocess of dicts the caller passes in. The output equals the original's
in every case, through the real binary."""
from typing import Dict, List

import pytest
import torch
from torch import Tensor
from torchvision.models.detection.transform import GeneralizedRCNNTransform

from conftest import findings


class Head(torch.nn.Module):
    """Builds the per-image result dicts as torchvision's heads do (one dict
    per image, appended to a list), then torchvision's postprocess."""
    with_masks: torch.jit.Final[bool]

    def __init__(self, with_masks):
        super().__init__()
        self.with_masks = with_masks
        self.transform = GeneralizedRCNNTransform(64, 64, [0.5] * 3, [0.2] * 3)

    def forward(self, boxes: Tensor, scores: Tensor, masks: Tensor):
        result: List[Dict[str, Tensor]] = []
        for i in range(boxes.size(0)):
            det = {"boxes": boxes[i], "scores": scores[i]}
            if self.with_masks:
                det["masks"] = masks[i]
            result.append(det)
        return self.transform.postprocess(result, [(32, 48)] * boxes.size(0),
                                          [(64, 96)] * boxes.size(0))


class Given(torch.nn.Module):
    """postprocess of dicts the caller passes: any key may be there."""

    def __init__(self):
        super().__init__()
        self.transform = GeneralizedRCNNTransform(64, 64, [0.5] * 3, [0.2] * 3)

    def forward(self, result: List[Dict[str, Tensor]]):
        return self.transform.postprocess(result, [(32, 48)], [(64, 96)])


def in_paste_masks(report):
    return [f for f in findings(report)
            if "roi_heads.py" in ((f.get("location") or {}).get("file") or "")]


def inputs(gen):
    boxes = torch.rand(2, 5, 4, generator=gen) * 30
    boxes[..., 2:] += boxes[..., :2]
    return boxes, torch.rand(2, 5, generator=gen), torch.rand(2, 5, 1, 28, 28, generator=gen)


def same(got, want):
    return len(got) == len(want) and all(
        g.keys() == w.keys() and all(torch.equal(g[k], w[k]) for k in w)
        for g, w in zip(got, want))


@pytest.mark.parametrize("with_masks", [False, True])
def test_postprocess_of_known_dicts(staticify, save, tmp_path, with_masks):
    path = save(Head(with_masks))
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    pasted = in_paste_masks(report)
    if with_masks:
        assert pasted, "the masks are pasted: the test must stay"
    else:
        assert not pasted, pasted
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        args = inputs(gen)
        want = original(*args)
        assert same(static(*args), want)
        assert ("masks" in want[0]) == with_masks


def test_postprocess_of_given_dicts_keeps_its_tests(staticify, save, tmp_path):
    path = save(Given())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    assert in_paste_masks(report)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    boxes, scores, masks = inputs(torch.Generator().manual_seed(1))
    for given in ([{"boxes": boxes[0], "scores": scores[0]}],
                  [{"boxes": boxes[0], "scores": scores[0], "masks": masks[0]}]):
        want = original([dict(d) for d in given])
        assert same(static([dict(d) for d in given]), want)
