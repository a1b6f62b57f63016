"""Per-op facts that make spellings from other projects' code end alike,
through the real binary against the original:

- sort and argsort keep their operand's shape (OpInfo's kKeepsShape): the
  numel of a sorted selection is the selection's count, and a selection of
  it by a mask over its own elements reads no size (HRNet's OHEM loss:
  `pred, ind = x[mask].sort(); pred[min(k, pred.numel() - 1)]`);
- a row of a transposed matrix is a column of the matrix (yolov5's
  `i, j = (conf > t).nonzero().t()`);
- gather along dim 0 and take by a bounded index have the index's rows
  (Open3D's `gather(labels, 0, where(valid)[0])`, an imputer's
  `take(col_mean, where(isnan(x))[1])`).

- a tensor read out of a list has the dtype of what the list holds, also
  where a loop appends to the list what it computed from its reads
  (tianshou's n-step `cur = indices[-1]`, `indices.append(next(cur))`): of
  an int64 input the index gathers, and an input of unknown dtype is
  versioned on being int64.

- both branches of an early return run where the other branch reads past a
  selection's rows (torchmetrics' reciprocal rank: `if not target.sum():
  return 0.0`, then `nonzero(target).view(-1)[0]`): the read takes a
  stand-in row where there are none, and nonzero, argsort(dim=-1) and
  `arange(1, len(t) + 1)` raise on no value.

Each goes to no sync point; outputs are compared on inputs that select
nothing, everything or some, empty tables included."""

import json

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from test_never_more_syncs import sync_points
from test_rewrites import compare_outputs

TRIALS = 24


class OhemLoss(torch.nn.Module):
    """HRNet's OhemCrossEntropy: the pixels whose predicted probability is
    below the k-th smallest (at least a threshold) count in the loss."""

    def forward(self, score: Tensor, target: Tensor) -> Tensor:
        losses = F.cross_entropy(score, target, ignore_index=255,
                                 reduction="none").contiguous().view(-1)
        mask = target.contiguous().view(-1) != 255
        safe = target.clone()
        safe[safe == 255] = 0
        prob = F.softmax(score, dim=1).gather(1, safe.unsqueeze(1))
        pred, ind = prob.contiguous().view(-1)[mask].contiguous().sort()
        kth = pred[min(5, pred.numel() - 1)]
        threshold = max(float(kth), 0.7)
        kept = losses[mask][ind]
        return kept[pred < threshold].mean()


class ConfidentPairs(torch.nn.Module):
    """yolov5's multi-label detections: every (box, class) above a
    confidence, as rows and columns of nonzero's transposed coordinates."""

    def forward(self, conf: Tensor, boxes: Tensor) -> Tensor:
        ij = (conf > 0.5).nonzero().t()
        i, j = ij[0], ij[1]
        return torch.cat((boxes[i], conf[i, j].unsqueeze(1), j[:, None].float()), 1).sum(0)


class ValidGather(torch.nn.Module):
    """Open3D-ML's filter_valid_label: rows and labels of the points whose
    label is not ignored, gathered by their positions."""

    def forward(self, scores: Tensor, labels: Tensor) -> Tensor:
        idx = torch.where(labels != 0)[0]
        rows = torch.gather(scores, 0, idx.unsqueeze(-1).expand(-1, scores.size(1)))
        kept = torch.gather(labels, 0, idx)
        return rows.sum(0) + kept.sum()


class TakeMeans(torch.nn.Module):
    """A tabular imputer: the column mean of each missing value, taken by
    its column."""

    def forward(self, x: Tensor, col_mean: Tensor) -> Tensor:
        inds = torch.where(torch.isnan(x))
        return torch.take(col_mean, inds[1]).sum()


class NStepIndices(torch.nn.Module):
    """tianshou's compute_nstep_return: each step's next index in a ring
    buffer, stopping at episode ends."""

    def forward(self, done: Tensor, indice: Tensor, rew: Tensor) -> Tensor:
        indices = [indice]
        for _ in range(3):
            cur = indices[-1]
            end = done[cur] | (cur == done.size(0) - 1)
            indices.append((cur + (~end).long()) % done.size(0))
        idx = torch.stack(indices)
        return rew[idx].sum(0)


class ReciprocalRank(torch.nn.Module):
    """torchmetrics' retrieval_reciprocal_rank and average precision."""

    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        if not target.sum():
            return torch.tensor(0.0)
        hits = target[torch.argsort(preds, dim=-1, descending=True)]
        position = torch.nonzero(hits).view(-1)
        ranks = torch.arange(1, len(hits) + 1, dtype=torch.float32)[hits > 0]
        return 1.0 / (position[0] + 1.0) + ranks.mean()


class ColumnOfSelectedRows(torch.nn.Module):
    """Must keep the host's check: a column of selected rows in a branch on
    data is a select along dim 1, whose size is static (stand-in rows
    along dim 0 would add rows to it)."""

    def forward(self, x: Tensor, m: Tensor) -> Tensor:
        rows = x.view(-1, 3)[m.view(-1) > 0]
        if bool(x.sum() > 0):
            return rows.select(1, 2)
        return rows.select(1, 0)


def segmentation(gen, kind):
    score = torch.randn(1, 4, 5, 5, generator=gen) * 3.0
    target = torch.randint(0, 4, (1, 5, 5), generator=gen)
    if kind == "none":
        target.fill_(255)
    elif kind == "random":
        target[torch.rand(1, 5, 5, generator=gen) < 0.4] = 255
    return score, target


def detections(gen, kind):
    conf = torch.rand(7, 3, generator=gen)
    conf = {"none": conf * 0.5, "all": conf * 0.4 + 0.55}.get(kind, conf)
    return conf, torch.rand(7, 4, generator=gen)


def points(gen, kind):
    # Nothing selected: of eight points, or of none (an empty table).
    n = 8 * int(torch.randint(0, 2, (1,), generator=gen)) if kind == "none" else 8
    labels = torch.randint(0, 3, (n,), generator=gen)
    labels = {"none": labels * 0, "all": labels + 1}.get(kind, labels)
    return torch.randn(n, 3, generator=gen), labels


def table(gen, kind):
    x = torch.rand(5, 3, generator=gen)
    if kind == "all":
        x.fill_(float("nan"))
    elif kind == "random":
        x[x > 0.6] = float("nan")
    return x, torch.rand(3, generator=gen)


def ring(gen, kind):
    done = torch.rand(9, generator=gen) < {"none": 0.0, "all": 1.1}.get(kind, 0.3)
    return done, torch.randint(0, 9, (5,), generator=gen), torch.randn(9, generator=gen)


def rows_and_mask(gen, kind):
    m = torch.randn(4, generator=gen)
    m = {"none": -m.abs() - 1.0, "all": m.abs() + 1.0}.get(kind, m)
    return torch.randn(4, 3, generator=gen), m


def retrieval(gen, kind):
    n = 6
    target = (torch.rand(n, generator=gen) < {"none": 0.0, "all": 1.1}.get(kind, 0.4)).long()
    return torch.randn(n, generator=gen), target


CASES = [(OhemLoss(), segmentation, (5, 0)), (ConfidentPairs(), detections, (1, 0)),
         (ValidGather(), points, (1, 0)), (TakeMeans(), table, (1, 0)),
         (NStepIndices(), ring, (2, 0)), (ReciprocalRank(), retrieval, (3, 0)),
         (ColumnOfSelectedRows(), rows_and_mask, (2, 1))]


@pytest.mark.parametrize("module,inputs,syncs", CASES,
                         ids=["ohem-sorted-count", "transposed-nonzero",
                              "gather-dim0", "take", "list-read-indices",
                              "early-return-first-hit", "column-of-selected-rows"])
def test_op_semantics(staticify, save, tmp_path, module, inputs, syncs):
    path = save(module)
    out, report = tmp_path / "out.pt", tmp_path / "report.json"
    staticify(path, "-o", out, "--report-json", report)
    assert sync_points(json.loads(report.read_text())) == syncs
    compared = compare_outputs(torch.jit.load(str(path)), torch.jit.load(str(out)),
                               inputs, TRIALS, type(module).__name__)
    assert compared >= TRIALS - 2
