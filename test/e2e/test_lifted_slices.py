"""x[start:end] of a tensor of static rows by bounds read from data is a
bounded value (slice_lifted): librosa's trim returns the signal between the
first and the last loud frame, cut at the output (its bounds, read from
rows of a selection under an if on its count, computed on the device and
returned as the host tensor torch.tensor makes); bounds that may be
negative or past the rows are clamped as Python's slice does. Checked
through the binary against the original."""
import torch

from conftest import left_reasons


class Trim(torch.nn.Module):
    """librosa.effects.trim, as ported to torch in speech pipelines."""

    def __init__(self, top_db: float = 40.0, frame_length: int = 64, hop_length: int = 16):
        super().__init__()
        self.top_db = top_db
        self.frame_length = frame_length
        self.hop_length = hop_length

    def forward(self, y: torch.Tensor):
        pad = self.frame_length // 2
        y_pad = torch.nn.functional.pad(y[None, None], [pad, pad], mode="reflect")[0, 0]
        frames = y_pad.unfold(0, self.frame_length, self.hop_length)
        mse = frames.pow(2).mean(dim=-1)
        db = 10.0 * torch.log10(torch.clamp(mse, min=1e-10))
        db = db - db.max()
        nonzero = torch.nonzero(db > -self.top_db).flatten()
        if nonzero.numel() > 0:
            start = int(nonzero[0]) * self.hop_length
            end = min(y.size(-1), (int(nonzero[-1]) + 1) * self.hop_length)
        else:
            start, end = 0, 0
        return y[start:end], torch.tensor([start, end])


class Window(torch.nn.Module):
    """Rows around the largest value, bounds that fall off either end."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = int(x.argmax())
        return (x[c - 3:c + 2] * 2.0).sum() + x[c - 20:].sum()


def test_trim_cuts_once_at_the_output(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(Trim()), tmp_path / "out.pt")
    # The cut of the returned signal and the copy of the returned bounds to
    # the host (torch.tensor makes a host tensor), both at the output.
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (3, 2)
    reasons = left_reasons(method)
    assert all("it is returned" in r for r in reasons), reasons
    g = torch.Generator().manual_seed(0)
    loud = torch.randn(1600, generator=g) * 1e-4
    loud[500:1100] += torch.sin(torch.arange(600) * 0.3) * 0.5
    for y in (loud, torch.zeros(800), torch.randn(800, generator=g), torch.randn(64, generator=g)):
        want, got = original(y), model(y)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (got[1], want[1])


def test_bounds_past_the_rows_clamp(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(Window()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 0)
    for n in (1, 2, 4, 9, 30):
        for c in range(n):
            x = torch.arange(n, dtype=torch.float32) * 0.0
            x[c] = 1.0
            assert torch.equal(model(x), original(x)), (n, c)
