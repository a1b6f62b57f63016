"""An if on data whose branches are bounded values of one count (a curve
normalized unless its last point is 0: torchmetrics' roc before auc) is
selected on the device, and the result keeps that count, so that trapz
integrates the live points with no read of the device. Checked through the
binary against the original: ties, all positive, all negative, one point."""
import torch
import torch.nn.functional as F


class BinaryAuroc(torch.nn.Module):
    """torchmetrics' _binary_clf_curve, roc and auc."""

    def forward(self, preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        order = torch.argsort(preds, descending=True)
        preds, target = preds[order], target[order]
        distinct = torch.where(preds[1:] - preds[:-1])[0]
        idxs = F.pad(distinct, [0, 1], value=float(target.size(0) - 1))
        target = (target == 1).to(torch.long)
        tps = torch.cumsum(target * 1.0, dim=0)[idxs]
        fps = 1 + idxs - tps
        thresholds = preds[idxs]
        tps = torch.cat([torch.zeros(1, dtype=tps.dtype, device=tps.device), tps])
        fps = torch.cat([torch.zeros(1, dtype=fps.dtype, device=fps.device), fps])
        thresholds = torch.cat([torch.ones(1, dtype=thresholds.dtype), thresholds])
        if fps[-1] <= 0:
            fpr = torch.zeros_like(thresholds)
        else:
            fpr = fps / fps[-1]
        if tps[-1] <= 0:
            tpr = torch.zeros_like(thresholds)
        else:
            tpr = tps / tps[-1]
        return torch.trapz(tpr, fpr)


def test_auroc_selects_its_curves_on_the_device(staticify, save, tmp_path):
    method, original, model = staticify.rewritten(save(BinaryAuroc()), tmp_path / "out.pt")
    assert (method["before"]["sync_points"], method["after"]["sync_points"]) == (3, 0)
    g = torch.Generator().manual_seed(0)
    cases = [(torch.rand(16, generator=g), torch.ones(16, dtype=torch.long)),
             (torch.rand(16, generator=g), torch.zeros(16, dtype=torch.long)),
             (torch.full((8,), 0.5), torch.randint(0, 2, (8,), generator=g)),
             (torch.rand(1, generator=g), torch.ones(1, dtype=torch.long))]
    for n in (2, 5, 17, 64):
        for _ in range(10):
            preds = (torch.rand(n, generator=g) * 0.6).round(decimals=1)  # ties
            cases.append((preds, torch.randint(0, 2, (n,), generator=g)))
    for preds, target in cases:
        want, got = original(preds, target), model(preds, target)
        assert torch.allclose(got, want, equal_nan=True), (preds, target, got, want)
