"""torchvision's MultiScaleRoIAlign (the box and mask heads' pooler of every
two-stage detector), scripted as torchvision ships it, through the real
binary: each level's `torch.where(levels == level)[0]` is bounded, the
level's rois are gathered, pooled by roi_align on the padded rows and
written back to their rows of the result, with no host read (bound's
roi-align rule, and isinstance folded by normalize so the rois gathered are
not taken for written). With --runtime-ops each level pools and writes its
valid rows only on the CPU (staticify::valid_rows, put_valid_rows). The
output must equal the original's exactly on random images and boxes:
several images, boxes of every level, none at all in an image or in every
image."""
import pytest
import torch

from conftest import RUNTIME, sync_points

torchvision = pytest.importorskip("torchvision")


def random_inputs(gen, trial):
    images = 1 + trial % 3
    x = {"feat1": torch.rand(images, 5, 64, 64, generator=gen),
         "feat3": torch.rand(images, 5, 16, 16, generator=gen)}
    boxes = []
    for _ in range(images):
        k = 0 if trial % 7 == 0 else int(torch.randint(0, 40, (), generator=gen))
        xy = torch.rand(k, 2, generator=gen) * 400
        # Small boxes map to the finest level, large ones to the coarsest.
        wh = torch.rand(k, 2, generator=gen) * (300 if trial % 2 else 40)
        boxes.append(torch.cat([xy, xy + wh], 1))
    return x, boxes, [(512, 512)] * images


@pytest.mark.parametrize("kernels", [False, True], ids=["forms", "runtime-ops"])
def test_multiscale_roi_align_is_static_and_equal(staticify, save, tmp_path,
                                                  torchvision_library, kernels):
    pooler = torchvision.ops.MultiScaleRoIAlign(["feat1", "feat3"], 7, 2)
    path = save(pooler)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--load-library", torchvision_library,
                              *(["--runtime-ops"] if kernels else []))
    before, after = sync_points(report)
    assert (before, after) == (1, 0), (before, after)  # the where, in the level loop
    if kernels:
        torch.ops.load_library(str(RUNTIME))
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    code = static.code + "".join(c.code for c in static.children() if hasattr(c, "code"))
    for op in ("valid_rows", "put_valid_rows"):
        assert (f"staticify.{op}" in code) == kernels, op
    gen = torch.Generator().manual_seed(0)
    pooled = 0
    for trial in range(30):
        args = random_inputs(gen, trial)
        want, got = original(*args), static(*args)
        assert want.shape == got.shape
        assert torch.equal(want, got), trial
        pooled += want.size(0)
    assert pooled > 100  # the comparison saw rois, not only empty inputs
