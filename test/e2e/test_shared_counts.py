"""Cuts of rows selected by one mask share one host read of its count
(bound), across an if on a host fact too, and a selection that leaves an if
only to be returned is cut as a returned one (normalize takes a result both
branches yield alike out of the if): PyG's remove_self_loops with and
without edge attributes, and subgraph's relabelling of the kept edges. A
returned list of selections (greedy CTC decoding, one hypothesis per item)
is cut at the return with every count copied to the host at once.
Through the binary against the original, on edge lists with no self loop,
only self loops, and some; the sync points are the report's."""
from typing import List, Optional, Tuple

import pytest
import torch
from torch import Tensor

from conftest import left_reasons

TRIALS = 60


def remove_self_loops(edge_index: Tensor, edge_attr: Optional[Tensor] = None
                      ) -> Tuple[Tensor, Optional[Tensor]]:
    mask = edge_index[0] != edge_index[1]
    edge_index = edge_index[:, mask]
    if edge_attr is None:
        return edge_index, None
    else:
        return edge_index, edge_attr[mask]


class RemoveSelfLoops(torch.nn.Module):
    def forward(self, edge_index: Tensor, edge_attr: Optional[Tensor] = None):
        edge_index = edge_index.view(2, -1)
        had_loops = bool((edge_index[0] == edge_index[1]).sum().item() > 0)
        kept, attr = remove_self_loops(edge_index, edge_attr)
        return kept, attr, had_loops


class Relabel(torch.nn.Module):
    """The kept edges between the nodes of a subset, renumbered."""

    def forward(self, subset: Tensor, edge_index: Tensor, edge_attr: Tensor):
        edge_index = edge_index.view(2, -1).long()
        n = subset.size(0)
        node_mask = subset.view(-1) > 0
        edge_mask = node_mask[edge_index[0]] & node_mask[edge_index[1]]
        kept = edge_index[:, edge_mask]
        attr = edge_attr[edge_mask]
        node_idx = torch.cumsum(node_mask.long(), 0) - 1
        return node_idx[kept], attr, n


def edges(gen, loops):
    n = int(torch.randint(1, 12, (1,), generator=gen))
    e = torch.randint(0, 6, (2, n), generator=gen)
    if loops == "all":
        e[1] = e[0]
    elif loops == "none":
        e[1] = (e[0] + 1) % 6
    return e


def same(got, want):
    assert type(got) == type(want)
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, (want, got)
        assert torch.equal(got, want)
    else:
        assert got == want


@pytest.mark.parametrize("with_attr", [False, True], ids=["no-attr", "attr"])
def test_remove_self_loops_reads_one_count(staticify, save, tmp_path, with_attr):
    method, original, rewritten = staticify.rewritten(save(RemoveSelfLoops()),
                                                      tmp_path / "out.pt")
    # The returned bool and one count for both selections.
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (3, 2)
    gen = torch.Generator().manual_seed(0)
    for trial in range(TRIALS):
        e = edges(gen, ("none", "all", "some")[trial % 3])
        attr = torch.randn(e.size(1), 3, generator=gen) if with_attr else None
        want, got = original(e, attr), rewritten(e, attr)
        for g, w in zip(got, want):
            same(g, w)


def test_relabelled_edges_read_one_count(staticify, save, tmp_path):
    method, original, rewritten = staticify.rewritten(save(Relabel()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (2, 1)
    reasons = left_reasons(method)
    assert reasons and all("it is returned" in r for r in reasons), reasons
    gen = torch.Generator().manual_seed(1)
    for trial in range(TRIALS):
        e = edges(gen, "some")
        subset = torch.randint(0, 2, (6,), generator=gen)
        if trial % 4 == 0:
            subset.zero_()  # no edge kept
        attr = torch.randn(e.size(1), generator=gen)
        want, got = original(subset, e, attr), rewritten(subset, e, attr)
        for g, w in zip(got, want):
            same(g, w)


class GreedyCTC(torch.nn.Module):
    def forward(self, log_probs: Tensor, lengths: Tensor) -> List[Tensor]:
        best = log_probs.argmax(dim=-1)
        hyps: List[Tensor] = []
        for b in range(best.size(0)):
            seq = best[b, : int(lengths[b])]
            seq = torch.unique_consecutive(seq, dim=-1)
            hyps.append(seq[seq != 0])
        return hyps


def test_returned_hypotheses_copy_their_counts_once(staticify, save, tmp_path):
    method, original, rewritten = staticify.rewritten(save(GreedyCTC()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (3, 1)
    reasons = left_reasons(method)
    assert reasons == ["bound: materialized: it is returned (each element cut to its "
                       "count, the counts copied to the host at once)"], reasons
    gen = torch.Generator().manual_seed(2)
    for trial in range(TRIALS):
        b = 1 + trial % 4
        t = 1 + int(torch.randint(0, 12, (1,), generator=gen))
        logits = torch.randn(b, t, 5, generator=gen)
        logits[..., 0] += 1.0  # blank-heavy
        lengths = torch.randint(0, t + 1, (b,), generator=gen)
        want, got = original(logits, lengths), rewritten(logits, lengths)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)


class TopOfSelection(torch.nn.Module):
    """The top-k's indices into a selection (min(k, n) of them) beside a
    selection by its mask (n): two counts, never one read."""

    def forward(self, x: Tensor, y: Tensor):
        keep = x > 0.5
        s = x[keep]
        v, i = s.topk(min(3, s.size(0)))
        return i, y[keep]


def test_top_of_a_selection_keeps_its_own_count(staticify, save, tmp_path):
    _, original, rewritten = staticify.rewritten(save(TopOfSelection()), tmp_path / "out.pt",
                                                 "--static-forms")
    gen = torch.Generator().manual_seed(3)
    for _ in range(TRIALS):
        x, y = torch.rand(12, generator=gen), torch.randn(12, 2, generator=gen)
        for g, w in zip(rewritten(x, y), original(x, y)):
            same(g, w)
