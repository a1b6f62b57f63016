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


@pytest.mark.parametrize("device", DEVICES)
def test_valid_rows_and_padded_rows(ops, device):
    """valid_rows is x's first `count` rows on the CPU (the count read there
    waits for no device) and x itself elsewhere; padded_rows gives the rows
    back, zeros past the valid ones. Gradients flow through both."""
    staticify, _ = ops
    x = torch.randn(6, 3, device=device, requires_grad=True)
    for n in (0, 1, 4, 6, 9, -2):
        count = torch.tensor(n, device=device)
        valid = staticify.valid_rows(x, count)
        if device == "cpu":
            assert torch.equal(valid, x[:max(0, min(n, 6))])
        else:
            assert valid is x or valid.data_ptr() == x.data_ptr() and valid.shape == x.shape
        back = staticify.padded_rows(valid, 6)
        assert back.shape == x.shape
        assert torch.equal(back[:valid.size(0)], x[:valid.size(0)])
        assert not back[valid.size(0):].any()
    count = torch.tensor(4, device=device)
    (staticify.padded_rows(staticify.valid_rows(x, count), 6) * 3).sum().backward()
    rows = 4 if device == "cpu" else 6
    want = torch.zeros(6, 3, device=device)
    want[:rows] = 3
    assert torch.equal(x.grad, want)


def test_valid_rows_rejects_what_it_does_not_take(ops):
    staticify, _ = ops
    with pytest.raises(RuntimeError, match="0-d integer count"):
        staticify.valid_rows(torch.ones(3, 2), torch.tensor([1]))
    with pytest.raises(RuntimeError, match="0-d integer count"):
        staticify.valid_rows(torch.ones(3, 2), torch.tensor(1.0))
    with pytest.raises(RuntimeError, match="do not fit in 2"):
        staticify.padded_rows(torch.ones(3, 2), 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_put_valid_rows_is_index_put_on_the_valid_rows(ops, device, accumulate):
    """put_valid_rows(x, index, count, values, value_rows, accumulate) is
    x.index_put_((index[:count],), values[:count] or the 0-d value,
    accumulate): negative indices count from the end, and the padding rows
    (out of range, negative, or repeating valid ones) write nothing. Repeated
    valid indices are left out on CUDA, where PyTorch does not say which row
    wins."""
    staticify, _ = ops
    gen = torch.Generator().manual_seed(3)
    for trial in range(200):
        n, p = 1 + trial % 9, int(torch.randint(0, 12, (), generator=gen))
        count = int(torch.randint(0, p + 1, (), generator=gen)) if p else 0
        if device == "cpu" or accumulate:
            valid = torch.randint(-n, n, (count,), generator=gen)
        else:
            valid = torch.randperm(n, generator=gen)[:min(count, n)] - n * (trial % 2)
            count = valid.numel()
        padding = torch.randint(-100, 100, (p - count,), generator=gen)
        index = torch.cat([valid, padding])
        x = torch.randn(n, 3, generator=gen)
        for value_rows in (True, False):
            values = torch.randn(p, 3, generator=gen) if value_rows else torch.tensor(2.5)
            want = x.clone().index_put_((valid,), values[:count] if value_rows else values,
                                        accumulate)
            got = staticify.put_valid_rows(x.clone().to(device), index.to(device),
                                           torch.tensor(count, device=device),
                                           values.to(device), value_rows, accumulate)
            torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
