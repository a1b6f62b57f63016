"""The analysis through the real binary on programs it once got wrong: each
must be reported (or not) exactly as stated."""
from typing import Dict, List

import pytest
import torch

from conftest import findings


class CallsSub(torch.nn.Module):
    class Sub(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x)

    def __init__(self):
        super().__init__()
        self.sub = CallsSub.Sub()

    def forward(self, x):
        return self.sub(x).float().sum()


def where3_mask(x):
    m = torch.where(x > 0, x > 1, x < -1)  # a bool mask from where(c, a, b)
    return x[m]


def str_branch(x):
    if str(x) == "tensor([1.])":
        return torch.zeros(3)
    return torch.zeros(4)


def print_tensor(x):
    print(x)
    return x


def dict_write(x):
    d: Dict[str, int] = {}
    d["n"] = int(x.sum())
    return torch.zeros(d["n"])


def list_extend(x):
    items: List[int] = []
    items.extend([int(x.sum())])
    return torch.zeros(items[0])


def append_under_branch(x):
    items: List[int] = []
    if bool(x.sum() > 0):
        items.append(1)
    return torch.zeros(len(items))


def list_length_from_data(x):
    return torch.tensor([1] * int(x.sum()))


class AttributeWrite(torch.nn.Module):
    n: int

    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n = int(x.sum())
        return torch.zeros(self.n)


def arange_index(x):
    return x[torch.arange(3)]


def sort_index(x):
    s, i = torch.sort(x)
    return x[i]


def topk_index(x):
    v, i = torch.topk(x, 2)
    return x[i]


def script(fn):
    if isinstance(fn, torch.nn.Module):
        return torch.jit.script(fn)

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.f = torch.jit.script(fn)

        def forward(self, x):
            return self.f(x)

    return torch.jit.script(Wrap())


DYNAMIC = [  # program, an op the report must name
    (where3_mask, "aten::index"),
    (str_branch, "aten::str"),
    (print_tensor, "prim::Print"),
    (dict_write, "aten::zeros"),
    (list_extend, "aten::zeros"),
    (append_under_branch, "aten::zeros"),
    (list_length_from_data, "aten::tensor"),
    (AttributeWrite(), "aten::zeros"),
]
STATIC = [arange_index, sort_index, topk_index]


@pytest.mark.parametrize("program,op", DYNAMIC, ids=[
    getattr(p, "__name__", type(p).__name__) for p, _ in DYNAMIC])
def test_data_dependence_is_found(staticify, save, program, op):
    report = staticify.report(save(script(program)))
    assert op in {f["op"] for f in findings(report)}, findings(report)
    assert report["methods"][0]["after"]["static"] is False


@pytest.mark.parametrize("program", STATIC, ids=[p.__name__ for p in STATIC])
def test_static_programs_have_no_findings(staticify, save, program):
    report = staticify.report(save(script(program)))
    assert findings(report) == []


def test_traced_size_reads_are_not_syncs(staticify, save):
    class View(torch.nn.Module):
        def forward(self, x):
            return x.view(x.size(0), -1) * 2

    traced = torch.jit.trace(View(), torch.rand(2, 3, 4))
    report = staticify.report(save(traced))
    assert findings(report) == []


def test_calls_not_inlined_are_reported(staticify, save):
    report = staticify.report(save(CallsSub()), "--no-inline")
    ops = [f["op"] for f in findings(report)]
    assert "prim::CallMethod" in ops
    assert report["methods"][0]["after"]["static"] is False


def test_report_json_is_utf8_for_any_path(staticify, save, tmp_path):
    """A path may hold any bytes; the JSON report must still be UTF-8."""
    import json
    import os
    odd = os.path.join(os.fsencode(tmp_path), b"m\xff.pt")
    os.rename(save(CallsSub()), odd)
    out = tmp_path / "r.json"
    staticify(os.fsdecode(odd), "--report-json", out)  # the raw byte 0xff
    report = json.loads(out.read_bytes().decode("utf-8"))  # strict UTF-8
    assert report["input"].endswith("m\ufffd.pt")
