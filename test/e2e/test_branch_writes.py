"""Ifs on data whose branch writes in place (`if m.any(): y[m] = 0`),
through the binary against the original: branch-writes computes the writes
out of place and writes back once after the if, so if-convert runs both
branches. Compared on inputs whose masks keep nothing, everything or some,
with autograd off and on (a tensor autograd records is written back only
where the branch is taken, in the guard's fallback: the gradients match);
the sync points are the report's. The must-not-touch case keeps its sync and
says why."""

from typing import List

import pytest
import torch
from torch import Tensor

from test_rewrites import compare_outputs

TRIALS = 60


class GuardedStore(torch.nn.Module):
    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        y = x * 1.0
        if bool(m.any()):
            y[m] = 0.0
        return y * 2


class GuardedCopy(torch.nn.Module):
    """mask-store makes the store `y.copy_(where(m, v, y))`."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        y = torch.zeros_like(x)
        if bool(m.sum() > 1):
            y[m] = x[m] * 3.0
        return y


class Accumulate(torch.nn.Module):
    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        acc = torch.ones_like(x)
        if bool((x * m).sum() > 0):
            acc.add_(x)
            acc.mul_(2.0)
        return acc + x


class BinnedError(torch.nn.Module):
    """Expected calibration error (torchmetrics-style): per bin, `if
    prop.item() > 0: ece += ...`, a condition lift-scalars lifts, in a
    loop; TorchScript returns the add_'s result from the branch."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        conf = torch.sigmoid(x)
        ece = torch.zeros(1)
        bounds: List[float] = [0.0, 0.25, 0.5, 0.75, 1.0]
        for i in range(4):
            in_bin = conf.gt(bounds[i]) * conf.le(bounds[i + 1])
            prop = in_bin.float().mean()
            if prop.item() > 0:
                ece += torch.abs(conf[in_bin].mean() - m[in_bin].float().mean()) * prop
        return ece


class LocalInBranch(torch.nn.Module):
    """A copy made in the branch, written, and returned as its result."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        if bool(m.any()):
            z = x.clone()
            z[m] = 0.0
            r = z
        else:
            r = x * 2
        return r


class WriteAtRows(torch.nn.Module):
    """Writes through views made in the branch (`y[0] = ...`, `y[1:3] =
    ...`, a tracker's `ids[i] = j`): scattered back into y (select_scatter,
    slice_scatter), y[0] read after the first write seeing it."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        y = x * 1.0
        if bool(m.any()):
            y[1:3] = -1.0
            y[0] = y[0] * 2.0 + y[-1]
        return y * 2


class BothBranchesWrite(torch.nn.Module):
    """Each branch writes y: with autograd on, the fallback writes y back
    whichever branch is taken (each branch's writes where it is taken)."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        y = x * 1.0
        if bool(m.any()):
            y.add_(1.0)
        else:
            y.mul_(2.0)
        return y * 2


class IntoInput(torch.nn.Module):
    """Must not touch: a graph input is written, and libtorch's alias
    analysis lets graph inputs alias each other (m might be a view of x)."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        if bool(m.any()):
            x.masked_fill_(m, 0.0)
        return x


def mask_inputs(gen, kind):
    n = int(torch.randint(0, 6, (1,), generator=gen))
    x = torch.randn(n, generator=gen)
    p = {"none": 0.0, "all": 1.0}.get(kind, 0.5)
    return x, torch.rand(n, generator=gen) < p


CASES = [
    # name, module, sync points (before, after)
    ("guarded-store", GuardedStore(), (2, 0)),
    ("guarded-copy", GuardedCopy(), (3, 0)),
    ("accumulate", Accumulate(), (1, 0)),
    ("binned-error", BinnedError(), (3, 0)),
    ("local-in-branch", LocalInBranch(), (2, 0)),
    ("write-at-rows", WriteAtRows(), (1, 0)),
    ("both-branches-write", BothBranchesWrite(), (1, 0)),
    ("into-input", IntoInput(), (1, 1)),
]


@pytest.mark.parametrize("name,module,syncs", CASES, ids=[c[0] for c in CASES])
def test_branch_writes_equal_original(staticify, save, tmp_path, name, module, syncs):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    method = staticify.report(path)["methods"][0]
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == syncs
    if syncs[1]:
        assert any(f["action"] == "kept" and f.get("reason") for f in method["findings"])
    original, rewritten = torch.jit.load(str(path)), torch.jit.load(str(out))
    with torch.no_grad():
        assert compare_outputs(original, rewritten, mask_inputs, TRIALS, name) > TRIALS // 2


@pytest.mark.parametrize("name,module", [c[:2] for c in CASES[:7]], ids=[c[0] for c in CASES[:7]])
def test_branch_writes_gradients(staticify, save, tmp_path, name, module):
    """With autograd recording the written tensor, the guard's fallback
    writes only where the branch is taken: outputs and gradients match."""
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    original, rewritten = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(1)
    for trial in range(30):
        x, m = mask_inputs(gen, ("none", "all", "random")[trial % 3])
        results = []
        for model in (original, rewritten):
            leaf = x.clone().requires_grad_()
            y = model(leaf * 1.0, m)
            g = (torch.autograd.grad(y.sum(), leaf, allow_unused=True)[0]
                 if y.requires_grad else None)
            results.append((y.detach(), y.requires_grad, g))
        (ya, ra, ga), (yb, rb, gb) = results
        torch.testing.assert_close(yb, ya)
        assert ra == rb, (name, x, m)
        assert (ga is None) == (gb is None), (name, x, m, ga, gb)
        if ga is not None:
            torch.testing.assert_close(gb, ga)
