"""The sync oracle: the host syncs of one forward, counted at run time on the
CPU, to hold the report's sync points against (test_sync_oracle.py).

What is counted. A CUDA program waits for the device where the host needs
a value the device computed:
- a scalar read: `.item()`, `int(t)`, `float(t)`, `bool(t)`, `if t:`, all
  of which reach the kernel `_local_scalar_dense`;
- a kernel that must know the size of its result before it can allocate
  it: `nonzero` and what calls it (`x[mask]`, `x[mask] = v`,
  `torch.where(c)`), `masked_select`, `unique`, `bincount`,
  `repeat_interleave` with tensor repeats, torchvision's `nms`;
- a kernel that returns a host value computed on the device (`equal`,
  `allclose`), or reads its 0-d tensor argument with `value.item()`:
  `masked_fill` and `index_fill` with a tensor value, and `fill_` with one
  (on every device up to PyTorch 2.1, pytorch/pytorch#109115).
Each counts only where the value read lives on the device (below).

How. A TorchDispatchMode sees every op the TorchScript interpreter calls,
at the level where a backend kernel is chosen: composite ops (`where(c)`,
`item`, `F.one_hot`) arrive decomposed into what they call, kernels arrive
whole, with their arguments. So each sync is counted once: `x[mask]` is one
`index` with a boolean index (its inner `nonzero` runs below the mode and
is not seen again), a read is one `_local_scalar_dense`; and the arguments
tell `x[mask]` (a sync) from `x[idx]` (none).

Where the data lives. The mode follows each tensor as the CUDA program
would place it: the forward's arguments and the module's parameters and
buffers are on the device; what an op computes from a device tensor is on
the device; a factory given a `device` (in TorchScript, almost always
`x.device`) makes a device tensor; one given none (`torch.tensor(...)`,
`torch.zeros(n)`, a tensor made of a host number) a host tensor, whose
reads cost nothing (torchvision's transform reads `scale.item()` of a
tensor it built from the image's sizes: no sync). One factory hides its
device: `torch.tensor(data, device=d)` fills a CPU tensor and copies it to
`d`, a copy the CPU skips, so the mode takes it for a host tensor (a read
of such an upload itself would go uncounted; what is computed from it
with device tensors is on the device).

Program points. The report counts places in the program, one per root
finding; a run counts executions: a read inside a loop runs once per trip.
Each counted op runs inside a profiler scope named after it, and the
profiler's TorchScript call stack (with_stack=True) says which line of the
module's serialized code ran it: a point is that stack (two reads of one
kind that the serialized code prints on one line are one point). The
archive's debug tables (code/...py.debug_pkl) map that line back to the
original source lines it was printed from (SourceMap), which the report's
findings name: compare() matches each point to a root finding of the same
kind at one of those lines.

Why not profiler events alone. torch.autograd.profiler's events (with
record_shapes off) carry names only, so `aten::index` with a mask cannot be
told from one with indices but by its child `aten::nonzero`; the nesting of
events is rebuilt from microsecond timestamps, which on torch 1.13 puts
`aten::_local_scalar_dense` beside its `aten::item` rather than inside it
(so counting the outermost sync event counts some reads twice); counting
leaves (`nonzero`, `_local_scalar_dense`) counts the reads CPU kernels make
for themselves (`std` reads its mean on the CPU, `masked_select` its count)
and misses the kernels that sync only on CUDA (`unique`, `bincount`,
`equal`); and events do not say where the data lives.

What the CPU cannot show (classes of test_sync_oracle.py's CLASSES):
copies to the host (`.cpu()`, `.tolist()`, formatting a tensor) are no-ops
on the CPU, where a copy is nothing to count (host-copy); composite ops
take CPU-only paths that read values a CUDA program does not (`F.one_hot`
checks its classes with `min().item()` and `max().item()` on the CPU
only), and code that branches on the device type runs its CPU branch
(cpu-only-read)."""
import bisect
import pickle
import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from torch.autograd import profiler
from torch.utils._python_dispatch import TorchDispatchMode

MASK_DTYPES = (torch.bool, torch.uint8)

# Kernels that return a tensor whose size is the count of something in the
# data: on CUDA each learns that count on the host (one sync per call).
SIZE_FROM_DATA = {
    "aten::nonzero", "aten::masked_select",
    "aten::_unique", "aten::_unique2", "aten::unique_dim",
    "aten::unique_consecutive", "aten::unique_dim_consecutive",
    "aten::bincount", "aten::histc", "torchvision::nms",
}

# Kernels that return a host value computed from device data.
HOST_RESULT = {"aten::_local_scalar_dense", "aten::equal", "aten::allclose"}

# Kernels that read a 0-d tensor argument with value.item(), by the
# argument's name: masked_fill's and index_fill's CUDA kernels; fill_'s on
# every device up to PyTorch 2.1 (libtorch 1.13's among them).
READS_VALUE = {("aten::masked_fill", "Tensor"): "value", ("aten::masked_fill_", "Tensor"): "value",
               ("aten::index_fill", "int_Tensor"): "value",
               ("aten::index_fill_", "int_Tensor"): "value",
               ("aten::fill_", "Tensor"): "value", ("aten::fill", "Tensor"): "value"}

# Advanced indexing: a sync where an index is a boolean (or uint8) mask on
# the device, which the kernel turns into its coordinates with nonzero.
INDEXING = {"aten::index", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_"}

# Where the mode marks a tensor the CUDA program would hold on the device.
_ON_DEVICE = "_sync_oracle_on_device"


def on_device(t):
    return isinstance(t, torch.Tensor) and getattr(t, _ON_DEVICE, False)


def mark_on_device(value):
    """Marks every tensor in \\p value (nested lists, tuples, dicts) as
    living on the device."""
    for t in _tensors(value):
        setattr(t, _ON_DEVICE, True)


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _argument(func, args, kwargs, name):
    """The argument \\p name of a call of \\p func (positional or keyword),
    or None when not given."""
    if name in kwargs:
        return kwargs[name]
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return args[i] if i < len(args) else None
    return None


def sync_kind(func, args, kwargs):
    """The name under which a call of \\p func counts as a host sync of the
    CUDA program, or None when it reaches no host."""
    name, overload = func._schema.name, func._overloadname
    inputs = list(_tensors(list(args) + list(kwargs.values())))
    if name in HOST_RESULT or name in SIZE_FROM_DATA:
        return name if any(on_device(t) for t in inputs) else None
    if (name, overload) in READS_VALUE:
        value = _argument(func, args, kwargs, READS_VALUE[(name, overload)])
        return f"{name} (reads its value)" if on_device(value) else None
    if name in INDEXING:
        indices = _argument(func, args, kwargs, "indices") or []
        masks = [i for i in indices if isinstance(i, torch.Tensor) and i.dtype in MASK_DTYPES]
        # index_put_ takes a masked_fill_ shortcut (no nonzero) for one
        # mask and a one-element value on the CPU; but TorchScript stores a
        # number by a mask as torch.tensor(v, device=x.device), on the
        # device: the nonzero path.
        return name + " (mask)" if any(on_device(m) for m in masks) else None
    if name == "aten::repeat_interleave" and overload == "Tensor":
        # With output_size given, the kernel trusts it: no read.
        if _argument(func, args, kwargs, "output_size") is not None:
            return None
        return name if on_device(_argument(func, args, kwargs, "repeats")) else None
    if name == "aten::copy_" and not on_device(args[0]) and on_device(args[1]):
        return name + " (to the host)"
    return None


def _result_on_device(func, args, kwargs):
    """Whether what a call of \\p func returns lives on the device: computed
    from a device tensor, or made by a factory given a device."""
    if func._schema.name == "aten::copy_":
        return on_device(args[0])  # in place: where its tensor is
    if any(on_device(t) for t in _tensors(list(args) + list(kwargs.values()))):
        return True
    # A factory given a device; but not the buffer torch.tensor(data)
    # fills on the host before any copy to its device, the one factory
    # call that names its layout.
    return (_argument(func, args, kwargs, "device") is not None
            and _argument(func, args, kwargs, "layout") is None)


class SyncCounter(TorchDispatchMode):
    """Within `with SyncCounter() as c:`, c.kinds lists the sync of every op
    call that reaches the host, in program order (sync_kind's names); each
    such call runs in a profiler scope "sync: KIND", which measure() reads
    the program point of."""

    def __init__(self):
        super().__init__()
        self.kinds = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = sync_kind(func, args, kwargs)
        if kind is None:
            out = func(*args, **kwargs)
        else:
            self.kinds.append(kind)
            with profiler.record_function("sync: " + kind):
                out = func(*args, **kwargs)
        if _result_on_device(func, args, kwargs):
            mark_on_device(out)
        return out


@dataclass
class Measurement:
    """The host syncs of one call: `events` in program order, each as
    (kind, point), a point being the TorchScript call stack of the
    statement that ran it; `error` the type name of what the call raised."""
    events: List[Tuple[str, Tuple[str, ...]]] = field(default_factory=list)
    error: Optional[str] = None

    @property
    def count(self):
        """Syncs executed."""
        return len(self.events)

    @property
    def points(self):
        """Distinct program points that reached the host at least once."""
        return len(set(self.events))

    def summary(self):
        """The events as "aten::nonzero x2 @ code/__torch__/m.py(12)" lines
        (for messages)."""
        counts = Counter(self.events)
        return "; ".join(f"{kind}{f' x{n}' if n > 1 else ''} @ {' < '.join(point)}"
                         for (kind, point), n in counts.items()) or "none"


def measure(module, args):
    """The host syncs of one call module(*args) (a Measurement). The
    arguments are cloned, so that in-place ops leave them as given; they
    and the module's parameters and buffers are on the device."""
    args = [_clone(a) for a in args]
    mark_on_device(args)
    mark_on_device(list(module.parameters()) + list(module.buffers()))
    counter = SyncCounter()
    error = None
    with profiler.profile(record_shapes=False, with_stack=True) as prof:
        with counter:
            try:
                module(*args)
            except Exception as e:  # noqa: BLE001 - the original may raise
                error = type(e).__name__
    events = [(e.name[len("sync: "):], tuple(e.stack or ()))
              for e in prof.function_events if e.name.startswith("sync: ")]
    # The profiler's scopes and the mode's calls are the same calls.
    assert [k for k, _ in events] == counter.kinds, (events, counter.kinds)
    return Measurement(events, error)


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


# --- what the report says ------------------------------------------------------

# The report's root ops, by the name sync_kind gives the sync each makes.
_READS = {"aten::item", "aten::_local_scalar_dense", "aten::Int", "aten::Float", "aten::Bool",
          "aten::Complex", "aten::IntImplicit", "aten::FloatImplicit", "aten::ScalarImplicit",
          "aten::ComplexImplicit", "aten::is_nonzero"}
_NONZERO = {"aten::nonzero", "aten::argwhere", "aten::nonzero_numpy", "aten::where"}
_READS_VALUE_OPS = {name for name, _ in READS_VALUE}


def reported_kind(op):
    """The kind (sync_kind's name) of the sync a root finding of \\p op makes.
    Copies to the host (`aten::cpu`, `prim::tolist`) and formatting
    (`aten::str`, `aten::format`, `prim::Print`, `aten::warn`) keep their op:
    no CPU run shows them."""
    if op in _READS:
        return "aten::_local_scalar_dense"
    if op in _NONZERO:
        return "aten::nonzero"
    if op in INDEXING:
        return op + " (mask)"
    if op in _READS_VALUE_OPS:
        return op + " (reads its value)"
    return op


@dataclass(frozen=True)
class Root:
    """A root finding counted as a sync point: its kind and where it is."""
    kind: str
    file: Optional[str]
    line: Optional[int]

    def __str__(self):
        where = f"{self.file.rsplit('/', 1)[-1]}:{self.line}" if self.file else "no location"
        return f"{self.kind} @ {where}"


def reported_roots(report, side, method="forward"):
    """The root findings the report counts as sync points of \\p side
    ("before": the original's, "after": those kept or introduced by a
    rewrite), as conftest.sync_points counts them."""
    (m,) = [m for m in report["methods"] if m["name"] == method]
    counted = {"before": lambda a: a != "introduced",
               "after": lambda a: a in ("kept", "introduced")}[side]
    roots = []
    for f in m["findings"]:
        if f["role"] == "root" and counted(f["action"]):
            loc = f["location"] or {}
            roots.append(Root(reported_kind(f["op"]), loc.get("file"), loc.get("line")))
    return roots


# --- where a point is in the original source -----------------------------------------

_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>[0-9]+)\): (?P<function>.*)$")


class SourceMap:
    """The original source lines each line of a saved module's serialized
    code was printed from, read from the archive's debug tables: for each
    code/....py, a code/....py.debug_pkl of ("FORMAT_WITH_STRING_TABLE",
    strings, ranges), each range (byte offset in the serialized code,
    ((indices of the source's text in strings, index of its file name,
    its first line), start, end), debug handle) covering the serialized
    code up to the next range's offset."""

    def __init__(self, path):
        self.files = {}
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if not name.endswith(".py.debug_pkl") or "/code/" not in name:
                    continue
                code = name[:-len(".debug_pkl")]
                tag, strings, ranges = pickle.loads(z.read(name))
                assert tag == "FORMAT_WITH_STRING_TABLE", (name, tag)
                text = z.read(code)
                # The frame names the file from code/ on, without the
                # archive's top folder.
                self.files[code[code.index("/code/") + 1:]] = (text, strings, ranges)
        self._cache = {}

    def lines(self, file, line):
        """The set of (original file, line) that line \\p line of serialized
        file \\p file (as a profiler frame names it) was printed from."""
        key = (file, line)
        if key not in self._cache:
            self._cache[key] = self._lookup(file, line)
        return self._cache[key]

    def _lookup(self, file, line):
        if file not in self.files:
            return frozenset()
        text, strings, ranges = self.files[file]
        starts = [0] + [i + 1 for i, c in enumerate(text) if c == ord("\n")]
        begin = starts[line - 1]
        end = starts[line] if line < len(starts) else len(text)
        offsets = [r[0] for r in ranges]
        i = max(bisect.bisect_right(offsets, begin) - 1, 0)
        found = set()
        while i < len(ranges) and ranges[i][0] < end:
            (texts, name, first_line), start, _ = ranges[i][1]
            if texts:
                source = "".join(strings[t] for t in texts)
                found.add((strings[name], first_line + source.count("\n", 0, start)))
            i += 1
        return frozenset(found)

    def point_lines(self, point):
        """The original lines of a point's innermost frame."""
        match = _FRAME.match(point[0]) if point else None
        return self.lines(match["file"], int(match["line"])) if match else frozenset()


# --- the comparison ---------------------------------------------------------------


@dataclass
class Difference:
    """How one run differs from the report on one side: `extra`, the kinds
    of the points that synced and match no reported root (a sync the report
    does not count); `missing`, those of the reported roots no point
    matched (a sync that did not happen: a branch not taken, a read merged
    away); `repeated`, the syncs beyond one per point (a point that ran
    more than once: a loop)."""
    extra: Dict[str, int] = field(default_factory=dict)
    missing: Dict[str, int] = field(default_factory=dict)
    repeated: int = 0


@dataclass
class Comparison:
    """A run of one side against its report: `reported`, the roots counted;
    `measurement`, what ran; `matched`, (point, root) pairs; `extra`, the
    points matched to no root; `missing`, the roots matched to no point."""
    reported: List[Root]
    measurement: Measurement
    matched: List[Tuple[Tuple[str, Tuple[str, ...]], Root]]
    extra: List[Tuple[str, Tuple[str, ...]]]
    missing: List[Root]

    @property
    def difference(self):
        return Difference(dict(Counter(k for k, _ in self.extra)),
                          dict(Counter(r.kind for r in self.missing)),
                          self.measurement.count - self.measurement.points)

    def describe(self):
        """Every point and root, matched or not (for messages)."""
        lines = [f"  reported {len(self.reported)}, measured {self.measurement.points} points "
                 f"({self.measurement.count} syncs)"]
        times = Counter(self.measurement.events)
        for (kind, point), root in self.matched:
            at = point[0] if point else "?"
            lines.append(f"    = {root} (ran {times[(kind, point)]}x at {at})")
        for kind, point in self.extra:
            lines.append(f"    + {kind} (ran {times[(kind, point)]}x at {' < '.join(point)}), "
                         "not in the report")
        for root in self.missing:
            lines.append(f"    - {root}: reported, did not sync")
        return "\n".join(lines)


def compare(report, side, module_path, args, module=None, measurement=None,
            method="forward"):
    """Runs the module saved at \\p module_path (or \\p module, loaded from
    it) on \\p args, unless given its \\p measurement, and matches each
    distinct point that synced to a reported root of \\p side: same kind,
    and the root's line among the original lines of the point's innermost
    frame (a root with no location matches by kind). A maximum matching
    (Kuhn's augmenting paths: points that could be either of two roots on
    one line take one each)."""
    if measurement is None:
        module = module if module is not None else torch.jit.load(str(module_path))
        measurement = measure(module, args)
    roots = reported_roots(report, side, method)
    source = SourceMap(module_path)
    points = sorted(set(measurement.events))
    fits = [[j for j, r in enumerate(roots) if r.kind == kind and
             (r.file is None or (r.file, r.line) in source.point_lines(point))]
            for kind, point in points]
    owner = {}  # root index -> point index

    def assign(i, seen):
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(points)):
        assign(i, set())
    matched_points = set(owner.values())
    return Comparison(
        roots, measurement,
        matched=[(points[i], roots[j]) for j, i in sorted(owner.items())],
        extra=[p for i, p in enumerate(points) if i not in matched_points],
        missing=[r for j, r in enumerate(roots) if j not in owner])
