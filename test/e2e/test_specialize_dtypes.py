"""specialize-dtypes through the real binary: a method that indexes by a
graph input of unknown dtype (`obs[valid]`) runs a version that reads the
input as a mask when it is bool (no sync), and the original otherwise; its
outputs equal the original's for bool, uint8 and int64 indices. An index
is tried as int64 indices too (a gather, never a selection). Where no
version removes a sync point, the method is left as it was."""
import json

import pytest
import torch
from torch import Tensor

from conftest import sync_points


class MaskedMean(torch.nn.Module):
    """A reduction of the selected rows (PyG-style: `valid` from the caller)."""

    def forward(self, obs: Tensor, valid: Tensor) -> Tensor:
        sel = obs[valid]
        return sel.sum(0) / max(1, sel.size(0))


class ViewedMask(torch.nn.Module):
    """The input reaches the index through a view."""

    def forward(self, obs: Tensor, valid: Tensor) -> Tensor:
        return obs.view(-1)[valid.view(-1)].sum()


class ReturnsSelection(torch.nn.Module):
    """The selection is the result: every version cuts it on the host (a
    bool mask, or an int64 one, which masked_select refuses)."""

    def forward(self, obs: Tensor, valid: Tensor) -> Tensor:
        return obs.masked_select(valid) * 2


class ReturnsGather(torch.nn.Module):
    """`obs[idx]` returned: as a mask it is cut on the host, as int64
    indices a gather of static shape: the int64 version has no sync."""

    def forward(self, obs: Tensor, idx: Tensor) -> Tensor:
        return obs[idx] * 2


def _run(staticify, save, tmp_path, module):
    path = save(module)
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--report-json", report)
    return (torch.jit.load(str(path)), torch.jit.load(str(out)),
            json.loads(report.read_text()), out)


def _indices(n, kind, gen):
    keep = torch.rand(n, generator=gen) > 0.5
    return {"bool": keep, "uint8": keep.to(torch.uint8),
            "int64": torch.nonzero(keep).flatten()}[kind]


@pytest.mark.parametrize("module", [MaskedMean(), ViewedMask()],
                         ids=["masked-mean", "viewed-mask"])
def test_bool_version_removes_the_sync(staticify, save, tmp_path, module):
    original, result, report, _ = _run(staticify, save, tmp_path, module)
    before, after = sync_points(report)
    assert (before, after) == (1, 0), report["methods"][0]["after"]
    # The original, with its host read, is the fallback for other dtypes.
    assert report["methods"][0]["after"]["fallback_sync_points"] >= 1
    gen = torch.Generator().manual_seed(0)
    for kind in ("bool", "uint8", "int64"):
        for _ in range(20):
            obs = torch.randn(12, 3, generator=gen)
            if isinstance(module, ViewedMask):
                obs = obs[:, 0].contiguous()
            valid = _indices(12, kind, gen)
            torch.testing.assert_close(result(obs, valid), original(obs, valid),
                                       rtol=1e-5, atol=1e-6)
    # A mask that keeps nothing: the original divides by max(1, 0).
    obs = torch.randn(12, 3 if isinstance(module, MaskedMean) else 1).squeeze(1)
    none = torch.zeros(12, dtype=torch.bool)
    torch.testing.assert_close(result(obs, none), original(obs, none))


def test_indices_of_unknown_dtype_are_tried_as_int64(staticify, save, tmp_path):
    original, result, report, _ = _run(staticify, save, tmp_path, ReturnsGather())
    assert sync_points(report) == (1, 0)
    gen = torch.Generator().manual_seed(3)
    for kind in ("bool", "uint8", "int64"):
        obs, idx = torch.randn(12, generator=gen), _indices(12, kind, gen)
        assert torch.equal(result(obs, idx), original(obs, idx)), kind


def test_no_version_where_it_removes_nothing(staticify, save, tmp_path):
    original, result, report, _ = _run(staticify, save, tmp_path, ReturnsSelection())
    assert "prim::dtype" not in str(result.graph)  # no guard, one body
    before, after = sync_points(report)
    assert after == before == 1
    obs, valid = torch.randn(8), torch.rand(8) > 0.5
    assert torch.equal(result(obs, valid), original(obs, valid))


class MaskedSelectSum(torch.nn.Module):
    """masked_select's mask from the caller: bool, or uint8 (deprecated, still
    taken), or int64 (refused by PyTorch, in both versions)."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        return x.masked_select(m).sum()


def test_masked_select_mask_of_unknown_dtype(staticify, save, tmp_path):
    original, result, report, _ = _run(staticify, save, tmp_path, MaskedSelectSum())
    assert sync_points(report) == (1, 0), report["methods"][0]["after"]
    gen = torch.Generator().manual_seed(0)
    for n in (0, 1, 7):
        x = torch.randn(n, generator=gen)
        keep = torch.rand(n, generator=gen) > 0.5
        for m in (keep, keep.to(torch.uint8), ~keep, torch.ones(n, dtype=torch.bool)):
            torch.testing.assert_close(result(x, m), original(x, m))
        with pytest.raises(RuntimeError):
            original(x, keep.long())
        with pytest.raises(RuntimeError):
            result(x, keep.long())


class RunsOfSelected(torch.nn.Module):
    """unique_consecutive of a selection of ids from the caller (CTC-style
    collapsing): bound takes integers only; int64 ids run the static
    version, others (int32, floats with NaN) the original."""

    def forward(self, tok: Tensor, m: Tensor) -> Tensor:
        return torch.unique_consecutive(tok[m]).sum()


def test_unique_of_input_of_unknown_dtype(staticify, save, tmp_path):
    original, result, report, _ = _run(staticify, save, tmp_path, RunsOfSelected())
    assert sync_points(report) == (2, 0), report["methods"][0]["after"]
    gen = torch.Generator().manual_seed(0)
    for trial in range(60):
        n = int(torch.randint(0, 9, (1,), generator=gen))
        tok = torch.randint(0, 4, (n,), generator=gen)
        m = torch.rand(n, generator=gen) < (0.0, 0.5, 1.0)[trial % 3]
        nan = torch.where(tok == 1, torch.tensor(float("nan")), tok.float())
        for t in (tok, tok.int(), tok.float(), nan):
            want, got = original(t, m), result(t, m)
            assert want.dtype == got.dtype
            torch.testing.assert_close(got, want, equal_nan=True)
