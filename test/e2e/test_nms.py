"""Padded NMS: the bounded form `nms` (passes/forms/bounded_forms.py) and the
runtime's kernel `staticify::nms_padded` (runtime/Nms.cpp, CPU here, CUDA on
the GPU machine) against torchvision's own NMS, on 2,000 random cases per
device: sizes 0 to 5,000, heavy overlap, identical boxes, tied scores,
zero-area boxes, and thresholds exactly at an IoU that occurs in the case.

The kept indices (the first `count` rows) must equal torchvision.ops.nms
exactly, order included; the kernel's padded result must equal the form's,
padding included. With classes (the per-class strategy of batched_nms) the
kept set equals torchvision's `_batched_nms_vanilla`, and so does the order
where scores are distinct (its last step is an unstable sort: among tied
scores its order is the sort implementation's)."""

import pytest
import torch

from conftest import RUNTIME
from test_forms import compile_forms

torchvision = pytest.importorskip("torchvision")
from torchvision.ops import boxes as box_ops  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CASES = 2000


@pytest.fixture(scope="module")
def ops():
    torch.ops.load_library(str(RUNTIME))
    return torch.ops.staticify, compile_forms()


def iou_at(boxes, i, j):
    """IoU of rows i and j, with the arithmetic of torchvision's kernels."""
    a, b = boxes[i], boxes[j]
    w = (torch.minimum(a[2], b[2]) - torch.maximum(a[0], b[0])).clamp(min=0)
    h = (torch.minimum(a[3], b[3]) - torch.maximum(a[1], b[1])).clamp(min=0)
    inter = w * h
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    return float(inter / (area(a) + area(b) - inter))


def random_case(gen, n=None):
    """boxes [n, 4], scores [n], classes [n], threshold. Sizes: 0 to 3
    often, then up to 15, 100, 400; 1.5% from 1,000 to 5,000."""
    r = lambda *shape: torch.rand(*shape, generator=gen)  # noqa: E731
    pick = lambda k: int(torch.randint(0, k, (), generator=gen))  # noqa: E731
    if n is None:
        size = pick(200)
        n = (1000 + pick(4001) if size < 3 else
             [0, 1, 2, 3, pick(16), pick(100), pick(400)][size % 7])
    kind = pick(5)
    if kind == 0:    # scattered
        xy, wh = r(n, 2) * 100, r(n, 2) * 30
    elif kind == 1:  # heavy overlap: a few clusters of jittered boxes
        centers = r(max(n // 50, 1), 2) * 50
        xy = centers[torch.randint(0, centers.size(0), (n,), generator=gen)] + r(n, 2)
        wh = 10 + r(n, 2)
    elif kind == 2:  # integer grid: identical boxes, zero-area boxes
        xy, wh = (r(n, 2) * 4).floor(), (r(n, 2) * 3).floor()
    else:            # nested and shifted
        xy, wh = r(n, 2) * 20, 5 + r(n, 2) * 20
    boxes = torch.cat([xy, xy + wh], 1)
    if n > 1 and pick(4) == 0:
        boxes[pick(n):] = boxes[0]  # a run of identical boxes
    scores = r(n)
    if pick(3) == 0:
        scores = (scores * 4).floor()  # ties
    classes = torch.randint(0, 1 + pick(6), (n,), generator=gen)
    threshold = [0.0, 0.3, 0.5, 0.7, 1.0, -0.5][pick(6)]
    if n > 1 and pick(2) == 0:
        # Exactly an IoU of this case, or the doubles next to it.
        at = iou_at(boxes, pick(n), pick(n))
        threshold = at + [0.0, 1e-9, -1e-9][pick(3)]
    return boxes, scores, classes, threshold


def by_class(boxes, scores, classes, threshold):
    """_batched_nms_vanilla's kept set, ordered by descending score with ties
    by index (a stable sort)."""
    keep = box_ops._batched_nms_vanilla(boxes, scores, classes, threshold)
    kept = keep.sort().values
    return kept[scores[kept].sort(descending=True, stable=True).indices]


@pytest.mark.parametrize("device", DEVICES)
def test_nms_form_and_kernel_equal_torchvision(ops, device):
    staticify, forms = ops
    gen = torch.Generator().manual_seed(0)
    sizes, edges = 0, 0
    for case in range(CASES):
        n = 5000 if case == 0 else None  # the largest size, at least once
        boxes, scores, classes, t = (x.to(device) if torch.is_tensor(x) else x
                                     for x in random_case(gen, n))
        where = (case, boxes.size(0), t)
        want = torchvision.ops.nms(boxes, scores, t)
        form, form_count = forms.nms(boxes, scores, t, None, None)
        got, count = staticify.nms_padded(boxes, scores, t)
        assert got.device == boxes.device and count.device == boxes.device, where
        assert got.dtype == torch.long and count.dim() == 0, where
        assert got.size(0) == boxes.size(0), where
        assert torch.equal(got[:int(count)], want), where
        assert torch.equal(got, form) and int(count) == int(form_count), where

        if case % 4 == 0:  # batched, per class
            want = by_class(boxes, scores, classes, t)
            got, count = staticify.nms_padded(boxes, scores, t, classes=classes)
            form, form_count = forms.nms(boxes, scores, t, None, classes)
            assert torch.equal(got, form) and int(count) == int(form_count), where
            assert torch.equal(got[:int(count)], want), where
        if case % 4 == 1 and boxes.size(0):  # bounded: rows past count are padding
            live = int(torch.randint(0, boxes.size(0) + 1, (), generator=gen))
            count_in = torch.tensor(live, device=device)
            junk = torch.rand(boxes.size(0) - live, generator=gen).to(device) + 9
            padded_scores = torch.cat([scores[:live], junk])
            want = torchvision.ops.nms(boxes[:live], scores[:live], t)
            got, count = staticify.nms_padded(boxes, padded_scores, t, count_in)
            form, form_count = forms.nms(boxes, padded_scores, t, count_in, None)
            assert torch.equal(got, form) and int(count) == int(form_count), where
            assert torch.equal(got[:int(count)], want), where
        sizes = max(sizes, boxes.size(0))
        edges += t not in (0.0, 0.3, 0.5, 0.7, 1.0, -0.5)
    assert sizes == 5000 and edges >= 500  # the generator covers what it claims


def test_batched_nms_order_matches_torchvision_where_scores_differ(ops):
    """Against torchvision.ops.batched_nms itself (either strategy): with
    distinct scores the per-class result is exactly its result."""
    staticify, _ = ops
    gen = torch.Generator().manual_seed(1)
    for case in range(200):
        boxes, _, classes, t = random_case(gen)
        scores = torch.randperm(boxes.size(0), generator=gen).float()
        want = box_ops._batched_nms_vanilla(boxes, scores, classes, t)
        got, count = staticify.nms_padded(boxes, scores, t, classes=classes)
        assert torch.equal(got[:int(count)], want), case


def test_nms_padded_rejects_what_it_does_not_take(ops):
    staticify, _ = ops
    with pytest.raises(RuntimeError, match=r"boxes of shape \[N, 4\]"):
        staticify.nms_padded(torch.rand(3, 5), torch.rand(3), 0.5)
    with pytest.raises(RuntimeError, match="scores of shape"):
        staticify.nms_padded(torch.rand(3, 4), torch.rand(4), 0.5)
    with pytest.raises(RuntimeError, match="float or double"):
        staticify.nms_padded(torch.rand(3, 4).half(), torch.rand(3).half(), 0.5)
    with pytest.raises(RuntimeError, match="0-d int64"):
        staticify.nms_padded(torch.rand(3, 4), torch.rand(3), 0.5, torch.tensor([1]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_nms_padded_never_syncs_on_cuda(ops):
    staticify, _ = ops
    boxes = torch.rand(3000, 4, device="cuda") * 50
    boxes[:, 2:] += boxes[:, :2]
    scores = torch.rand(3000, device="cuda")
    staticify.nms_padded(boxes, scores, 0.5)  # warm-up: loads the kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        staticify.nms_padded(boxes, scores, 0.5, torch.tensor(2000, device="cuda"))
    finally:
        torch.cuda.set_sync_debug_mode("default")
