"""Ops written with out= (`torch.index_select(m, 0, row, out=edge_mask)`,
PyG's k_hop_subgraph) through the binary against the original: the write
to the out tensor is kept (normalize spells it as the functional op, then
resize_as_ and copy_ into the out tensor), and the selection by a mask
written that way is rewritten like any other. Compared on masks keeping
nothing, everything or some."""

from typing import Tuple

import pytest
import torch
from torch import Tensor

from test_never_more_syncs import sync_points
from test_rewrites import compare_outputs

TRIALS = 30


class SelectByOutMask(torch.nn.Module):
    def forward(self, seeds: Tensor, row: Tensor, col: Tensor) -> Tensor:
        node_mask = torch.zeros(10, dtype=torch.bool)
        edge_mask = torch.zeros(row.size(0), dtype=torch.bool)
        node_mask[seeds] = True
        torch.index_select(node_mask, 0, row, out=edge_mask)
        return col[edge_mask].float().sum()


class KHopNeighbours(torch.nn.Module):
    """Two hops, the mask refilled through out= in the loop."""

    def forward(self, seeds: Tensor, row: Tensor, col: Tensor) -> Tuple[Tensor, Tensor]:
        node_mask = torch.zeros(10, dtype=torch.bool)
        edge_mask = torch.zeros(row.size(0), dtype=torch.bool)
        reached = torch.zeros(10)
        frontier = seeds
        for _ in range(2):
            node_mask.fill_(0)
            node_mask[frontier] = True
            torch.index_select(node_mask, 0, row, out=edge_mask)
            frontier = col[edge_mask]
            reached.index_add_(0, frontier, torch.ones_like(frontier, dtype=torch.float))
        return reached, edge_mask


class OutIntoLocal(torch.nn.Module):
    def forward(self, seeds: Tensor, row: Tensor, col: Tensor) -> Tensor:
        out = torch.empty(0)
        torch.mul(row.float(), 2.0, out=out)
        return out + col


def edges(gen, kind):
    row = torch.randint(0, 10, (16,), generator=gen)
    col = torch.randint(0, 10, (16,), generator=gen)
    n = {"none": 0, "all": 10}.get(kind, int(torch.randint(1, 10, (), generator=gen)))
    seeds = torch.randperm(10, generator=gen)[:n]
    if kind == "all":
        row = torch.arange(16) % 10
    return seeds, row, col


@pytest.mark.parametrize("module,floor", [
    (SelectByOutMask(), 0), (KHopNeighbours(), None), (OutIntoLocal(), 0)],
    ids=["select-by-out-mask", "k-hop", "out-into-local"])
def test_out_variant(staticify, save, tmp_path, module, floor):
    import json
    path = save(module)
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--report-json", report)
    before, after = sync_points(json.loads(report.read_text()))
    assert after <= before
    if floor is not None:
        assert after == floor, (before, after)
    compared = compare_outputs(torch.jit.load(str(path)), torch.jit.load(str(out)),
                               edges, TRIALS, type(module).__name__)
    assert compared == TRIALS
