"""Host numbers put on a device by torchvision's own detection code, through
the real binary: GeneralizedRCNNTransform's normalize (`torch.as_tensor(
self.image_mean, dtype=..., device=...)`), transform.resize_boxes
(`torch.tensor(s, dtype=torch.float32, device=...)`) and
AnchorGenerator.generate_anchors (`torch.as_tensor(scales, ...)`). Each
such tensor is copied from pageable host memory, which on CUDA waits for
the stream; normalize builds them on the device instead. The staticified
module keeps no such copy (but the fallback for long lists) and returns
the same values and dtypes as the original; on a GPU, its calls make no
synchronizing call (torch.cuda.set_sync_debug_mode)."""
from typing import List

import pytest
import torch
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.transform import GeneralizedRCNNTransform, resize_boxes


class DetectionGlue(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transform = GeneralizedRCNNTransform(320, 320, [0.485, 0.456, 0.406],
                                                  [0.229, 0.224, 0.225])
        self.anchors = AnchorGenerator()

    def forward(self, image, boxes, scale: float):
        normalized = self.transform.normalize(image)
        h, w = image.shape[-2], image.shape[-1]
        size: List[int] = [h, w]
        resized = resize_boxes(boxes, size, [int(h * scale), int(w * scale)])
        cells = self.anchors.generate_anchors([32, 64, 128], [0.5, 1.0, 2.0],
                                              image.dtype, image.device)
        return normalized, resized, cells


class Edges(torch.nn.Module):
    """What TorchScript's torch.tensor does with host numbers, at the edges:
    floats through the default dtype (0.485 as float64 is not 0.485; 1e300
    is inf), an int beyond float16 (inf) and beyond float32's precision, a
    bool as a float, a float with no dtype, a list longer than the pass
    fills element by element (kept as a copy)."""

    def forward(self, x, f: float, i: int, b: bool, fs: List[float], ints: List[int]):
        d = x.device
        return (torch.tensor(f, dtype=torch.float64, device=d),
                torch.tensor(f, device=d),
                torch.tensor(i, dtype=torch.float16, device=d),
                torch.tensor(i, dtype=torch.float32, device=d),
                torch.tensor(b, dtype=torch.float32, device=d),
                torch.tensor(b, device=d),
                torch.as_tensor(fs, dtype=torch.float64, device=d),
                torch.tensor(fs, device=d),
                torch.as_tensor(ints, dtype=torch.int32, device=d),
                torch.tensor(ints, device=d))


def test_edge_values_are_torchscripts(staticify, save, tmp_path):
    path = save(Edges())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert uploads(static) == [] and len(uploads(original)) == 10
    x = torch.zeros(1)
    raised = 0
    for f, i, b, n in ((0.485, 70000, True, 3), (1e300, 2 ** 62 + 1, False, 2),
                      (-1e-320, -5, True, 65), (float("nan"), 2 ** 31, False, 64),
                      (float("inf"), 1, True, 1)):
        fs = [1e300 * k - 0.485 for k in range(n)]
        ints = [i + k for k in range(n)]
        try:
            want = original(x, f, i, b, fs, ints)
        except RuntimeError as e:  # 1e300 as a float32 number: both raise
            with pytest.raises(RuntimeError, match=str(e).splitlines()[-1][-40:]):
                static(x, f, i, b, fs, ints)
            raised += 1
            continue
        got = static(x, f, i, b, fs, ints)
        for w, g in zip(want, got):
            assert g.dtype == w.dtype and g.shape == w.shape, (f, i, b, n)
            assert torch.equal(g.isnan(), w.isnan()) and \
                torch.equal(g.nan_to_num(0.0), w.nan_to_num(0.0)), (f, i, b, n, g, w)
    assert raised == 1


def in_kept_fallback(node):
    """Whether node is the second branch of the uploads pass's `if
    len(values) <= 64`, whose first branch fills the values in."""
    owner = node.owningBlock().owningNode()
    if owner is None or owner.kind() != "prim::If":
        return False
    first = list(next(owner.blocks()).nodes())
    inner = [m for n in first for b in n.blocks() for m in b.nodes()]
    return node not in first and any(n.kind() == "aten::fill_" for n in first + inner)


def uploads(module):
    """The copies left in the forward's graph, but in a kept fallback."""
    graph = module.forward.graph
    torch._C._jit_pass_inline(graph)
    return [n for n in graph.findAllNodes("aten::tensor") + graph.findAllNodes("aten::as_tensor")
            if n.inputsSize() >= 3 and n.inputsAt(2).type().kind() == "DeviceObjType"
            and not in_kept_fallback(n)]


def staticified(staticify, save, tmp_path):
    path = save(DetectionGlue())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out)
    return torch.jit.load(str(path)), torch.jit.load(str(out))


def inputs(gen, device="cpu", dtype=torch.float32):
    image = torch.rand(3, 40, 56, generator=gen).to(dtype)
    boxes = (torch.rand(7, 4, generator=gen) * 40).to(dtype)
    return image.to(device), boxes.to(device)


def test_uploads_are_built_on_the_device_with_the_same_values(staticify, save, tmp_path):
    original, static = staticified(staticify, save, tmp_path)
    assert len(uploads(original)) >= 4  # the test can fail: the original copies
    assert uploads(static) == []
    gen = torch.Generator().manual_seed(5)
    for dtype in (torch.float32, torch.float64):
        for scale in (0.5, 1.7, 3.0):
            image, boxes = inputs(gen, dtype=dtype)
            want, got = original(image, boxes, scale), static(image, boxes, scale)
            for w, g in zip(want, got):
                assert g.dtype == w.dtype and torch.equal(g, w), (dtype, scale)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_no_synchronizing_call_on_cuda(staticify, save, tmp_path):
    original, static = staticified(staticify, save, tmp_path)
    image, boxes = inputs(torch.Generator().manual_seed(6), "cuda")
    for _ in range(3):  # the profiling executor specializes on its first runs
        static(image, boxes, 1.5)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = static(image, boxes, 1.5)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for w, g in zip(original(image, boxes, 1.5), got):
        assert torch.equal(g, w)
