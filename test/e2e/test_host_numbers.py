"""Reads of values made from host numbers, and histograms of bytes, through
the real binary, against the original in PyTorch.

- host-replay: a check on a tensor built from host numbers on the data's
  device (torchvision's normalize: `(std == 0).any()`) is read from the same
  ops replayed on the host; with the dtype known only at run time, a guard
  replays in the dtypes the host computes exactly and reads the device's
  tensor otherwise (float16 here).
- lift-scalars: a coefficient read back as a float and rebuilt with
  `torch.as_tensor(c, dtype=..., device=...)` (torchaudio's biquads) stays a
  tensor: one rounding to the dtype, as as_tensor's.
- normalize: `torch.bincount(x, minlength=256)` of a uint8 vector is a
  scatter_add into 256 zeros; any other dtype or rank takes bincount.
- lift-scalars: a fake-quantize observer's scale and zero point, read with
  `.item()`/`float()`/`int()`, go to fake_quantize_per_tensor_affine's
  tensor overload.
- bound: a loss divided by a count only the device knows (mmdet's
  `loss / max(pos_inds.numel(), 1)`) divides by the count as a tensor of
  the loss's dtype; an integer sum takes the guard's fallback."""
from typing import List

import pytest
import torch

from conftest import sync_points


class StdCheck(torch.nn.Module):
    def __init__(self, std: List[float]):
        super().__init__()
        self.std = std

    def forward(self, x):
        std = torch.as_tensor(self.std, dtype=x.dtype, device=x.device)
        if (std == 0).any():
            raise ValueError("std evaluated to zero")
        return x / std.view(-1, 1, 1)


class Coefficients(torch.nn.Module):
    def forward(self, x, w):
        c = torch.sin(x.mean()) / 2.0
        b0 = torch.as_tensor(float(c), dtype=w.dtype, device=w.device)
        b1 = torch.as_tensor(float(c * 3.0), dtype=torch.float64, device=w.device)
        return w * b0 + b1


class Histogram(torch.nn.Module):
    def forward(self, x):
        return torch.bincount(x.reshape(-1), minlength=256)


class Observer(torch.nn.Module):
    """Quantization-aware training's min/max observer, qparams read back."""

    def __init__(self, qmin: int, qmax: int):
        super().__init__()
        self.qmin = qmin
        self.qmax = qmax

    def forward(self, x):
        mn = torch.clamp(x.min(), max=0.0)
        mx = torch.clamp(x.max(), min=0.0)
        scale = torch.clamp((mx - mn) / float(self.qmax - self.qmin), min=1e-8)
        zp = self.qmin - int(torch.round(mn / scale).item())
        return torch.fake_quantize_per_tensor_affine(
            x, float(scale), zp, self.qmin, self.qmax)


class FixedZeroPoint(torch.nn.Module):
    """Only the scale read back: the zero point a host int."""

    def forward(self, x, zp: int):
        scale = x.abs().max() / 127.0
        return torch.fake_quantize_per_tensor_affine(x, scale.item(), zp, -128, 127)


def run(staticify, save, tmp_path, module):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    return torch.jit.load(str(path)), torch.jit.load(str(out)), staticify.report(path)


def test_std_check_reads_the_host(staticify, save, tmp_path):
    original, result, report = run(staticify, save, tmp_path, StdCheck([0.2, 0.3, 0.4]))
    assert sync_points(report) == (1, 0)
    for dtype in (torch.float32, torch.float64, torch.float16):
        x = torch.rand(3, 4, 5).to(dtype)
        assert torch.equal(original(x), result(x)), dtype


def test_std_check_still_raises(staticify, save, tmp_path):
    original, result, _ = run(staticify, save, tmp_path, StdCheck([0.2, 0.0, 0.4]))
    for module in (original, result):
        with pytest.raises(torch.jit.Error, match="std evaluated to zero"):
            module(torch.rand(3, 4, 5))


def test_rebuilt_coefficients_stay_tensors(staticify, save, tmp_path):
    original, result, report = run(staticify, save, tmp_path, Coefficients())
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):  # no sin of half on the CPU
        x = torch.randn(7, generator=gen, dtype=torch.float64).to(dtype)
        w = torch.randn(5, generator=gen, dtype=torch.float64).to(dtype)
        a, b = original(x, w), result(x, w)
        assert a.dtype == b.dtype and torch.equal(a, b), dtype


def test_byte_histogram_is_static_and_equal(staticify, save, tmp_path):
    original, result, report = run(staticify, save, tmp_path, Histogram())
    # The histogram of bytes has 256 bins: no root left in the guarded form.
    assert sync_points(report)[1] == 0
    gen = torch.Generator().manual_seed(0)
    cases = [torch.randint(0, 256, (3, 32, 32), generator=gen, dtype=torch.uint8),
             torch.zeros(0, dtype=torch.uint8),
             torch.full((10,), 255, dtype=torch.uint8),
             # Other dtypes take bincount: more bins than 256 where the
             # values reach past them.
             torch.randint(0, 1000, (50,), generator=gen),
             torch.randint(0, 200, (50,), generator=gen, dtype=torch.int32)]
    for x in cases:
        a, b = original(x), result(x)
        assert a.dtype == b.dtype and torch.equal(a, b), x.dtype


def test_byte_histogram_of_a_scalar_raises_as_bincount(staticify, save, tmp_path):
    class Scalar(torch.nn.Module):
        def forward(self, x):
            return torch.bincount(x, minlength=256)

    original, result, _ = run(staticify, save, tmp_path, Scalar())
    x = torch.tensor(3, dtype=torch.uint8)
    for module in (original, result):
        with pytest.raises(RuntimeError, match="1-d"):
            module(x)


@pytest.mark.parametrize("qrange", [(0, 255), (-128, 127)])
def test_observer_qparams_stay_on_the_device(staticify, save, tmp_path, qrange):
    original, result, report = run(staticify, save, tmp_path, Observer(*qrange))
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(0)
    for trial in range(60):
        x = torch.randn(4, 33, generator=gen) * (0.01 + trial) + (trial % 7 - 3)
        if trial % 10 == 0:
            x = x.abs()  # min clamped to 0: zero point qmin
        a, b = original(x), result(x)
        assert a.dtype == b.dtype and torch.equal(a, b), trial


def test_a_host_zero_point_beside_a_read_scale(staticify, save, tmp_path):
    original, result, report = run(staticify, save, tmp_path, FixedZeroPoint())
    assert sync_points(report) == (1, 0)
    gen = torch.Generator().manual_seed(1)
    for zp in (-5, 0, 3):
        x = torch.randn(50, generator=gen, dtype=torch.float32)
        assert torch.equal(original(x, zp), result(x, zp)), zp
    # Where the original raises (the zero point outside [qmin, qmax]), the
    # tensor overload does not check it: the contract's "may return values".
    with pytest.raises(RuntimeError, match="zero_point"):
        original(torch.randn(5), 300)


class ConfusionOfAttribute(torch.nn.Module):
    """torchmetrics' confusion matrix of valid pixels, its class count a
    module attribute (a host int, not a constant: a method or the caller may
    change it): bincount(n * target + pred, minlength=n * n).reshape(n, n)
    has exactly n * n bins wherever the reshape does not raise."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes

    def forward(self, pred, target):
        n = self.num_classes
        k = (target >= 0) & (target < n)
        return torch.bincount(n * target[k] + pred[k], minlength=n * n).reshape(n, n)


def test_confusion_of_a_host_class_count_is_static(staticify, save, tmp_path):
    original, result, report = run(staticify, save, tmp_path, ConfusionOfAttribute(4))
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(2)
    for size in (0, 1, 50):
        pred = torch.randint(0, 4, (size,), generator=gen)
        target = torch.randint(-1, 5, (size,), generator=gen)  # -1 and 4 ignored
        a, b = original(pred, target), result(pred, target)
        assert a.dtype == b.dtype and torch.equal(a, b), size
    # A prediction past the classes: more bins than n * n, the reshape raises.
    pred, target = torch.tensor([0, 9]), torch.tensor([1, 3])
    for module in (original, result):
        with pytest.raises(RuntimeError):
            module(pred, target)
    # The attribute changed from Python: the same host int in both.
    original.num_classes = result.num_classes = 3
    pred, target = torch.randint(0, 3, (20,), generator=gen), torch.randint(0, 3, (20,), generator=gen)
    assert torch.equal(original(pred, target), result(pred, target))


class AssignedBoxLoss(torch.nn.Module):
    """mmdet's PseudoSampler and bbox loss: positives by unique(nonzero),
    their ground truth by gt_inds - 1, the summed L1 loss over the number
    of positives (a count only the device knows), and an integer sum over
    it, whose fallback divides as the original does."""

    def forward(self, gt_inds, bboxes, gt_bboxes):
        pos = torch.unique(torch.nonzero(gt_inds > 0).squeeze(-1))
        gt = gt_bboxes[gt_inds[pos] - 1, :]
        loss = torch.nn.functional.l1_loss(bboxes[pos], gt, reduction="sum")
        return loss / max(pos.numel(), 1), gt_inds.sum() / max(pos.numel(), 1)


def test_a_loss_over_a_device_count_is_static(staticify, save, tmp_path):
    path = save(AssignedBoxLoss())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert before >= 4 and after == 0, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for n, gts in ((0, 3), (1, 3), (9, 3), (9, 1)):
        # Nothing assigned, some, everything.
        for high in (1, gts + 1):
            gt_inds = torch.randint(0, high, (n,), generator=gen)
            bboxes, gt_bboxes = torch.randn(n, 4, generator=gen), torch.randn(gts, 4, generator=gen)
            want, got = original(gt_inds, bboxes, gt_bboxes), static(gt_inds, bboxes, gt_bboxes)
            for w, g in zip(want, got):
                assert w.dtype == g.dtype and torch.allclose(w, g), (n, gts, high)


class InPlaceScale(torch.nn.Module):
    """From the differential fuzzer: a selection made only where its
    mask's count falls short (all-tested-selections), summed and scaled in
    place by 100 over its element count, a count only the device knows,
    beside the unique values of a selection by an equal mask. The scale is
    applied once: the rewritten in-place op replaces the original, which
    writes too."""

    def forward(self, y, t, xi):
        kept = torch.unique(xi[t > -0.25])
        m = t > -0.25
        s = y
        if m.sum().item() != len(y):
            s = y[m]
        return s.sum().mul_(100.0 / max(s.numel(), 1)), kept


def test_an_in_place_scale_by_a_device_count_is_applied_once(staticify, save, tmp_path):
    path = save(InPlaceScale())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert after < before, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for n in (1, 6, 9):
        for shift in (-2.0, 0.0, 2.0):  # every row kept, some, none
            y, t = torch.randn(n, 4, generator=gen), torch.randn(n, generator=gen) + shift
            xi = torch.randint(-3, 4, (n, 4), generator=gen)
            want, got = original(y, t, xi), static(y, t, xi)
            assert all(torch.allclose(w, g) for w, g in zip(want, got)), (n, shift, want, got)
