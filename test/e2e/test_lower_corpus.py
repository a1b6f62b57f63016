"""`--lower=cpu` over the 41 idioms of real projects (idioms.py): each is
lowered for the dtypes and ranks of its inputs (every size `?`), whole or,
where the bridge does not take the whole method, by its static regions.
Where it lowers, the output's numbers equal the original's on
inputs whose selections keep nothing, everything or some (integers and bools
exactly, floats within summation-order tolerance), and the kernels, not the
TorchScript fallback, answered. Where it does not, the reason names an op."""
import json

import pytest
import torch

from conftest import RUNTIME
from idioms import IDIOMS
from test_rewrites import run_safely

torch.ops.load_library(str(RUNTIME))

# The last test counts what the others lowered (module state): under
# pytest-xdist they all run in one worker (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("lower-corpus")

TRIALS = 12
DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64",
          torch.int32: "i32", torch.bool: "b8", torch.float16: "f16", torch.int8: "i8"}
# The idioms the bridge lowers today: a change that lowers fewer fails here;
# one that lowers more raises the floor.
MIN_LOWERED = 36
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
    runners = ["_staticify_lowered_forward"]
    if not lowering["lowered"]:
        reason = lowering["reason"]
        assert " at " in reason or "attribute" in reason, reason  # names the op
        # Not whole: by its static regions, each a kernel of its own.
        runners = [f"_staticify_lowered_{r['method']}" for r in lowering["regions"]
                   if r["lowered"]]
        if not runners:
            pytest.skip(f"not lowered: {reason}; regions: "
                        f"{lowering['regions'] or lowering['regions_reason']}")
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
    for runner in runners:
        answered, fallback = getattr(lowered, runner).counts()[:2]
        assert answered >= compared // 2, (name, runner, answered, fallback)


def test_enough_idioms_lower():
    """Runs after the parametrized tests above (file order)."""
    if len(lowered_names) == 0:
        pytest.skip("run with the idiom tests")
    assert len(lowered_names) >= MIN_LOWERED, sorted(lowered_names)


# --- the bounded forms --------------------------------------------------------
# The TorchScript bound inserts (passes/forms/bounded_forms.py), each wrapped in
# a module and lowered on its own: the kernel must compute exactly what the
# form's TorchScript computes.

def _forms():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "passes" / "forms" / "bounded_forms.py"
    spec = importlib.util.spec_from_file_location("bounded_forms", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


forms = _forms()


class Compact(torch.nn.Module):
    def forward(self, keep: torch.Tensor):
        return forms.compact(keep)


class SelectRows(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        return forms.select_rows(x, mask)


class WhereIndex(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        return forms.where_index(x, 0)


class Nonzero(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        return forms.nonzero(x)


class ReduceLive(torch.nn.Module):
    def forward(self, rows: torch.Tensor, count: torch.Tensor):
        return forms.reduce_live(rows, count, True), forms.reduce_live(rows, count, False)


class IgnorePadding(torch.nn.Module):
    def forward(self, target: torch.Tensor, count: torch.Tensor):
        return forms.ignore_padding(target, count, -100)


def _mask(n, gen):
    return torch.rand(n, generator=gen) < float(torch.rand((), generator=gen))


FORM_CASES = [
    # name, module, input types, inputs(gen)
    ("compact", Compact(), "b8[?]",
     lambda g: [_mask(int(torch.randint(0, 300, (), generator=g)), g)]),
    ("select_rows", SelectRows(), "f32[?,?], b8[?]",
     lambda g: (lambda n: [torch.randn(n, 5, generator=g), _mask(n, g)])(
         int(torch.randint(0, 300, (), generator=g)))),
    ("where_index", WhereIndex(), "i64[?]",
     lambda g: [torch.randint(0, 3, (int(torch.randint(0, 300, (), generator=g)),),
                              generator=g)]),
    ("nonzero", Nonzero(), "i64[?,?]",
     lambda g: [torch.randint(0, 3, (int(torch.randint(0, 30, (), generator=g)), 7),
                              generator=g)]),
    ("reduce_live", ReduceLive(), "f32[?,?], i64[]",
     lambda g: (lambda n: [torch.randn(n, 3, generator=g),
                           torch.randint(0, n + 1, (), generator=g)])(
         int(torch.randint(1, 50, (), generator=g)))),
    ("ignore_padding", IgnorePadding(), "i64[?], i64[]",
     lambda g: (lambda n: [torch.randint(0, 5, (n,), generator=g),
                           torch.randint(0, n + 1, (), generator=g)])(
         int(torch.randint(0, 50, (), generator=g)))),
]


@pytest.mark.parametrize("name,module,types,inputs", FORM_CASES, ids=[c[0] for c in FORM_CASES])
def test_lowered_form_equals_its_torchscript(staticify, save, tmp_path, name, module, types,
                                            inputs):
    path = save(module)
    out, report = tmp_path / "lowered.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--lower=cpu", "--input-types", types, "--report-json", report)
    lowering = json.loads(report.read_text())["methods"][0]["lowering"]
    assert lowering["lowered"], lowering["reason"]
    original, lowered = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(5)
    for _ in range(200):
        args = inputs(gen)
        assert_close(original(*args), lowered(*args), name)
    answered, fallback = lowered._staticify_lowered_forward.counts()[:2]
    assert answered == 200 and fallback == 0, (answered, fallback)
