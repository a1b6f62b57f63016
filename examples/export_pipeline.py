"""An export pipeline with staticify in it (docs/python.md runs this).

The loss is fairseq's label-smoothed cross-entropy as its criterion computes
it (the seed-002 idiom): the padding positions are dropped by boolean
indexing, whose shape depends on the data. The pipeline scripts the module,
freezes it, makes it static, checks it against the original on fresh inputs,
and saves it:

    /usr/bin/python3 examples/export_pipeline.py loss_static.pt
"""
import sys

import torch
import torch.nn.functional as F

import staticify


class LabelSmoothedCrossEntropy(torch.nn.Module):
    def __init__(self, epsilon: float = 0.1, padding_idx: int = 1):
        super().__init__()
        self.epsilon = epsilon
        self.padding_idx = padding_idx

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        lprobs = F.log_softmax(logits, dim=-1).view(-1, logits.size(-1))
        target = target.view(-1)
        keep = target != self.padding_idx
        lprobs, target = lprobs[keep], target[keep]          # data-dependent shapes
        nll_loss = -lprobs.gather(dim=-1, index=target.unsqueeze(-1)).squeeze(-1)
        smooth_loss = -lprobs.sum(dim=-1)
        eps_i = self.epsilon / lprobs.size(-1)
        return ((1.0 - self.epsilon) * nll_loss + eps_i * smooth_loss).sum()


def main(out_path: str) -> int:
    model = LabelSmoothedCrossEntropy().eval()
    frozen = torch.jit.freeze(torch.jit.script(model))        # 1. script, 2. freeze
    static, report = staticify.optimize(frozen)                # 3. make it static
    print(report)
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    for _ in range(20):                                        # 4. check
        logits = torch.randn(4, 9, 32, generator=gen)
        target = torch.randint(0, 32, (4, 9), generator=gen)
        target[:, 6:] = 1                                      # padding at the end
        worst = max(worst, float((static(logits, target) - model(logits, target)).abs()))
    print(f"static: {report.static}; host syncs {report.method().before.sync_points} -> "
          f"{report.method().after.sync_points}")
    print(f"max |static - original| = {worst:g}")
    static.save(out_path)                                      # 5. ship it
    return 0 if report.static and worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "loss_static.pt"))
