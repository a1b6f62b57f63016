"""Random picks from disjoint masks share one random order (bound's
randomOrderFor): the orders of disjoint sets in one uniformly random
permutation are independent, so the pair of picks keeps the original's joint
distribution. Masks that may overlap draw orders of their own; were they to
share one, both picks of one set would always agree. Checked through the
binary against the distribution the original has, over many calls."""
import math

import pytest
import torch

CALLS = 2700
Z_LIMIT = 4.0


class DisjointPicks(torch.nn.Module):
    """One random element of each class: labels == 1, labels == 0."""

    def forward(self, labels):
        first = torch.where(labels == 1)[0]
        second = torch.where(labels == 0)[0]
        a = first[torch.randperm(first.numel())[:1]]
        b = second[torch.randperm(second.numel())[:1]]
        return torch.stack([a.sum(), b.sum()])


class OverlappingPicks(torch.nn.Module):
    """One random element twice of one set, written two ways."""

    def forward(self, labels):
        first = torch.where(labels == 1)[0]
        second = torch.where(labels >= 1)[0]  # the same set as `first`
        a = first[torch.randperm(first.numel())[:1]]
        b = second[torch.randperm(second.numel())[:1]]
        return torch.stack([a.sum(), b.sum()])


LABELS = torch.tensor([1, 0, 1, 0, 1, 0])


def pair_counts(model, first, second):
    """How often each (a, b) pair came out, over CALLS calls."""
    counts = torch.zeros(len(first), len(second))
    for _ in range(CALLS):
        a, b = model(LABELS).tolist()
        counts[first.index(a), second.index(b)] += 1
    return counts


@pytest.mark.parametrize("overlapping", [False, True], ids=["disjoint", "overlapping"])
def test_pairs_of_picks_keep_their_joint_distribution(staticify, save, tmp_path, overlapping):
    path = save(OverlappingPicks() if overlapping else DisjointPicks())
    out = tmp_path / "static.pt"
    staticify(path, "-o", out)
    report = staticify.report(path)
    assert report["methods"][0]["after"]["static"] is True
    graph = str(torch.jit.load(str(out)).forward.graph)
    # One draw for disjoint masks, two for masks that may overlap.
    assert graph.count("aten::randperm(") == (2 if overlapping else 1)
    first = [0, 2, 4]
    second = first if overlapping else [1, 3, 5]
    torch.manual_seed(3)
    counts = pair_counts(torch.jit.load(str(out)), first, second)
    # Independent uniform picks: every pair equally likely (the same element
    # twice too, where the sets are one).
    expected = CALLS / counts.numel()
    df = counts.numel() - 1
    chi2 = float(((counts - expected) ** 2).sum() / expected)
    z = (chi2 - df) / math.sqrt(2 * df)
    assert abs(z) < Z_LIMIT, (counts.tolist(), z)
    original = torch.jit.load(str(path))
    for _ in range(20):  # the original's picks lie in the same sets
        a, b = original(LABELS).tolist()
        assert a in first and b in second
