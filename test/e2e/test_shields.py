"""Branches that may raise, run both (IfConvert.cpp, shieldBranches): an if on
tensor data whose branch divides by a tensor or indexes by int64 values is
converted with shields, a divisor made 1 and an index 0 where the branch is
not taken. Through the real binary: outputs equal the original's on inputs
that take each branch (the guarded division by 0 included), the converted
ifs read nothing on the host, and where the original raises (the branch
taken divides by 0, or indexes out of range) the output raises too."""
import pytest
import torch
from torch import Tensor

from conftest import sync_points


class Equalize(torch.nn.Module):
    """torchvision's _scale_channel, early return before a division and a
    lookup-table gather, written out."""

    def forward(self, img: Tensor) -> Tensor:
        hist = torch.zeros(256, dtype=torch.long).scatter_add(
            0, img.flatten().long(), torch.ones_like(img.flatten().long()))
        nonzero_hist = hist[hist != 0]
        step = torch.div(nonzero_hist[:-1].sum(), 255, rounding_mode="floor")
        if step == 0:
            return img
        lut = torch.div(torch.cumsum(hist, 0) + torch.div(step, 2, rounding_mode="floor"),
                        step, rounding_mode="floor")
        lut = torch.nn.functional.pad(lut, [1, 0])[:-1].clamp(0, 255)
        return lut[img.to(torch.int64)].to(torch.uint8)


class RaiseWhereTaken(torch.nn.Module):
    """The branch taken divides by a divisor that may be 0, and gathers by
    indices that may be out of range: the original raises there."""

    def forward(self, x: Tensor, d: Tensor, i: Tensor, table: Tensor) -> Tensor:
        if x.sum() > 0:
            return torch.div(x, d, rounding_mode="floor") + table[i.long()]
        return x


def staticified(staticify, save, tmp_path, module):
    """(report, original, static) of `module` through the binary."""
    path = save(module)
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out)
    return report, torch.jit.load(str(path)), torch.jit.load(str(out))


@pytest.fixture
def equalize(staticify, save, tmp_path):
    return staticified(staticify, save, tmp_path, Equalize())


def test_equalize_reads_nothing_on_the_host(equalize):
    report, _, _ = equalize
    assert sync_points(report) == (2, 0)


def test_equalize_outputs_equal_on_both_branches(equalize):
    _, original, static = equalize
    gen = torch.Generator().manual_seed(0)
    taken = {True: 0, False: 0}
    for trial in range(60):
        img = torch.randint(0, 256, (32, 32), generator=gen, dtype=torch.uint8)
        if trial % 3 == 0:
            img.fill_(trial)  # one value: step == 0, the early return
        elif trial % 3 == 1:
            img = img // 128 * 255  # two values: step == 0 as well
        expected = original(img)
        taken[torch.equal(expected, img)] += 1
        assert torch.equal(static(img), expected), trial
    assert taken[True] >= 20 and taken[False] >= 15, taken


@pytest.fixture
def raising(staticify, save, tmp_path):
    return staticified(staticify, save, tmp_path, RaiseWhereTaken())


def test_the_branch_not_taken_never_raises(raising):
    report, original, static = raising
    assert sync_points(report) == (1, 0)
    x = -torch.arange(1, 7).reshape(2, 3)  # sum < 0: the other branch
    d = torch.zeros(2, 3, dtype=torch.long)  # would divide by 0
    i = torch.tensor([[7], [-9]])  # would be out of range
    table = torch.arange(3)
    assert torch.equal(static(x, d, i, table), original(x, d, i, table))


def test_the_branch_taken_gives_the_original_values(raising):
    _, original, static = raising
    x = torch.arange(1, 7).reshape(2, 3)
    d = torch.tensor([[1, 2, 3], [4, 5, 6]])
    i = torch.tensor([[2], [-3]])
    table = torch.arange(3) * 10
    assert torch.equal(static(x, d, i, table), original(x, d, i, table))


@pytest.mark.parametrize("bad", ["divisor", "index"])
def test_the_branch_taken_raises_where_the_original_raises(raising, bad):
    _, original, static = raising
    x = torch.arange(1, 7).reshape(2, 3)
    d = torch.ones(2, 3, dtype=torch.long)
    i = torch.tensor([0, 1, 2])
    if bad == "divisor":
        d[1, 2] = 0
    else:
        i[1] = 3
    table = torch.arange(3)
    for module in (original, static):
        with pytest.raises(RuntimeError):
            module(x, d, i, table)


class SelectOrGather(torch.nn.Module):
    """`x[k]` by a host int and `x[0]` (select: raises only where k is out of
    range of x's rows, a host fact) and gather by int64 values, in branches
    on data."""

    def forward(self, x: Tensor, k: int, i: Tensor) -> Tensor:
        if x.sum() > 0:
            y = x[k] + x.gather(0, i.long()).sum(0)
        else:
            y = x[0]
        return y


@pytest.fixture
def selecting(staticify, save, tmp_path):
    return staticified(staticify, save, tmp_path, SelectOrGather())


def test_select_and_gather_in_branches_read_nothing(selecting):
    report, _, _ = selecting
    assert sync_points(report) == (1, 0)


@pytest.mark.parametrize("k", [0, 2, -3, 3, -4])
@pytest.mark.parametrize("sign", [1, -1])
def test_select_by_host_index_equals_the_original(selecting, k, sign):
    """k in range and out of it (3 rows), each branch taken: the same values,
    or a raise exactly where the original raises (k out of range and the
    branch taken)."""
    _, original, static = selecting
    x = sign * torch.arange(1, 13, dtype=torch.float).reshape(3, 4)
    i = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    try:
        expected = original(x, k, i)
    except RuntimeError:
        assert sign == 1 and not -3 <= k < 3
        with pytest.raises(RuntimeError):
            static(x, k, i)
        return
    assert torch.equal(static(x, k, i), expected)


def test_gather_out_of_range_raises_only_where_taken(selecting):
    _, original, static = selecting
    i = torch.tensor([[5, 0, 0, 0]])  # row 5 of 3
    x = -torch.ones(3, 4)  # not taken: x[0]
    assert torch.equal(static(x, 0, i), original(x, 0, i))
    with pytest.raises(RuntimeError):
        original(-x, 0, i)
    with pytest.raises(RuntimeError):
        static(-x, 0, i)


def test_empty_rows_take_the_fallback(selecting):
    """x with no rows: x[0] raises in the original on the branch taken (sum 0
    is not > 0: the else branch, x[0], raises in both)."""
    _, original, static = selecting
    x = torch.zeros(0, 4)
    i = torch.zeros(1, 4, dtype=torch.long)
    for module in (original, static):
        with pytest.raises(RuntimeError):
            module(x, 0, i)


class NestedEarlyReturn(torch.nn.Module):
    """mmdet's mask_matrix_nms, reduced: an early return nested in an if on
    a host constant, after a selection. Where the inner branch does not
    return, TorchScript leaves its returned value undefined
    (prim::Uninitialized); the converted if must never ask that value its
    shape or dtype (which raises)."""

    def forward(self, scores: Tensor, order: Tensor) -> Tensor:
        thr = 0.1
        idx = order
        if thr > 0:
            keep = scores >= thr
            idx = idx[keep]
            if not keep.any():
                return order
        return idx[order]


def test_a_nested_early_return_equals_the_original(staticify, save, tmp_path):
    _, original, static = staticified(staticify, save, tmp_path, NestedEarlyReturn())
    gen = torch.Generator().manual_seed(0)
    for trial in range(30):
        scores = torch.rand(6, generator=gen) * (trial % 3)  # none kept, some, all
        order = torch.randperm(6, generator=gen)
        try:
            expected = original(scores, order)
        except (IndexError, RuntimeError):
            continue  # an index past the rows kept: nothing to compare
        assert torch.equal(static(scores, order), expected), trial


class FilterThenSort(torch.nn.Module):
    """mmdet's mask_matrix_nms after its decay: keep the scores above a
    threshold, return empty results early where none is kept, else sort the
    kept. Where the early return is not taken, its values are undefined;
    the selections' counts must not be read from them."""

    def forward(self, scores: Tensor, labels: Tensor, inds: Tensor):
        thr = 0.1
        if thr > 0:
            keep = scores >= thr
            inds = inds[keep]
            if not keep.any():
                return scores.new_zeros(0), labels.new_zeros(0), labels.new_zeros(0)
            scores = scores[keep]
            labels = labels[keep]
        scores, order = torch.sort(scores, descending=True)
        return scores, labels[order], inds[order]


def test_an_early_return_of_empty_selections_equals_the_original(staticify, save, tmp_path):
    _, original, static = staticified(staticify, save, tmp_path, FilterThenSort())
    gen = torch.Generator().manual_seed(0)
    for trial in range(30):
        scores = torch.rand(7, generator=gen) * (trial % 3) * 0.1  # none kept, some, most
        labels = torch.randint(0, 3, (7,), generator=gen)
        inds = torch.randperm(7, generator=gen)
        expected = original(scores, labels, inds)
        got = static(scores, labels, inds)
        assert all(torch.equal(e, g) for e, g in zip(expected, got)), trial


class AssignHighestOverlaps(torch.nn.Module):
    """ultralytics' TaskAlignedAssigner.select_highest_overlaps: in a branch
    on data, a repeat and a permute that raise on ranks only, an argmax that
    raises on an empty dim, and a one_hot of its indices. Of unknown rank
    here; specialize-ranks' version at rank 3 shows the first two never
    raise, and if-convert shields the others with host checks. The returned
    targets are clamped in place (get_targets' `target_labels.clamp_(0)`)."""

    def forward(self, mask_pos: Tensor, overlaps: Tensor, gt_labels: Tensor):
        n_max_boxes = mask_pos.shape[1]
        fg_mask = mask_pos.sum(-2)
        if fg_mask.max() > 1:
            mask_multi_gts = (fg_mask.unsqueeze(1) > 1).repeat([1, n_max_boxes, 1])
            max_overlaps_idx = overlaps.argmax(1)
            is_max_overlaps = torch.nn.functional.one_hot(max_overlaps_idx, n_max_boxes)
            is_max_overlaps = is_max_overlaps.permute(0, 2, 1).to(overlaps.dtype)
            mask_pos = torch.where(mask_multi_gts, is_max_overlaps, mask_pos)
            fg_mask = mask_pos.sum(-2)
        target_gt_idx = mask_pos.argmax(-2)
        target_labels = gt_labels.long().flatten()[target_gt_idx]
        target_labels.clamp_(0)
        return target_labels, fg_mask


class EulerChurn(torch.nn.Module):
    """diffusers' EulerDiscreteScheduler.step: `gamma = min(s_churn /
    (len(sigmas) - 1), ...) if s_tmin <= sigma <= s_tmax else 0.0`, a
    division by a host number (0 for a one-step schedule) in a branch on
    data: checked on the host, the condition asked only where it is 0."""

    def forward(self, sample: Tensor, sigmas: Tensor, step: int):
        sigma = sigmas[step]
        gamma = min(0.5 / (len(sigmas) - 1), 2 ** 0.5 - 1) if 0.5 <= sigma <= 5.0 else 0.0
        return sample * (sigma * (gamma + 1))


def test_ranks_and_empty_dims_shielded(staticify, save, tmp_path):
    report, original, static = staticified(staticify, save, tmp_path,
                                           AssignHighestOverlaps())
    assert sync_points(report) == (1, 0)
    g = torch.Generator().manual_seed(0)
    for case in range(12):
        b, n, a = 2, 3, 10
        if case % 3 == 0:  # no anchor of two boxes: the branch not taken
            owner = torch.randint(-1, n, (b, a), generator=g)
            mask_pos = torch.stack([(owner == i).float() for i in range(n)], 1)
        elif case % 3 == 1:
            mask_pos = torch.ones(b, n, a)
        else:
            mask_pos = (torch.rand(b, n, a, generator=g) < 0.5).float()
        overlaps = torch.rand(b, n, a, generator=g) * mask_pos
        labels = torch.randint(-1, 4, (b, n, 1), generator=g)
        want, got = original(mask_pos, overlaps, labels), static(mask_pos, overlaps, labels)
        assert all(torch.equal(w, s) for w, s in zip(want, got)), case
    # Other ranks run the original (the guard's fallback): at rank 2 the
    # branch would raise (permute), so only inputs that do not take it.
    args = (torch.zeros(3, 2), torch.ones(3, 2), torch.ones(3))
    assert all(torch.equal(w, s) for w, s in zip(original(*args), static(*args)))


def test_a_host_divisor_shielded(staticify, save, tmp_path):
    report, original, static = staticified(staticify, save, tmp_path, EulerChurn())
    assert sync_points(report) == (2, 0)  # each comparison of the chain
    x = torch.arange(6.0)
    for sigmas in ([0.1, 1.0, 7.0], [0.1, 0.2], [3.0, 1.0, 0.0]):
        for step in range(len(sigmas)):
            s = torch.tensor(sigmas)
            assert torch.equal(static(x, s, step), original(x, s, step))
    # One step: the divisor is 0 (TorchScript's float division gives inf;
    # an int remainder by 0 would stop the process), the branch taken or not.
    for sigma in (0.1, 1.0):
        s = torch.tensor([sigma])
        assert torch.equal(static(x, s, 0), original(x, s, 0))
