"""A rewrite exists to make a model faster: a rewritten method that reaches
the host at as many points as the original and runs more ops per call is
left as it was, and the report says why. Where the caller asked for static
regions or kernels (--static-forms, implied by --padded-outputs,
--runtime-ops, --outline, --cuda-graphs, --lower) it is kept."""
import torch
from torch import Tensor

from conftest import findings, sync_points


class Both(torch.nn.Module):
    """The selected rows and their indices, both returned: each is cut on
    the host either way (2 -> 2), the bounded forms only add ops."""

    def forward(self, x: Tensor, keep: Tensor):
        return x[keep], torch.nonzero(keep).squeeze(1)


class BothByScore(torch.nn.Module):
    """Selected rows and the indices of other ones, both returned: each is
    cut on the host at its own count either way (2 -> 2). (Both, by one
    mask, shares one count at rank 1: 2 -> 1.)"""

    def forward(self, x: Tensor, score: Tensor):
        return x[score > 0], torch.nonzero(score < -1).squeeze(1)


def test_equal_sync_rewrite_that_runs_more_ops_is_not_kept(staticify, save, tmp_path):
    path = save(BothByScore())
    report = staticify.report(path)
    assert sync_points(report) == (2, 2)
    roots = [f for f in findings(report) if f["role"] == "root"]
    assert roots and all("as many points (2)" in f["reason"] for f in roots), roots
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    # Written back as it came: the same graph, the same outputs.
    assert str(original.forward.graph) == str(result.forward.graph)
    x, score = torch.randn(9, 3), torch.randn(9)
    for a, b in zip(original(x, score), result(x, score)):
        assert torch.equal(a, b)


def test_padded_outputs_keep_the_rewrite(staticify, save, tmp_path):
    # Padded, nothing is cut (2 -> 0): the selection by a mask of unknown
    # dtype runs in the version where it is bool, and the other version
    # (integer indices) returns its rows whole with their number.
    path = save(Both())
    assert sync_points(staticify.report(path, "--padded-outputs")) == (2, 0)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--padded-outputs")
    result = torch.jit.load(str(out))
    x, keep = torch.randn(9, 3), torch.rand(9) > 0.5
    (rows, rows_count), (idx, count) = result(x, keep)
    n = int(keep.sum())
    assert int(count) == n == int(rows_count) and torch.equal(rows[:n], x[keep])
    assert torch.equal(idx[:n], torch.nonzero(keep).squeeze(1))
