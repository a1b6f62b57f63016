"""Selected rows combined with static tensors of a lower rank, which
broadcast along the rows' trailing dims (NeRF's samples along each ray hit:
`nears[:, None] + (fars - nears)[:, None] * steps`; a per-feature weight
`rows * self.weight`), through the binary against the original: the rows
stay padded, with no sync, where the ranks are known, and behind a rank
guard where they are not. Compared on masks keeping nothing, everything or
some."""

import json

import pytest
import torch
from torch import Tensor

from test_never_more_syncs import sync_points
from test_rewrites import compare_outputs

TRIALS = 30


class RaySamples(torch.nn.Module):
    def forward(self, nears: Tensor, fars: Tensor) -> Tensor:
        hit = fars > nears
        nears = nears[hit]
        fars = fars[hit]
        steps = torch.linspace(0.0, 1.0, 8)
        t = nears[:, None] + (fars - nears)[:, None] * steps
        return t.sum(1).sum() + t.amax(1).sum()


class WeightedRows(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 4))

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        rows = x.view(-1, 4)[m.view(-1) > 0]
        return (rows * self.weight).sum() + (rows[:, :, None] * self.weight).amax(2).sum()


def rays(gen, kind):
    nears = torch.rand(12, generator=gen)
    fars = {"none": nears - 1.0, "all": nears + 1.0}.get(kind, torch.rand(12, generator=gen))
    return nears, fars


def rows(gen, kind):
    m = torch.randn(6, generator=gen)
    m = {"none": -m.abs() - 1.0, "all": m.abs() + 1.0}.get(kind, m)
    return torch.randn(6, 4, generator=gen), m


@pytest.mark.parametrize("module,inputs", [(RaySamples(), rays), (WeightedRows(), rows)],
                         ids=["ray-samples", "weighted-rows"])
def test_lower_rank_operand(staticify, save, tmp_path, module, inputs):
    path = save(module)
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--report-json", report)
    before, after = sync_points(json.loads(report.read_text()))
    expected = (2, 0) if isinstance(module, RaySamples) else (1, 0)
    assert (before, after) == expected
    compared = compare_outputs(torch.jit.load(str(path)), torch.jit.load(str(out)),
                               inputs, TRIALS, type(module).__name__)
    assert compared == TRIALS
