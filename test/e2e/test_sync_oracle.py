"""The sync oracle (issue 45, point 5): the report's sync points held
against the host syncs one forward makes at run time, on the CPU
(sync_oracle.py says what counts as a sync and how it is seen).

For every idiom of idioms.py, the original and staticify's output run on
inputs whose selections keep nothing, everything and some; each distinct
program point that synced must match a root finding the report counts on
that side (same kind of sync, same source line), each counted root must
have synced, and no point may sync twice: report and measurement agree.
Where they do not, the difference is one of the named classes below, and
KNOWN says which, for which idiom, exactly: a new difference, or one that
went away, fails the test.

The detectors (two of test_detectors.py's CI subset, about a minute on
two cores; all five with STATICIFY_SYNC_ORACLE_DETECTORS=all, two minutes
more) run on one image each, cut and padded: no point syncs that the report does not count,
and the padded forward, which the report says syncs nowhere, syncs
nowhere. What the report counts and this image does not reach is named
for each model (NOT_TAKEN).

Last, inputs that take the paths the report counts apart: a guard's
fallback (fallback_sync_points) and a branch that only warns
(error_path_sync_points)."""
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict

import pytest
import torch
from torchvision.models import detection

from conftest import FULL, RUNTIME, sync_points
from idioms import IDIOMS
from sync_oracle import Difference, compare, measure
from test_detectors import CONFIGS as DETECTOR_MODELS, fresh_weights

READ = "aten::_local_scalar_dense"

# The classes of difference between the report and a run, and why each is
# not a disagreement (or, for missed-read, is one: a finding to fix).
CLASSES = {
    # A point inside a loop syncs once per trip; the report counts it once.
    "loop": "the point is in a loop: it syncs once per trip",
    # A branch this input did not take (the training targets' checks,
    # batched_nms's other strategy); a guard's fallback or a branch that
    # only raises or warns, which the report counts apart
    # (fallback_sync_points, error_path_sync_points), is one until taken.
    "branch-not-taken": "the reported point is in a branch the input did not take",
    # The CPU runs code a CUDA program does not: F.one_hot checks its
    # classes with min().item() and max().item() unless on CUDA (where
    # scatter's device assert checks them), batched_nms picks its strategy
    # by the device type.
    "cpu-only-read": "a composite op reads values on the CPU that it does not on CUDA",
    # `.cpu()`, `.tolist()`, formatting a tensor: copies to the host, which
    # the report counts and the CPU does not make.
    "host-copy": "the reported copy to the host is no copy on the CPU",
    # `x[idx]` with idx of no known dtype: the report counts it, as it
    # would be a sync for a mask; the run, with indices, gathers.
    "unknown-dtype": "the report cannot tell a mask from indices and counts the sync",
    # A sync the report does not count: a bug of the report (the op table,
    # passes/OpInfo.cpp) or of the rewrite that emitted it.
    "missed-read": "the run syncs where the report says nothing does",
    # The report's "before" is the program after normalization, whose
    # canonical forms may already remove a read (a histogram whose size its
    # use fixes becomes an index_add, the original bincount only in the
    # guard's fallback); the original runs the read.
    "normalized": "the report's before is the normalized program, which no longer reads there",
}


@dataclass
class Known:
    """A documented difference of one idiom: its class, why, and the
    Difference (sync_oracle.py) expected on each side, on every input."""
    cls: str
    reason: str
    before: Difference = field(default_factory=Difference)
    after: Difference = field(default_factory=Difference)


KNOWN: Dict[str, Known] = {
    "metrics-confusion-bincount": Known(
        "normalized",
        "bincount(4 * target[k] + preds[k], minlength=16).view(4, 4) has 16 bins wherever "
        "the view does not raise: normalize makes it an index_add, bincount only in the "
        "guard's fallback",
        before=Difference(extra={"aten::bincount": 1})),
    "per-graph-mean": Known(
        "loop", "x[batch == i] runs in `for i in range(3)`: one point, three nonzeros",
        before=Difference(repeated=2)),
    "moe-capacity-drop": Known(
        "cpu-only-read",
        "F.one_hot(router.argmax(-1), 3) reads min() and max() of the classes on the CPU "
        "(one line of the serialized code: one point, two reads), in the original and the "
        "output alike; on CUDA it reads neither",
        before=Difference(extra={READ: 1}, repeated=1),
        after=Difference(extra={READ: 1}, repeated=1)),
}

assert all(k.cls in CLASSES for k in KNOWN.values())
assert set(KNOWN) <= {i[0] for i in IDIOMS}


def _table(name, comparisons):
    return f"{name}:\n" + "\n".join(f" {side}:\n{c.describe()}" for side, c in comparisons)


@pytest.mark.parametrize("name,source,module,inputs", IDIOMS, ids=[i[0] for i in IDIOMS])
def test_idiom_report_matches_its_syncs(staticify, save, tmp_path, name, source, module,
                                        inputs):
    path = save(module)
    out = tmp_path / "out.pt"
    report = staticify.report(path, "-o", out)
    known = KNOWN.get(name, Known("", ""))
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    compared = 0
    for kind in ("none", "all", "random"):
        args = inputs(gen, kind)
        before = compare(report, "before", path, args, module=original)
        if before.measurement.error:
            continue  # the original raises on this input: nothing to hold
        after = compare(report, "after", out, args, module=static)
        assert after.measurement.error is None, (name, kind, after.measurement.error)
        table = _table(f"{name} ({kind})", [("before", before), ("after", after)])
        assert (before.difference, after.difference) == (known.before, known.after), table
        compared += 1
    assert compared > 0, name


# --- the oracle itself ----------------------------------------------------------------


class OneOfEach(torch.nn.Module):
    """What the oracle must tell apart, one line each."""

    def forward(self, x, m, idx):
        a = x[m > 0]                                # a mask on the device: nonzero
        b = x[idx]                                  # indices: a gather (unknown-dtype)
        n = int(m.sum())                            # a read
        s = torch.tensor(x.shape).max().item()      # a read of a host tensor: none
        y = x.clone()
        y[m > 0] = 0.0                              # a store by a mask: nonzero
        u = torch.unique(m)                         # no sync on the CPU, one on CUDA
        t = 0
        for i in range(3):
            t += int(m[i])                          # one point, three reads (loop)
        z = torch.zeros(2, device=x.device).fill_(x.sum())  # value.item(): a read
        c = m.cpu()                                 # no copy on the CPU (host-copy)
        return a, b, n, s, y, u, t, z, c


def test_the_oracle_counts_what_a_cuda_program_waits_for(staticify, save):
    path = save(OneOfEach())
    args = (torch.randn(6), torch.randint(0, 2, (6,)), torch.tensor([0, 2]))
    measured = measure(torch.jit.load(str(path)), args)
    assert [kind for kind, _ in measured.events] == [
        "aten::index (mask)", READ, "aten::index_put_ (mask)", "aten::_unique2",
        READ, READ, READ, "aten::fill_ (reads its value)"], measured.summary()
    assert (measured.points, measured.count) == (6, 8), measured.summary()
    # Against the report, each line where it is: two classes at once (the
    # report counts fill_'s read too: passes/OpInfo.cpp).
    before = compare(staticify.report(path), "before", path, args, measurement=measured)
    assert before.difference == Difference(
        missing={"aten::index (mask)": 1, "aten::cpu": 1}, repeated=2), before.describe()


# --- detectors ----------------------------------------------------------------------

# A two-stage detector (about 25 seconds on two busy cores); a one-stage one
# too in the slow tier (STATICIFY_TESTS=all), all five with
# STATICIFY_SYNC_ORACLE_DETECTORS=all (SSD's two, 55 and 75 seconds).
DETECTORS = (["fasterrcnn_mobilenet_v3_large_320_fpn", "fcos_resnet50_fpn",
              "retinanet_resnet50_fpn", "ssd300_vgg16", "ssdlite320_mobilenet_v3_large"]
             if os.environ.get("STATICIFY_SYNC_ORACLE_DETECTORS") == "all"
             else ["fasterrcnn_mobilenet_v3_large_320_fpn"]
             + (["retinanet_resnet50_fpn"] if FULL else []))

# The roots each model's report counts before rewriting that one 240x320
# image does not reach (branch-not-taken, cpu-only-read): batched_nms picks
# its strategy by box count and device type (`boxes.numel() > (4000 if
# boxes.device.type == "cpu" else 20000)`). Faster R-CNN's two calls (RPN,
# box head) keep fewer than 1,000 boxes and take the coordinate trick, so
# the per-class loop's unique, two wheres and nms of each are not reached;
# the one-stage detectors pass more than 1,000 boxes, which on the CPU take
# the per-class loop (on CUDA, below 5,000, the trick), so the trick's nms
# is not reached.
NOT_TAKEN = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": {"aten::_unique2": 2, "aten::nonzero": 4,
                                              "torchvision::nms": 2},
    "retinanet_resnet50_fpn": {"torchvision::nms": 1},
    "fcos_resnet50_fpn": {"torchvision::nms": 1},
    "ssd300_vgg16": {"torchvision::nms": 1},
    "ssdlite320_mobilenet_v3_large": {"torchvision::nms": 1},
}

# Without --assume-none targets, each model keeps its check of the targets'
# boxes (`if degenerate_boxes.any():`, a read) under `if targets is not
# None`, before and after rewriting: inference passes none
# (branch-not-taken).
TARGETS_CHECK = {READ: 1}


@pytest.mark.parametrize("name", DETECTORS)
def test_detector_report_matches_its_syncs(staticify, save, tmp_path, torchvision_library, name):
    torch.manual_seed(0)
    torch.ops.load_library(str(RUNTIME))
    model = getattr(detection, name)(weights=None, weights_backbone=None,
                                     **DETECTOR_MODELS[name]).eval()
    if "mobilenet" in name:
        model = fresh_weights(model)
    path = save(model)
    images = [torch.rand(3, 240, 320, generator=torch.Generator().manual_seed(1))]
    # The original runs once: both reports' before sides hold against it.
    original = measure(torch.jit.load(str(path)), [images])
    for padded in (False, True):
        out = tmp_path / f"static{'-padded' if padded else ''}.pt"
        flags = ["--specialize-training", "--runtime-ops"] + (
            ["--padded-outputs", "--assume-none", "targets"] if padded else [])
        report = staticify.report(path, "-o", out, "--load-library", torchvision_library, *flags)
        before = compare(report, "before", path, [images], measurement=original)
        after = compare(report, "after", out, [images])
        table = _table(f"{name} ({'padded' if padded else 'cut'})",
                       [("before", before), ("after", after)])
        assert before.measurement.error is None and after.measurement.error is None, table
        # Every sync of either run is a point the report counts.
        assert before.difference.extra == after.difference.extra == {}, table
        targets = Counter() if padded else Counter(TARGETS_CHECK)
        assert before.difference.missing == dict(Counter(NOT_TAKEN[name]) + targets), table
        assert after.difference.missing == dict(targets), table
        if padded:
            # The inference export's forward syncs nowhere, as the report says.
            assert sync_points(report)[1] == 0 and after.measurement.count == 0, table


# --- the paths the report counts apart ---------------------------------------------------

IDIOM = {i[0]: i for i in IDIOMS}


def _off_path_inputs():
    gen = torch.Generator().manual_seed(0)
    # Unfinished rows broadcast against the tokens: zeros_like(next_tokens)
    # and next_tokens * unfinished differ in size, so the if-convert guard
    # (same size, dtype and device) fails and its fallback reads the
    # condition, as the original does.
    eos = (torch.randint(0, 5, (6,), generator=gen), torch.randint(0, 2, (2, 6), generator=gen))
    # One target column for four predicted: smooth_l1_loss warns "Using a
    # target size ... different to the input size", a message of the
    # selections' sizes, which the rewrite reads in the warning's branch
    # (one int(count) of the one count both selections have).
    matched = torch.randint(-1, 4, (12,), generator=gen)
    box = (torch.randn(12, 4, generator=gen), torch.randn(12, 1, generator=gen), matched)
    return [("hf-eos-finished", eos, "fallback_sync_points", 1, 1),
            ("foreground-box-loss", box, "error_path_sync_points", 1, 1)]


OFF_PATH = _off_path_inputs()


@pytest.mark.filterwarnings("ignore:Using a target size")
@pytest.mark.parametrize("name,args,field_name,reported,synced", OFF_PATH,
                         ids=[c[0] for c in OFF_PATH])
def test_fallbacks_and_error_paths_sync_as_reported(staticify, save, tmp_path, name, args,
                                                    field_name, reported, synced):
    path = save(IDIOM[name][2])
    out = tmp_path / "out.pt"
    report = staticify.report(path, "-o", out)
    summary = report["methods"][0]["after"]
    assert sync_points(report)[1] == 0 and summary[field_name] == reported, summary
    after = compare(report, "after", out, args)
    before = compare(report, "before", path, args)
    assert before.measurement.error is None and after.measurement.error is None
    assert before.difference == Difference(), before.describe()
    # The static path syncs nowhere; this one reads where the report said
    # such a path would, and no more often.
    assert after.difference == Difference(extra={READ: synced}), after.describe()
    assert after.measurement.points <= summary[field_name], after.describe()
