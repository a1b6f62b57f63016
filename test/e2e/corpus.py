"""The rewrite corpus: small scripted programs, each with the inputs to try
and what staticify must do with it.

Each case is (name, module, inputs, expect) where inputs(gen, kind) returns a
tuple of arguments for a torch.Generator and a mask kind ("random", "none",
"all"), and expect is "static" (every finding rewritten, zero left) or a
rule name that must *not* apply ("kept:<rule>"), the graph left dynamic."""
from typing import List, Tuple

import torch

import idioms


def mask_like(shape, gen, kind):
    """A float tensor t whose `t > 0` is the mask: none, all, or random.
    (TorchScript graphs carry no dtypes, so masks come from comparisons in
    the model, as they do in real models.)"""
    if kind == "none":
        return -torch.rand(shape, generator=gen) - 0.1
    if kind == "all":
        return torch.rand(shape, generator=gen) + 0.1
    return torch.rand(shape, generator=gen) - 0.5


def floats(shape, gen):
    return torch.randn(shape, generator=gen)


# --- masked-reduce --------------------------------------------------------

class SumMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].sum()


class MeanMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].mean()


class ProdMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].prod()


class AmaxMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].amax()


class MinMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].min()


class AnyAllMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return (x[m] > 0.5).any(), (x[m] > -3.0).all()


class CountNonzeroMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return torch.count_nonzero(x[m])


class NormMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].norm(), x[m].norm(1.0)


class LogsumexpMask(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return torch.logsumexp(x[m], 0)


class MaskedSelectSum(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return torch.masked_select(x, m).sum()


class RowMaskSumDim0(torch.nn.Module):
    """A 1-D mask over the rows of a 3-D tensor, reduced along dim 0."""

    def forward(self, x, t):
        m = t > 0
        return x[m].sum(0), x[m].mean(0, keepdim=True)


class RowMaskMaxDim0(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m].amax(0), torch.max(x[m], 0)[0]


class IntSumMask(torch.nn.Module):
    """Integer and bool sums keep PyTorch's promotion to int64."""

    def forward(self, x, t):
        m = t > 0
        return x[m].sum(), (x > 0)[m].sum()


class ByteMaskSum(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return x[m.to(torch.uint8)].sum()


class NumelOfMask(torch.nn.Module):
    """The count would stay lifted up to torch.tensor(), a host value (and a
    CPU tensor), and be read there once: one sync for the original's one,
    mid-computation, so bound keeps the original and says why."""

    def forward(self, x, t):
        m = t > 0
        return torch.tensor(x[m].numel())


class SumDim1Kept(torch.nn.Module):
    """Reducing only a trailing dim keeps the data-dependent count: kept."""

    def forward(self, x, t):
        m = t > 0
        return x[m].sum(1)


class MaxIndicesKept(torch.nn.Module):
    """max's indices refer to the selected rows: bounded, the selection would
    be cut to its count for max, a sync for the original's one: kept."""

    def forward(self, x, t):
        m = t > 0
        return torch.max(x[m], 0)


class FunctionalNormKept(torch.nn.Module):
    """torch.norm builds its dims with a loop at run time: bounded, the
    selection would be cut to its count for it, a sync for the original's
    one: kept, and said."""

    def forward(self, x, t):
        m = t > 0
        return torch.norm(x[m], 1.0)


class IntegerIndexUntouched(torch.nn.Module):
    """A gather by integer indices is static already: nothing to do."""

    def forward(self, x, i):
        return x[i.long()].sum()


class UnknownIndexReported(torch.nn.Module):
    """x[i] with i of unknown dtype may be a mask: the method is versioned on
    i's dtype (specialize-dtypes), static when it is bool, the original (an
    integer gather here) otherwise."""

    def forward(self, x, i):
        return x[i].sum()


# --- mask-store ---------------------------------------------------------

class StoreScalar(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        y = x.clone()
        y[m] = 0.0
        return y


class StoreSeesAlias(torch.nn.Module):
    """The store is in place: a view taken before sees it."""

    def forward(self, x, t):
        m = t > 0
        y = x.clone()
        v = y.view(-1)
        y[m] = -1.0
        return v


class StoreZeroDimTensor(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        y = x.clone()
        y[m] = x.sum()
        return y


class StoreKeptForVectorValue(torch.nn.Module):
    """A value that is neither 0-d nor a selection by the same mask: kept."""

    def forward(self, x, t, v):
        m = t > 0
        y = x.clone()
        y[m] = v
        return y


# --- mask-propagate ------------------------------------------------------

class ChainSameMask(torch.nn.Module):
    """Seed 002 example 2's shape on one base: (x[m] * 2 + x[m]).sum()."""

    def forward(self, x, t):
        m = t > 0
        return (x[m] * 2.0 + x[m]).sum()


class NestedMasks(torch.nn.Module):
    """x[m][x[m] > 0]: the two masks combine with &."""

    def forward(self, x, t):
        m = t > 0
        y = x[m]
        return y[y > 0].sum()


class GatherTwoBases(torch.nn.Module):
    """Seed 002 example 2 on 2-D masks: where(m)[0] repeats rows."""

    def forward(self, a, b, t):
        i = torch.where(t > 0)[0]
        return (torch.gather(a, 0, i) * torch.gather(b, 0, i)).sum()


class IndexSelectByWhere(torch.nn.Module):
    def forward(self, x, t):
        i = torch.where(t > 0)[0]
        return torch.index_select(x, 0, i).amax(0)


class DifferentBases(torch.nn.Module):
    """x[m] * y[m] with x, y of unrelated ranks: mask-propagate leaves it
    (it cannot prove the ranks equal); bound combines the padded rows
    behind a rank guard, whose fallback computes the original mul when the
    ranks differ (x of (n, 1) and y of (n,) give a (k, k) product)."""

    def forward(self, x, y, t):
        m = t > 0
        return (x[m] * y[m]).sum()


class CrossEntropyWeighted(torch.nn.Module):
    """torchvision's fastrcnn_loss / Hugging Face's token classification:
    cross_entropy over the selected rows, with class weights and an
    ignore_index that also occurs among the kept rows (the mean's
    denominator counts only the rows not ignored, weighted)."""

    def forward(self, x, t, target, weight):
        m = t > 0
        return torch.nn.functional.cross_entropy(x[m], target[m], weight=weight, ignore_index=2)


class CrossEntropyProbabilities(torch.nn.Module):
    """cross_entropy with class probabilities (label-smoothed soft targets):
    no index is ignored; the target's dtype is known only at run time."""

    def forward(self, x, t, probs):
        m = t > 0
        return torch.nn.functional.cross_entropy(x[m], probs[m], label_smoothing=0.1)


class NllLossRows(torch.nn.Module):
    """nll_loss per row (reduction none) of selected rows, then their sum:
    the padding's classes are never read."""

    def forward(self, x, t, target):
        m = t > 0
        lp = torch.log_softmax(x, dim=1)
        return torch.nn.functional.nll_loss(lp[m], target[m], reduction="none").sum()


class EqualOpsAcrossAWrite(torch.nn.Module):
    """One expression written twice with an in-place write between: the two
    read two values and are not one (normalize merges equal ops)."""

    def forward(self, x, m):
        y = x.clone()
        before = (y > 0).float().sum()
        y.add_(1.0)
        after = (y > 0).float().sum()
        return before, after, y[m > 0].sum()


class MaskedSelectBroadcastCount(torch.nn.Module):
    """masked_select broadcasts: x of (2, n) by m of (n,) selects each
    element twice, so its count is not x[m]'s (a + b broadcasts b's one
    element where m holds once)."""

    def forward(self, x, s):
        keep = s > 0
        a = x.masked_select(keep)
        b = s[keep]
        return a + b


class ScatterAddOfSelection(torch.nn.Module):
    """PyG-style segment sums of selected values: scatter_add into a vector
    by selected segment ids (whose dtype TorchScript does not record)."""

    def forward(self, x, t, seg):
        m = t > 0
        return torch.zeros(8).scatter_add(0, seg[m], x[m])


class IndexAddOfSelection(torch.nn.Module):
    """Selected rows added into their segments' rows (index_add)."""

    def forward(self, x, t, seg):
        m = t > 0
        return torch.zeros(8, 3).index_add(0, seg[m], x[m])


class HistcOfSelection(torch.nn.Module):
    """A histogram of the valid values over a fixed range."""

    def forward(self, x, t):
        return torch.histc(x[t > 0], bins=5, min=-1.0, max=1.0)


class HistcOfDataRangeKept(torch.nn.Module):
    """histc with min == max bins over the data's own range, which padding
    would widen: kept."""

    def forward(self, x, t):
        return torch.histc(x[t > 0], bins=5)


def segments(n, rows=()):
    """x of (n, *rows), a mask source of (n,), and int64 segment ids in [0, 8)."""
    return lambda g, k: (floats((n,) + tuple(rows), g), mask_like((n,), g, k),
                         torch.randint(0, 8, (n,), generator=g))


def at_most_one(n):
    """x of (2, n) and s with at most one positive element (none for kind
    "none")."""
    def make(g, kind):
        s = -torch.rand(n, generator=g) - 0.1
        if kind != "none":
            s[torch.randint(0, n, (1,), generator=g)] = 1.0
        return floats((2, n), g), s
    return make


class FullOfCount(torch.nn.Module):
    """detectron2's proposal count for logging: a tensor filled with a count
    read from data (new_full) and one of its float (full)."""

    def forward(self, x):
        n = int((x > 0).sum())
        return x.new_full((2,), n) + torch.full((2,), float(n) / 2)


class LogSoftmaxLastDim(torch.nn.Module):
    """fairseq's MaskedLmLoss: log_softmax(logits[masked], dim=-1) where the
    graph does not record the logits' rank: -1 is a trailing dim for rank 2
    (the padded rows, behind a rank guard) and dim 0 for a vector (the
    guard's fallback: over all valid elements)."""

    def forward(self, x, t):
        m = t > 0
        return torch.log_softmax(x[m], dim=-1).sum()


class IntegerDivisionKept(torch.nn.Module):
    """// by integers that are 0 on unselected elements (and only there):
    moved past the mask it would divide by them: kept."""

    def forward(self, x, t):
        m = t > 0
        d = (t * 10).long()
        d = torch.where(m, d.clamp(min=1), torch.zeros_like(d))
        return (x[m] // d[m]).sum()


class IntegerDivisionByConstant(torch.nn.Module):
    """// by a non-zero constant never raises: the mask moves past it."""

    def forward(self, x, t):
        m = t > 0
        return (x[m] // 3).sum()


# --- if-convert ---------------------------------------------------------

class IfOnTensor(torch.nn.Module):
    def forward(self, x, t):
        if bool(t.sum() > 0):
            y = x * 2.0
        else:
            y = x * 3.0
        return y


class IfElifChain(torch.nn.Module):
    def forward(self, x, t):
        s = t.sum()
        if bool(s > 1.0):
            y = x.masked_fill(x > 0, 1.0)
        elif bool(s > -1.0):
            y = x.clone()
        else:
            y = x.masked_fill(x < 0, -1.0)
        return y


class IfTupleOutputs(torch.nn.Module):
    def forward(self, x, t):
        if bool(t.mean() > 0):
            a, b = x + 1.0, x - 1.0
        else:
            a, b = x - 1.0, x + 1.0
        return a, b


class IfPrintKept(torch.nn.Module):
    def forward(self, x, t):
        if bool(t.sum() > 0):
            print("positive")
            y = x * 2.0
        else:
            y = x
        return y


class IfMutatesKept(torch.nn.Module):
    def forward(self, x, t):
        y = x.clone()
        if bool(t.sum() > 0):
            y.add_(1.0)
        return y


class IfShapesGuarded(torch.nn.Module):
    """Branch results whose shapes agree only for some inputs (x[:3] and x):
    if-convert selects behind a guard on their sizes, dtypes and devices;
    for x of 3 rows where() is taken, for more the guard's fallback picks
    one by bool(), as the original did."""

    def forward(self, x, t):
        if bool(t.sum() > 0):
            y = x[:3]
        else:
            y = x
        return y


class DataAssertKept(torch.nn.Module):
    def forward(self, x, t):
        if bool(t.sum() > 100.0):
            raise ValueError("too large")
        return x * 2.0


# --- lift-scalars -------------------------------------------------------

class LiftIntArithmetic(torch.nn.Module):
    def forward(self, x, t):
        n = int((t > 0).sum())
        k = min(n, 5) * 2 - 1
        return x * k


class LiftFloatComparison(torch.nn.Module):
    def forward(self, x, t):
        s = float(t.sum())
        if s > 0.5:
            y = x * s
        else:
            y = x * 0.5
        return y


class LiftCountsThroughIfs(torch.nn.Module):
    """The sampler's count logic, feeding a value instead of a size."""

    def forward(self, x, t):
        pos = int((t > 0).sum())
        neg = int((t <= 0).sum())
        num_pos = min(pos, 5)
        num_neg = min(neg, 5)
        if num_neg < 5:
            num_pos = 10 - num_neg
        elif num_pos < 5:
            num_neg = 10 - num_pos
        return x * num_pos + num_neg


class LiftItem(torch.nn.Module):
    """x * t.sum().item(), and int(item()) in arithmetic."""

    def forward(self, x, t):
        s = t.sum().item()
        k = int((t > 0).sum().item()) + 1
        return x * s + k


class LiftItemOfInts(torch.nn.Module):
    """item() of an integer tensor stays an int: x_float * int keeps x's
    dtype, and so does the lifted form."""

    def forward(self, x, t):
        n = (t > 0).sum().item()
        return x.to(torch.float16) * n


class LiftNumelOfWhere(torch.nn.Module):
    """numel() of a data-dependent tensor: the mask's count, on the device."""

    def forward(self, x, t):
        n = torch.where(t > 0)[0].numel()
        k = torch.nonzero(t > 0.25).size(0)
        return x * min(n, 5) + k


class LiftNumelOfNonzero(torch.nn.Module):
    """detectron2/FCOS style: `num_pos = torch.nonzero(labels > 0).numel()`
    of a 2-D mask (count times rank), and a branch on it into two unary ops
    that keep the dtype: lifted, and selected with no guard."""

    def forward(self, x, t):
        num_pos = torch.nonzero(t.reshape(-1, 2) > 0).numel()
        if num_pos < 6:
            y = torch.relu(x)
        else:
            y = torch.neg(x)
        return y * 2 + num_pos


class LiftToSizeKept(torch.nn.Module):
    """n is a size (randperm): lift-scalars keeps it; bound makes it static
    (a count of a mask lies in [0, t.numel()])."""

    def forward(self, x, t):
        n = int((t > 0).sum())
        return torch.randperm(n).sum() + x


class LiftReturnedKept(torch.nn.Module):
    """A count returned as an int: lifted, then read once at the return."""

    def forward(self, x, t) -> int:
        return int((t > 0).sum()) + 1


# --- soundness regressions (each once a wrong rewrite) --------------------

class ChainedWhereMasks(torch.nn.Module):
    """The second mask is the first gather's result: rewriting the first
    gather before the second read its mask was a use after free."""

    def forward(self, x, t):
        f = t[torch.where(t > 0)[0]]
        return x[torch.where(f)[0]].sum(0)


class WriteToSelection(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        s = x[m]
        s.clamp_(min=0.0)
        return s.sum()


class RestoreAfterWrite(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        y = x.clone()
        old = y[m]
        y.mul_(2.0)
        y[m] = old
        return y


class MaskWrittenAfterWhere(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        m[0] = False
        return x[torch.where(m)[0]].sum()


class MaxOfTwo(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        return torch.max(x[m], torch.zeros(1))


class DivisionInBranch(torch.nn.Module):
    def forward(self, x, t):
        n = int((t > 0).sum())
        if n > 0:
            q = 10 // n
        else:
            q = 0
        return x * q


class IndexInBranch(torch.nn.Module):
    """x[7] of 5 rows raises where taken: its shield checks the index on the
    host, and out of range asks the condition there (if-convert)."""

    def forward(self, x, t):
        if bool(t.sum() > 0):
            y = x[7]
        else:
            y = x[0]
        return y


class MaskedSelectBranches(torch.nn.Module):
    def forward(self, x, t):
        if bool(t.sum() > 0):
            y = torch.masked_select(x, x > 0)
        else:
            y = torch.masked_select(x, x < 0)
        return y


class WiderMaskInBranch(torch.nn.Module):
    def forward(self, x, t):
        m2 = t.reshape(2, 4) > 0
        if bool(t.sum() > 0):
            y = x.masked_fill(m2, 0.0)
        else:
            y = x.expand(2, 4)
        return y


class MaskInLoop(torch.nn.Module):
    def forward(self, x, t):
        m = t > 0
        s = torch.zeros(())
        for i in range(3):
            s = s + x[torch.where(m)[0]].sum()
            m = m & (x > float(i) - 1.0)
        return s


class WhereWithLiftedFloat(torch.nn.Module):
    def forward(self, x, t):
        v = float(t.sum())
        return torch.where(x > 0, x.double(), v)


class IntItemWithBoolMask(torch.nn.Module):
    def forward(self, x, t):
        n = t.to(torch.int32).abs().max().item()
        return (x > 0) * n


class FloorDivByLifted(torch.nn.Module):
    def forward(self, x, t):
        n = int((t > 0).sum())
        return torch.div(x, n, rounding_mode="floor")


class BranchResultMutated(torch.nn.Module):
    def forward(self, x, t):
        y = x.clone()
        if bool(t.sum() > 0):
            z = y
        else:
            z = y.clone()
        z.add_(1.0)
        return y


class ZeroDimMaskWhere(torch.nn.Module):
    def forward(self, x, t):
        return x[torch.where(t.sum() > 0)[0]].sum()


# --- several selections by one mask (bound) ------------------------------

class MaskedAccuracy(torch.nn.Module):
    """In the style of Hugging Face's and torchmetrics' token accuracy:
    predictions against targets at the positions a mask keeps, two
    selections by one mask compared elementwise. Both come from one tensor
    here, so their ranks are provably equal; with unrelated inputs they are
    not, and bound guards on the ranks (see DifferentBases)."""

    def forward(self, x, t):
        m = t > 0
        pred = (t > 0.5).long()
        tgt = (t * 2).round().long()
        return (pred[m] == tgt[m]).float().mean()


class ConfusionIndices(torch.nn.Module):
    """In the style of torchvision's segmentation reference
    (`ConfusionMatrix.update`): `target * C + pred` over the valid pixels
    (of one rank, as above)."""

    def forward(self, x, t):
        m = t > 0
        pred = (t * 3).long().clamp(0, 4)
        tgt = (t * 5).long().clamp(0, 4)
        return (tgt[m] * 5 + pred[m]).sum()


class StdOfSelection(torch.nn.Module):
    """A threshold from the statistics of the valid entries (OHEM and
    outlier clipping in segmentation losses): std and biased var of x[m]."""

    def forward(self, x, t):
        m = t > 0
        return x[m].std() + torch.var(x[m], unbiased=False)


class StdOfRowsDim0(torch.nn.Module):
    def forward(self, x, t):
        return x[t > 0].std(0)


# --- token losses of real projects: idioms.py's fairseq and Hugging Face ones -----

def token_inputs(vocab, pad):
    """logits [4, 6, vocab] and targets with `pad` where kind says: none
    padded, all padded, or random."""
    def make(g, kind):
        logits = torch.randn(4, 6, vocab, generator=g)
        target = torch.randint(0, vocab, (4, 6), generator=g)
        target[target == pad] = 0
        drop = {"none": torch.zeros(4, 6), "all": torch.ones(4, 6)}.get(
            kind, torch.rand(4, 6, generator=g))
        target[drop > 0.5] = pad
        return logits, target
    return make


def _1d(n):
    return lambda g, k: (floats((n,), g), mask_like((n,), g, k))


def _rows(shape):
    return lambda g, k: (floats(shape, g), mask_like(shape[:1], g, k))


def _same(shape):
    return lambda g, k: (floats(shape, g), mask_like(shape, g, k))


CASES = [
    ("fairseq-label-smoothed-nll", idioms.FairseqLabelSmoothed(), token_inputs(13, 1), "static"),
    ("hf-ignored-tokens", idioms.HFIgnoreIndexLoss(), token_inputs(11, -100), "static"),
    ("masked-accuracy", MaskedAccuracy(), _1d(40), "static"),
    ("std-of-selection", StdOfSelection(), _1d(30), "static"),
    ("std-of-rows-dim0", StdOfRowsDim0(), _rows((9, 4)), "static"),
    ("confusion-indices", ConfusionIndices(), _same((6, 7)), "static"),
    ("sum-mask", SumMask(), _1d(50), "static"),
    ("sum-mask-2d-over-3d", SumMask(), lambda g, k: (floats((4, 5, 3), g), mask_like((4, 5), g, k)), "static"),
    ("mean-mask", MeanMask(), _same((6, 7)), "static"),
    ("prod-mask", ProdMask(), _1d(20), "static"),
    ("amax-mask", AmaxMask(), _same((5, 4)), "static"),
    ("min-mask", MinMask(), _1d(30), "static"),
    ("any-all-mask", AnyAllMask(), _1d(40), "static"),
    ("count-nonzero-mask", CountNonzeroMask(), lambda g, k: (torch.randint(0, 3, (40,), generator=g).float(), mask_like((40,), g, k)), "static"),
    ("norm-mask", NormMask(), _1d(40), "static"),
    ("logsumexp-mask", LogsumexpMask(), _1d(40), "static"),
    ("masked-select-sum", MaskedSelectSum(), _same((3, 8)), "static"),
    ("rows-sum-mean-dim0", RowMaskSumDim0(), _rows((6, 3, 2)), "static"),
    ("rows-amax-max-dim0", RowMaskMaxDim0(), _rows((6, 3)), "static"),
    ("int-and-bool-sum", IntSumMask(), lambda g, k: (torch.randint(-5, 5, (30,), generator=g), mask_like((30,), g, k)), "static"),
    ("byte-mask-sum", ByteMaskSum(), _1d(30), "static"),
    ("numel-of-mask", NumelOfMask(), _same((4, 6)), "kept:bound"),
    ("sum-dim1-kept", SumDim1Kept(), _rows((6, 3)), "materialized"),
    ("max-indices-kept", MaxIndicesKept(), _rows((6, 3)), "static"),
    ("functional-norm-kept", FunctionalNormKept(), _1d(20), "kept:bound"),
    ("integer-index-untouched", IntegerIndexUntouched(), lambda g, k: (floats((10,), g), torch.randint(0, 10, (7,), generator=g)), "untouched"),
    ("unknown-index-versioned", UnknownIndexReported(), lambda g, k: (floats((10,), g), torch.randint(0, 10, (7,), generator=g)), "static"),
    ("unknown-index-versioned-bool", UnknownIndexReported(), lambda g, k: (floats((10,), g), mask_like((10,), g, k) > 0), "static"),
    ("store-scalar", StoreScalar(), _same((5, 5)), "static"),
    ("store-sees-alias", StoreSeesAlias(), _same((4, 3)), "static"),
    ("store-0d-tensor", StoreZeroDimTensor(), _1d(20), "static"),
    ("chain-same-mask", ChainSameMask(), _1d(40), "static"),
    ("nested-masks", NestedMasks(), _same((5, 6)), "static"),
    ("gather-two-bases-2d-mask", GatherTwoBases(), lambda g, k: (floats((12,), g), floats((12,), g), mask_like((8, 3), g, k)), "static"),
    ("index-select-by-where", IndexSelectByWhere(), lambda g, k: (floats((9, 4), g), mask_like((9,), g, k)), "static"),
    ("different-bases-guarded", DifferentBases(), lambda g, k: (floats((6,), g), floats((6,), g), mask_like((6,), g, k)), "static"),
    ("different-ranks-fallback", DifferentBases(), lambda g, k: (floats((6, 1), g), floats((6,), g), mask_like((6,), g, k)), "static"),
    ("cross-entropy-weighted", CrossEntropyWeighted(), lambda g, k: (floats((8, 4), g), mask_like((8,), g, k), torch.randint(0, 4, (8,), generator=g), torch.rand(4, generator=g) + 0.5), "static"),
    ("cross-entropy-probabilities", CrossEntropyProbabilities(), lambda g, k: (floats((8, 4), g), mask_like((8,), g, k), torch.softmax(floats((8, 4), g), 1)), "static"),
    ("nll-loss-rows", NllLossRows(), lambda g, k: (floats((8, 5), g), mask_like((8,), g, k), torch.randint(0, 5, (8,), generator=g)), "static"),
    ("equal-ops-across-a-write", EqualOpsAcrossAWrite(), _1d(20), "static"),
    ("masked-select-broadcast-count", MaskedSelectBroadcastCount(), at_most_one(6), "safe"),
    ("full-of-count", FullOfCount(), lambda g, k: (mask_like((20,), g, k),), "static"),
    ("log-softmax-rows", LogSoftmaxLastDim(), lambda g, k: (floats((7, 5), g), mask_like((7,), g, k)), "static"),
    ("log-softmax-vector-fallback", LogSoftmaxLastDim(), lambda g, k: (floats((7,), g), mask_like((7,), g, k)), "static"),
    ("integer-division-kept", IntegerDivisionKept(), lambda g, k: (torch.randint(-9, 9, (20,), generator=g), mask_like((20,), g, k)), "kept:mask-propagate"),
    ("integer-division-by-constant", IntegerDivisionByConstant(), lambda g, k: (torch.randint(-9, 9, (20,), generator=g), mask_like((20,), g, k)), "static"),
    ("if-on-tensor", IfOnTensor(), _same((4, 4)), "static"),
    ("if-elif-chain", IfElifChain(), _same((4, 4)), "static"),
    ("if-tuple-outputs", IfTupleOutputs(), _same((3, 5)), "static"),
    ("if-print-kept", IfPrintKept(), _same((3,)), "kept:if-convert"),
    # branch-writes: the add_ computed out of place, written back after the
    # if, which if-convert then runs both ways.
    ("if-mutates-kept", IfMutatesKept(), _same((3,)), "static"),
    ("if-shapes-guarded", IfShapesGuarded(), _same((3,)), "static"),
    ("if-shapes-guarded-fallback", IfShapesGuarded(), _same((6,)), "static"),
    ("data-assert-kept", DataAssertKept(), _same((6,)), "kept:if-convert"),
    ("lift-int-arithmetic", LiftIntArithmetic(), _same((8,)), "static"),
    ("lift-float-comparison", LiftFloatComparison(), _same((8,)), "static"),
    ("lift-counts-through-ifs", LiftCountsThroughIfs(), _same((12,)), "static"),
    ("lift-item", LiftItem(), _same((8,)), "static"),
    ("lift-item-of-ints", LiftItemOfInts(), _same((8,)), "static"),
    ("lift-numel-of-where", LiftNumelOfWhere(), _same((8,)), "static"),
    ("lift-numel-of-nonzero", LiftNumelOfNonzero(), _same((12,)), "static"),
    ("lift-to-size-kept", LiftToSizeKept(), _same((12,)), "static"),
    ("lift-returned-kept", LiftReturnedKept(), _same((12,)), "materialized"),
    ("write-to-selection", WriteToSelection(), _1d(20), "safe"),
    ("chained-where-masks", ChainedWhereMasks(), _rows((12, 3)), "safe"),
    ("restore-after-write", RestoreAfterWrite(), _1d(20), "safe"),
    ("mask-written-after-where", MaskWrittenAfterWhere(), _1d(20), "safe"),
    ("max-of-two", MaxOfTwo(), _1d(20), "safe"),
    ("division-in-branch", DivisionInBranch(), _1d(20), "safe"),
    ("index-in-branch", IndexInBranch(), _1d(5), "static"),
    ("masked-select-branches", MaskedSelectBranches(), _1d(12), "safe"),
    ("wider-mask-in-branch", WiderMaskInBranch(), lambda g, k: (floats((4,), g), mask_like((8,), g, k)), "kept:if-convert"),
    ("mask-in-loop", MaskInLoop(), _1d(12), "safe"),
    ("where-with-lifted-float", WhereWithLiftedFloat(), _1d(12), "static"),
    ("int-item-with-bool-mask", IntItemWithBoolMask(), _1d(12), "static"),
    ("floor-div-by-lifted", FloorDivByLifted(), _1d(12), "static"),
    ("branch-result-mutated", BranchResultMutated(), _1d(6), "kept:if-convert"),
    ("zero-dim-mask-where", ZeroDimMaskWhere(), _1d(12), "static"),
    ("store-vector-kept", StoreKeptForVectorValue(), lambda g, k: (floats((6, 3), g), mask_like((6,), g, k), floats((3,), g)), "kept:mask-store"),
    ("scatter-add-of-selection", ScatterAddOfSelection(), segments(12), "static"),
    ("index-add-of-selection", IndexAddOfSelection(), segments(12, (3,)), "static"),
    ("histc-of-selection", HistcOfSelection(), _1d(20), "static"),
    ("histc-of-data-range-kept", HistcOfDataRangeKept(), _1d(20), "kept:bound"),
]
