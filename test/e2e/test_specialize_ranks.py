"""specialize-ranks through the real binary: a method selecting by (or from)
inputs whose rank TorchScript does not record is versioned on their ranks
(metadata: no sync). The first version sees the spelling it knows
(`m.nonzero().squeeze(1)` of a 1-D m is `torch.where(m)[0]`; experts applied
to `x[idx]` of a 2-D x keep rows apart); the original runs for any other
rank. Outputs equal the original's at every rank, and where the original
raises the result raises too."""
import pytest
import torch
from torch import Tensor

from conftest import sync_points


class MaskedMAE(torch.nn.Module):
    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        valid = ~torch.isnan(target)
        return (preds[valid.nonzero().squeeze(1)] - target[valid.nonzero().squeeze(1)]).abs().mean()


class MoEDispatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: Tensor, router: Tensor) -> Tensor:
        expert_index = router.argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx = (expert_index == e).nonzero().squeeze(1)
            out[idx] = expert(x[idx])
        return out


def compiled(staticify, save, tmp_path, module):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    return torch.jit.load(str(path)), torch.jit.load(str(out)), staticify.report(path)


def same(original, result, *args):
    try:
        expected = original(*args)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            result(*args)
        return
    got = result(*args)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=1e-6, equal_nan=True)


def test_masked_mean_of_vectors_is_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, MaskedMAE())
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(0)
    for shape in [(20,), (0,), (4, 5), (2, 3, 4)]:
        for keep in (0.0, 0.5, 1.0):
            preds = torch.randn(*shape, generator=gen)
            target = torch.randn(*shape, generator=gen)
            target[torch.rand(*shape, generator=gen) >= keep] = float("nan")
            same(original, result, preds, target)


def test_expert_dispatch_is_static(staticify, save, tmp_path):
    torch.manual_seed(0)
    original, result, report = compiled(staticify, save, tmp_path, MoEDispatch().eval())
    assert sync_points(report) == (3, 0)
    gen = torch.Generator().manual_seed(1)
    for shape in [(10, 4), (1, 4), (0, 4), (2, 5, 4)]:
        x = torch.randn(*shape, generator=gen)
        router = torch.randn(*shape[:-1], 3, generator=gen)
        with torch.no_grad():
            same(original, result, x, router)
