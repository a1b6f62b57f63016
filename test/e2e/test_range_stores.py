"""Stores into a range whose bound is read from data, through the real
binary against the original in PyTorch (lift-scalars' range stores): the
bound stays on the device and the store is masked by the positions the
slice spans. SpecAugment's mask (torchaudio 0.7's mask_along_axis), a
padding mask built row by row in a loop, and bounds from both ends of a
tensor's values, negative ones and ones past the dim included."""
import torch
from torch import Tensor

from conftest import sync_points


class MaskAlongAxis(torch.nn.Module):
    def forward(self, specgram: Tensor, r: Tensor):
        value = r[0] * 10.0
        min_value = r[1] * (specgram.size(2) - value)
        mask_start = (min_value.long()).squeeze()
        mask_end = (min_value.long() + value.long()).squeeze()
        specgram[:, :, mask_start:mask_end] = 0.0
        return specgram


class LengthMask(torch.nn.Module):
    def forward(self, x: Tensor, lengths: Tensor):
        mask = torch.zeros(x.size(0), x.size(1))
        for i in range(x.size(0)):
            mask[i, :lengths[i]] = 1.0
        return (x * mask.unsqueeze(-1)).sum(1)


class Between(torch.nn.Module):
    def forward(self, x: Tensor, t: Tensor, fill: Tensor):
        a = int(t.min())
        b = int(t.max())
        x[:, a:b] = fill.sum()
        return x


def check(staticify, save, tmp_path, module, inputs, trials=150):
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert before >= 1 and after == 0, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for _ in range(trials):
        args = inputs(gen)
        want = original(*[a.clone() for a in args])
        got = static(*[a.clone() for a in args])
        assert torch.equal(want, got), args


def test_spec_augment_mask(staticify, save, tmp_path):
    check(staticify, save, tmp_path, MaskAlongAxis(),
          lambda g: (torch.randn(2, 3, 12, generator=g), torch.rand(2, generator=g)))


def test_padding_mask_in_a_loop(staticify, save, tmp_path):
    # Lengths past the rows' size, zero and negative (slicing clamps and
    # wraps them).
    check(staticify, save, tmp_path, LengthMask(),
          lambda g: (torch.randn(4, 6, 3, generator=g), torch.randint(-7, 9, (4,), generator=g)))


def test_bounds_from_both_ends_and_a_tensor_value(staticify, save, tmp_path):
    check(staticify, save, tmp_path, Between(),
          lambda g: (torch.randn(3, 7, generator=g), torch.randint(-9, 10, (2,), generator=g),
                     torch.randn(2, generator=g)))
