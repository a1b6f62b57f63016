"""Stores into a range whose bound is read from data, through the real
binary against the original in PyTorch (lift-scalars' range stores): the
bound stays on the device and the store is masked by the positions the
slice spans. SpecAugment's mask (torchaudio 0.7's mask_along_axis), a
padding mask built row by row in a loop, bounds from both ends of a
tensor's values, negative ones and ones past the dim included, and CutMix's
box (torchvision's references), a region along two dims that takes the same
region of another tensor of its shape."""
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


class CutMixBox(torch.nn.Module):
    """torchvision references' RandomCutmix: the box's corners read from
    tensors, the box pasted from the batch rolled by one."""

    def forward(self, batch: Tensor, target: Tensor, lam: Tensor, r_x: Tensor,
                r_y: Tensor):
        rolled = batch.roll(1, 0)
        H, W = batch.shape[-2], batch.shape[-1]
        r = 0.5 * torch.sqrt(1.0 - lam)
        r_w_half = int(r * W)
        r_h_half = int(r * H)
        x1 = int(torch.clamp(r_x - r_w_half, min=0))
        y1 = int(torch.clamp(r_y - r_h_half, min=0))
        x2 = int(torch.clamp(r_x + r_w_half, max=W))
        y2 = int(torch.clamp(r_y + r_h_half, max=H))
        batch = batch.clone()
        batch[:, :, y1:y2, x1:x2] = rolled[:, :, y1:y2, x1:x2]
        area = float(1.0 - (x2 - x1) * (y2 - y1) / (W * H))
        return batch, target * area + target.roll(1, 0) * (1.0 - area)


class SignedBox(torch.nn.Module):
    """A box whose bounds may be negative or past the dims (slicing wraps
    and clamps them), pasted from another tensor of the batch's shape, in
    another dtype (the store casts)."""

    def forward(self, x: Tensor, t: Tensor):
        a, b = int(t[0]), int(t[1])
        c, d = int(t[2]), int(t[3])
        y = (x * 10).to(torch.int64)
        x[:, a:b, c:d] = y[:, a:b, c:d]
        return x


class OtherRegion(torch.nn.Module):
    """Must not touch: the value is another region of y (which element a
    position takes depends on both bounds)."""

    def forward(self, x: Tensor, t: Tensor):
        a, b = int(t[0]), int(t[1])
        y = x.neg()
        x[:, a:] = y[:, b:]
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
        if isinstance(want, torch.Tensor):
            want, got = (want,), (got,)
        assert len(want) == len(got)
        assert all(torch.equal(w, o) for w, o in zip(want, got)), args


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


def test_cutmix_box_from_a_rolled_batch(staticify, save, tmp_path):
    check(staticify, save, tmp_path, CutMixBox(),
          lambda g: (torch.randn(3, 2, 8, 10, generator=g), torch.rand(3, 4, generator=g),
                     torch.rand([], generator=g),
                     torch.randint(0, 10, (1,), generator=g),
                     torch.randint(0, 8, (1,), generator=g)))


def test_box_with_signed_bounds_and_a_cast(staticify, save, tmp_path):
    check(staticify, save, tmp_path, SignedBox(),
          lambda g: (torch.randn(2, 5, 6, generator=g), torch.randint(-8, 9, (4,), generator=g)))


def test_another_region_is_left_alone(staticify, save, tmp_path):
    path = save(OtherRegion())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert before == 2 and after == 2, (before, after)
