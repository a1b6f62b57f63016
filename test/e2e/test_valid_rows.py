"""A box head on the proposals a selection keeps (Faster R-CNN's shape:
roi_align, flatten, two Linear layers), through the real binary
with --runtime-ops: each op batched on rows takes staticify::valid_rows of
its padded rows, so on the CPU roi_align and the matrix products compute the
valid rows only (the profiler's shapes say so), and the outputs, the padded
rows cut at the count, equal the original's, as do the gradients."""
import pytest
import torch

from conftest import RUNTIME, sync_points

torchvision = pytest.importorskip("torchvision")


class BoxHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc6 = torch.nn.Linear(5 * 3 * 3, 32)
        self.fc7 = torch.nn.Linear(32, 4)

    def forward(self, feat: torch.Tensor, rois: torch.Tensor, scores: torch.Tensor):
        keep = scores > 0.5
        pooled = torchvision.ops.roi_align(feat, rois[keep], 3, 0.25, 2)
        x = torch.relu(self.fc6(pooled.flatten(1)))
        return self.fc7(x).sum(0), scores[keep]


def random_inputs(gen, trial, requires_grad=False):
    images = 1 + trial % 2
    feat = torch.rand(images, 5, 64, 64, generator=gen)
    n = 0 if trial % 9 == 0 else int(torch.randint(1, 60, (), generator=gen))
    xy = torch.rand(n, 2, generator=gen) * 200
    wh = torch.rand(n, 2, generator=gen) * 60
    image = torch.randint(0, images, (n, 1), generator=gen).float()
    rois = torch.cat([image, xy, xy + wh], 1).requires_grad_(requires_grad)
    scores = torch.rand(n, generator=gen) * (0.6 if trial % 5 == 1 else 1.0)
    return feat, rois, scores


def addmm_rows(module, args):
    with torch.profiler.profile(record_shapes=True) as prof:
        module(*args)
    return sorted(e.input_shapes[1][0] for e in prof.events() if e.name == "aten::addmm")


def test_box_head_computes_the_valid_rows_only(staticify, save, tmp_path,
                                               torchvision_library):
    torch.ops.load_library(str(RUNTIME))
    torch.manual_seed(0)
    path = save(BoxHead().eval())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--load-library", torchvision_library,
                              "--runtime-ops")
    before, after = sync_points(report)
    assert after == 1 < before  # left: the selection returned, cut at its count
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    assert "staticify::valid_rows" in str(static.forward.graph)
    gen = torch.Generator().manual_seed(1)
    kept = 0
    for trial in range(40):
        args = random_inputs(gen, trial)
        want, got = original(*args), static(*args)
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
        assert torch.equal(got[1], want[1])
        kept += want[1].numel()
        # The matrix products ran on the kept rows, not on every padded row.
        assert addmm_rows(static, args) == [want[1].numel()] * 2, trial
    assert kept > 200

    # Gradients through valid_rows and padded_rows: the boxes' and fc6's.
    for trial in range(1, 6):
        grads = []
        for module in (original, static):
            module.zero_grad()
            args = random_inputs(torch.Generator().manual_seed(trial), trial, True)
            module(*args)[0].sum().backward()
            grads.append((args[1].grad, module.fc6.weight.grad.clone()))
        for want, got in zip(*grads):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
