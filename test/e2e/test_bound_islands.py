"""bound decides island by island: one part of a graph with no bounded form
no longer keeps the rest of it dynamic, and no island is kept with more syncs.

The model joins two independent computations, as a detector's forward joins
its proposal sampler and its post-processing: seed 000's balanced sampler
(bounded, it needs no sync) and corpus.ChainedWhereMasks (bounded, its 2 syncs
would become more). Taken as one graph, the old whole-graph decision bounded
both, the chained island's extra syncs included; island by island, the sampler is
bounded and the other left as the earlier passes made it: 4 syncs become
2."""
import re

import torch

from conftest import findings, sync_points
from corpus import ChainedWhereMasks
from sampler import BalancedSampler


class SamplerAndChained(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sampler = BalancedSampler(sub_sample=16)
        self.chained = ChainedWhereMasks()

    def forward(self, features, labels, x, t):
        picked, picked_labels = self.sampler(features, labels)
        return picked, picked_labels, self.chained(x, t)


def test_each_island_is_decided_on_its_own(staticify, save, tmp_path):
    path = save(SamplerAndChained())
    report = staticify.report(path)
    assert sync_points(report) == (4, 2)
    rewritten = {f["location"]["file"].rsplit("/", 1)[-1]
                 for f in findings(report) if f["action"] == "rewritten"}
    assert "sampler.py" in rewritten
    # What stays is the chained island's, as index-to-mask left it: bound
    # tried that island alone and kept it as it was.
    left = [f for f in findings(report)
            if f["role"] == "root" and f["action"] in ("kept", "introduced")]
    assert len(left) == 2, left
    assert all("corpus.py" in f["location"]["file"] for f in left), left
    # Refused for costing more reads than the 2 it had (how many more
    # depends on how far the rules carry the bounded rows before they stop).
    more = [re.search(r"at (\d+) points instead of 2", f["reason"]) for f in left]
    assert all(m and int(m.group(1)) > 2 for m in more), left

    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for trial in range(30):
        labels = torch.randint(0, 3, (64,), generator=gen)
        features = torch.randn(64, 5, generator=gen)
        x, t = torch.randn(10, 3, generator=gen), torch.randn(10, generator=gen)
        a_feat, a_lab, a_sum = original(features, labels, x, t)
        b_feat, b_lab, b_sum = result(features, labels, x, t)
        # The chained island is deterministic and untouched: equal.
        assert torch.equal(a_sum, b_sum)
        # The sampler draws: same shapes, rows that belong together, and
        # the same number of positives (the balance rule is deterministic).
        assert b_feat.shape == a_feat.shape and b_lab.shape == a_lab.shape
        rows = {tuple(r.tolist()): int(l) for r, l in zip(features, labels)}
        assert all(rows[tuple(r.tolist())] == int(l) for r, l in zip(b_feat, b_lab))
        assert int((b_lab == 1).sum()) == int((a_lab == 1).sum())
