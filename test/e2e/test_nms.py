"""Padded NMS: the bounded form `nms` (passes/forms/bounded_forms.py) and the
runtime's kernel `staticify::nms_padded` (runtime/Nms.cpp, CPU here, CUDA on
the GPU machine), and its mask form `staticify::nms_kept_mask`, against
torchvision's own NMS, on 2,000 random cases per
device: sizes 0 to 5,000, heavy overlap, identical boxes, tied scores,
zero-area boxes, float and double, and thresholds exactly at an IoU that
occurs in the case.

The kept indices (the first `count` rows) must equal torchvision.ops.nms
exactly, order included. The reference is torchvision's CPU kernel: on CUDA
with the threshold rounded to float, as the CUDA kernels round it. The
kernel's padded result must equal the form's, padding included. Against
torchvision's CUDA kernel itself (whose IoU nvcc contracts into FMAs) the
results must be equal wherever the threshold is not within a rounding of an
IoU of the case; at such edge thresholds the test counts the differences.
With classes (the per-class strategy of batched_nms) the kept set equals
torchvision's `_batched_nms_vanilla`, and so does the order where scores
are distinct (its last step is an unstable sort: among tied scores its
order is the sort implementation's)."""

import pytest
import torch

from conftest import RUNTIME, sync_points
from test_forms import compile_forms

torchvision = pytest.importorskip("torchvision")
from torchvision.ops import boxes as box_ops  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CASES = 2000


@pytest.fixture(scope="module")
def ops():
    torch.ops.load_library(str(RUNTIME))
    return torch.ops.staticify, compile_forms()


def iou_at(boxes, i, j):
    """IoU of rows i and j, with the arithmetic of torchvision's kernels."""
    a, b = boxes[i], boxes[j]
    w = (torch.minimum(a[2], b[2]) - torch.maximum(a[0], b[0])).clamp(min=0)
    h = (torch.minimum(a[3], b[3]) - torch.maximum(a[1], b[1])).clamp(min=0)
    inter = w * h
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    return float(inter / (area(a) + area(b) - inter))


def random_case(gen, n=None):
    """boxes [n, 4], scores [n], classes [n], threshold. Sizes: 0 to 3
    often, then up to 15, 100, 400; 1.5% from 1,000 to 5,000."""
    r = lambda *shape: torch.rand(*shape, generator=gen)  # noqa: E731
    pick = lambda k: int(torch.randint(0, k, (), generator=gen))  # noqa: E731
    if n is None:
        size = pick(200)
        n = (1000 + pick(4001) if size < 3 else
             [0, 1, 2, 3, pick(16), pick(100), pick(400)][size % 7])
    kind = pick(5)
    if kind == 0:    # scattered
        xy, wh = r(n, 2) * 100, r(n, 2) * 30
    elif kind == 1:  # heavy overlap: a few clusters of jittered boxes
        centers = r(max(n // 50, 1), 2) * 50
        xy = centers[torch.randint(0, centers.size(0), (n,), generator=gen)] + r(n, 2)
        wh = 10 + r(n, 2)
    elif kind == 2:  # integer grid: identical boxes, zero-area boxes
        xy, wh = (r(n, 2) * 4).floor(), (r(n, 2) * 3).floor()
    else:            # nested and shifted
        xy, wh = r(n, 2) * 20, 5 + r(n, 2) * 20
    boxes = torch.cat([xy, xy + wh], 1)
    if n > 1 and pick(4) == 0:
        boxes[pick(n):] = boxes[0]  # a run of identical boxes
    scores = r(n)
    if pick(3) == 0:
        scores = (scores * 4).floor()  # ties
    classes = torch.randint(0, 1 + pick(6), (n,), generator=gen)
    threshold = [0.0, 0.3, 0.5, 0.7, 1.0, -0.5][pick(6)]
    if n > 1 and pick(2) == 0:
        # Exactly an IoU of this case, or the doubles next to it.
        at = iou_at(boxes, pick(n), pick(n))
        threshold = at + [0.0, 1e-9, -1e-9][pick(3)]
    return boxes, scores, classes, threshold


def by_class(boxes, scores, classes, threshold):
    """_batched_nms_vanilla's kept set, ordered by descending score with ties
    by index (a stable sort)."""
    keep = box_ops._batched_nms_vanilla(boxes, scores, classes, threshold)
    kept = keep.sort().values
    return kept[scores[kept].sort(descending=True, stable=True).indices]


def form_threshold(t, device):
    """The threshold torchvision's CPU kernel must be given to compare as the
    form compares on `device`: on CUDA, rounded to float."""
    return float(torch.tensor(t, dtype=torch.float32)) if device == "cuda" else t


@pytest.mark.parametrize("device", DEVICES)
def test_nms_form_and_kernel_equal_torchvision(ops, device):
    staticify, forms = ops
    gen = torch.Generator().manual_seed(0)
    sizes, edges, fma_edges = 0, 0, 0
    for case in range(CASES):
        n = 5000 if case == 0 else None  # the largest size, at least once
        boxes, scores, classes, t = random_case(gen, n)
        if case % 10 == 3:  # double boxes: the IoU in double, the same rules
            boxes, scores = boxes.double(), scores.double()
        cpu = (boxes, scores, classes)
        boxes, scores, classes = (x.to(device) for x in cpu)
        tf = form_threshold(t, device)
        where = (case, boxes.size(0), t)

        edge = t not in (0.0, 0.3, 0.5, 0.7, 1.0, -0.5)

        def check(got, count, form, form_count, on_device, reference):
            nonlocal fma_edges
            assert got.device == boxes.device and count.device == boxes.device, where
            assert got.dtype == torch.long and count.dim() == 0, where
            assert got.size(0) == boxes.size(0), where
            assert torch.equal(got[:int(count)].cpu(), reference), where
            assert torch.equal(got, form) and int(count) == int(form_count), where
            if not torch.equal(got[:int(count)], on_device.to(device)):
                assert device == "cuda" and edge, where
                fma_edges += 1

        check(*staticify.nms_padded(boxes, scores, t),
              *forms.nms(boxes, scores, t, None, None),
              torchvision.ops.nms(boxes, scores, t),
              torchvision.ops.nms(cpu[0], cpu[1], tf))
        def check_mask(*args, **kwargs):
            # nms_kept_mask: the rows nms_padded keeps, as a mask in the
            # input's order (the batched-nms pass's kernel).
            got, count = staticify.nms_padded(*args, **kwargs)
            want = torch.zeros(boxes.size(0), dtype=torch.bool, device=device)
            want[got[:int(count)]] = True
            mask = staticify.nms_kept_mask(*args, **kwargs)
            assert mask.dtype == torch.bool and mask.device == boxes.device, where
            assert torch.equal(mask, want), where

        if case % 4 == 0:  # batched, per class
            check(*staticify.nms_padded(boxes, scores, t, classes=classes),
                  *forms.nms(boxes, scores, t, None, classes),
                  by_class(boxes, scores, classes, t),
                  by_class(*cpu, tf))
            check_mask(boxes, scores, t, classes=classes)
        if case % 4 == 1 and boxes.size(0):  # bounded: rows past count are padding
            live = int(torch.randint(0, boxes.size(0) + 1, (), generator=gen))
            count_in = torch.tensor(live, device=device)
            junk = torch.rand(boxes.size(0) - live, generator=gen).to(device) + 9
            padded = torch.cat([scores[:live], junk])
            check(*staticify.nms_padded(boxes, padded, t, count_in),
                  *forms.nms(boxes, padded, t, count_in, None),
                  torchvision.ops.nms(boxes[:live], scores[:live], t),
                  torchvision.ops.nms(cpu[0][:live], cpu[1][:live], tf))
            check_mask(boxes, padded, t, count_in, classes)
        sizes = max(sizes, boxes.size(0))
        edges += edge
    assert sizes == 5000 and edges >= 500  # the generator covers what it claims
    print(f"{device}: {edges} cases at an edge threshold; {fma_edges} differ from "
          "torchvision's CUDA kernel (its FMAs)")


def test_nms_walk_equals_the_host_path(ops):
    """The form's two paths compute one result: nms_on_host (the CPU's, held
    against torchvision above) in blocks of 1 to 64 rows and nms_walk (every
    other device's, which the CPU does not take in `nms`), on the same random
    cases (padding rows included: they take no part)."""
    _, forms = ops
    gen = torch.Generator().manual_seed(1)
    for case in range(CASES // 4):
        boxes, scores, _, t = random_case(gen)
        n = boxes.size(0)
        if n > 400:
            continue  # the walk's n steps; the sizes below 400 cover the blocks
        if case % 10 == 3:
            boxes, scores = boxes.double(), scores.double()
        order = scores.sort(descending=True, stable=True).indices
        sorted_boxes = boxes[order]
        dead = torch.arange(n) >= int(torch.randint(0, n + 1, (), generator=gen))
        rows = torch.cat([sorted_boxes, dead.to(boxes.dtype)[:, None]], 1)
        block = [1, 3, 16, 64][case % 4]
        walk = forms.nms_walk(sorted_boxes, dead, t, None)
        assert torch.equal(forms.nms_on_host(rows, t, block), walk), (case, n, t, block)
        assert bool((walk | ~dead).all())  # padding is never kept


def test_batched_nms_order_matches_torchvision_where_scores_differ(ops):
    """Against torchvision.ops.batched_nms itself (either strategy): with
    distinct scores the per-class result is exactly its result."""
    staticify, _ = ops
    gen = torch.Generator().manual_seed(1)
    for case in range(200):
        boxes, _, classes, t = random_case(gen)
        scores = torch.randperm(boxes.size(0), generator=gen).float()
        want = box_ops._batched_nms_vanilla(boxes, scores, classes, t)
        got, count = staticify.nms_padded(boxes, scores, t, classes=classes)
        assert torch.equal(got[:int(count)], want), case


def test_nms_padded_rejects_what_it_does_not_take(ops):
    staticify, _ = ops
    with pytest.raises(RuntimeError, match=r"boxes of shape \[N, 4\]"):
        staticify.nms_padded(torch.rand(3, 5), torch.rand(3), 0.5)
    with pytest.raises(RuntimeError, match="scores of shape"):
        staticify.nms_padded(torch.rand(3, 4), torch.rand(4), 0.5)
    with pytest.raises(RuntimeError, match="float or double"):
        staticify.nms_padded(torch.rand(3, 4).half(), torch.rand(3).half(), 0.5)
    with pytest.raises(RuntimeError, match="0-d int64"):
        staticify.nms_padded(torch.rand(3, 4), torch.rand(3), 0.5, torch.tensor([1]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_nms_padded_never_syncs_on_cuda(ops):
    staticify, _ = ops
    boxes = torch.rand(3000, 4, device="cuda") * 50
    boxes[:, 2:] += boxes[:, :2]
    scores = torch.rand(3000, device="cuda")
    count = torch.tensor(2000, device="cuda")  # a host-to-device copy: before
    classes = torch.randint(0, 5, (3000,), device="cuda")
    staticify.nms_padded(boxes, scores, 0.5)  # warm-up: loads the kernels
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        staticify.nms_padded(boxes, scores, 0.5)
        staticify.nms_padded(boxes, scores, 0.5, count, classes)
    finally:
        torch.cuda.set_sync_debug_mode("default")


class KeepAfterNms(torch.nn.Module):
    """torchvision's RoIHeads.postprocess_detections, its last steps."""

    def forward(self, boxes, scores):
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return boxes[keep], scores[keep]


class ThresholdThenOffsetNms(torch.nn.Module):
    """torchvision's RoIHeads.postprocess_detections with mmdet's batched_nms
    (boxes offset per class, one NMS): a score threshold, remove_small_boxes,
    the offset NMS, the first 100 detections. Not yet static: the early
    return on no boxes that torchvision's and mmdet's offset NMS both have
    (an if on the count whose branches differ in shape), and torchvision's
    batched_nms above 4,000 boxes (a per-class loop over unique labels).
    Without boxes this model raises, in the original and the output alike
    (max of nothing): the inputs here always keep one."""

    def forward(self, boxes, scores, labels):
        inds = torch.where(scores > 0.05)[0]
        boxes, scores, labels = boxes[inds], scores[inds], labels[inds]
        keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        offsets = labels.to(boxes) * (boxes.max() + 1)
        keep = torchvision.ops.nms(boxes + offsets[:, None], scores, 0.5)[:100]
        return boxes[keep], scores[keep], labels[keep]


def detections(gen, n):
    """n boxes, the first one certain to pass the score threshold."""
    xy = torch.rand(n, 2, generator=gen) * 60
    boxes = torch.cat([xy, xy + 1 + torch.rand(n, 2, generator=gen) * 25], 1)
    scores = torch.rand(n, generator=gen)
    scores[:1] = 0.9
    return boxes, scores, torch.randint(0, 4, (n,), generator=gen)


@pytest.mark.parametrize("flags", [["--static-forms"], ["--padded-outputs"], ["--runtime-ops"],
                                   ["--padded-outputs", "--runtime-ops"]])
def test_staticified_nms_models_equal_the_original(staticify, save, tmp_path,
                                                   torchvision_library, ops, flags):
    """The real binary on scripted models that call torchvision's NMS: each
    output equals the original's on 20 random inputs (sizes 1 to 400); with
    --runtime-ops the kernel replaces the op, otherwise the form does, and
    neither needs torchvision's library any more. (Without either option
    the form reaches the host as often as torchvision's op and runs more
    ops: staticify keeps it only with --static-forms.)"""
    gen = torch.Generator().manual_seed(2)
    for module, takes_labels in [(KeepAfterNms(), False), (ThresholdThenOffsetNms(), True)]:
        name = type(module).__name__
        original = torch.jit.script(module)
        path = save(original, f"{name}.pt")
        out = tmp_path / f"{name}-static.pt"
        report = staticify.report(path, "-o", out, "--load-library", torchvision_library, *flags)
        method = report["methods"][0]
        rewritten = [f for f in method["findings"]
                     if f["op"] == "torchvision::nms" and f["action"] == "rewritten"]
        assert rewritten, name
        graph = str(torch.jit.load(str(out)).forward.graph)
        assert "torchvision::nms" not in graph
        assert ("staticify::nms_padded" in graph) == ("--runtime-ops" in flags)
        if "--padded-outputs" in flags:  # no sync left at all
            assert method["after"]["static"] and method["after"]["counts"]["host-sync"] == 0
        static = torch.jit.load(str(out))
        for trial in range(20):
            boxes, scores, labels = detections(gen, [1, 2, 7, 60, 400][trial % 5])
            args = (boxes, scores, labels) if takes_labels else (boxes, scores)
            want, got = original(*args), static(*args)
            if "--padded-outputs" in flags:
                got = tuple(padded[:int(count)] for padded, count in got)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert torch.equal(g, w), (name, trial)


class BatchedNms(torch.nn.Module):
    """torchvision.ops.batched_nms as detection heads call it (torchvision's
    RoIHeads, RetinaNet, FCOS): the per-class loop above 4,000 box
    coordinates on the CPU, the coordinate trick below."""

    def forward(self, boxes, scores, idxs):
        return torchvision.ops.batched_nms(boxes, scores, idxs, 0.5)


class BatchedNmsVanilla(torch.nn.Module):
    """batched_nms's per-class strategy at any size (its private function,
    as the public one calls it), with the caller's threshold."""

    def forward(self, boxes, scores, idxs, t: float):
        return box_ops._batched_nms_vanilla(boxes, scores, idxs, t)


def same_up_to_tie_order(got, want, scores):
    """Whether kept indices `got` are `want` but for the order among equal
    scores. batched_nms's per-class path ends with torch.sort of the kept
    scores without stable=True, which leaves that order unspecified (on the
    CPU, unstable above 16 elements); staticify's sort of padded rows is
    stable. Runs of equal scores are compared as sets."""
    if got.shape != want.shape or not torch.equal(scores[got], scores[want]):
        return False
    s = scores[want]
    start = 0
    for end in range(1, len(s) + 1):
        if end == len(s) or s[end] != s[start]:
            if set(got[start:end].tolist()) != set(want[start:end].tolist()):
                return False
            start = end
    return True


def test_batched_nms_per_class_loop_needs_the_kernel(staticify, save, torchvision_library):
    """Without --runtime-ops the per-class loop stays, with the reason: it is
    taken above 1,000 boxes, where the TorchScript form's walk is many times
    slower than the loop's syncs (docs/benchmarks.md)."""
    path = save(torch.jit.script(BatchedNmsVanilla()))
    # Up to batched-nms: bound, later, gives the loop's nms its own reason.
    report = staticify.report(path, "--load-library", torchvision_library,
                              "--passes", "inline,normalize,batched-nms")
    kept = [f for f in report["methods"][0]["findings"]
            if f["op"] == "torchvision::nms" and f["action"] == "kept"]
    assert kept and "--runtime-ops replaces it" in kept[0]["reason"]
    assert not any(f["action"] == "rewritten" and f.get("rule") == "batched-nms"
                   for f in report["methods"][0]["findings"])


def test_batched_nms_per_class_loop_equals_the_original(staticify, save, tmp_path,
                                                        torchvision_library, ops):
    """The real binary on scripted batched_nms with --runtime-ops: the
    per-class loop (unique, then a where and an NMS per class) becomes one
    NMS of classes, the runtime's kernel, behind a guard, and each output
    equals the original's: 60 random cases of
    random_case's kinds (overlap, ties, identical boxes, edge thresholds,
    1 to 6 classes) through the private function at sizes 0 to 400, 6
    through the public one above its 1,000-box switch, and float classes,
    which the guard sends to the original loop. The order among equal
    scores is compared as a set (same_up_to_tie_order)."""
    gen = torch.Generator().manual_seed(3)
    flags = ["--runtime-ops"]
    cases = []
    exact = 0
    for module, runs in [(BatchedNmsVanilla(), 60), (BatchedNms(), 6)]:
        name = type(module).__name__
        original = torch.jit.script(module)
        path = save(original, f"{name}.pt")
        out = tmp_path / f"{name}-static.pt"
        report = staticify.report(path, "-o", out, "--load-library", torchvision_library,
                                  *flags)
        method = report["methods"][0]
        by_op = {f["op"]: f for f in method["findings"]
                 if f["action"] == "rewritten" and f["rule"] == "batched-nms"}
        assert {"aten::_unique2", "aten::where", "torchvision::nms"} <= set(by_op), name
        before, after = sync_points(report)
        assert after < before
        assert method["after"]["fallback_sync_points"] > 0  # the loop, as the fallback
        graph = str(torch.jit.load(str(out)).forward.graph)
        assert "staticify::nms_kept_mask" in graph
        if isinstance(module, BatchedNms):
            # Both strategies' kept indices leave their ifs padded, with a
            # count: one read where they are returned, none with
            # --padded-outputs.
            assert sync_points(report) == (5, 1)
            padded = staticify.report(path, "-o", tmp_path / "padded.pt", "--load-library",
                                      torchvision_library, "--padded-outputs", *flags)
            assert sync_points(padded) == (5, 0)
        static = torch.jit.load(str(out))
        for trial in range(runs):
            if isinstance(module, BatchedNms):
                boxes, scores, idxs, t = random_case(gen, 1001 + 300 * trial)
                args = (boxes, scores, idxs)
            else:
                boxes, scores, idxs, t = random_case(gen, [0, 1, 2, 7, 60, 400][trial % 6])
                args = (boxes, scores, idxs, t)
            if trial % 10 == 9:
                args = (boxes, scores, idxs.double()) + args[3:]  # the fallback
            want, got = original(*args), static(*args)
            assert same_up_to_tie_order(got, want, scores), (name, trial, boxes.size(0), t)
            exact += torch.equal(got, want)
            cases.append(boxes.size(0))
    assert max(cases) > 1000 and min(cases) == 0
    assert exact > len(cases) // 2  # ties in a minority of cases only


class SelectedBatchedNms(torch.nn.Module):
    """batched_nms on the boxes a score threshold selected, as RetinaNet's
    and FCOS's postprocess call it: which strategy runs (the per-class loop
    above 1,000 boxes on the CPU, the coordinate trick below) depends on how
    many boxes the threshold kept, a count only the device knows."""

    def forward(self, boxes, scores, idxs, t: float):
        keep = torch.where(scores > 0.25)[0]
        b, s, i = boxes[keep], scores[keep], idxs[keep]
        kept = torchvision.ops.batched_nms(b, s, i, t)
        return b[kept], s[kept], i[kept]


def test_batched_nms_strategy_of_selected_boxes_runs_on_the_device(
        staticify, save, tmp_path, torchvision_library, ops):
    """The real binary with --runtime-ops: both strategies run on the padded
    rows and the count picks one (passes/bound/BothBranches.cpp), so with
    --padded-outputs nothing is read on the host; cut, the one read left is
    where the detections are returned. Each output equals the original's on
    40 random cases (sizes 0 to 3,000, so both strategies are taken, and the
    coordinate trick on rows cut to 1,000 of more), but for the order among
    equal scores (same_up_to_tie_order)."""
    gen = torch.Generator().manual_seed(5)
    original = torch.jit.script(SelectedBatchedNms())
    path = save(original, "selected.pt")
    runs = {}
    for padded in (False, True):
        out = tmp_path / f"selected-{padded}.pt"
        flags = ["--runtime-ops"] + (["--padded-outputs"] if padded else [])
        report = staticify.report(path, "-o", out, "--load-library",
                                  torchvision_library, *flags)
        before, after = sync_points(report)
        assert after == (0 if padded else 1) < before, (padded, before, after)
        runs[padded] = torch.jit.load(str(out))
    strategies, cut = set(), set()
    for case in range(40):
        n = [0, 1, 5, 300, 900, 1700, 3000][case % 7]
        boxes, scores, idxs, t = random_case(gen, n)
        if case % 3 == 0:  # no box above the threshold
            scores = scores.clamp(max=0.2)
        elif case % 3 == 1 and n > 1000:
            # At most 600 kept of more rows: the coordinate trick, on rows
            # cut to the 1,000 its test allows (capBranchRows).
            scores[600:] = scores[600:].clamp(max=0.2)
            cut.add(n)
        want = original(boxes, scores, idxs, t)
        strategies.add(int((scores > 0.25).sum()) * 4 > 4000)
        for padded, static in runs.items():
            got = static(boxes, scores, idxs, t)
            if padded:
                got = tuple(rows[:int(count)] for rows, count in got)
            # The kept rows' scores in order; rows of one score as a set.
            assert torch.equal(got[1], want[1]), (case, n, padded)
            for score in want[1].unique():
                pick = lambda d: sorted(map(tuple, torch.cat(  # noqa: E731
                    [d[0], d[2][:, None].to(d[0])], 1)[d[1] == score].tolist()))
                assert pick(got) == pick(want), (case, n, padded)
    assert strategies == {False, True}  # both strategies were taken
    assert cut == {1700, 3000}
