"""Kernels lowered by another build, run by this one's runtime. The GPU
machine's build (a PyTorch wheel, no MLIR) has no --lower; the Debian build
lowers (scripts/gpu/lower_here.py) and the archives are carried over: the
runtime that launches their cubins links no MLIR. On a GPU each lowered
method must equal its module, answer from the kernels (not the TorchScript
fallback), make no host sync, and capture into a CUDA graph.

Runs where STATICIFY_CARRIED_LOWERED names the folder of archives: on a GPU,
or on the CPU under STATICIFY_DRY_RUN=1 (scripts/gpu/validate.sh --dry-run
rehearses here: the archives load and their fallback answers)."""
import os
import pathlib

import pytest
import torch

from conftest import RUNTIME
from idioms import IDIOMS
from test_gpu import N, assert_graph_replays_equal, calls_that_sync, check_sample
from test_lower_corpus import assert_close

CARRIED = os.environ.get("STATICIFY_CARRIED_LOWERED")
ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"

pytestmark = [
    pytest.mark.skipif(not CARRIED, reason="no STATICIFY_CARRIED_LOWERED folder"),
    pytest.mark.skipif(not ON_GPU and not os.environ.get("STATICIFY_DRY_RUN"),
                       reason="needs a CUDA GPU (or STATICIFY_DRY_RUN=1 to rehearse)"),
]

KINDS = ("none", "all", "random")


def carried(name):
    torch.ops.load_library(str(RUNTIME))
    path = pathlib.Path(CARRIED) / f"{name}.pt"
    assert path.exists(), f"{path} was not carried: scripts/gpu/lower_here.py makes it"
    return torch.jit.load(str(path))


def answered_by_kernels(lowered, calls):
    """On a GPU: every call ran the CUDA kernels, none the fallback."""
    if ON_GPU:
        assert lowered.cuda_calls() == calls and lowered.counts()[1] == 0, lowered.counts()
    else:
        assert lowered.counts()[1] == calls  # the dry run: the fallback answered


def sample_inputs(gen):
    x = torch.arange(N, dtype=torch.float32, device=DEVICE).unsqueeze(1).repeat(1, 16)
    labels = (torch.rand(N, generator=gen) < 0.3).long().to(DEVICE)
    return x, labels


def test_carried_sampler_keeps_its_invariants_without_a_sync():
    model = carried("sampler")
    x, labels = sample_inputs(torch.Generator().manual_seed(0))
    draws = {tuple(check_sample(x, labels, *model(x, labels)).tolist()) for _ in range(4)}
    assert len(draws) == 4, "the kernels' draws repeat"
    if ON_GPU:
        assert calls_that_sync(model, x, labels) is None
    answered_by_kernels(model._staticify_lowered_forward, 4 + ON_GPU)


def carried_idioms():
    folder = pathlib.Path(CARRIED or ".")
    return [i for i in IDIOMS if (folder / f"idiom-{i[0]}.pt").exists()]


def test_enough_idioms_were_carried():
    assert len(carried_idioms()) >= 15, [i[0] for i in carried_idioms()]


@pytest.mark.parametrize("name,source,module,make", carried_idioms(),
                         ids=[i[0] for i in carried_idioms()])
def test_carried_idiom_equals_its_module(name, source, module, make):
    model = carried(f"idiom-{name}")
    lowered = model._staticify_lowered_forward
    calls = 0
    for seed, kind in enumerate(KINDS * 2, start=1):
        args = [a.to(DEVICE) for a in make(torch.Generator().manual_seed(seed), kind)]
        assert_close(module(*args), model(*args), name)
        calls += 1
        if ON_GPU:
            assert calls_that_sync(model, *args) is None, name
            calls += 1
    answered_by_kernels(lowered, calls)


@pytest.mark.skipif(not ON_GPU, reason="CUDA graphs need a GPU")
def test_carried_idiom_captures_into_a_cuda_graph():
    """A lowered method without random ops launches on the capturing stream
    and allocates from the graph's pool: captured once, replayed on new
    inputs copied into the captured ones, it equals the module."""
    name, _, module, make = next(i for i in IDIOMS if i[0] == "metrics-mae-masked")
    assert_graph_replays_equal(carried(f"idiom-{name}"), module, make, name)
