"""`rows.reshape(n, 3, 4)` of selected rows by their count n, through the
real binary with only the passes that reach it (inline, normalize, bound):
bound reshapes the padded rows to [padded, 3, 4] behind a host guard that a
row has 12 elements. Where it has not, the original raises only where it
has rows; so does the staticified model, and with no row selected it
returns the same as the original (before session 25 it raised there)."""
import torch

from conftest import sync_points


class ReshapeByCount(torch.nn.Module):
    def forward(self, boxes, scores, t: float):
        rows = boxes[scores > t]
        n = len(rows)
        return rows.reshape(n, 3, 4).sum()


def run(f, *args):
    try:
        return "value", float(f(*args))
    except RuntimeError:
        return "raises", None


def test_reshape_by_count_raises_only_where_the_original_does(staticify, save, tmp_path):
    path = save(ReshapeByCount())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--passes", "inline,normalize,bound")
    before, after = sync_points(report)
    assert after == 0 < before, (before, after)
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(3)
    outcomes = set()
    for columns in (12, 10):  # a row of 3 x 4 elements, and one that is not
        for t in (2.0, 0.5, -1.0):  # no row, some, all
            boxes = torch.rand(6, columns, generator=gen)
            scores = torch.rand(6, generator=gen)
            want, got = run(original, boxes, scores, t), run(static, boxes, scores, t)
            assert got[0] == want[0], (columns, t, want, got)
            if want[1] is not None:
                torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)
            outcomes.add((columns, want[0]))
    # Both kinds of rows, and the mismatched one both raising and not.
    assert outcomes == {(12, "value"), (10, "value"), (10, "raises")}, outcomes
