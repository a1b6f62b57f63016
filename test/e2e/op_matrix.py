"""The op matrix: each ATen op applied to bounded values, staticified and
run against the op on the cut tensors.

A row is one op spelled once in TorchScript over the selections of one
mask `m` ([N] bool) from fixed-size inputs:

    s = x[m]          # [k, C] float rows, k = m.sum()
    t = y[m]          # [k, C] float rows, the same k
    v = x[:, 0][m]    # [k] float vector
    j = i.long()[m]   # [k] int64 in [0, C) (a dtype the program fixes, as a
                      # model's computed indices have)

and returns the op's result. The original runs the op on the cut tensors;
`staticify --padded-outputs --static-forms` rewrites the program into its
bounded form, where the selections are padded to N rows with their count
beside them and the op's bounded transfer carries them. A bounded output
comes back as (padded, count), compared cut to its count; a static one as
is. The report says whether the op has a bounded transfer: no sync point
after rewriting. Where it has none, the reason the report gives is the
row's reason.

The cases (CASES per op) draw counts 0, 1, all and random, and fill the
rows the mask leaves out with garbage that must never reach a live result:
NaN, +-inf, 1e30, or random values. An output must equal the original's
wherever the original runs (integers and bools exactly; floats within
1e-5, NaN equal to NaN) and must not raise where the original does not.

ROWS names each op and its spelling. Ops of the idiom and real-code
corpora that no row exercises are in NO_ROW with the reason
(test_op_matrix.py checks that every op the idioms apply to
data-dependent values is in one or the other)."""
import math
import random

import torch

N, C = 9, 4

# (ATen op, expression). One row per op; where an op has a dim-0 (along the
# bounded dim) and a dim-1 form, both.
ROWS = [
    # Elementwise, unary.
    ("aten::abs", "s.abs()"),
    ("aten::neg", "-s"),
    ("aten::sigmoid", "torch.sigmoid(s)"),
    ("aten::exp", "torch.exp(s.clamp(max=30.0))"),
    ("aten::log", "torch.log(s.abs() + 1.0)"),
    ("aten::sqrt", "torch.sqrt(s.abs())"),
    ("aten::relu", "torch.relu(s)"),
    ("aten::tanh", "torch.tanh(s)"),
    ("aten::sin", "torch.sin(s)"),
    ("aten::clamp", "s.clamp(-0.5, 0.5)"),
    ("aten::clamp_min", "s.clamp_min(0.0)"),
    ("aten::sign", "torch.sign(s)"),
    ("aten::floor", "torch.floor(s * 3.0)"),
    ("aten::round", "torch.round(s * 3.0)"),
    ("aten::reciprocal", "torch.reciprocal(s.abs() + 1.0)"),
    ("aten::pow", "s.pow(2)"),
    ("aten::isnan", "torch.isnan(s)"),
    ("aten::isfinite", "torch.isfinite(s)"),
    ("aten::logical_not", "torch.logical_not(s > 0)"),
    ("aten::to", "s.to(torch.float64)"),
    ("aten::long", "(s * 4.0).long()"),
    ("aten::float", "j.float()"),
    ("aten::type_as", "j.type_as(s)"),
    ("aten::softmax", "torch.softmax(s, 1)"),
    ("aten::log_softmax", "torch.log_softmax(s, 1)"),
    ("aten::softmax (dim 0)", "torch.softmax(v, 0)"),
    ("aten::dropout", "torch.dropout(s, 0.5, False)"),
    ("aten::clone", "s.clone()"),
    ("aten::contiguous", "s.contiguous()"),
    ("aten::detach", "s.detach()"),
    ("aten::relu_", "torch.relu_(s * 1.0)"),
    ("aten::broadcast_tensors", "torch.broadcast_tensors(s, t)[0] - t"),
    # Elementwise, binary and ternary, with broadcasting.
    ("aten::add", "s + t"),
    ("aten::sub", "s - t * 2.0"),
    ("aten::mul", "s * t"),
    ("aten::div", "s / (t.abs() + 1.0)"),
    ("aten::maximum", "torch.maximum(s, t)"),
    ("aten::minimum", "torch.minimum(s, t)"),
    ("aten::atan2", "torch.atan2(s, t)"),
    ("aten::add (broadcast)", "s + y[0]"),
    ("aten::mul (broadcast column)", "s * v.unsqueeze(1)"),
    ("aten::gt", "s > t"),
    ("aten::le", "s <= 0.25"),
    ("aten::eq", "j == 2"),
    ("aten::ne", "j != 1"),
    ("aten::__and__", "(s > 0) & (t > 0)"),
    ("aten::__or__", "(s > 0) | (t > 0)"),
    ("aten::logical_and", "torch.logical_and(s > 0, t > 0)"),
    ("aten::where", "torch.where(s > 0, s, t)"),
    ("aten::masked_fill", "s.masked_fill(t > 0, 0.0)"),
    ("aten::ge", "s >= t"),
    ("aten::lt", "s < 0.25"),
    ("aten::ceil", "torch.ceil(s * 3.0)"),
    ("aten::frac", "torch.frac(s * 3.0)"),
    ("aten::cos", "torch.cos(s)"),
    ("aten::tan", "torch.tan(s)"),
    ("aten::atan", "torch.atan(s)"),
    ("aten::log2", "torch.log2(s.abs() + 1.0)"),
    ("aten::angle", "torch.angle(s)"),
    ("aten::rad2deg", "torch.rad2deg(s)"),
    ("aten::expand_as", "v.unsqueeze(1).expand_as(s)"),
    ("aten::zeros_like", "torch.zeros_like(s)"),
    ("aten::full_like", "torch.full_like(s, 2.0)"),
    ("aten::add_", "(s * 1.0).add_(t)"),
    ("aten::mul_", "(s * 1.0).mul_(t)"),
    ("aten::div_", "(s * 1.0).div_(2.0)"),
    ("aten::masked_fill_", "(s * 1.0).masked_fill_(t > 0, 0.0)"),
    ("aten::fill_", "(s * 1.0).fill_(3.0)"),
    ("aten::zero_", "(s * 1.0).zero_()"),
    ("aten::unsqueeze_", "(s * 1.0).unsqueeze_(1)"),
    ("aten::pad", "torch.nn.functional.pad(s, [1, 1])"),
    ("aten::pad (dim 0)", "torch.nn.functional.pad(j.cumsum(0), [1, 2], value=-1.0)"),
    ("aten::new_zeros", "torch.cat([j.new_zeros(1), j.cumsum(0)])"),
    ("aten::mm", "torch.mm(s, y[:4].t())"),
    ("aten::amin", "s.amin(1)"),
    ("aten::remainder", "j % 3"),
    ("aten::floor_divide", "torch.div(j, 2, rounding_mode='floor')"),
    ("aten::lerp", "torch.lerp(s, t, 0.25)"),
    # Reductions over everything.
    ("aten::sum", "s.sum()"),
    ("aten::mean", "s.mean()"),
    ("aten::amax", "s.amax()"),
    ("aten::max", "s.max()"),
    ("aten::min", "v.min()"),
    ("aten::prod", "(s.abs() + 0.5).prod()"),
    ("aten::any", "(s > 0.4).any()"),
    ("aten::all", "(s > -0.4).all()"),
    ("aten::std", "v.std()"),
    ("aten::var", "s.var()"),
    ("aten::norm", "s.norm()"),
    ("aten::count_nonzero", "torch.count_nonzero(s > 0)"),
    ("aten::argmax", "v.argmax()"),
    ("aten::argmin", "s.argmin()"),
    ("aten::logsumexp", "torch.logsumexp(v, 0)"),
    ("aten::numel", "torch.tensor(s.numel())"),
    ("aten::size", "torch.tensor(s.size(0))"),
    # Reductions along the bounded dim.
    ("aten::sum (dim 0)", "s.sum(0)"),
    ("aten::mean (dim 0)", "s.mean(0)"),
    ("aten::amax (dim 0)", "s.amax(0)"),
    ("aten::max (dim 0)", "s.max(0)[0]"),
    ("aten::argmax (dim 0)", "s.argmax(0)"),
    ("aten::min (dim 0, indices)", "s.min(0)[1]"),
    ("aten::std (dim 0)", "s.std(0)"),
    ("aten::cumsum", "s.cumsum(0)"),
    ("aten::cumprod", "(s.abs() + 0.5).cumprod(0)"),
    ("aten::cummax", "s.cummax(0)[1]"),
    ("aten::logcumsumexp", "torch.logcumsumexp(v.clamp(-30.0, 30.0), 0)"),
    # Reductions along the other dim: bounded rows of a static result.
    ("aten::sum (dim 1)", "s.sum(1)"),
    ("aten::max (dim 1)", "s.max(1)[0]"),
    ("aten::argmax (dim 1)", "s.argmax(1)"),
    ("aten::norm (dim 1)", "s.norm(2, 1)"),
    ("aten::mean (dim 1, keepdim)", "s.mean(1, keepdim=True)"),
    ("aten::cumsum (dim 1)", "s.cumsum(1)"),
    # Views and reshapes.
    ("aten::flatten", "s.flatten()"),
    ("aten::reshape", "s.reshape(-1)"),
    ("aten::view", "s.view(-1, 2)"),
    ("aten::unsqueeze", "s.unsqueeze(1)"),
    ("aten::squeeze", "s[:, :1].squeeze(1)"),
    ("aten::select", "s[:, 1]"),
    ("aten::slice", "s[:, 1:3]"),
    ("aten::slice (dim 0)", "s[1:]"),
    ("aten::slice (dim 0, step)", "v[1:-1:2]"),
    ("aten::slice (dim 0, end)", "j[2:5]"),
    ("aten::narrow", "s.narrow(1, 0, 2)"),
    ("aten::t", "s.t()"),
    ("aten::transpose", "s.transpose(0, 1)"),
    ("aten::permute", "s.permute(1, 0)"),
    ("aten::expand", "v.unsqueeze(1).expand(-1, 3)"),
    ("aten::repeat", "s.repeat(3, 2)"),
    ("aten::repeat (rows)", "v.repeat(2)"),
    ("aten::flip", "s.flip(0)"),
    # Joins and splits.
    ("aten::cat", "torch.cat([s, t])"),
    ("aten::cat (dim 1)", "torch.cat([s, t], 1)"),
    ("aten::stack", "torch.stack([v, v * 2.0])"),
    ("aten::stack (dim 1)", "torch.stack([v, v * 2.0], 1)"),
    ("aten::unbind", "s.unbind(1)[2]"),
    ("aten::split", "s.split(2, 1)[1]"),
    # Order.
    ("aten::sort", "torch.sort(v)[0]"),
    ("aten::sort (indices)", "torch.sort(v, descending=True)[1]"),
    ("aten::argsort", "torch.argsort(v)"),
    ("aten::topk", "torch.topk(v, min(2, v.size(0)))[0]"),
    ("aten::unique_consecutive", "torch.unique_consecutive(torch.sort(j)[0])"),
    ("aten::unique_consecutive (counts)",
     "torch.unique_consecutive(j, return_counts=True)[1]"),
    ("aten::_unique2", "torch.unique(j)"),
    ("aten::_unique2 (inverse)", "torch.unique(j, return_inverse=True)[1]"),
    # Gathers, histograms, embeddings.
    ("aten::index_select", "torch.index_select(y, 0, j)"),
    ("aten::index", "y[j]"),
    ("aten::gather", "torch.gather(s, 1, j.unsqueeze(1))"),
    ("aten::gather (dim 0)", "torch.gather(y, 0, j.unsqueeze(1).expand(-1, 4))"),
    ("aten::take", "torch.take(y, j * 3 - 5)"),
    ("aten::t (nonzero's rows)", "torch.nonzero(s > 0).t()[1]"),
    ("aten::embedding", "torch.embedding(y, j)"),
    ("aten::one_hot", "torch.nn.functional.one_hot(j, 4)"),
    ("aten::bincount", "torch.bincount(j, minlength=4)"),
    ("aten::histc", "torch.histc(v, 4, -1.0, 1.0)"),
    ("aten::quantile", "torch.quantile(v, 0.5)"),
    ("aten::quantile (0.3, NaN)", "torch.quantile(_nans(v), 0.3)"),
    ("aten::nanquantile", "torch.nanquantile(_nans(v), 0.7)"),
    ("aten::median", "v.median()"),
    ("aten::median (NaN)", "_nans(v).median()"),
    ("aten::nanmedian", "_nans(s).nanmedian()"),
    ("aten::median (int)", "j.median()"),
    ("aten::trapz", "torch.trapz(v, x[:, 1][b])"),
    ("aten::trapezoid", "torch.trapezoid(v * 2.0, torch.cumsum(x[:, 1][b], 0))"),
    # Stores and scatters from bounded data into static tensors.
    ("aten::index_add", "torch.zeros(4).index_add(0, j, v)"),
    ("aten::scatter_add", "torch.zeros(4).scatter_add(0, j, v)"),
    ("aten::index_put_", "_store(j, v)"),
    # Products and losses.
    ("aten::matmul", "s @ y[:4].t()"),
    ("aten::linear", "torch.nn.functional.linear(s, y[:3], y[3, :3])"),
    ("aten::cross_entropy_loss", "torch.nn.functional.cross_entropy(s, j)"),
    ("aten::nll_loss_nd", "torch.nn.functional.nll_loss(torch.log_softmax(s, 1), j)"),
    ("aten::mse_loss", "torch.nn.functional.mse_loss(s, t)"),
    ("aten::smooth_l1_loss", "torch.nn.functional.smooth_l1_loss(s, t, reduction='sum')"),
    ("aten::binary_cross_entropy_with_logits",
     "torch.nn.functional.binary_cross_entropy_with_logits(s, torch.sigmoid(t))"),
    # Selections of selections.
    ("aten::nonzero", "torch.nonzero(v > 0)"),
    ("aten::masked_select", "torch.masked_select(s, t > 0)"),
    ("aten::index (mask)", "v[v > 0]"),
]

# The rows with no bounded transfer today, each with the class it belongs
# to (docs/coverage.md's op matrix says more). test_op_matrix.py fails when
# one gains a transfer (remove it here) or a row loses one.
WITHOUT_TRANSFER = {
    "aten::numel": "a count as a host number (`torch.tensor(n)`): the arange class",
    "aten::size": "as aten::numel",
    "aten::t": "moves the bounded dim off dim 0: bounded dims other than 0 are not represented",
    "aten::transpose": "as aten::t",
    "aten::permute": "as aten::t",
    "aten::flip": "reverses the bounded dim: the padding would come first",
    "aten::stack": "a list of bounded values built by a literal: list rules follow appends",
    "aten::broadcast_tensors": "as aten::stack",
    "aten::split": "returns a list of bounded values along dim 1: no list rule",
    "aten::bincount": "the selection is gone (bincount_live), but bincount's length "
                      "depends on the largest value: its own sync point stays",


    "aten::add_": "an in-place write to a bounded value: no rule (the out-of-place op has one)",
    "aten::mul_": "as aten::add_",
    "aten::div_": "as aten::add_",
    "aten::masked_fill_": "as aten::add_",
    "aten::fill_": "as aten::add_",
    "aten::zero_": "as aten::add_",
    "aten::unsqueeze_": "as aten::add_ (and it reshapes in place)",
}

# Ops of the corpora's data-dependent values with no row here: why.
NO_ROW = {
    "aten::unique": "torch.unique scripts to aten::_unique2, which has rows",
    "aten::item": "a host read: lift-scalars makes it a 0-d tensor, not a bounded transfer",
    "aten::Int": "a host read, as aten::item",
    "aten::Float": "a host read, as aten::item",
    "aten::Bool": "a host read, as aten::item",
    "aten::randperm": "a root sized by a count: bound's sampler rule (random keys and topk)",
    "aten::arange": "a root sized by a count: `arange(n)` of a count is bounded by the "
                    "count's bound where a later use compares it to the count",
    "aten::zeros": "a factory: sized by a count it is bounded like arange",
    "aten::full": "a factory, as aten::zeros",
    "aten::copy_": "an in-place write: mask-store's and bound's store rules",
    "aten::index_put": "as aten::index_put_",
    "aten::__getitem__": "list plumbing: bound's list rules",
    "aten::append": "list plumbing: bound's list rules",
    "aten::len": "list plumbing: bound's list rules",
    "aten::dim": "metadata: never data-dependent",
    "aten::__is__": "an identity test of Optional values, never data",
    "aten::__not__": "of a host bool: lift-scalars' (logical_not of the lifted tensor)",
    "aten::format": "a host string: a read, kept (printing needs the value)",
    "aten::warn": "as aten::format",
    "aten::tensor": "a factory of host numbers: lift-scalars and host-replay",
    "aten::new_full": "a factory, as aten::zeros",
    "aten::ones": "a factory, as aten::zeros",
    "aten::empty": "a factory, as aten::zeros",
    "aten::linspace": "a factory, as aten::zeros",
    "aten::hann_window": "a factory, as aten::zeros",
    "aten::randint": "a random factory sized by host numbers",
    "aten::bernoulli_": "draws random numbers in place: padded rows would draw more than "
                        "the cut's, changing the stream",
    "aten::repeat_interleave": "a root of its own (repeats read from data)",
    "aten::__contains__": "host list plumbing",
    "aten::_set_item": "host list and dict plumbing: bound's list rules",
    "aten::list": "host list plumbing: a copy bound's list rules leave alone",
    "aten::is_floating_point": "metadata: never data-dependent",
    "aten::cpu": "a copy to the host: hoist-reads' (not a transfer)",
    "aten::floordiv": "of host ints: lift-scalars' (floor_divide of lifted tensors)",
    "aten::lstm": "a recurrence over a bounded time or batch dim: no rule (torchaudio's "
                  "RNN-T and Tacotron2 run it on padded batches already)",
    "aten::lstm_cell": "as aten::lstm",
    "aten::gru": "as aten::lstm",
    "aten::_pad_packed_sequence": "as aten::lstm: pack_padded_sequence's batch sizes are read "
                                  "on the host",
    "aten::_native_multi_head_attention": "attention over a bounded sequence: no masked form "
                                          "(the key padding mask would be one)",
    "aten::conv1d": "a convolution: over bounded rows of a batch it is row-wise (bound's rule), "
                    "over a bounded length no rule",
    "aten::conv2d": "as aten::conv1d",
    "aten::batch_norm": "row-wise in eval mode (bound's rule); no row of its own here",
    "aten::bmm": "batched products over a bounded batch: row-wise; over a bounded inner dim "
                 "padding must be zero: no rule",
    "aten::einsum": "its subscripts decide which dims are bounded: no rule",
    "aten::grid_sampler": "samples a static image at bounded points: no rule",
    "aten::istft": "a bounded frame count: no rule",
    "aten::linalg_lstsq": "a solve over bounded rows: no masked form",
    "aten::polar": "elementwise on complex values: no row (the matrix's inputs are real)",
    "aten::radians": "of a host float (math.radians): lift-scalars'",
    "aten::degrees": "of a host float (math.degrees): lift-scalars'",
    "aten::__isnot__": "as aten::__is__",
}

PRELUDE = '''
import torch
from torch import Tensor


def _nans(v: Tensor) -> Tensor:
    return torch.where(v > 0.6, torch.full_like(v, float("nan")), v)


def _store(j: Tensor, v: Tensor) -> Tensor:
    out = torch.zeros(4)
    out[j] = v
    return out


class Op(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor, i: Tensor, m: Tensor):
        b = m.to(torch.bool)
        s = x[b]
        t = y[b]
        v = x[:, 0][b]
        j = i.long()[b]
        return {expr}
'''


def source(expr):
    return PRELUDE.format(expr=expr)


def module(expr, name):
    """The row's module, scripted from its source (TorchScript needs the
    source of a file: written next to the caller's temporary files)."""
    import importlib.util
    import pathlib
    import tempfile
    directory = pathlib.Path(tempfile.mkdtemp(prefix="op-matrix-"))
    path = directory / f"{name}.py"
    path.write_text(source(expr))
    spec = importlib.util.spec_from_file_location(f"op_matrix_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return torch.jit.script(mod.Op())


def slug(op):
    return "".join(c if c.isalnum() else "_" for c in op).strip("_")


GARBAGE = (math.nan, math.inf, -math.inf, 1e30, None)


def inputs(rng: random.Random, case: int):
    """Case `case`'s inputs: counts 0, 1, all, then random; the rows the
    mask leaves out hold garbage (NaN, +-inf, 1e30, or random values)."""
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    kind = case % 4 if case < 8 else 3
    if kind == 0:
        m = torch.zeros(N, dtype=torch.bool)
    elif kind == 1:
        m = torch.zeros(N, dtype=torch.bool)
        m[rng.randrange(N)] = True
    elif kind == 2:
        m = torch.ones(N, dtype=torch.bool)
    else:
        m = torch.rand(N, generator=gen) < rng.random()
    x = torch.rand(N, C, generator=gen) * 2 - 1
    y = torch.rand(N, C, generator=gen) * 2 - 1
    i = torch.randint(0, C, (N,), generator=gen)
    fill = rng.choice(GARBAGE)
    if fill is not None:
        x[~m] = fill
        y[~m] = -fill if rng.random() < 0.5 else fill
        i[~m] = rng.choice((-(2**62), 2**62, C + 7))
    return x, y, i, m


def cut(result):
    """A --padded-outputs result cut to its count: (padded, count) becomes
    padded[:count]; anything else is itself."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], torch.Tensor) \
            and result[1].dim() == 0 and not result[1].dtype.is_floating_point:
        return result[0][:int(result[1])]
    return result


def difference(want, got):
    """Where got differs from want, or None."""
    got = cut(got)
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(want) != len(got):
            return f"{type(want).__name__} vs {type(got).__name__}"
        return next((d for d in map(difference, want, got) if d), None)
    if not isinstance(want, torch.Tensor):
        return None if want == got else f"{want!r} vs {got!r}"
    if not isinstance(got, torch.Tensor):
        return f"a tensor vs {type(got).__name__}"
    if want.dtype != got.dtype or want.shape != got.shape:
        return f"{want.dtype}{list(want.shape)} vs {got.dtype}{list(got.shape)}"
    if want.dtype.is_floating_point:
        try:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
        except AssertionError as e:
            return " ".join(str(e).split())[:200]
        return None
    return None if torch.equal(want, got) else f"{int((want != got).sum())} elements differ"


def run_cases(original, result, cases, seed=0):
    """(cases compared, first difference or None)."""
    rng = random.Random(seed)
    compared = 0
    for case in range(cases):
        args = inputs(rng, case)
        try:
            want = original(*[a.clone() for a in args])
        except Exception:  # noqa: BLE001 - the op raises on the cut tensors: no claim
            continue
        try:
            got = result(*[a.clone() for a in args])
        except Exception as e:  # noqa: BLE001
            return compared, f"case {case}: the rewrite raised: {str(e).splitlines()[-1][:200]}"
        diff = difference(want, got)
        if diff:
            return compared, f"case {case} (count {int(args[3].sum())}): {diff}"
        compared += 1
    return compared, None


def measure(op, expr, binary, workdir, cases, run=None):
    """One row: bounded (no sync point after rewriting), the sync points
    before and after, the first remaining reason, and the cases compared
    with the first difference. `run(argv)` runs the command and returns its
    CompletedProcess (the tests run it in process); by default the binary."""
    import json
    import pathlib
    import subprocess
    workdir = pathlib.Path(workdir)
    name = slug(op)
    path, out, rep = (workdir / f"{name}.pt", workdir / f"{name}.out.pt",
                      workdir / f"{name}.json")
    try:
        module(expr, name).save(str(path))
    except Exception as e:  # noqa: BLE001 - a row TorchScript refuses is a bug of the row
        return {"op": op, "expr": expr, "error": f"does not script: {str(e).strip().splitlines()[0]}"}
    argv = [str(path), "-o", str(out), "--report-json", str(rep),
            "--padded-outputs", "--static-forms"]
    if run is None:
        def run(argv):
            return subprocess.run([str(binary), *argv], capture_output=True, text=True,
                                  timeout=300)
    proc = run(argv)
    row = {"op": op, "expr": expr}
    if proc.returncode != 0:
        row["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return row
    report = json.loads(rep.read_text())
    roots = [f for m in report["methods"] if m["name"] == "forward"
             for f in m["findings"] if f["role"] == "root"]
    kept = [f for f in roots if f["action"] in ("kept", "introduced")]
    row.update(before=sum(1 for f in roots if f["action"] != "introduced"),
               after=len(kept), bounded=not kept,
               reason=(kept[0].get("reason") or kept[0].get("message") or kept[0]["op"])
               if kept else "")
    compared, diff = run_cases(torch.jit.load(str(path)), torch.jit.load(str(out)), cases)
    row.update(compared=compared, diff=diff)
    return row


def row_op(name):
    """The ATen op a row exercises: its name without the parenthesised form."""
    return name.split(" (")[0]


# The ops the corpora apply to data-dependent values: every op a root's
# results reach, through every use, in the inlined graph (an
# over-approximation: an integer index counts as a root too).
ROOT_KINDS = {"aten::nonzero", "aten::argwhere", "aten::masked_select", "aten::unique",
              "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim",
              "aten::nonzero_numpy", "aten::index", "aten::repeat_interleave", "aten::item",
              "aten::Int", "aten::Float", "aten::Bool", "aten::bincount"}


def data_dependent_ops(graph):
    work, seen, kinds = [], set(), set()

    def roots(block):
        for node in block.nodes():
            if node.kind() in ROOT_KINDS or (node.kind() == "aten::where"
                                             and len(list(node.inputs())) == 1):
                work.append(node)
            for inner in node.blocks():
                roots(inner)

    roots(graph)
    while work:
        node = work.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.kind().startswith("aten::"):
            kinds.add(node.kind())
        for out in node.outputs():
            work.extend(use.user for use in out.uses())
    return kinds
