"""Loops whose exit depends on data (`for _ in range(n): ...; if t.all():
break`, `while i < n: if bool(done): break`), through the binary against the
original: with --static-loops, lift-scalars runs such a loop on to its bound
with an `active` mask, each carried tensor kept as the exit left it
(`where(active, x', x)`); without it the loop is kept and the report names
the flag.
Each program is compared on random inputs that leave the loop at the first
iteration, later, or never; the sync points are the report's. The
must-not-touch cases keep their sync and say why."""

import pytest
import torch
from torch import Tensor

from test_rewrites import run_safely

TRIALS = 60


class Converge(torch.nn.Module):
    """A fixed-point iteration with a tolerance: stops when the step is
    small (power iteration, Sinkhorn, mean shift)."""

    def forward(self, a: Tensor, x: Tensor) -> Tensor:
        for _ in range(20):
            y = torch.tanh(a @ x + x)
            step = (y - x).abs().max()
            x = y
            if step < 0.05:
                break
        return x


class EarlyStop(torch.nn.Module):
    """A per-row done flag (a decoder's `finished`): stops when every row is
    done; what follows the break runs only when the loop goes on."""

    def forward(self, w: Tensor, h: Tensor):
        finished = torch.zeros(h.shape[0], dtype=torch.bool)
        for _ in range(12):
            h = torch.tanh(h @ w)
            finished = finished | (h.sum(1) > 0.5)
            if torch.all(finished):
                break
            h = h * 0.9
        return h, finished


class WhileCount(torch.nn.Module):
    """Left alone: a while loop over its own count with a break on data.
    TorchScript moves `i += 1` into the branch that goes on, so the count
    itself depends on data ("it is carried by a loop")."""

    def forward(self, x: Tensor, limit: Tensor) -> Tensor:
        i = 0
        total = torch.zeros_like(x)
        while i < 10:
            if bool((total.sum() >= limit).item()):
                break
            total = total + x.abs()
            i += 1
        return total


class DivideUntilSmall(torch.nn.Module):
    """An integer division by data in the body: past the exit its divisor is
    shielded (no raise where the original ran no iteration)."""

    def forward(self, x: Tensor, d: Tensor) -> Tensor:
        for _ in range(6):
            if bool((x.abs() < 4).all()):
                break
            x = torch.div(x, d, rounding_mode="floor")
        return x


class ReadsIteration(torch.nn.Module):
    """Must not touch: the body reads the iteration number."""

    def forward(self, x: Tensor, limit: Tensor) -> Tensor:
        for i in range(8):
            x = x + i
            if bool(x.sum() > limit):
                break
        return x


class CountsSteps(torch.nn.Module):
    """Must not touch: the number of steps taken is returned (a host value
    the loop carries)."""

    def forward(self, x: Tensor, limit: Tensor):
        steps = 0
        for _ in range(8):
            x = x * 1.5
            steps += 1
            if bool(x.sum() > limit):
                break
        return x, steps


class WritesInPlace(torch.nn.Module):
    """Must not touch: the body writes in place."""

    def forward(self, x: Tensor, limit: Tensor) -> Tensor:
        y = x.clone()
        for _ in range(8):
            y.mul_(1.5)
            if bool(y.sum() > limit):
                break
        return y


class SelectsInBody(torch.nn.Module):
    """Must not touch: the body makes a shape of its own from data (the
    carried tensor shrinks)."""

    def forward(self, x: Tensor, limit: Tensor) -> Tensor:
        for _ in range(8):
            x = x[x.abs() < 8] * 1.5
            if bool(x.sum() > limit):
                break
        return x


def matrix_inputs(gen):
    n = int(torch.randint(1, 5, (1,), generator=gen))
    scale = float(torch.rand(1, generator=gen)) * 2
    return torch.randn(n, n, generator=gen) * scale, torch.randn(n, 2, generator=gen)


def decoder_inputs(gen):
    n = int(torch.randint(0, 5, (1,), generator=gen))
    return torch.randn(3, 3, generator=gen), torch.randn(n, 3, generator=gen)


def limit_inputs(gen):
    n = int(torch.randint(0, 4, (1,), generator=gen))
    return torch.randn(n, generator=gen), torch.randn((), generator=gen) * 8


def division_inputs(gen):
    n = int(torch.randint(0, 5, (1,), generator=gen))
    x = torch.randint(-100, 100, (n,), generator=gen)
    d = torch.randint(-3, 4, (n,), generator=gen)  # a zero divisor raises
    if int(torch.randint(0, 3, (1,), generator=gen)) > 0:
        d = torch.where(d == 0, torch.full_like(d, 2), d)
    return x, d


CASES = [
    # name, module, inputs, sync points (before, after)
    ("converge", Converge(), matrix_inputs, (1, 0)),
    ("early-stop", EarlyStop(), decoder_inputs, (1, 0)),
    ("while-count", WhileCount(), limit_inputs, (1, 1)),
    ("divide-until-small", DivideUntilSmall(), division_inputs, (1, 0)),
    ("reads-iteration", ReadsIteration(), limit_inputs, (1, 1)),
    ("counts-steps", CountsSteps(), limit_inputs, (1, 1)),
    ("writes-in-place", WritesInPlace(), limit_inputs, (1, 1)),
    ("selects-in-body", SelectsInBody(), limit_inputs, (2, 2)),
]


@pytest.mark.parametrize("name,module,inputs,syncs", CASES, ids=[c[0] for c in CASES])
def test_loop_exit_equals_original(staticify, save, tmp_path, name, module, inputs, syncs):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--static-loops")
    report = staticify.report(path, "--static-loops")
    method = report["methods"][0]
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == syncs
    if syncs[1]:
        reasons = [f.get("reason") or "" for f in method.get("findings", [])
                   if f.get("action") == "kept"]
        assert any(reasons), method
    original, rewritten = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    ran = 0
    for _ in range(TRIALS):
        args = inputs(gen)
        want, want_error = run_safely(original, args)
        got, got_error = run_safely(rewritten, args)
        assert want_error == got_error, (name, args, want_error, got_error)
        if want_error:
            continue
        ran += 1
        for w, g in zip(want if isinstance(want, tuple) else (want,),
                        got if isinstance(got, tuple) else (got,)):
            if isinstance(w, Tensor):
                assert g.dtype == w.dtype and g.shape == w.shape, (name, args)
                torch.testing.assert_close(g, w, equal_nan=True)
            else:
                assert g == w, (name, args)
    assert ran > TRIALS // 2, ran


def test_loops_run_to_their_bound_only_when_asked(staticify, save):
    """Running on to the bound does every iteration's work: by default the
    loop keeps its read, and the report's hint names --static-loops."""
    path = save(EarlyStop())
    method = staticify.report(path)["methods"][0]
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 1)
    reasons = [f.get("reason") or "" for f in method["findings"] if f["action"] == "kept"]
    assert any("--static-loops" in r for r in reasons), reasons
    assert any("--static-loops" in hint for hint in method.get("hints", [])), method.get("hints")
