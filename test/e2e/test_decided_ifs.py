"""Ifs on the size of a selection, as torchvision's detectors reach
batched_nms: RetinaNet's postprocess keeps the boxes above a score
threshold and calls `batched_nms` on them, whose strategy is
`if boxes.numel() > 4000` (20,000 on CUDA) and whose coordinate trick
starts with `if boxes.numel() == 0: return empty`. The boxes are bounded
(at most the rows the threshold saw): bound runs both strategies on the
padded rows and the device picks one by the count (no read of the test:
passes/bound/BothBranches.cpp), and runs the trick with its count set to
0 where there are no boxes. Through the real binary with the runtime's NMS
kernel: outputs equal the original's for selections of nothing, everything
and some, with a bound below the strategy's threshold (top 200 boxes, 800
coordinates) and above it (top 2,000)."""
import pytest
import torch
import torchvision
from torch import Tensor

from conftest import RUNTIME, sync_points


class ThresholdTopkNms(torch.nn.Module):
    """RetinaNet.postprocess_detections for one level and one image."""

    def __init__(self, topk_candidates: int):
        super().__init__()
        self.topk_candidates = topk_candidates

    def forward(self, logits: Tensor, anchors: Tensor, thresh: float):
        num_classes = logits.shape[-1]
        scores = torch.sigmoid(logits).flatten()
        keep = scores > thresh
        scores = scores[keep]
        topk_idxs = torch.where(keep)[0]
        num_topk = min(self.topk_candidates, topk_idxs.size(0))
        scores, idxs = scores.topk(num_topk)
        topk_idxs = topk_idxs[idxs]
        anchor_idxs = torch.div(topk_idxs, num_classes, rounding_mode="floor")
        labels = topk_idxs % num_classes
        boxes = anchors[anchor_idxs]
        kept = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)[:50]
        return boxes[kept], scores[kept], labels[kept]


def detections(n, gen):
    xy = torch.rand(n, 2, generator=gen) * 100
    wh = torch.rand(n, 2, generator=gen) * 30 + 1
    return torch.randn(n, 5, generator=gen), torch.cat([xy, xy + wh], dim=1)


@pytest.fixture(params=[200, 2000], ids=["below", "above"])
def staticified(staticify, save, tmp_path, torchvision_library, request):
    torch.ops.load_library(str(RUNTIME))
    path = save(ThresholdTopkNms(request.param))
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--load-library", torchvision_library,
                              "--runtime-ops")
    return report, torch.jit.load(str(path)), torch.jit.load(str(out))


def test_the_strategy_test_runs_on_the_device(staticified):
    report, _, _ = staticified
    roots = [f for f in report["methods"][0]["findings"] if f["role"] == "root"]
    # Neither the strategy's test nor the early return's is read on the host:
    # no guard on the bound is left, nor a read of a condition.
    assert not [f for f in roots if f["op"] == "prim::If" and f["action"] != "rewritten"]
    assert not any(f["op"] == "aten::Bool" for f in roots if f["action"] != "rewritten")
    before, after = sync_points(report)
    assert after == 1 < before, (before, after)  # the returned detections


def test_equals_the_original_below_and_above_the_bound(staticified):
    _, original, static = staticified
    gen = torch.Generator().manual_seed(original.topk_candidates)
    for trial in range(12):
        logits, anchors = detections(600, gen)
        thresh = (1.0, 0.0, 0.6)[trial % 3]  # nothing, everything, some
        want = original(logits, anchors, thresh)
        got = static(logits, anchors, thresh)
        for g, w in zip(got, want):
            assert torch.equal(g, w), (original.topk_candidates, thresh)
