"""The rewrite corpus: small scripted programs, each with the inputs to try
and what staticify must do with it.

Each case is (name, module, inputs, expect) where inputs(gen, kind) returns a
tuple of arguments for a torch.Generator and a mask kind ("random", "none",
"all"), and expect is "static" (every finding rewritten, zero left) or a
rule name that must *not* apply ("kept:<rule>"), the graph left dynamic."""
from typing import List, Tuple

import torch


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
    def forward(self, x, t):
        m = t > 0
        return torch.tensor(x[m].numel())


class SumDim1Kept(torch.nn.Module):
    """Reducing only a trailing dim keeps the data-dependent count: kept."""

    def forward(self, x, t):
        m = t > 0
        return x[m].sum(1)


class MaxIndicesKept(torch.nn.Module):
    """max's indices refer to the selected rows: kept."""

    def forward(self, x, t):
        m = t > 0
        return torch.max(x[m], 0)


class FunctionalNormKept(torch.nn.Module):
    """torch.norm builds its dims with a loop at run time: kept, and said."""

    def forward(self, x, t):
        m = t > 0
        return torch.norm(x[m], 1.0)


class IntegerIndexUntouched(torch.nn.Module):
    """A gather by integer indices is static already: nothing to do."""

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


def _1d(n):
    return lambda g, k: (floats((n,), g), mask_like((n,), g, k))


def _rows(shape):
    return lambda g, k: (floats(shape, g), mask_like(shape[:1], g, k))


def _same(shape):
    return lambda g, k: (floats(shape, g), mask_like(shape, g, k))


CASES = [
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
    ("numel-of-mask", NumelOfMask(), _same((4, 6)), "kept:lift-scalars"),
    ("sum-dim1-kept", SumDim1Kept(), _rows((6, 3)), "kept:masked-reduce"),
    ("max-indices-kept", MaxIndicesKept(), _rows((6, 3)), "kept:masked-reduce"),
    ("functional-norm-kept", FunctionalNormKept(), _1d(20), "kept:masked-reduce"),
    ("integer-index-untouched", IntegerIndexUntouched(), lambda g, k: (floats((10,), g), torch.randint(0, 10, (7,), generator=g)), "untouched"),
    ("store-scalar", StoreScalar(), _same((5, 5)), "static"),
    ("store-sees-alias", StoreSeesAlias(), _same((4, 3)), "static"),
    ("store-0d-tensor", StoreZeroDimTensor(), _1d(20), "static"),
    ("store-vector-kept", StoreKeptForVectorValue(), lambda g, k: (floats((6, 3), g), mask_like((6,), g, k), floats((3,), g)), "kept:mask-store"),
]
