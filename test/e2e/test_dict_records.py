"""A dict accessed only at keys the graph fixes is a record (normalize,
passes/DictRecords.h): Segment Anything's MaskData, filtered entry by
entry in a loop over its items under host ifs, becomes one selection per
entry, each bounded, cut once where the dict is returned. Checked through
the binary against the original: entries, their order and their values,
with every row kept, none, and some."""
from typing import Dict

import torch

from conftest import left_reasons


def filter_data(data: Dict[str, torch.Tensor], keep: torch.Tensor) -> Dict[str, torch.Tensor]:
    out: Dict[str, torch.Tensor] = {}
    for k, v in data.items():
        out[k] = v[keep]
    return out


class MaskFilter(torch.nn.Module):
    """SAM's _process_batch: filter by predicted IoU, add a stability score,
    filter by it; each step under a test of a module threshold."""

    def __init__(self, iou_thresh: float = 0.5, score_thresh: float = 0.3):
        super().__init__()
        self.iou_thresh = iou_thresh
        self.score_thresh = score_thresh

    def forward(self, masks: torch.Tensor, iou: torch.Tensor, points: torch.Tensor) -> Dict[str, torch.Tensor]:
        data: Dict[str, torch.Tensor] = {"masks": masks, "iou": iou, "points": points}
        if self.iou_thresh > 0.0:
            data = filter_data(data, data["iou"] > self.iou_thresh)
        data["score"] = (data["masks"] > 0.0).float().mean(dim=(1, 2))
        if self.score_thresh > 0.0:
            data = filter_data(data, data["score"] >= self.score_thresh)
        if "boxes" not in data:
            data["count"] = data["iou"].new_zeros(data["iou"].size()) + len(data)
        return data


class Keys(torch.nn.Module):
    """The dict's keys, values and length read back as host values."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d: Dict[str, torch.Tensor] = {"a": x[x > 0]}
        d["b"] = x * 2.0
        total = torch.zeros(())
        for k in d.keys():
            total = total + d[k].sum() * len(k)
        for v in d.values():
            total = total + v.abs().sum()
        return total + len(d)


def inputs(n: int, seed: int, keep_iou: float):
    g = torch.Generator().manual_seed(seed)
    masks = torch.randn(n, 8, 8, generator=g)
    iou = torch.rand(n, generator=g) * keep_iou
    points = torch.randn(n, 2, generator=g)
    return masks, iou, points


def test_filtered_dict_is_its_entries(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(MaskFilter()), tmp_path / "out.pt")
    before, after = method["before"]["sync_points"], method["after"]["sync_points"]
    # Each filter selects its three (then four) entries; what is left is
    # the cut of the returned entries.
    assert after < before, (before, after)
    reasons = left_reasons(method)
    assert reasons and all("it is returned" in r for r in reasons), reasons
    cases = [inputs(12, 0, 1.0), inputs(12, 1, 0.4), inputs(12, 2, 10.0), inputs(1, 3, 1.0), inputs(0, 4, 1.0)]
    for masks, iou, points in cases:
        want, got = original(masks, iou, points), model(masks, iou, points)
        assert list(got.keys()) == list(want.keys())
        for k in want:
            assert torch.equal(got[k], want[k]), k


def test_keys_and_values_are_known(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(Keys()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (1, 0)
    g = torch.Generator().manual_seed(5)
    for x in (torch.randn(9, generator=g), -torch.ones(4), torch.zeros(0)):
        assert torch.equal(model(x), original(x))
