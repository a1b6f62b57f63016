"""The seed 000 article's hand-written, sync-free sampler (`opt_sample_data`),
as a scriptable module: the baseline staticify's output is measured against.

Transcribed from the article with two changes, both needed to compare like
with like: SUB_SAMPLE is a `Final` attribute (TorchScript reads no globals),
and the final gather of `input` expands the index over the feature dimension.
The article's `gather(input, -2, sampled_idxs.unsqueeze(-1))` returns only the
first feature column ([K, 1]); `sample_data` returns whole rows ([K, F])."""
from typing import Final, Tuple

import torch
from torch import Tensor


class OptSampler(torch.nn.Module):
    sub_sample: Final[int]

    def __init__(self, sub_sample: int = 1000):
        super().__init__()
        self.sub_sample = sub_sample

    def forward(self, input: Tensor, labels: Tensor) -> Tuple[Tensor, Tensor]:
        SUB_SAMPLE = self.sub_sample
        pos_mask = labels == 1
        neg_mask = labels == 0
        num_pos_idxs = torch.count_nonzero(pos_mask, dim=-1)
        num_neg_idxs = torch.count_nonzero(neg_mask, dim=-1)
        half_samples = labels.new_full((), SUB_SAMPLE // 2)
        num_pos = torch.minimum(num_pos_idxs, half_samples)
        num_neg = torch.minimum(num_neg_idxs, half_samples)
        num_pos = torch.where(num_neg < SUB_SAMPLE // 2, SUB_SAMPLE - num_neg, num_pos)
        num_neg = SUB_SAMPLE - num_pos
        # create random ordering on pos and neg entries
        rand = torch.rand_like(labels, dtype=torch.float32)
        pos_rand = torch.where(pos_mask, rand, -1)
        neg_rand = torch.where(neg_mask, rand, -1)
        # select top pos entries and invalidate others
        top_pos_rand, top_pos_idx = torch.topk(pos_rand, k=SUB_SAMPLE)
        arange = torch.arange(SUB_SAMPLE, device=labels.device)
        if num_pos.numel() > 1:
            # unsqueeze to support batched input
            arange = arange.unsqueeze(0)
            num_pos = num_pos.unsqueeze(-1)
            num_neg = num_neg.unsqueeze(-1)
        top_pos_rand = torch.where(arange >= num_pos, -1, top_pos_rand)
        # repeat for neg entries
        top_neg_rand, top_neg_idx = torch.topk(neg_rand, k=SUB_SAMPLE)
        top_neg_rand = torch.where(arange >= num_neg, -1, top_neg_rand)
        # combine and mix together positive and negative idxs
        cat_rand = torch.cat([top_pos_rand, top_neg_rand], dim=-1)
        cat_idx = torch.cat([top_pos_idx, top_neg_idx], dim=-1)
        topk_rand_idx = torch.topk(cat_rand, k=SUB_SAMPLE)[1]
        sampled_idxs = torch.gather(cat_idx, dim=-1, index=topk_rand_idx)
        rows = sampled_idxs.unsqueeze(-1)
        sampled_input = torch.gather(
            input, dim=-2, index=rows.expand(rows.shape[:-1] + (input.size(-1),)))
        sampled_labels = torch.gather(labels, dim=-1, index=sampled_idxs)
        return sampled_input, sampled_labels
