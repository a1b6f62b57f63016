"""`--lower=cpu` over the 41 idioms of real projects (idioms.py): each is
lowered for the dtypes and ranks of its inputs (every size `?`). Where the
bridge takes the whole method, the kernel's outputs equal the original's on
inputs whose selections keep nothing, everything or some (integers and bools
exactly, floats within summation-order tolerance), and the kernel, not the
TorchScript fallback, answered. Where it does not, the reason names an op."""
import json

import pytest
import torch

from conftest import RUNTIME
from idioms import IDIOMS
from test_rewrites import run_safely

torch.ops.load_library(str(RUNTIME))

TRIALS = 12
DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64",
          torch.int32: "i32", torch.bool: "b8", torch.float16: "f16", torch.int8: "i8"}
# The idioms the bridge lowers today: a change that lowers fewer fails here;
# one that lowers more raises the floor.
MIN_LOWERED = 15
lowered_names = []


def signature(args):
    return ", ".join(f"{DTYPES[a.dtype]}[{','.join('?' * a.dim())}]" for a in args)


def assert_close(a, b, name):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), name
        for p, q in zip(a, b):
            assert_close(p, q, name)
        return
    assert a.dtype == b.dtype and a.shape == b.shape, (name, a, b)
    if a.dtype.is_floating_point:
        # The kernel sums in order; PyTorch vectorizes.
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4, equal_nan=True)
    else:
        assert torch.equal(a, b), (name, a, b)


@pytest.mark.parametrize("name,source,module,inputs", IDIOMS, ids=[i[0] for i in IDIOMS])
def test_lowered_idiom_equals_original(staticify, save, tmp_path, name, source, module,
                                       inputs):
    path = save(module)
    out, report = tmp_path / "lowered.pt", tmp_path / "report.json"
    types = signature(inputs(torch.Generator().manual_seed(0), "random"))
    staticify(path, "-o", out, "--lower=cpu", "--input-types", types, "--report-json", report)
    lowering = json.loads(report.read_text())["methods"][0]["lowering"]
    if not lowering["lowered"]:
        reason = lowering["reason"]
        assert " at " in reason or "attributes" in reason, reason  # names the op
        pytest.skip(f"not lowered: {reason}")
    lowered_names.append(name)
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    compared = 0
    for trial in range(TRIALS):
        kind = ("none", "all", "random")[trial % 3]
        args = inputs(gen, kind)
        expected, error = run_safely(original, [t.clone() for t in args])
        if error:
            continue
        got = lowered(*[t.clone() for t in args])
        assert_close(expected, got, name)
        compared += 1
    assert compared >= TRIALS // 2, (name, compared)
    answered, fallback = lowered._staticify_lowered_forward.counts()[:2]
    assert answered >= compared // 2, (name, answered, fallback)


def test_enough_idioms_lower():
    """Runs after the parametrized tests above (file order)."""
    if len(lowered_names) == 0:
        pytest.skip("run with the idiom tests")
    assert len(lowered_names) >= MIN_LOWERED, sorted(lowered_names)
