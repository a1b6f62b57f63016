"""Indices, ranges and sizes the host computes beside data-dependent values,
through the binary against the original:
- an index read from data (`x[int(i.item())]`, diffusers' scheduler step:
  the step index of a timestep, read from `(timesteps == t).nonzero()`, the
  second match where there are two): a gather on the device (lift-scalars),
  and the `if len(matches) > 1` run both ways by bound with no shield that
  would read the count;
- histograms over a range the host computes from module attributes (mmseg's
  intersect and union: `histc(..., max=num_classes - 1)`) and a bincount
  with a computed minlength of selected vectors viewed as [-1]
  (torchmetrics' confusion matrix), behind host guards;
- a slice by a length read from data, then reduced (speechbrain's statistics
  pooling): the rows between the bounds selected, the mean and std masked.
The sync points are the report's; outputs equal wherever the original runs."""

import pytest
import torch
from torch import Tensor

from test_rewrites import run_safely

TRIALS = 60


class EulerStep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("timesteps", torch.tensor([999.0, 999.0, 750.0, 500.0, 250.0, 0.0]))
        self.register_buffer("sigmas", torch.linspace(10.0, 0.5, 7))

    def forward(self, t: Tensor, sample: Tensor, eps: Tensor) -> Tensor:
        matches = (self.timesteps == t).nonzero()
        if len(matches) > 1:
            pos = matches[1]
        else:
            pos = matches[0]
        i = int(pos.item())
        sigma = self.sigmas[i]
        return sample + eps * (self.sigmas[i + 1] - sigma)


def step_inputs(gen):
    t = [999.0, 750.0, 250.0, 0.0][int(torch.randint(0, 4, (1,), generator=gen))]
    return torch.tensor(t), torch.randn(2, 3, generator=gen), torch.randn(2, 3, generator=gen)


class IntersectUnion(torch.nn.Module):
    def __init__(self, num_classes: int = 5, ignore_index: int = 255):
        super().__init__()
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def forward(self, pred: Tensor, label: Tensor):
        keep = label != self.ignore_index
        pred, label = pred[keep], label[keep]
        both = pred[pred == label]
        top = self.num_classes - 1
        inter = torch.histc(both.float(), bins=self.num_classes, min=0, max=top)
        area_pred = torch.histc(pred.float(), bins=self.num_classes, min=0, max=top)
        area_label = torch.histc(label.float(), bins=self.num_classes, min=0, max=top)
        return inter, area_pred + area_label - inter


def segmentation_inputs(gen):
    pred = torch.randint(0, 5, (4, 5), generator=gen)
    label = torch.randint(0, 5, (4, 5), generator=gen)
    # nothing ignored, some, or everything (an empty selection)
    ignored = [0.0, 0.4, 1.1][int(torch.randint(0, 3, (1,), generator=gen))]
    label[torch.rand(4, 5, generator=gen) < ignored] = 255
    return pred, label


class ConfusionBins(torch.nn.Module):
    def __init__(self, num_classes: int = 4, ignore_index: int = -1):
        super().__init__()
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        preds, target = preds.argmax(1).flatten(), target.flatten()
        keep = target != self.ignore_index
        pairs = target[keep].view(-1) * self.num_classes + preds[keep].view(-1)
        bins = torch.bincount(pairs, minlength=self.num_classes * self.num_classes)
        return bins.reshape(self.num_classes, self.num_classes)


def confusion_inputs(gen):
    n = [1, 6, 30][int(torch.randint(0, 3, (1,), generator=gen))]
    target = torch.randint(0, 4, (n,), generator=gen)
    target[torch.rand(n, generator=gen) < 0.3] = -1
    return torch.randn(n, 4, generator=gen), target


class StatisticsPooling(torch.nn.Module):
    """speechbrain's statistics pooling: mean and std of each utterance's
    frames up to its relative length, read from data (x[i, 0:int(n)])."""

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        means, stds = [], []
        for i in range(x.shape[0]):
            n = int(torch.round(lengths[i] * x.shape[1]))
            means.append(torch.mean(x[i, 0:n, ...], dim=0))
            stds.append(torch.std(x[i, 0:n, ...], dim=0))
        return torch.cat((torch.stack(means), torch.stack(stds)), dim=1)


def pooling_inputs(gen):
    b = int(torch.randint(1, 4, (1,), generator=gen))
    # relative lengths: whole, a part, one frame, none (a mean of nothing: nan)
    lengths = torch.tensor([[1.0, 0.5, 0.2, 0.0][int(i)] for i in
                            torch.randint(0, 4, (b,), generator=gen)])
    return torch.randn(b, 5, 3, generator=gen), lengths


CASES = [
    # name, module, inputs, sync points (before, after)
    ("euler-step-index", EulerStep(), step_inputs, (2, 0)),
    ("intersect-union", IntersectUnion(), segmentation_inputs, (3, 0)),
    # bincount's own length (its largest value) stays a read.
    # self.num_classes read four times is one value (normalize): the
    # histogram is exact there, before the report's first count.
    ("confusion-bins", ConfusionBins(), confusion_inputs, (2, 0)),
    ("statistics-pooling", StatisticsPooling(), pooling_inputs, (1, 0)),
]


@pytest.mark.parametrize("name,module,inputs,syncs", CASES, ids=[c[0] for c in CASES])
def test_host_known_equals_original(staticify, save, tmp_path, name, module, inputs, syncs):
    path = save(module)
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    method = staticify.report(path)["methods"][0]
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == syncs
    original, rewritten = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(0)
    for _ in range(TRIALS):
        args = inputs(gen)
        want, want_error = run_safely(original, args)
        got, got_error = run_safely(rewritten, args)
        assert want_error == got_error, (name, args, want_error, got_error)
        if want_error:
            continue
        for g, w in zip(want if isinstance(want, tuple) else [want],
                        got if isinstance(got, tuple) else [got]):
            assert g.dtype == w.dtype and g.shape == w.shape, (name, args, w, g)
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5, equal_nan=True)
