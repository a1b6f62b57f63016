"""specialize-shapes through the real binary: masked_select broadcasts its
base against its mask, so two selections by one mask share a count only
where the bases have the mask's shape, which TorchScript does not record.
The method is versioned on those shapes (metadata: no sync); the first
version selects as `x[m]` does, the original runs for any other shapes
(broadcasting ones included). Where the version does not reach the host
at fewer points it is not kept: bound then lines the two selections up as
their elementwise op broadcasts them. Outputs equal the original's for every
shape pair; where the original raises the result raises too, except where
it raises because the two selections' counts differ and neither is 1 (the
op's broadcast fails): there the result is padding (docs/passes.md)."""
import torch
from torch import Tensor

from conftest import sync_points
from test_specialize_ranks import compiled, same


class MaskedSelectMAE(torch.nn.Module):
    """torchmetrics' MAE over valid targets, spelled with masked_select."""

    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        valid = ~torch.isnan(target)
        return (preds.masked_select(valid) - torch.masked_select(target, valid)).abs().mean()


class MaskedSelectTokenAccuracy(torch.nn.Module):
    """A token accuracy whose predictions the method computes (argmax)."""

    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        preds = logits.argmax(-1)
        mask = labels != -100
        return (preds.masked_select(mask) == labels.masked_select(mask)).float().mean()


def counts_differ(base: Tensor, mask: Tensor) -> bool:
    """Whether masked_select(base, mask) and a selection by mask of its own
    shape have counts that neither match nor are 1; False where
    masked_select itself raises (base and mask do not broadcast)."""
    try:
        shape = torch.broadcast_shapes(base.shape, mask.shape)
    except RuntimeError:
        return False
    a, b = int(mask.expand(shape).sum()), int(mask.sum())
    return a != b and 1 not in (a, b)


def same_or_padding(original, result, base, mask, *args):
    try:
        original(*args)
    except RuntimeError:
        if counts_differ(base, mask):
            result(*args)  # padding: it must not raise for other reasons
            return
    same(original, result, *args)


def test_masked_select_mae_is_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, MaskedSelectMAE())
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(0)
    # Equal shapes (the first version); preds broadcast against the mask,
    # the mask against preds, and shapes that do not broadcast (the original).
    pairs = [((20,), (20,)), ((0,), (0,)), ((4, 5), (4, 5)), ((2, 3, 4), (2, 3, 4)),
             ((1,), (20,)), ((3, 20), (20,)), ((20,), (3, 20)), ((4,), (5,))]
    for preds_shape, target_shape in pairs:
        for keep in (0.0, 0.05, 0.5, 1.0):
            preds = torch.randn(*preds_shape, generator=gen)
            target = torch.randn(*target_shape, generator=gen)
            target[torch.rand(*target_shape, generator=gen) >= keep] = float("nan")
            same_or_padding(original, result, preds, ~torch.isnan(target), preds, target)


def test_masked_select_of_computed_base_is_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, MaskedSelectTokenAccuracy())
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(1)
    for logits_shape, labels_shape in [((6, 8, 5), (6, 8)), ((1, 5), (1,)), ((6, 8, 5), (8,)),
                                       ((6, 1, 5), (6, 8)), ((3, 5), (4,))]:
        for keep in (0.0, 0.5, 1.0):
            logits = torch.randn(*logits_shape, generator=gen)
            labels = torch.randint(0, 5, labels_shape, generator=gen)
            labels[torch.rand(*labels_shape, generator=gen) >= keep] = -100
            same_or_padding(original, result, logits.argmax(-1), labels != -100, logits,
                            labels)


class HardNegativeLoss(torch.nn.Module):
    """ssd.pytorch's MultiBoxLoss confidence term: the rows of an expanded
    mask, `conf[(pos_idx.long() + neg_idx.long()).gt(0)].view(-1, C)`,
    against the targets selected by the unexpanded mask."""

    def forward(self, conf: Tensor, conf_t: Tensor, neg: Tensor) -> Tensor:
        pos = conf_t > 0
        pos_idx = pos.unsqueeze(2).expand_as(conf)
        neg_idx = neg.unsqueeze(2).expand_as(conf)
        rows = conf[(pos_idx.long() + neg_idx.long()).gt(0)].view(-1, 4)
        targets = conf_t[(pos.long() + neg.long()).gt(0)]
        return torch.nn.functional.cross_entropy(rows, targets, reduction="sum")


def test_rows_of_expanded_mask_are_static(staticify, save, tmp_path):
    original, result, report = compiled(staticify, save, tmp_path, HardNegativeLoss())
    assert sync_points(report) == (2, 0)
    gen = torch.Generator().manual_seed(2)
    # The first version: conf [B, A, 4] and masks [B, A]. The original: a
    # mask of one row broadcast over the batch, a last dim other than 4
    # (the view regroups elements), and shapes that do not broadcast.
    shapes = [((3, 7, 4), (3, 7)), ((1, 5, 4), (1, 5)), ((0, 5, 4), (0, 5)),
              ((3, 7, 4), (1, 7)), ((3, 7, 8), (3, 7)), ((3, 7, 4), (3, 6))]
    for conf_shape, mask_shape in shapes:
        for keep in (0.0, 0.3, 1.0):
            conf = torch.randn(*conf_shape, generator=gen)
            conf_t = torch.randint(0, 4, mask_shape, generator=gen)
            conf_t[torch.rand(*mask_shape, generator=gen) >= keep] = 0
            neg = torch.rand(*mask_shape, generator=gen) < 0.2
            same(original, result, conf, conf_t, neg)
