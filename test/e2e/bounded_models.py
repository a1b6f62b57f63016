"""Programs the bound pass must make static, or bound and materialize."""
from typing import Final, List, Tuple

import torch
from torch import Tensor


class MaskSampler(torch.nn.Module):
    """torchvision's BalancedPositiveNegativeSampler: per-image label tensors
    (>= 1 positive, == 0 negative, == -1 ignored) -> per-image masks."""
    batch_size_per_image: Final[int]
    positive_fraction: Final[float]

    def __init__(self, batch_size_per_image: int = 64, positive_fraction: float = 0.25):
        super().__init__()
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction

    def forward(self, matched_idxs: List[Tensor]) -> Tuple[List[Tensor], List[Tensor]]:
        pos_idx = []
        neg_idx = []
        for matched_idxs_per_image in matched_idxs:
            positive = torch.where(matched_idxs_per_image >= 1)[0]
            negative = torch.where(matched_idxs_per_image == 0)[0]
            num_pos = int(self.batch_size_per_image * self.positive_fraction)
            num_pos = min(positive.numel(), num_pos)
            num_neg = self.batch_size_per_image - num_pos
            num_neg = min(negative.numel(), num_neg)
            perm1 = torch.randperm(positive.numel(), device=positive.device)[:num_pos]
            perm2 = torch.randperm(negative.numel(), device=negative.device)[:num_neg]
            pos_idx_per_image = positive[perm1]
            neg_idx_per_image = negative[perm2]
            pos_mask = torch.zeros_like(matched_idxs_per_image, dtype=torch.uint8)
            neg_mask = torch.zeros_like(matched_idxs_per_image, dtype=torch.uint8)
            pos_mask[pos_idx_per_image] = 1
            neg_mask[neg_idx_per_image] = 1
            pos_idx.append(pos_mask)
            neg_idx.append(neg_mask)
        return pos_idx, neg_idx


class IndexSampler(torch.nn.Module):
    """The seed's balanced idiom per image, returning index tensors: the
    labels are -1 (ignore), 0 (negative) or a class id >= 1 (positive)."""
    sub_sample: Final[int]

    def __init__(self, sub_sample: int = 32):
        super().__init__()
        self.sub_sample = sub_sample

    def forward(self, labels: List[Tensor]) -> List[Tensor]:
        out: List[Tensor] = []
        for labels_per_image in labels:
            positive = torch.where(labels_per_image >= 1)[0]
            negative = torch.where(labels_per_image == 0)[0]
            num_pos = min(positive.numel(), self.sub_sample // 2)
            num_neg = min(negative.numel(), self.sub_sample // 2)
            if num_neg < self.sub_sample // 2:
                num_pos = self.sub_sample - num_neg
            elif num_pos < self.sub_sample // 2:
                num_neg = self.sub_sample - num_pos
            perm1 = torch.randperm(positive.numel(), device=labels_per_image.device)[:num_pos]
            perm2 = torch.randperm(negative.numel(), device=labels_per_image.device)[:num_neg]
            idx = torch.cat([positive[perm1], negative[perm2]], dim=0)
            order = torch.randperm(self.sub_sample, device=labels_per_image.device)
            out.append(idx[order])
        return out


class Nonzero1D(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return torch.nonzero(x > 0)


class NonzeroND(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return torch.argwhere(x > 0) * 2 + 1  # elementwise on the bounded rows


class WhereCoords(torch.nn.Module):
    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        rows, cols = torch.where(x > 0)
        return rows, cols


class MaskedSelect(torch.nn.Module):
    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return torch.masked_select(x, y > 0)  # y broadcasts against x


class BoolIndex(torch.nn.Module):
    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        return x[m.to(torch.bool)].abs()  # a 2-D mask over a 3-D tensor


class Unique(torch.nn.Module):
    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return torch.unique(x, sorted=True, return_inverse=True, return_counts=True)


class UniqueValues(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return torch.unique(x)


class UniqueConsecutive(torch.nn.Module):
    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return torch.unique_consecutive(x, return_inverse=True, return_counts=True)


class UniqueDim(torch.nn.Module):
    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return torch.unique(x, dim=0, return_inverse=True, return_counts=True)


class RowOps(torch.nn.Module):
    """Detection-style post-processing of a selection: columns, widths,
    stacks and cats along dim 1, a softmax and a sort within each row. Every
    op works row by row, so the selection stays bounded until it is
    returned."""
    def forward(self, boxes: Tensor, scores: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        b = boxes[scores > 0]
        x0, y1 = b[:, 0], b[:, 3]
        wh = b[:, 2:4] - b[:, 0:2]
        c = torch.cat([torch.stack([x0, y1], dim=1), wh], dim=1)
        v, i = torch.sort(c, dim=1, descending=True)
        return torch.softmax(c, dim=1), v, i, torch.cumsum(c.unsqueeze(2), dim=1)


class SortSelection(torch.nn.Module):
    """Keep the positive scores, sort them, take the top 3, order the boxes
    by score: sorts and topk along dim 0 of bounded values."""
    def forward(self, scores: Tensor, boxes: Tensor
                ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        keep = scores > 0
        s, b = scores[keep], boxes[keep]
        v, order = s.sort(descending=True)
        top_v, top_i = s.topk(min(3, s.numel()))
        return v, b[order], top_v, b[top_i], torch.argsort(s)


class LevelTopk(torch.nn.Module):
    """RetinaNet's per-level selection: the scores over a threshold, the top
    k of them (k an attribute of unknown sign), their anchors and classes
    (where(keep)[0] at the top-k's indices), the boxes at those anchors."""
    def __init__(self, k: int = 5):
        super().__init__()
        self.k = k

    def forward(self, logits: Tensor, boxes: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        num_classes = logits.size(-1)
        scores = torch.sigmoid(logits).flatten()
        keep = scores > 0.5
        s, idx = scores[keep], torch.where(keep)[0]
        s, i = s.topk(min(self.k, idx.size(0)))
        idx = idx[i]
        anchors = torch.div(idx, num_classes, rounding_mode="floor")
        return s, idx % num_classes, boxes[anchors]


class ClassTopk(torch.nn.Module):
    """SSD's per-class selection: scores[keep] and boxes[keep], the top 4
    scores and their boxes, where keep = scores >= -inf selects -inf and
    leaves NaN (which top-k puts above every number) out."""
    def __init__(self):
        super().__init__()
        self.t = float("-inf")

    def forward(self, scores: Tensor, boxes: Tensor) -> Tuple[Tensor, Tensor]:
        keep = scores >= self.t
        s, b = scores[keep], boxes[keep]
        s, i = s.topk(min(4, s.size(0)))
        return s, b[i]


class NarrowByCount(torch.nn.Module):
    """The first k rows, k counted from data, then reduced: bounded by x's
    rows, masked by the count, static end to end."""
    def forward(self, x: Tensor, t: Tensor) -> Tensor:
        k = min(int((t > 0).sum()), x.size(0))
        return x.narrow(0, 0, k).sum(0)


class CountAfterNonzero(torch.nn.Module):
    """numel() of a bounded value stays a device count until it is returned."""
    def forward(self, x: Tensor) -> int:
        return torch.nonzero(x > 0).numel() + 1


class HintedArange(torch.nn.Module):
    """A length read from data: only a --bound hint can bound it."""
    def forward(self, x: Tensor) -> Tensor:
        k = int(x.sum())
        return torch.arange(k) * 2


class WriteGathered(torch.nn.Module):
    """torchvision's Matcher.set_low_quality_matches_: every prediction that
    is some ground truth's best match takes its original match back
    (`matches[pred] = all_matches[pred]`), and, to exercise repeats, the
    ground-truth index of each (gt, pred) pair is written too: a prediction
    that is the best of several ground truths is written several times."""

    def forward(self, quality: torch.Tensor, matches: torch.Tensor):
        all_matches = matches.clone()
        matches = torch.where(quality.max(dim=0)[0] > 0.5, matches, -torch.ones_like(matches))
        best, _ = quality.max(dim=1)
        pairs = torch.nonzero(quality == best[:, None])
        pred = pairs[:, 1]
        matches[pred] = all_matches[pred]
        written = torch.full_like(matches, -1)
        written[pred] = pairs[:, 0]
        return matches, written


class AddAtBoundedRows(torch.nn.Module):
    """GShard-style combine, `out.index_add_(0, idx, rows)`, at indices that
    repeat (each prediction once per ground truth it is the best match of),
    in place and out of place."""

    def forward(self, quality: torch.Tensor, x: torch.Tensor):
        best, _ = quality.max(dim=1)
        pairs = torch.nonzero(quality == best[:, None])
        pred = pairs[:, 1]
        out = torch.zeros_like(x)
        out.index_add_(0, pred, x[pred] * 2.0)
        return out, x.index_add(0, pred, x[pred])
