"""randint below a bound read from data draws on the device (random_below)
where the program keeps the bound above the low end: SpecAugment's mask
starts and widths, a random pick among the rows a mask keeps. Checked
through the binary: no sync point left, each value in range, and the
distribution over many calls the original's (uniform on [low, high)); where
the bound is not provably above the low end, randint may raise and the
draw stays."""
import math

import pytest
import torch

from uniformity import Z_LIMIT, chi2_z

CALLS = 3000


class MaskStart(torch.nn.Module):
    """A SpecAugment-style band of one utterance: its start drawn below a
    bound from the length, its width below a constant."""

    def forward(self, x, length):
        n = int(length[0])
        start = int(torch.randint(0, max(1, n - 2), (1,)).item())
        width = int(torch.randint(1, 3, (1,)).item())
        mask = torch.zeros(x.shape, dtype=torch.bool)
        mask[start:start + width] = True
        return x.masked_fill(mask, 0.0), torch.tensor(start, dtype=torch.long, device=x.device)


class PickKept(torch.nn.Module):
    """Eight random rows among those a mask keeps (with replacement)."""

    def forward(self, x):
        keep = x[:, 0] > 0
        n = int(keep.sum())
        i = torch.randint(0, max(n, 1), (8,), device=x.device)
        return x[keep][i]


class Unbounded(torch.nn.Module):
    """A start below `n` itself: randint raises for n <= 0."""

    def forward(self, x, length):
        n = int(length[0])
        start = int(torch.randint(0, n, (1,)).item())
        return x + start


class NoiseIfPositive(torch.nn.Module):
    """diffusers' Euler step: noise drawn only where a value read from data
    says so."""

    def forward(self, x, sigma):
        gamma = float(sigma) * 0.5
        if gamma > 0:
            eps = torch.randn(x.shape, dtype=x.dtype, device=x.device)
            x = x + eps * gamma
        return x


def test_mask_start_is_static_and_uniform(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(MaskStart()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 0)
    # The start's draw is random_below's; the width's, of constant bounds,
    # is the original randint (on the CPU: reading it is no sync).
    assert str(model.forward.graph).count("aten::randint(") == 1
    x = torch.ones(12)
    length = torch.tensor([7])  # starts in [0, 5)
    counts = torch.zeros(5)
    torch.manual_seed(0)
    for _ in range(CALLS):
        y, start = model(x, length)
        s = int(start)
        assert 0 <= s < 5
        zeros = (y == 0).nonzero().flatten().tolist()
        # The band: the original's shape of mask, width 1 or 2 from start.
        assert zeros[0] == s and len(zeros) in (1, 2)
        assert zeros == list(range(s, s + len(zeros)))
        counts[s] += 1
    assert abs(chi2_z(counts)) < Z_LIMIT, counts.tolist()
    for _ in range(20):
        y, start = original(x, length)
        assert 0 <= int(start) < 5


def test_pick_among_kept_rows_is_static_and_uniform(staticify, save, tmp_path):
    method, _, model = staticify.rewritten(save(PickKept()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (2, 0)
    x = torch.tensor([[1.0, 10.0], [-1.0, 20.0], [2.0, 30.0], [3.0, 40.0], [-5.0, 50.0]])
    kept = {10.0: 0, 30.0: 1, 40.0: 2}
    counts = torch.zeros(3)
    torch.manual_seed(1)
    for _ in range(CALLS // 8):
        rows = model(x)
        assert rows.shape == (8, 2)
        for r in rows[:, 1].tolist():
            counts[kept[r]] += 1  # only kept rows come out
    assert abs(chi2_z(counts)) < Z_LIMIT, counts.tolist()


def test_draw_below_an_unbounded_length_stays(staticify, save, tmp_path):
    path = save(Unbounded())
    method = staticify.report(path, "--static-forms")["methods"][0]
    assert method["after"]["sync_points"] == method["before"]["sync_points"] == 1
    reasons = [f.get("reason") or "" for f in method["findings"] if f["role"] == "root"]
    assert any("'aten::randint' needs it as a host value" in r for r in reasons), reasons
    out = tmp_path / "static.pt"
    staticify(path, "-o", out)
    with pytest.raises(Exception):  # as the original does
        torch.jit.load(str(out))(torch.ones(4), torch.tensor([0]))


def test_noise_under_a_branch_on_data_runs_in_both(staticify, save, tmp_path):
    # randn of x's sizes raises on no value: if-convert draws it in both
    # branches and keeps it where the branch is taken.
    method, _, model = staticify.rewritten(save(NoiseIfPositive()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 0)
    x = torch.arange(4000.0).reshape(40, 100)
    assert torch.equal(model(x, torch.tensor(-1.0)), x)
    assert torch.equal(model(x, torch.tensor(0.0)), x)
    torch.manual_seed(2)
    noise = (model(x, torch.tensor(4.0)) - x) / 2.0  # gamma = 2
    # 4,000 standard normal draws: mean within 4 standard errors of 0,
    # standard deviation within 5% of 1.
    assert abs(float(noise.mean())) < 4 / math.sqrt(noise.numel())
    assert abs(float(noise.std()) - 1.0) < 0.05
