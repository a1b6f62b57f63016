"""A loop over feature levels that appends each level's selected detections
to lists and concatenates them afterwards, written as torchvision's
RetinaNet.postprocess_detections is (score threshold, top-k of
min(topk_candidates, kept), anchor and class from the flat index by floor
division and remainder, boxes gathered by anchor), through the real binary.
With --padded-outputs the whole method is static; its valid rows equal the
original's whatever the threshold keeps (nothing, everything, some), and for
any topk_candidates the caller sets (a negative one raises in both)."""
from typing import List

import pytest
import torch
from torch import Tensor


class LevelDetections(torch.nn.Module):
    def __init__(self, topk_candidates=7):
        super().__init__()
        self.topk_candidates = topk_candidates

    def forward(self, logits: List[Tensor], boxes: List[Tensor], score_thresh: float):
        image_boxes, image_scores, image_labels = [], [], []
        for logits_per_level, boxes_per_level in zip(logits, boxes):
            num_classes = logits_per_level.shape[-1]
            scores_per_level = torch.sigmoid(logits_per_level).flatten()
            keep_idxs = scores_per_level > score_thresh
            scores_per_level = scores_per_level[keep_idxs]
            topk_idxs = torch.where(keep_idxs)[0]
            num_topk = min(self.topk_candidates, topk_idxs.size(0))
            scores_per_level, idxs = scores_per_level.topk(num_topk)
            topk_idxs = topk_idxs[idxs]
            anchor_idxs = torch.div(topk_idxs, num_classes, rounding_mode="floor")
            labels_per_level = topk_idxs % num_classes
            image_boxes.append(boxes_per_level[anchor_idxs].flatten(1))
            image_scores.append(scores_per_level)
            image_labels.append(labels_per_level)
        return (torch.cat(image_boxes, dim=0), torch.cat(image_scores, dim=0),
                torch.cat(image_labels, dim=0))


def levels(gen):
    sizes = [int(s) for s in torch.randint(0, 9, (3,), generator=gen)]
    logits = [torch.randn(n, 4, generator=gen) for n in sizes]
    boxes = [torch.rand(n, 2, 2, generator=gen) for n in sizes]
    return logits, boxes


@pytest.fixture
def staticified(staticify, save, tmp_path):
    path = save(LevelDetections())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--padded-outputs")
    return report["methods"][0], torch.jit.load(str(path)), torch.jit.load(str(out))


def test_level_loop_is_static_with_padded_outputs(staticified):
    method, _, _ = staticified
    assert method["before"]["counts"]["dynamic-shape"] > 0
    assert method["after"]["static"] is True, method["after"]


@pytest.mark.parametrize("topk_candidates", [7, 0, 100, -2])
def test_level_loop_equals_the_original(staticified, topk_candidates):
    _, original, static = staticified
    original.topk_candidates = topk_candidates
    static.topk_candidates = topk_candidates
    gen = torch.Generator().manual_seed(topk_candidates + 10)
    for trial in range(40):
        logits, boxes = levels(gen)
        thresh = (2.0, -2.0, 0.5)[trial % 3]  # nothing, everything, some
        try:
            want = original(logits, boxes, thresh)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match="selected index k out of range"):
                static(logits, boxes, thresh)
            assert "selected index k out of range" in str(e)
            continue
        got = static(logits, boxes, thresh)
        assert len(got) == len(want)
        for (padded, count), w in zip(got, want):
            assert torch.equal(padded[:int(count)], w), (trial, w, padded, count)
