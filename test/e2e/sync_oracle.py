"""The sync oracle: the host syncs of one forward, counted at run time on the
CPU, to hold the report's `sync_points` against (test_sync_oracle.py).

What is counted. A CUDA program waits for the device where the host needs
a value the device computed: a scalar read (`.item()`, `int(t)`,
`float(t)`, `bool(t)`, `if t:`; all of them reach the kernel
`_local_scalar_dense`), or a kernel that must know its output's size before
it can allocate it (`nonzero` and what calls it: `x[mask]`, `x[mask] = v`,
`torch.where(c)`; `masked_select`, `unique`, `bincount`, `repeat_interleave`
with tensor repeats, torchvision's `nms`), or one that returns a host
value computed on the device (`equal`, `allclose`).

How. A TorchDispatchMode sees every op the TorchScript interpreter (or
Python) calls, at the level where a backend kernel is chosen: composite ops
(`where(c)`, `item`, `allclose`'s pieces, `one_hot`) arrive decomposed into
what they call, kernels arrive whole, with their arguments. Each op that
reaches the host there is counted once: a read is one
`_local_scalar_dense`, `x[mask]` is one `index` with a boolean index (its
inner `nonzero` runs below the mode and is not seen again). The arguments
tell `x[mask]` (a sync) from `x[idx]` (none), which the profiler cannot
without record_shapes.

Why not profiler events. torch.autograd.profiler's events (with
record_shapes off) carry names only, so `aten::index` with a mask cannot be
told from one with indices but by its child `aten::nonzero`; and the
nesting of events is rebuilt from microsecond timestamps, which puts
`aten::_local_scalar_dense` beside its `aten::item` rather than inside it
(seen on torch 1.13): counting only the outermost sync event double counts,
counting leaves misses the kernels whose CPU implementation syncs nothing
(`masked_select`, `unique`, `bincount`, `equal` run without a `nonzero` or
an `item` on the CPU and with one on CUDA). The dispatch mode has neither
problem.

What the CPU cannot show (the documented classes of test_sync_oracle.py):
copies to the host (`.cpu()`, `.tolist()`) are no-ops there; and CPU
kernels or CPU paths of composite ops may read values a CUDA program does
not (`F.one_hot` checks its classes with `min().item()` and
`max().item()` on the CPU only)."""
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

MASK_DTYPES = (torch.bool, torch.uint8)

# Kernels that return a tensor whose size is the count of something in the
# data: on CUDA each learns that count on the host (one sync per call).
SIZE_FROM_DATA = {
    "aten::nonzero", "aten::masked_select",
    "aten::_unique", "aten::_unique2", "aten::unique_dim",
    "aten::unique_consecutive", "aten::unique_dim_consecutive",
    "aten::bincount", "torchvision::nms",
}

# Kernels that return a host value computed from device data.
HOST_RESULT = {"aten::_local_scalar_dense", "aten::equal", "aten::allclose"}

# Advanced indexing: a sync where an index is a boolean (or uint8) mask,
# which the kernel turns into its coordinates with nonzero.
INDEXING = {"aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"}


def _has_mask_index(indices):
    return any(isinstance(i, torch.Tensor) and i.dtype in MASK_DTYPES for i in indices or ())


def sync_kind(func, args, kwargs):
    """The op name under which a call of \\p func counts as a host sync, or
    None when it reaches no host (on CUDA)."""
    name = func._schema.name
    if name in HOST_RESULT or name in SIZE_FROM_DATA:
        return name
    if name in INDEXING and _has_mask_index(args[1] if len(args) > 1 else kwargs.get("indices")):
        return name + " (mask)"
    if name == "aten::repeat_interleave" and func._overloadname == "Tensor":
        # With output_size given, the kernel trusts it: no read.
        output_size = kwargs.get("output_size", args[1] if len(args) > 1 else None)
        return None if output_size is not None else name
    return None


class SyncCounter(TorchDispatchMode):
    """Within `with SyncCounter() as c:`, c.events lists the sync of every
    op call that reaches the host, in program order (sync_kind names)."""

    def __init__(self):
        super().__init__()
        self.events = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = sync_kind(func, args, kwargs)
        if kind is not None:
            self.events.append(kind)
        return func(*args, **kwargs)


def measure(module, args):
    """(events, error): the host syncs of one call module(*args), in order,
    and the type name of the exception it raised (None if it returned).
    The arguments are cloned, so that in-place ops leave them as given."""
    counter = SyncCounter()
    error = None
    with counter:
        try:
            module(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        except Exception as e:  # noqa: BLE001 - the original may raise
            error = type(e).__name__
    return counter.events, error


def summary(events):
    """`events` as "aten::nonzero x2, aten::_local_scalar_dense" (for messages)."""
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in Counter(events).items()) or "none"
