"""Message passing as PyTorch Geometric writes it, through the real binary
against the original: `remove_self_loops` (`edge_index[:, mask]`, read by its
rows: normalize makes it `edge_index[0][mask]`), a sum aggregation with
`index_add_` of `x[src]` (a gather by selected indices: mask-propagate), and
GCN's symmetric normalization (gathers by the rows of edge_index). The
graph input edge_index has no dtype in TorchScript: specialize-dtypes
versions it as int64 indices, which gather (a mask would select), with the
original as the fallback for any other dtype (int32 here, which indexing
refuses in both, and a bool edge_index, which selects)."""
import pytest
import torch
from torch import Tensor

from conftest import sync_points
from test_rewrites import run_safely


class RemoveSelfLoopsSum(torch.nn.Module):
    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        mask = edge_index[0] != edge_index[1]
        edge_index = edge_index[:, mask]
        src, dst = edge_index[0], edge_index[1]
        out = torch.zeros_like(x)
        out.index_add_(0, dst, x[src])
        return out


class GcnNorm(torch.nn.Module):
    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        row = edge_index[0]
        deg = torch.zeros(x.size(0), dtype=x.dtype).scatter_add_(
            0, row, torch.ones_like(row, dtype=x.dtype))
        dinv = deg.pow(-0.5)
        dinv.masked_fill_(dinv == float("inf"), 0.0)
        return dinv[row].unsqueeze(1) * x[edge_index[1]]


def graph_inputs(gen):
    nodes = int(torch.randint(1, 7, (1,), generator=gen))
    edges = int(torch.randint(0, 12, (1,), generator=gen))
    x = torch.randn(nodes, 3, generator=gen)
    edge_index = torch.randint(0, nodes, (2, edges), generator=gen)
    if edges and int(torch.randint(0, 3, (1,), generator=gen)) == 0:
        edge_index[1] = edge_index[0]  # only self loops: nothing kept
    return x, edge_index


@pytest.mark.parametrize("module,syncs", [(RemoveSelfLoopsSum(), (3, 0)), (GcnNorm(), (2, 0))],
                         ids=["remove-self-loops-sum", "gcn-norm"])
def test_message_passing_equals_the_original(staticify, save, tmp_path, module, syncs):
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    assert sync_points(report) == syncs
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for trial in range(120):
        x, edge_index = graph_inputs(gen)
        if trial % 10 == 9:
            edge_index = edge_index.int()  # the fallback: both raise
        want, want_error = run_safely(original, (x, edge_index))
        got, got_error = run_safely(static, (x, edge_index))
        assert bool(want_error) == bool(got_error), (trial, want_error, got_error)
        if not want_error:
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
