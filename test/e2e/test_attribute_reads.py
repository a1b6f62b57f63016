"""Reads of one module attribute the method never writes are one value
(normalize): torchmetrics' confusion matrix, `bincount(x, minlength=self.C *
self.C).view(self.C, self.C)`, is then an exact histogram, with no sync.
An attribute the method writes (a call counter) keeps each read where it
is. Through the binary against the original."""
import torch
from torch import Tensor


class ConfusionMatrix(torch.nn.Module):
    def __init__(self, num_classes: int = 4, ignore_index: int = 255):
        super().__init__()
        self.num_classes = num_classes
        self.ignore_index = ignore_index

    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        keep = target != self.ignore_index
        mapping = target[keep] * self.num_classes + preds[keep]
        bins = torch.bincount(mapping, minlength=self.num_classes * self.num_classes)
        return bins.reshape(self.num_classes, self.num_classes)


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: Tensor) -> Tensor:
        before = x * self.calls
        self.calls += 1
        return before + x * self.calls


def test_confusion_matrix_is_static(staticify, save, tmp_path):
    method, original, rewritten = staticify.rewritten(save(ConfusionMatrix()),
                                                      tmp_path / "out.pt")
    assert method["after"]["sync_points"] == 0
    assert method["before"]["sync_points"] >= 1
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        preds = torch.randint(0, 4, (40,), generator=gen)
        target = torch.randint(0, 4, (40,), generator=gen)
        target[torch.rand(40, generator=gen) < 0.3] = 255
        assert torch.equal(rewritten(preds, target), original(preds, target))


def test_a_written_attribute_is_read_where_it_is(staticify, save, tmp_path):
    _, original, rewritten = staticify.rewritten(save(Counter()), tmp_path / "out.pt")
    x = torch.ones(3)
    for _ in range(4):  # each call reads the count before and after its write
        assert torch.equal(rewritten(x), original(x))
