"""Consumers of a selection that make no data-dependent shape of their own,
through the binary against the original: reductions over the selected
dimension of `x[:, m]`, `x[:, nonzero(m)]` and `x.index_select(1, ...)`,
after elementwise ops and softmax too (leading-selections: moved to dim 0,
where masked-reduce and bound take them), `bincount` of selected values (bound: the padding
counted in bin 0 and taken out again), and writes at selected indices
(`index_put` in place or not, accumulating or not: bound's put rule, the
padding written to a dropped row; an index of unknown dtype checked to be
int64 on the host). Each is compared on
random inputs whose masks keep nothing, everything or some, mismatched mask
lengths included (both raise); greedy CTC decoding (unique_consecutive's
runs, blanks dropped); masked_select by a mask the program takes as an input
through expand_as (its dtype unknown: specialize-dtypes versions the method
on it being bool); a store at a mask of rows computed from selections by it
(NeRF), at a mask made with an input of unknown dtype (ATSS), and sums over
the trailing dims of a selected stack of masks (SAM); index_select by ids
a mask keeps, topk by a count read from data, and runs of equal rows
(unique_consecutive along dim 0), a scatter sum by an index expanded over
its source's columns (PyG) and a grid written at the coordinates of kept
points; selections by two masks combined elementwise (event onsets and
offsets: equal counts line up, a count of 1 broadcasts, other pairs raise
in PyTorch and give padding here) and a selection by a mask computed from
them; pairs of two selections stacked along dim 1 (counts that differ raise
in PyTorch); segment offsets of unique counts made with F.pad, with a cat
after `new_zeros(1)`, and read back by slices along the bounded dim; sums
per group written at unique's inverse into rows made per group; the
sync points are the report's."""

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from test_rewrites import run_safely

TRIALS = 200


class ColumnSum(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return x[:, score > 0].sum(1)


class ColumnMeanKeepdim(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return x[:, score > 0].mean(dim=1, keepdim=True)


class ColumnVarLastDim(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        y = x.view(x.size(0), -1)  # rank 2: dim -1 is the selected one
        return y[:, score.view(-1) > 0].var(-1)


class ColumnProdOfThree(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return x[:, :, score > 0].prod(2)


class ColumnMax(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return x[:, score > 0].amax(1)


class ColumnScaledMax(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return (x[:, score > 0] * 2.0 - 1.0).amax(dim=1)


class ColumnAttention(torch.nn.Module):
    """softmax along the selected columns, weighing them: the move back
    sunk past softmax and the product, softmax of bounded rows in bound."""

    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        cols = x[:, score > 0]
        return (torch.softmax(cols, dim=1) * cols).sum(1)


class IndexSelectColumnsMean(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        idx = torch.nonzero(score > 0).squeeze(1)
        return x.index_select(1, idx).mean(1)


class IntegerColumnsLogsumexp(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        keep = (score > 0).nonzero().view(-1)
        return torch.logsumexp(x[:, keep], dim=1)


class ColumnKept(torch.nn.Module):
    """Must not touch: the selected dimension survives the reduction."""

    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return x[:, score > 0].sum(0)


class LastSelectedRow(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        return x[score > 0][-1]


class FirstTruePosition(torch.nn.Module):
    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        first = torch.nonzero(score > 0)[0]
        return x[first]


class MaskedSelectAsRows(torch.nn.Module):
    """masked_select by a mask of rows broadcast over x, viewed back as
    rows (SSD's `loc_data[pos_idx].view(-1, 4)`)."""

    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        rows = torch.masked_select(x, score[:, None] > 0).reshape(-1, x.size(1))
        return rows.sum(0)


class DistillSelected(torch.nn.Module):
    """KL divergence of the kept rows' distributions, summed and divided by
    their count."""

    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        keep = score > 0
        s, t = x[keep], (x * 2.0)[keep]
        return F.kl_div(F.log_softmax(s, -1), F.softmax(t, -1), reduction="sum") / \
            keep.sum().clamp(min=1)


class ScatterSumKeptEdges(torch.nn.Module):
    """PyG's scatter sum over the edges a mask keeps: the destination index
    expanded over the messages' columns."""

    def forward(self, msg: Tensor, dst: Tensor, w: Tensor) -> Tensor:
        keep = w > 0
        index = dst[keep][:, None].expand(-1, msg.size(1))
        return torch.zeros(6, msg.size(1)).scatter_add_(0, index, msg[keep])


def edge_inputs(gen, rank):
    n = int(torch.randint(0, 10, (1,), generator=gen))
    high = 7 if int(torch.randint(0, 8, (1,), generator=gen)) == 0 else 6
    w = torch.randn(n, generator=gen)
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    w = {0: -w.abs() - 1, 1: w.abs() + 1}.get(kind, w)
    return torch.randn(n, 3, generator=gen), torch.randint(0, high, (n,), generator=gen), w


class SelfLoopsMessagePassing(torch.nn.Module):
    """PyG's remove_self_loops, add_self_loops and a sum of messages: the
    kept columns of edge_index joined to the loops along dim 1, their rows
    gathering and indexing (edge_index's dtype not known when compiling)."""

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        keep = edge_index[0] != edge_index[1]
        loops = torch.arange(x.size(0)).unsqueeze(0).repeat(2, 1)
        ei = torch.cat([edge_index[:, keep], loops], dim=1)
        return torch.zeros_like(x).index_add_(0, ei[1], x[ei[0]] * 0.5)


class GcnNormalizedSum(torch.nn.Module):
    """PyG's gcn_norm: self loops removed and added back to the edges and
    to their weights (two cats), degrees by scatter_add_, messages summed by
    index_add_."""

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        n = x.size(0)
        w = (edge_index[0] + edge_index[1]).float() * 0.25 + 1.0
        keep = edge_index[0] != edge_index[1]
        loops = torch.arange(0, n).unsqueeze(0).repeat(2, 1)
        ei = torch.cat([edge_index[:, keep], loops], dim=1)
        w = torch.cat([w[keep], torch.ones(n)], dim=0)
        row, col = ei[0], ei[1]
        deg = torch.zeros(n).scatter_add_(0, col, w)
        norm = deg.pow(-0.5)[row] * w * deg.pow(-0.5)[col]
        return torch.zeros_like(x).index_add_(0, col, norm.view(-1, 1) * x[row])


def graph_inputs(gen, rank):
    n = int(torch.randint(1, 7, (1,), generator=gen))
    e = int(torch.randint(0, 12, (1,), generator=gen))
    high = n + 1 if int(torch.randint(0, 8, (1,), generator=gen)) == 0 else n
    return torch.randn(n, 3, generator=gen), torch.randint(0, high, (2, e), generator=gen)


class GridOfKeptPoints(torch.nn.Module):
    """Voxel occupancy: the kept points' cells written by their coordinates
    (negative ones count from the end; out of range raises)."""

    def forward(self, cells: Tensor, score: Tensor) -> Tensor:
        kept = cells[score > 0]
        grid = torch.zeros(4, 5, 2)
        grid[kept[:, 0], kept[:, 1]] = score[score > 0][:, None].expand(-1, 2)
        return grid


def cell_inputs(gen, rank):
    n = int(torch.randint(0, 10, (1,), generator=gen))
    wide = int(torch.randint(0, 8, (1,), generator=gen)) == 0
    cells = torch.randint(-6 if wide else -4, 7 if wide else 4, (n, 2), generator=gen)
    score = torch.randn(n, generator=gen)
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    return cells, {0: -score.abs() - 1, 1: score.abs() + 1}.get(kind, score)


class RepeatedQueries(torch.nn.Module):
    """DETR's denoising groups (DINO's prepare_for_cdn): the selected rows
    repeated as groups, each row widened, then a running sum over them and
    the groups' scores, weighted (repeat of bounded rows: repeat_rows)."""

    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        rows = x[score > 0].repeat(3, 2)
        labels = score[score > 0].repeat(2)
        return rows.cumsum(0).sum() + (labels.cumsum(0) * labels).sum()


class ProjectSelected(torch.nn.Module):
    """Selected rows through a matrix, normalized, and their cosine with a
    scaled copy: matmul row by row, F.normalize's expand_as of the rows'
    own norms, cosine_similarity along dim 1."""

    def forward(self, x: Tensor, score: Tensor) -> Tensor:
        w = torch.arange(9.0).view(3, -1) / 9.0
        rows = x[score > 0] @ w
        return (F.normalize(rows, dim=1) * 2.0).sum(0) + \
            F.cosine_similarity(rows, (x * 2.0 + 1.0)[score > 0], dim=1).sum()


class BincountSelected(torch.nn.Module):
    def forward(self, labels: Tensor, score: Tensor) -> Tensor:
        return torch.bincount(labels[score > 0], minlength=4)


class BincountWeighted(torch.nn.Module):
    """Must not touch: PyTorch returns an empty input's weighted counts as
    int64 zeros, a nonempty one's in the weights' dtype."""

    def forward(self, labels: Tensor, score: Tensor) -> Tensor:
        keep = labels != -1
        return torch.bincount(labels[keep], weights=score[keep], minlength=3)


class BincountNoMinlength(torch.nn.Module):
    """Must not touch: an empty selection has no bin, a padded one would."""

    def forward(self, labels: Tensor, score: Tensor) -> Tensor:
        return torch.bincount(labels[score > 0])


class PutAccumulate(torch.nn.Module):
    def forward(self, idx: Tensor, v: Tensor) -> Tensor:
        m = v > 0
        return torch.zeros(5).index_put((idx[m],), v[m], accumulate=True)


class PutCountInPlace(torch.nn.Module):
    def forward(self, idx: Tensor, v: Tensor) -> Tensor:
        out = torch.zeros(5)
        keep = v > 0
        out.index_put_((idx[keep],), torch.tensor(1.0), accumulate=True)
        return out


class PutValues(torch.nn.Module):
    def forward(self, idx: Tensor, v: Tensor) -> Tensor:
        m = v > 0
        return torch.full([5], -1.0).index_put((idx[m],), v[m])


class StoreInPlace(torch.nn.Module):
    def forward(self, idx: Tensor, v: Tensor) -> Tensor:
        out = torch.zeros(5)
        m = v > 0
        out[idx[m]] = v[m]
        return out


class CtcGreedyLength(torch.nn.Module):
    """Greedy CTC decoding: runs of the best label, blanks dropped (the
    selection of unique_consecutive's bounded values), as a count."""

    def forward(self, emission: Tensor, score: Tensor) -> Tensor:
        best = emission.argmax(-1)
        runs = torch.unique_consecutive(best)
        return runs[runs != 0].float().sum() + score.sum()


class CtcGreedyAlongDim(torch.nn.Module):
    """torchaudio's tutorial spelling, `dim=-1`: of a vector, the same runs
    (specialize-ranks tries the emission at rank 2)."""

    def forward(self, emission: Tensor, score: Tensor) -> Tensor:
        best = torch.argmax(emission, dim=-1)
        runs = torch.unique_consecutive(best, dim=-1)
        kept = runs[runs != 0]
        return (kept * 2 + 1).sum() + score.sum()


def ctc_inputs(gen, rank):
    frames = int(torch.randint(0, 12, (1,), generator=gen))
    emission = torch.randn(frames, 4, generator=gen)
    if int(torch.randint(0, 4, (1,), generator=gen)) == 0:
        emission[:, 0] += 10  # all blank
    return emission, torch.randn(3, generator=gen)


def index_inputs(gen, rank):
    n = int(torch.randint(0, 10, (1,), generator=gen))
    high = 6 if int(torch.randint(0, 8, (1,), generator=gen)) == 0 else 5
    idx = torch.randint(-5, high, (n,), generator=gen)  # negatives count from the end
    v = torch.randn(n, generator=gen)
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    return idx, {0: -v.abs() - 1, 1: v.abs() + 1}.get(kind, v)


def column_inputs(gen, rank):
    rows, cols = (int(v) for v in torch.randint(0, 5, (2,), generator=gen))
    shape = (rows, cols) if rank == 2 else (rows, 2, cols)
    x = torch.randn(shape, generator=gen)
    kind = int(torch.randint(0, 4, (1,), generator=gen))
    length = cols + (1 if kind == 3 and cols else 0)  # a mismatched mask
    score = torch.randn(length, generator=gen)
    score = {0: -score.abs() - 1, 1: score.abs() + 1}.get(kind, score)
    return x, score


def row_inputs(gen, rank):
    n = int(torch.randint(0, 10, (1,), generator=gen))
    score = torch.randn(n, generator=gen)
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    score = {0: -score.abs() - 1, 1: score.abs() + 1}.get(kind, score)
    return torch.randn(n, 3, generator=gen), score


def label_inputs(gen, rank):
    n = int(torch.randint(0, 12, (1,), generator=gen))
    labels = torch.randint(-1, 6, (n,), generator=gen)
    score = torch.randn(n, generator=gen)
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    score = {0: -score.abs() - 1, 1: score.abs() + 1}.get(kind, score)
    if kind == 1:
        labels = labels.clamp(min=0)  # everything kept: no negative bin
    return labels, score


class MaskedSelectInputMask(torch.nn.Module):
    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        return torch.masked_select(x, keep.unsqueeze(1).expand_as(x)).sum()


def mask_inputs(gen, rank):
    n = int(torch.randint(0, 12, (1,), generator=gen))
    x = torch.randn(n, 3, generator=gen)
    kind = int(torch.randint(0, 4, (1,), generator=gen))
    keep = torch.rand(n, generator=gen) < (0.0, 1.0, 0.5, 0.5)[kind]
    # bool and uint8 masks select alike. An int64 one, which masked_select
    # refuses, is not generated: normalize makes masked_select(x, m) of m's
    # shape x[m], which gathers by it (docs/passes.md, specialize-shapes).
    return x, keep.to((torch.bool, torch.bool, torch.bool, torch.uint8)[kind])


class StoreDerivedRows(torch.nn.Module):
    """NeRF: a depth per ray that hit, computed from selections by the
    mask and stored at it (bound's x[m] = v; the rank of the inputs
    versioned by specialize-ranks)."""

    def forward(self, weights: Tensor, z: Tensor) -> Tensor:
        hit = weights.sum(-1) > 1e-3
        w = weights[hit]
        depth = (w * z[hit]).sum(-1) / w.sum(-1)
        out = torch.zeros(weights.shape[0])
        out[hit] = depth
        return out


def ray_inputs(gen, rank):
    n = int(torch.randint(0, 10, (1,), generator=gen))
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    hits = torch.rand(n, 1, generator=gen) < (0.0, 1.0, 0.5)[kind]
    return torch.rand(n, 4, generator=gen) * hits, torch.rand(n, 4, generator=gen)


class StoreAtInputMask(torch.nn.Module):
    """ATSS: positives where the IoU passes its threshold and the anchor
    lies inside its box, `is_in` an input whose dtype the graph does not
    show (specialize-dtypes versions on it through `&`)."""

    def forward(self, ious: Tensor, is_in: Tensor) -> Tensor:
        thr = ious.mean(0) + ious.std(0)
        pos = (ious >= thr[None, :]) & is_in
        out = torch.full_like(ious, -1.0)
        out[pos] = ious[pos]
        return out.max(dim=1).values


def anchor_inputs(gen, rank):
    n = int(torch.randint(1, 10, (1,), generator=gen))
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    is_in = torch.rand(n, 5, generator=gen) < (0.0, 1.0, 0.5)[kind]
    return torch.rand(n, 5, generator=gen), is_in


class StackOfMasks(torch.nn.Module):
    """SAM: the stability of the masks whose predicted IoU passes, summed
    over dims -1 and -2 of a stack of masks (specialize-ranks tries rank 3)."""

    def forward(self, masks: Tensor, iou_pred: Tensor) -> Tensor:
        m = masks[iou_pred > 0.5]
        inter = (m > 1.0).sum((-1, -2)).float()
        union = (m > -1.0).sum((-1, -2)).float()
        return (inter / union.clamp(min=1.0)).sum()


def stack_inputs(gen, rank):
    n = int(torch.randint(0, 6, (1,), generator=gen))
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    iou = torch.rand(n, generator=gen)
    iou = {0: iou * 0.4, 1: iou * 0.4 + 0.6}.get(kind, iou)
    return torch.randn(n, 3, 4, generator=gen) * 2, iou


class GatherBySelectedIds(torch.nn.Module):
    """Features of the ids an input mask keeps, gathered by index_select:
    `ids` is an input whose dtype the graph does not show, and
    index_select takes only integer indices."""

    def forward(self, feats: Tensor, ids: Tensor, ok: Tensor) -> Tensor:
        return feats.index_select(0, ids[ok.to(torch.bool)]).sum(0)


def id_inputs(gen, rank):
    n = int(torch.randint(0, 9, (1,), generator=gen))
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    ok = torch.rand(n, generator=gen) < (0.0, 1.0, 0.5)[kind]
    return torch.randn(10, 4, generator=gen), torch.randint(0, 10, (n,), generator=gen), ok.long()


class TopkByCount(torch.nn.Module):
    """The top scores, as many as there are positive labels (a count read
    from data; specialize-ranks makes the scores a vector)."""

    def forward(self, scores: Tensor, labels: Tensor) -> Tensor:
        k = int((labels > 0).sum())
        return scores.topk(k).values.sum()


def count_inputs(gen, rank):
    n = int(torch.randint(0, 12, (1,), generator=gen))
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    labels = torch.randint(0, 3, (n,), generator=gen)
    labels = {0: labels * 0, 1: labels + 1}.get(kind, labels)
    return torch.randn(n, generator=gen), labels


class ConsecutiveRows(torch.nn.Module):
    """Runs of equal rows (unique_consecutive along dim 0: deduplicating
    consecutive boxes or frames), summed with the runs' lengths."""

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        u, counts = torch.unique_consecutive(x, return_counts=True, dim=0)
        return u.float().sum(0) + (counts * 2).sum() + w.sum()


def run_inputs(gen, rank):
    n = int(torch.randint(0, 10, (1,), generator=gen))
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    x = torch.randint(0, (1, 4, 2)[kind], (n, 2), generator=gen)
    return x, torch.randn(2, generator=gen)


class EventSpans(torch.nn.Module):
    """Onsets and offsets of the runs above zero, each a selection by its
    own mask: their difference lines the two up, and the spans long enough
    select the onsets by a mask of the broadcast count."""

    def forward(self, x: Tensor, w: Tensor) -> Tensor:
        up = (x[1:] > 0) & (x[:-1] <= 0)
        down = (x[1:] <= 0) & (x[:-1] > 0)
        onsets = torch.nonzero(up).squeeze(1)
        offsets = torch.nonzero(down).squeeze(1)
        lengths = offsets - onsets
        keep = lengths >= 2
        return onsets[keep].float().sum() + (lengths[keep] * w).sum()


def event_inputs(gen, rank):
    """Signals that start and end at or below zero (as many onsets as
    offsets) mostly; others start above zero or end above it (one count
    more than the other, which PyTorch raises on unless it is 1)."""
    n = int(torch.randint(0, 14, (1,), generator=gen))
    x = torch.randn(n, generator=gen)
    if n and int(torch.randint(0, 4, (1,), generator=gen)) != 0:
        x[0] = x[-1] = -1.0
    return x, torch.randn(1, generator=gen)


class ProductOfSelections(torch.nn.Module):
    """Two selections by masks of two inputs, multiplied: rows one by one,
    or the one row of a count of 1 over the other's."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return (x[x > 0] * y[y < 0]).sum(0)


def pair_inputs(gen, rank):
    n = int(torch.randint(0, 6, (1,), generator=gen))
    x = torch.randn(n, generator=gen)
    kind = int(torch.randint(0, 3, (1,), generator=gen))
    # y < 0 where x > 0 (equal counts), at one element only, or at random.
    y = {0: -x, 1: torch.where(x == x.max(), -1.0, 1.0) if n else x}.get(
        kind, torch.randn(n, generator=gen))
    return x, y


class PairsOfTwoMasks(torch.nn.Module):
    """Two selections by masks of two inputs stacked as pairs: stack takes
    parts of one length, so the second is fitted to the first's rows."""

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        pairs = torch.stack([x[x > 0], y[y < 0]], 1)
        return pairs.prod(1).sum() + pairs[:, 1].cumsum(0).abs().sum()


class SegmentOffsets(torch.nn.Module):
    """Offsets of the groups of equal labels (a leading 0 by F.pad, CSR
    style), each group's length read back from neighbouring offsets."""

    def forward(self, labels: Tensor, w: Tensor) -> Tensor:
        _, counts = torch.unique(labels, return_counts=True)
        offsets = F.pad(counts.cumsum(0), (1, 0))
        lengths = offsets[1:] - offsets[:-1]
        return (lengths * lengths).sum() + offsets[::2].sum() + w.sum()


class PointerFromCounts(torch.nn.Module):
    """PyG's `ptr`: a zero made like the counts, then their running sum."""

    def forward(self, labels: Tensor, w: Tensor) -> Tensor:
        _, counts = torch.unique(labels, return_counts=True)
        ptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
        return (ptr[1:] * 2 - ptr[:-1]).sum() + w.sum()


class GroupMeans(torch.nn.Module):
    """Pointcept's grid pooling: a sum per group of equal keys written at
    unique's inverse into rows made per group, then each group's mean."""

    def forward(self, labels: Tensor, w: Tensor) -> Tensor:
        keys, inverse, counts = torch.unique(labels, return_inverse=True,
                                             return_counts=True)
        sums = torch.zeros(keys.shape[0], 2).index_add_(
            0, inverse, torch.stack([w, w * w], 1))
        return (sums / counts.unsqueeze(1)).sum(0) + keys.sum()


CASES = [
    # name, module, inputs, rank, sync points (before, after)
    ("masked-select-input-mask", MaskedSelectInputMask(), mask_inputs, 1, (1, 0)),
    ("column-sum", ColumnSum(), column_inputs, 2, (1, 0)),
    ("column-mean-keepdim", ColumnMeanKeepdim(), column_inputs, 2, (1, 0)),
    ("column-var-last-dim", ColumnVarLastDim(), column_inputs, 2, (1, 0)),
    ("column-prod-of-three", ColumnProdOfThree(), column_inputs, 3, (1, 0)),
    ("column-max", ColumnMax(), column_inputs, 2, (1, 0)),
    ("column-scaled-max", ColumnScaledMax(), column_inputs, 2, (1, 0)),
    ("column-attention", ColumnAttention(), column_inputs, 2, (1, 0)),
    ("index-select-columns-mean", IndexSelectColumnsMean(), column_inputs, 2, (1, 0)),
    ("integer-columns-logsumexp", IntegerColumnsLogsumexp(), column_inputs, 3, (1, 0)),
    ("column-kept", ColumnKept(), column_inputs, 2, (1, 1)),
    ("last-selected-row", LastSelectedRow(), row_inputs, 2, (1, 0)),
    ("first-true-position", FirstTruePosition(), row_inputs, 2, (1, 0)),
    ("masked-select-as-rows", MaskedSelectAsRows(), row_inputs, 2, (1, 0)),
    ("distill-selected", DistillSelected(), row_inputs, 2, (2, 0)),
    ("scatter-sum-kept-edges", ScatterSumKeptEdges(), edge_inputs, 2, (2, 0)),
    ("self-loops-message-passing", SelfLoopsMessagePassing(), graph_inputs, 2, (2, 0)),
    ("gcn-normalized-sum", GcnNormalizedSum(), graph_inputs, 2, (5, 0)),
    ("grid-of-kept-points", GridOfKeptPoints(), cell_inputs, 2, (3, 0)),
    ("project-selected", ProjectSelected(), row_inputs, 2, (2, 0)),
    ("repeated-queries", RepeatedQueries(), row_inputs, 2, (2, 0)),
    # bincount's own length stays data-dependent: one sync point of its own.
    ("bincount-selected", BincountSelected(), label_inputs, 1, (2, 1)),
    # Weighted: kept; its two selections share one mask, cut once.
    ("bincount-weighted", BincountWeighted(), label_inputs, 1, (3, 2)),
    ("bincount-no-minlength", BincountNoMinlength(), label_inputs, 1, (2, 2)),
    ("put-accumulate", PutAccumulate(), index_inputs, 1, (3, 0)),
    ("put-count-in-place", PutCountInPlace(), index_inputs, 1, (2, 0)),
    ("put-values", PutValues(), index_inputs, 1, (3, 0)),
    ("store-in-place", StoreInPlace(), index_inputs, 1, (3, 0)),
    ("ctc-greedy-length", CtcGreedyLength(), ctc_inputs, 2, (2, 0)),
    ("ctc-greedy-along-dim", CtcGreedyAlongDim(), ctc_inputs, 2, (2, 0)),
    ("store-derived-rows", StoreDerivedRows(), ray_inputs, 2, (3, 0)),
    ("store-at-input-mask", StoreAtInputMask(), anchor_inputs, 2, (2, 0)),
    ("stack-of-masks", StackOfMasks(), stack_inputs, 3, (1, 0)),
    ("gather-by-selected-ids", GatherBySelectedIds(), id_inputs, 1, (1, 0)),
    ("topk-by-count", TopkByCount(), count_inputs, 1, (1, 0)),
    ("consecutive-rows", ConsecutiveRows(), run_inputs, 2, (1, 0)),
    ("event-spans", EventSpans(), event_inputs, 1, (4, 0)),
    ("product-of-selections", ProductOfSelections(), pair_inputs, 1, (2, 0)),
    ("pairs-of-two-masks", PairsOfTwoMasks(), pair_inputs, 1, (2, 0)),
    ("segment-offsets", SegmentOffsets(), label_inputs, 1, (1, 0)),
    ("pointer-from-counts", PointerFromCounts(), label_inputs, 1, (1, 0)),
    ("group-means", GroupMeans(), label_inputs, 1, (1, 0)),
]


# Cases whose original raises on an empty selection (a max of nothing, a
# row past the live ones): docs/passes.md says what the rewrite returns.
RAISES_ON_EMPTY = {"column-max", "column-scaled-max", "last-selected-row",
                   "first-true-position"}

# Cases whose original raises where two counts neither match nor are 1 (a
# broadcast of [3] with [2], or onsets[keep] with keep of offsets' count):
# the rewrite gives padding there (DESIGN.md's contract). Each says whether
# the counts of its selections are such.
def _spans_mismatch(x, w):
    onsets = int(((x[1:] > 0) & (x[:-1] <= 0)).sum())
    offsets = int(((x[1:] <= 0) & (x[:-1] > 0)).sum())
    return onsets != offsets and offsets != 1


def _product_mismatch(x, y):
    a, b = int((x > 0).sum()), int((y < 0).sum())
    return a != b and 1 not in (a, b)


def _pairs_mismatch(x, y):
    return int((x > 0).sum()) != int((y < 0).sum())


MISMATCHED_COUNTS = {"event-spans": _spans_mismatch,
                     "product-of-selections": _product_mismatch,
                     "pairs-of-two-masks": _pairs_mismatch}


@pytest.mark.parametrize("name,module,inputs,rank,syncs", CASES, ids=[c[0] for c in CASES])
def test_selection_consumer_equals_original(staticify, save, tmp_path, name, module, inputs,
                                            rank, syncs):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--static-forms")
    method = staticify.report(path, "--static-forms")["methods"][0]
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == syncs
    original, rewritten = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    ran = 0
    for _ in range(TRIALS):
        args = inputs(gen, rank)
        want, want_error = run_safely(original, args)
        got, got_error = run_safely(rewritten, args)
        if want_error and not got_error and name in RAISES_ON_EMPTY:
            # docs/passes.md: a max over an empty selection, where PyTorch
            # raises, returns an element of the first row (or 0); a row past
            # the live ones, zeros.
            assert not (args[1] > 0).any(), (name, args)
            continue
        if want_error and not got_error and name in MISMATCHED_COUNTS:
            assert MISMATCHED_COUNTS[name](*args), (name, args)
            continue
        assert want_error == got_error or (want_error and got_error), (name, args)
        if want_error:
            continue
        ran += 1
        assert got.dtype == want.dtype and got.shape == want.shape, (name, args, want, got)
        torch.testing.assert_close(got, want, equal_nan=True, atol=1e-5, rtol=1e-5)
    assert ran > TRIALS // 3, ran  # most inputs do not raise


def test_consecutive_rows_need_no_version_by_rank(staticify, save):
    """unique_consecutive along dim 0 of a matrix is static by itself: no
    method versioned on a rank whose fallback (the original, with its host
    read) the matrix would take."""
    after = staticify.report(save(ConsecutiveRows()))["methods"][0]["after"]
    assert (after["sync_points"], after["fallback_sync_points"]) == (0, 0)


def test_a_forms_own_sync_point_gives_its_reason(staticify, save):
    """bincount of selected labels keeps one sync point of its own (its
    length is the largest live label's): the report says why, as for every
    root left after rewriting."""
    report = staticify.report(save(BincountSelected()), "--static-forms")
    left = [f for f in report["methods"][0]["findings"]
            if f["role"] == "root" and f["action"] in ("kept", "introduced")]
    assert [f["op"] for f in left] == ["aten::bincount"]
    assert left[0]["reason"].startswith("pipeline: a form a rewrite emitted keeps it: "
                                        "'aten::bincount' returns max(input) + 1 bins"), left[0]
