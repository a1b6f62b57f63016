"""Rewrites that must not leave a host read hidden inside an op: masked_fill
with a 0-d tensor value reads it on the host (on CUDA, value.item()), and so
would a stored 0-d value put in by masked_fill_. A profile of the
staticified SSD300 on an H100 found one (docs/benchmarks.md, "Where a
forward still waits"). Through the real binary: each model's staticified
form has no sync point left, equals the original on random inputs of float
and integer dtypes (the value cast to x's dtype as masked_fill and
index_put_ cast it), and, on a GPU, runs without a single synchronizing
call (torch.cuda.set_sync_debug_mode)."""
import pytest
import torch

from conftest import sync_points


class FillWithDataMin(torch.nn.Module):
    """Masked scores pushed below every live one, by a value read from the
    data (fairseq's and detectron2's `masked_fill(~valid, float(x.min()) - 1)`
    style)."""

    def forward(self, x, t):
        valid = t > 0
        return x.masked_fill(~valid, float(x.min()) - 1.0)


class FillWithTensorMin(torch.nn.Module):
    """The same with the 0-d tensor itself as the value (no float()): the
    original's masked_fill reads it on the host, which the report now says."""

    def forward(self, x, t):
        return x.masked_fill(t <= 0, x.min() - 1)


class StoreDataMax(torch.nn.Module):
    """Holes filled in place with the largest value (depth-map style:
    `depth[depth <= 0] = depth.max()`), a 0-d tensor stored by a mask."""

    def forward(self, x, t):
        x[t <= 0] = t.max()
        return x


MODELS = [FillWithDataMin, FillWithTensorMin, StoreDataMax]


def inputs(gen, dtype, device="cpu"):
    x = (torch.randn(6, 5, generator=gen) * 10)
    t = torch.randn(6, 5, generator=gen) * 4
    return x.to(dtype).to(device), t.to(device)


def staticified(staticify, save, tmp_path, cls):
    path = save(cls())
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    return torch.jit.load(str(path)), torch.jit.load(str(out)), report


@pytest.mark.parametrize("cls", MODELS)
def test_no_host_read_is_left_and_values_equal(staticify, save, tmp_path, cls):
    original, static, report = staticified(staticify, save, tmp_path, cls)
    before, after = sync_points(report)
    assert before >= 1 and after == 0, (before, after)
    gen = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, torch.float64, torch.int64, torch.int32):
        for _ in range(10):
            x, t = inputs(gen, dtype)
            want = original(x.clone(), t)
            got = static(x.clone(), t)
            assert got.dtype == want.dtype and torch.equal(got, want), (dtype, got, want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("cls", MODELS)
def test_no_synchronizing_call_on_cuda(staticify, save, tmp_path, cls):
    original, static, _ = staticified(staticify, save, tmp_path, cls)
    gen = torch.Generator().manual_seed(8)
    x, t = inputs(gen, torch.float32, "cuda")
    for _ in range(3):  # the profiling executor specializes on its first runs
        original(x.clone(), t)
        static(x.clone(), t)
    y = x.clone()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = static(y, t)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(got, original(x.clone(), t))
