"""Every program of the e2e corpora (idioms.py and corpus.py), rewritten with
the inference flags, runs where the original runs with grad mode on, its
floating inputs requiring grad, for five calls (the profiling executor
differentiates from the second), gives the original's outputs, and, where
the original's floating outputs are differentiable and finite, the
original's input gradients.

--static-forms keeps every rewritten method, so what runs is the rewrite
even where the default would leave a method as it was. A gradient the
original does not produce (an input it never reads) equals zeros: the
rewrites read a selection's base through where(), whose gradient is zero
where the mask is false, exactly as index()'s scatters nothing there."""
import pytest
import torch

from corpus import CASES
from idioms import IDIOMS
from test_rewrites import assert_same

FLAGS = ("--specialize-training", "--static-forms")
CALLS = 5
PROGRAMS = ([(name, module, inputs) for name, _, module, inputs in IDIOMS] +
            [(name, module, inputs) for name, module, inputs, _ in CASES])


def leaves(args, grad=True):
    """Fresh copies of the inputs; floating ones require grad."""
    out = []
    for a in args:
        a = a.detach().clone()
        if grad and a.dtype.is_floating_point:
            a.requires_grad_()
        out.append(a)
    return out


def tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []


def detached(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(detached(v) for v in value)
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    return value


def differentiable(outputs):
    return [t for t in tensors(outputs) if t.requires_grad and t.dtype.is_floating_point]


def gradients(outputs, args):
    """d(sum of the differentiable outputs) / d(each floating input); None
    where the original has nothing to differentiate or is not finite there."""
    outs = differentiable(outputs)
    wrt = [a for a in args if a.requires_grad]
    if not outs or not wrt or not all(bool(o.isfinite().all()) for o in outs):
        return None
    loss = sum(o.sum() for o in outs)
    grads = torch.autograd.grad(loss, wrt, allow_unused=True)
    return [torch.zeros_like(a) if g is None else g for g, a in zip(grads, wrt)]


def call(module, args):
    try:
        return module(*args), None
    except Exception as e:  # noqa: BLE001 - the original may raise
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


@pytest.mark.parametrize("name,module,inputs", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_grad_mode(staticify_in_process, save, tmp_path, name, module, inputs):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify_in_process(path, "-o", out, *FLAGS)
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    ran = 0
    for trial in range(CALLS):
        kind = ("none", "all", "random")[trial % 3]
        args = inputs(gen, kind)
        a_args, b_args = leaves(args), leaves(args)
        with torch.enable_grad():
            want, err = call(original, a_args)
            if err:
                # Some ops refuse inputs requiring grad (cross_entropy's
                # weight): grad mode stays on, the inputs do not require it.
                a_args, b_args = leaves(args, grad=False), leaves(args, grad=False)
                want, err = call(original, a_args)
            if err:
                continue
            got, err = call(result, b_args)
            assert err is None, (name, kind, err)
            assert_same(detached(want), detached(got))
            want_grads = gradients(want, a_args)
            if want_grads is not None:
                got_grads = gradients(got, b_args)
                assert got_grads is not None, (name, kind, "the rewrite is not differentiable")
                for w, g in zip(want_grads, got_grads):
                    torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, equal_nan=True)
        ran += 1
    assert ran >= 2, (name, "the original raised on almost every call")
