"""Gathers by selected indices, `x[i[m]]` (mask-propagate, gatherBySelected):
rows of x named by the selected int64 indices are the selection of x gathered
by all of them, the unselected indices made 0 so that they cannot raise; of
an x with no rows a one-row stand-in is gathered. The selection then meets
the others by m: a tracker's update `tracks[m] = 0.5 * tracks[m] + 0.5 *
dets[j[m]]` becomes one masked write. Through the real binary against the
original: outputs equal on inputs that select nothing, everything or some,
unselected indices out of range included (the original never reads them),
and empty tables; where a selected index is out of range the original
raises."""
import pytest
import torch
from torch import Tensor

from conftest import sync_points
from test_rewrites import run_safely


class TrackUpdate(torch.nn.Module):
    def forward(self, tracks: Tensor, dets: Tensor, cost: Tensor, thr: float) -> Tensor:
        tracks = tracks.view(-1, 4)
        dets = dets.view(-1, 4)
        best, j = cost.view(tracks.size(0), dets.size(0)).min(1)
        matched = best < thr
        tracks = tracks.clone()
        tracks[matched] = 0.5 * tracks[matched] + 0.5 * dets[j[matched]]
        return tracks


class LookupSelected(torch.nn.Module):
    """Rows of a table at selected ids, scaled by the selected weights."""

    def forward(self, table: Tensor, ids: Tensor, w: Tensor) -> Tensor:
        table = table.view(-1, 3)
        ids = ids.view(-1).long()
        w = w.view(-1)
        keep = w > 0
        return (table[ids[keep]] * w[keep].unsqueeze(1)).sum(0)


class RowsOfIndices(torch.nn.Module):
    """Not this rule's: selected rows of an index matrix (the mask does not
    cover the index's elements), each naming two rows of the table."""

    def forward(self, table: Tensor, pairs: Tensor, w: Tensor) -> Tensor:
        keep = w > 0
        return table[pairs.view(-1, 2).long()[keep]].sum(0)


def staticified(staticify, save, tmp_path, module):
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    return report, torch.jit.load(str(path)), torch.jit.load(str(out))


def compare(original, static, args):
    want, want_error = run_safely(original, args)
    got, got_error = run_safely(static, args)
    if want_error:
        return False  # the contract: where the original raises, anything
    assert not got_error, (args, got)
    assert got.shape == want.shape and got.dtype == want.dtype, args
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    return True


def test_track_update_is_one_masked_write(staticify, save, tmp_path):
    report, original, static = staticified(staticify, save, tmp_path, TrackUpdate())
    assert sync_points(report) == (3, 0)
    gen = torch.Generator().manual_seed(0)
    ran = 0
    for _ in range(150):
        nt, nd = (int(v) for v in torch.randint(0, 6, (2,), generator=gen))
        args = (torch.randn(nt * 4, generator=gen), torch.randn(nd * 4, generator=gen),
                torch.rand(nt * nd, generator=gen), float(torch.rand(1, generator=gen)))
        ran += compare(original, static, args)
    assert ran > 75, ran


def test_lookup_of_selected_ids(staticify, save, tmp_path):
    report, original, static = staticified(staticify, save, tmp_path, LookupSelected())
    assert sync_points(report) == (2, 0)  # ids[keep] and w[keep]
    gen = torch.Generator().manual_seed(1)
    ran = 0
    for trial in range(150):
        rows = int(torch.randint(0, 5, (1,), generator=gen))
        n = int(torch.randint(0, 8, (1,), generator=gen))
        w = torch.randn(n, generator=gen)
        ids = torch.randint(-rows, max(rows, 1), (n,), generator=gen)
        if trial % 3 == 0:
            # Unselected ids out of range: never read by the original.
            ids = torch.where(w > 0, ids, torch.full_like(ids, 1000))
        args = (torch.randn(rows * 3, generator=gen), ids.to(torch.int32), w)
        ran += compare(original, static, args)
    assert ran > 75, ran


def test_a_selected_index_out_of_range_raises(staticify, save, tmp_path):
    _, original, static = staticified(staticify, save, tmp_path, LookupSelected())
    args = (torch.randn(6), torch.tensor([0, 5]), torch.tensor([1.0, 1.0]))
    for module in (original, static):
        with pytest.raises(RuntimeError):
            module(*args)


def test_rows_of_indices_equal_the_original(staticify, save, tmp_path):
    report, original, static = staticified(staticify, save, tmp_path, RowsOfIndices())
    before, after = sync_points(report)
    assert after <= before
    gen = torch.Generator().manual_seed(2)
    for _ in range(40):
        n = int(torch.randint(0, 6, (1,), generator=gen))
        args = (torch.randn(5, 3, generator=gen), torch.randint(0, 5, (n * 2,), generator=gen),
                torch.randn(n, generator=gen))
        compare(original, static, args)
