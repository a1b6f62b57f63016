"""The runtime library's ops against the bounded forms they implement:
staticify::compact equals the TorchScript `compact` form exactly, on CPU
here and also on CUDA on the GPU machine (where a CUDA kernel runs)."""

import pytest
import torch

from conftest import RUNTIME
from test_forms import compile_forms

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module")
def ops():
    torch.ops.load_library(str(RUNTIME))
    return torch.ops.staticify, compile_forms()


@pytest.mark.parametrize("device", DEVICES)
def test_compact_equals_its_form(ops, device):
    staticify, forms = ops
    gen = torch.Generator().manual_seed(0)
    # Empty, all, none, random densities; and one size past a full grid of
    # 65535 blocks x 256 threads (the CUDA kernel's grid-stride loop).
    sizes = [0, 1, 7, 1000, 65536] + ([65535 * 256 + 1001] if device == "cuda" else [])
    for n in sizes:
        for p in (0.0, 1.0, 0.01, 0.5):
            keep = (torch.rand(n, generator=gen) < p).to(device)
            positions, count = staticify.compact(keep)
            want_positions, want_count = forms.compact(keep)
            assert positions.device == keep.device and count.device == keep.device
            assert positions.dtype == torch.long and count.dim() == 0
            assert torch.equal(positions, want_positions), (n, p)
            assert int(count) == int(want_count) == int(keep.sum())


def test_compact_rejects_what_it_does_not_take(ops):
    staticify, _ = ops
    with pytest.raises(RuntimeError, match="1-D bool tensor"):
        staticify.compact(torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="1-D bool tensor"):
        staticify.compact(torch.ones(3))
