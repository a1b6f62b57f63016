"""Small TorchScript programs the end-to-end tests run through staticify.
Line numbers matter: tests locate findings by the source text of a line."""
from typing import Final, List, Tuple

import torch


class Seed002Example1(torch.nn.Module):
    """Seed 002, example 1: a sum over a boolean-indexed loss."""
    padding_idx: Final[int]

    def __init__(self, padding_idx: int = 0):
        super().__init__()
        self.padding_idx = padding_idx

    def forward(self, smooth_loss: torch.Tensor, targets: torch.Tensor):
        non_pad_mask = targets.ne(self.padding_idx).view(-1)
        smooth_loss = smooth_loss[non_pad_mask]
        smooth_loss = smooth_loss.sum()
        return smooth_loss


class Seed002Example2(torch.nn.Module):
    """Seed 002, example 2: sum(A[i] * B[i]) over the i with C[i] != -1."""

    def forward(self, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor):
        indices = torch.where(C != -1)
        A_filtered = torch.gather(A, 0, indices[0])
        B_filtered = torch.gather(B, 0, indices[0])
        res_dyn = torch.sum(A_filtered * B_filtered)
        return res_dyn


class SmallCNN(torch.nn.Module):
    """A purely static model."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv(x)))
        x = torch.nn.functional.adaptive_avg_pool2d(x, 4)
        return self.fc(x.flatten(1)) * self.scale


class Picker(torch.nn.Module):
    """A submodule whose data-dependent ops sit in a loop and a branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(1)
        for i in range(x.size(0)):
            row = x[i]
            if bool(row.sum() > 0):
                total = total + row[row > 0].sum()
        return total


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.picker = Picker()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.picker(x) + 1

    @torch.jit.export
    def count(self, x: torch.Tensor) -> int:
        return torch.nonzero(x).size(0)
