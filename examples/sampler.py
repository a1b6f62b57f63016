"""Seed 000's balanced sampler (`sample_data`), adapted for TorchScript.

TorchScript cannot script `torch.nonzero(..., as_tuple=True)` nor read module
globals, so the candidates come from `torch.where(cond)[0]` and the sizes are
`Final` attributes. Everything else is the article's code, line for line.

    /usr/bin/python3 examples/sampler.py OUT.pt     # script and save the sampler
"""
import sys
from typing import Final, Tuple

import torch


class BalancedSampler(torch.nn.Module):
    sub_sample: Final[int]

    def __init__(self, sub_sample: int = 1000):
        super().__init__()
        self.sub_sample = sub_sample

    def forward(self, input_array: torch.Tensor,
                labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        device = labels.device
        positive = torch.where(labels == 1)[0]
        negative = torch.where(labels == 0)[0]
        num_pos = min(positive.numel(), self.sub_sample // 2)
        num_neg = min(negative.numel(), self.sub_sample // 2)
        if num_neg < self.sub_sample // 2:
            num_pos = self.sub_sample - num_neg
        elif num_pos < self.sub_sample // 2:
            num_neg = self.sub_sample - num_pos
        # randomly select positive and negative examples
        perm1 = torch.randperm(positive.numel(), device=device)[:num_pos]
        perm2 = torch.randperm(negative.numel(), device=device)[:num_neg]
        pos_idxs = positive[perm1]
        neg_idxs = negative[perm2]
        sampled_idxs = torch.cat([pos_idxs, neg_idxs], dim=0)
        rand_perm = torch.randperm(self.sub_sample, device=labels.device)
        sampled_idxs = sampled_idxs[rand_perm]
        return input_array[sampled_idxs], labels[sampled_idxs]


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    torch.jit.script(BalancedSampler()).save(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
