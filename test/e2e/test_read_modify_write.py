"""`x[m] = f(x[m])` and `x[m] op= v`: a store that writes the selected tensor after f read the
selection (torchaudio's dcshift, overdrive and phaser). mask-propagate moves f
before the mask when nothing writes x between the selection and f
(MaskPropagate.cpp, unwrittenUntil); mask-store then writes `where(m, f(x),
x)`. Through the real binary: no sync left, outputs equal the original's, and
the caller's tensor, which the store writes in place, holds the same values
afterwards. A write between the selection and f keeps the selection."""
import torch
from torch import Tensor

from conftest import sync_points


class Limiter(torch.nn.Module):
    """torchaudio's dcshift with a limiter: two stores into the input."""

    def forward(self, waveform: Tensor) -> Tensor:
        out = waveform
        mask = waveform > 0.5
        temp = (waveform[mask] - 0.5) * 0.05 / 0.5
        out[mask] = (temp + 0.5 + 0.3).clamp(max=0.5)
        out[~mask] = (waveform[~mask] + 0.3).clamp(min=-1, max=1)
        return out


class Rounding(torch.nn.Module):
    """torchaudio's phaser: d[mask] = d[mask] - 0.5, then the others."""

    def forward(self, d: Tensor) -> Tensor:
        mask = d < 0
        d[mask] = d[mask] - 0.5
        d[~mask] = d[~mask] + 0.5
        return d.to(torch.int32)


class WriteBetween(torch.nn.Module):
    """Must keep the selection: x changes between x[m] and its use."""

    def forward(self, x: Tensor) -> Tensor:
        m = x > 0
        s = x[m]
        x.add_(1.0)
        return (s * 2).sum() + x.sum()


def run_both(staticify, save, tmp_path, module, inputs):
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    for x in inputs:
        a, b = x.clone(), x.clone()
        want, got = original(a), static(b)
        assert torch.equal(got, want)
        assert torch.equal(b, a)  # the caller's tensor, written in place
    return report


def waves(gen):
    return [torch.rand(2, 300, generator=gen) * 2 - 1, torch.full((1, 10), 0.9),
            torch.full((1, 10), -0.9), torch.zeros(0, 7)]


def test_limiter_stores_without_a_sync(staticify, save, tmp_path):
    report = run_both(staticify, save, tmp_path, Limiter(), waves(torch.Generator().manual_seed(0)))
    assert sync_points(report) == (4, 0)


def test_rounding_stores_without_a_sync(staticify, save, tmp_path):
    report = run_both(staticify, save, tmp_path, Rounding(), waves(torch.Generator().manual_seed(1)))
    assert sync_points(report) == (4, 0)


def test_a_write_between_reads_the_old_values(staticify, save, tmp_path):
    run_both(staticify, save, tmp_path, WriteBetween(), waves(torch.Generator().manual_seed(2)))


class AugmentedAssignments(torch.nn.Module):
    """`x[m] op= v`: TorchScript reads the selection, writes it in place
    (mul_, sub_, add_ on the fresh copy indexing made) and stores it back;
    normalize computes the write out of place (the copy is read nowhere
    else), and the three stores become masked writes. x, m and v have no
    rank in TorchScript: specialize-ranks tries them all at one rank."""

    def forward(self, x: Tensor, m: Tensor, v: Tensor) -> Tensor:
        x = x.clone()
        x[m > 0] *= 2.0
        x[m < 0] -= v[m < 0]
        x[m == 0] += 1
        return x


class FinishedLengths(torch.nn.Module):
    """Tacotron2's decoder loop: `mel_specgram_lengths[~finished] += 1`,
    an int32 counter (the in-place add keeps its dtype)."""

    def forward(self, lengths: Tensor, gate: Tensor) -> Tensor:
        lengths = lengths.clone()
        finished = torch.sigmoid(gate) > 0.5
        lengths[~finished] += 1
        return lengths


def test_augmented_assignments_store_without_a_sync(staticify, save, tmp_path):
    path = save(AugmentedAssignments())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    assert sync_points(report) == (7, 0)  # 3 selections read, 3 stores, v[m < 0]
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(3)
    for n in (0, 1, 9, 40):
        for dtype in (torch.float32, torch.float64):
            x = torch.randn(n, generator=gen).to(dtype)
            m = torch.randint(-1, 2, (n,), generator=gen)
            v = torch.randn(n, generator=gen).to(dtype)
            want, got = original(x, m, v), static(x, m, v)
            assert got.dtype == want.dtype and torch.equal(got, want), (n, dtype)
    # Another rank: the original, the guard's fallback.
    x, m, v = torch.randn(3, 4), torch.randint(-1, 2, (3, 4)), torch.randn(3, 4)
    assert torch.equal(static(x, m, v), original(x, m, v))


def test_finished_lengths_count_without_a_sync(staticify, save, tmp_path):
    path = save(FinishedLengths())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    before, after = sync_points(report)
    assert after == 0 < before
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(4)
    for n in (0, 1, 8):
        lengths = torch.randint(0, 50, (n,), generator=gen, dtype=torch.int32)
        gate = torch.randn(n, generator=gen)
        want, got = original(lengths, gate), static(lengths, gate)
        assert got.dtype == torch.int32 and torch.equal(got, want), n
