"""Ifs on data that return a tuple or a list each branch builds (normalize:
the if returns the elements, the container is built after it; if-convert
then runs both branches), through the real binary against the original:
no sync left, equal outputs with each branch taken. A list a branch also
stores elsewhere keeps its if."""
import torch
from torch import Tensor
from typing import List, Tuple

from conftest import sync_points


class SwapPair(torch.nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        if a.sum() > 0:
            out = (a, b * 2)
        else:
            out = (b, a + 1)
        return out


class AccuracyOrZeros(torch.nn.Module):
    """torchmetrics' early return of constants where nothing is kept
    (folded into one tuple constant by constant propagation)."""

    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        keep = a > 0
        if keep.sum() == 0:
            return torch.tensor(0.0), torch.tensor(0)
        hits = (b > 0) & keep
        return hits.float().sum() / keep.sum(), hits.sum()


class StackChosen(torch.nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        if bool(a.max() > 1):
            xs = [a, b]
        else:
            xs = [b, a * a]
        return torch.stack(xs).sum(0)


class ListAlsoStored(torch.nn.Module):
    """Must keep its if: the branch's list is also appended to another."""

    def forward(self, a: Tensor, b: Tensor) -> List[Tensor]:
        kept: List[List[Tensor]] = []
        if bool(a.max() > 1):
            xs = [a, b]
            kept.append(xs)
        else:
            xs = [b, a]
        xs.append(a)
        return [torch.stack(x).sum(0) for x in kept] + xs


def run(staticify, save, tmp_path, module):
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    return report, torch.jit.load(str(path)), torch.jit.load(str(out))


def same(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return torch.equal(a, b)


def inputs(gen):
    for trial in range(40):
        a = torch.randn(6, generator=gen) + (2 if trial % 2 else -2)
        yield a, torch.randn(6, generator=gen)
    yield -torch.ones(6), torch.randn(6, generator=gen)  # nothing kept


def test_tuple_and_list_ifs_are_converted(staticify, save, tmp_path):
    for module in (SwapPair(), StackChosen(), AccuracyOrZeros()):
        report, original, static = run(staticify, save, tmp_path, module)
        assert sync_points(report) == (1, 0), type(module).__name__
        for a, b in inputs(torch.Generator().manual_seed(0)):
            assert same(static(a, b), original(a, b)), type(module).__name__


def test_a_list_stored_elsewhere_keeps_its_if(staticify, save, tmp_path):
    report, original, static = run(staticify, save, tmp_path, ListAlsoStored())
    before, after = sync_points(report)
    assert after == before == 1
    for a, b in inputs(torch.Generator().manual_seed(1)):
        assert same(static(a, b), original(a, b))
