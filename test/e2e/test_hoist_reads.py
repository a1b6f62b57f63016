"""torchvision's per-box decoders through the real binary: RoIHeads'
`paste_masks_in_image` (Mask R-CNN's postprocess: ten integers of each box
read on the host, `int(box[2] - box[0] + 1)`, `max(box[0], 0)`, the bounds
of the paste) and `heatmaps_to_keypoints` (Keypoint R-CNN's: two,
`int(widths_ceil[i].item())`), the functions themselves, imported from
torchvision. On CUDA each read waits for the stream, once per box. The
`hoist-reads` pass copies the boxes to the host once before each loop and
the loop reads the copy: one sync point where there were ten (two); the
keypoint decoder's widths and heights are computed from the one copy of
the boxes. Outputs equal the original's exactly, for no box, one and many,
boxes reaching out of the image and boxes under a pixel wide."""
from typing import Tuple

import pytest
import torch
from torch import Tensor

from conftest import findings, sync_points

roi_heads = pytest.importorskip("torchvision.models.detection.roi_heads")


class PasteMasks(torch.nn.Module):
    def forward(self, masks: Tensor, boxes: Tensor) -> Tensor:
        return roi_heads.paste_masks_in_image(masks, boxes, (60, 80), 1)


class Keypoints(torch.nn.Module):
    def forward(self, maps: Tensor, rois: Tensor) -> Tuple[Tensor, Tensor]:
        return roi_heads.heatmaps_to_keypoints(maps, rois)


def random_boxes(gen, n):
    """n boxes in an 80x60 image, clipped to it as RoIHeads' postprocess
    clips them (paste_masks_in_image widens them by a pixel each side, past
    the image's edges; a box wholly outside makes torchvision raise), some
    under a pixel wide."""
    xy = torch.rand(n, 2, generator=gen) * torch.tensor([80.0, 60.0])
    wh = torch.rand(n, 2, generator=gen) * 40
    wh[::3] *= 0.01
    boxes = torch.cat([xy, xy + wh], 1)
    return torch.min(boxes, torch.tensor([80.0, 60.0, 80.0, 60.0]))


CASES = {
    "paste": (PasteMasks, lambda gen, n: (torch.rand(n, 1, 28, 28, generator=gen),
                                          random_boxes(gen, n))),
    "keypoints": (Keypoints, lambda gen, n: (torch.randn(n, 17, 56, 56, generator=gen),
                                             random_boxes(gen, n))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_copy_per_loop_and_equal_outputs(staticify, save, tmp_path, name):
    module, inputs = CASES[name]
    path = save(module())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert after == 1 < before, (before, after)
    left = [f for f in findings(report) if f["role"] == "root" and
            f["action"] in ("kept", "introduced")]
    assert [f["op"] for f in left] == ["aten::cpu"], left
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(3)
    for n in [0, 1, 2, 5, 17]:
        args = inputs(gen, n)
        want, got = original(*args), static(*args)
        for w, g in zip(want if isinstance(want, tuple) else [want],
                        got if isinstance(got, tuple) else [got]):
            assert torch.equal(w, g), (name, n)


class FirstRows(torch.nn.Module):
    """A loop that reads one number of each of its first rows (a host read
    each, on CUDA a sync each)."""

    def forward(self, x: Tensor, n: int) -> int:
        total = 0
        for i in range(n):
            total += int(x[i, 0])
        return total


def test_copy_bounded_by_the_reads_it_replaces(staticify, save, tmp_path):
    """The copy is made where it holds at most 64 elements per read, or
    65,536 in all: a 3-row loop over a 1,000 x 100 tensor copies it (under
    65,536), over a 100,000 x 4 one reads the device as before (the guard's
    fallback). Either way the result is the original's."""
    path = save(FirstRows())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    assert sync_points(report) == (1, 1)
    left = [f["op"] for f in findings(report) if f["role"] == "root" and
            f["action"] in ("kept", "introduced")]
    assert left == ["aten::cpu"], left
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for shape in [(1000, 100), (100000, 4)]:
        x = torch.randint(-9, 9, shape, generator=gen)
        for n in [0, 3]:
            assert static(x, n) == original(x, n), (shape, n)
