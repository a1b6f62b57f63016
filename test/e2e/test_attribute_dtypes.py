"""A module's tensor attributes have the dtypes the model gives them: a
gather by an int64 buffer (`table[self.relative_position_index]`, Swin's
and MaxViT's relative position bias) is a static gather, not a selection
by a mask of unknown dtype. Where a method stores to the attribute, its
dtype may change, and the index is reported as before."""
import json

import pytest
import torch
import torchvision
from torch import Tensor

from conftest import sync_points


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.tensor([2, 0, 1]))
        self.table = torch.nn.Parameter(torch.randn(3))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.table[self.idx]


class BufferIndex(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(Inner())

    def forward(self, x: Tensor) -> Tensor:
        return self.inner(x)


class StoredIndex(torch.nn.Module):
    """forward replaces its index buffer: its dtype is the caller's."""

    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.tensor([2, 0, 1]))

    def forward(self, x: Tensor, new: Tensor) -> Tensor:
        self.idx = new
        return x[self.idx].sum()


def test_buffer_index_is_a_gather(staticify, save, tmp_path):
    path = save(BufferIndex())
    report = staticify.report(path)
    assert sync_points(report) == (0, 0)
    assert report["methods"][0]["before"]["counts"]["total"] == 0


def test_stored_attribute_keeps_its_finding(staticify, save, tmp_path):
    report = staticify.report(save(StoredIndex()))
    assert sync_points(report)[0] == 1
    messages = [f["message"] for f in report["methods"][0]["findings"]]
    assert any("unknown dtype" in m for m in messages), messages


@pytest.mark.parametrize("name", ["swin_t", "maxvit_t"])
def test_static_transformers_report_no_sync(staticify, save, tmp_path, name):
    """Classification models: nothing depends on data, and the report says so
    (their int64 position-index buffers were 12 and 22 false sync points)."""
    model = getattr(torchvision.models, name)().eval()
    path = save(torch.jit.script(model))
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    assert sync_points(staticify.report(path)) == (0, 0)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.load(str(out))(x), model(x))
