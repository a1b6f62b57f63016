"""randperm(n)[:k] of a count n and a length k whose sign only the host or
the data knows: detectron2's subsample_labels, through its nonzero_tuple
(`if x.dim() == 0` before `x.nonzero().unbind(1)`, folded once the rank is
known). Checked through the binary: the sync points left, every sample a
distinct index of the right class, the counts the original's (min(#pos,
num_pos) positives, the rest of the batch negatives), each positive drawn
equally often; a negative K counting from the end as Python's slice does;
and a prefix by a length whose sign is data (n - K) with the original's
numbers."""
from typing import List, Tuple

import torch

from conftest import left_reasons

from uniformity import Z_LIMIT, chi2_z

CALLS = 2000


def nonzero_tuple(x: torch.Tensor) -> List[torch.Tensor]:
    if x.dim() == 0:
        return x.unsqueeze(0).nonzero().unbind(1)
    return x.nonzero().unbind(1)


class SubsampleLabels(torch.nn.Module):
    """detectron2's subsample_labels: num_pos from a module's numbers."""

    def __init__(self, batch: int = 8, fraction: float = 0.25, bg: int = 3):
        super().__init__()
        self.batch, self.fraction, self.bg = batch, fraction, bg

    def forward(self, labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        positive = nonzero_tuple((labels != -1) & (labels != self.bg))[0]
        negative = nonzero_tuple(labels == self.bg)[0]
        num_pos = int(self.batch * self.fraction)
        num_pos = min(positive.numel(), num_pos)
        num_neg = self.batch - num_pos
        num_neg = min(negative.numel(), num_neg)
        perm1 = torch.randperm(positive.numel(), device=positive.device)[:num_pos]
        perm2 = torch.randperm(negative.numel(), device=negative.device)[:num_neg]
        return positive[perm1], negative[perm2]


class FromTheEnd(torch.nn.Module):
    """A prefix by min(n, K) of a K below zero: all but the last -K."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept = torch.nonzero(x > 0).view(-1)
        n = kept.numel()
        order = torch.randperm(n, device=x.device)[:min(n, self.k)]
        return kept[order].sum() + torch.tensor(0)


class LessThanCount(torch.nn.Module):
    """A prefix by n - K of a selection of n rows: negative where K > n."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept = x[x > 0]
        return kept[:kept.numel() - self.k].sum()


def test_subsample_labels_draws_on_the_device(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(SubsampleLabels()), tmp_path / "out.pt")
    # The two cuts of the returned samples are what is left.
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (4, 2)
    reasons = left_reasons(method)
    assert all("it is returned" in r for r in reasons), reasons
    labels = torch.tensor([0, 3, 1, 3, -1, 2, 3, 0, 3, 3, 1, 3])
    positives = {0, 2, 5, 7, 10}
    negatives = {1, 3, 6, 8, 9, 11}
    counts = torch.zeros(12)
    torch.manual_seed(0)
    for _ in range(CALLS):
        pos, neg = model(labels)
        p, q = pos.tolist(), neg.tolist()
        # num_pos = int(8 * 0.25) = 2 of 5 positives; 6 negatives fill the
        # rest of the batch.
        assert len(p) == 2 and len(set(p)) == 2 and set(p) <= positives, p
        assert len(q) == 6 and len(set(q)) == 6 and set(q) <= negatives, q
        for i in p:
            counts[i] += 1
    assert abs(chi2_z(counts[sorted(positives)])) < Z_LIMIT, counts.tolist()
    # Fewer positives than num_pos, no negatives, a rank-0 label: the
    # original's counts.
    for labels in (torch.tensor([3, 1, 3, 3]), torch.tensor([0, 1, 2]), torch.tensor([]).long(),
                   torch.tensor(1), torch.tensor(3)):
        want = [len(t) for t in original(labels)]
        got = [len(t) for t in model(labels)]
        assert got == want, (labels, got, want)


def test_negative_k_counts_from_the_end(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(FromTheEnd(-2)), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 0)
    for values in ([1.0, -1.0, 2.0, 3.0, 4.0], [1.0, 2.0], [1.0], [-1.0, -2.0]):
        x = torch.tensor(values)
        # The sum of n - 2 distinct kept positions: its range is fixed, and
        # with all kept but two its value is the total less two of them.
        kept = [i for i, v in enumerate(values) if v > 0]
        taken = len(kept) - 2
        sums = {sum(kept) - a - b for a in kept for b in kept if a < b} if taken > 0 else {0}
        for _ in range(20):
            assert int(model(x)) in sums, values
            assert int(original(x)) in sums, values


def test_prefix_by_a_length_of_data_sign(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(LessThanCount(3)), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 0)
    g = torch.Generator().manual_seed(3)
    for n in (0, 1, 2, 3, 4, 5, 7, 9):
        x = torch.randn(n, generator=g)
        assert torch.equal(model(x), original(x)), x
