"""Idioms of real projects' code, written here in the style of the function
each comment names (not copied): detection (torchvision, detectron2, mmdet),
token losses and decoding (fairseq, Hugging Face), metrics (torchmetrics),
segmentation losses (mmseg), mixture-of-experts routing (Switch/GShard).

Each entry: (name, "project: function", module, inputs(gen, kind)), where
kind is "none", "all" or "random": which of the data-dependent selections
keep nothing, everything, or some. test_idioms.py checks staticify's output
against the original on each; bench/idiom_table.py writes the coverage
table (sync points before and after, and whether the floor is reached)
into docs/coverage.md."""
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def keep_frac(kind: str, gen) -> float:
    return {"none": 0.0, "all": 1.0}.get(kind, float(torch.rand((), generator=gen)))


def boxes(n, gen):
    xy = torch.rand(n, 2, generator=gen) * 100
    wh = torch.rand(n, 2, generator=gen) * 20
    return torch.cat([xy, xy + wh], 1)


# --- detection ---------------------------------------------------------------

class RemoveSmallBoxes(torch.nn.Module):
    def forward(self, b: Tensor) -> Tensor:
        ws, hs = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
        keep = (ws >= 5.0) & (hs >= 5.0)
        return torch.where(keep)[0]


class ScoreThreshold(torch.nn.Module):
    def forward(self, b: Tensor, scores: Tensor, labels: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        inds = torch.where(scores > 0.5)[0]
        return b[inds], scores[inds], labels[inds]


class ForegroundBoxLoss(torch.nn.Module):
    def forward(self, pred: Tensor, target: Tensor, matched: Tensor) -> Tensor:
        fg = torch.where(matched >= 0)[0]
        loss = F.smooth_l1_loss(pred[fg], target[fg], beta=1.0 / 9, reduction="sum")
        return loss / max(1, fg.numel())


class FastRCNNAccuracy(torch.nn.Module):
    def forward(self, pred_classes: Tensor, gt_classes: Tensor) -> Tensor:
        fg_inds = ((gt_classes >= 0) & (gt_classes < 3)).nonzero().squeeze(1)
        num_fg = fg_inds.numel()
        fg_gt = gt_classes[fg_inds]
        fg_pred = pred_classes[fg_inds]
        num_false_fg = (fg_pred != fg_gt).nonzero().numel()
        return torch.tensor(1.0 - num_false_fg / max(num_fg, 1))


class FocalLossNormalized(torch.nn.Module):
    def forward(self, logits: Tensor, targets: Tensor, matched: Tensor) -> Tensor:
        valid = matched >= -1
        num_fg = (matched >= 0).sum()
        loss = F.binary_cross_entropy_with_logits(logits[valid], targets[valid], reduction="sum")
        return loss / torch.clamp(num_fg.float(), min=1.0)


class ClassAgnosticScores(torch.nn.Module):
    def forward(self, scores: Tensor) -> Tensor:
        keep = scores > 0.05
        return scores[keep].sort(descending=True)[0]


class MatcherLowQuality(torch.nn.Module):
    def forward(self, quality: Tensor) -> Tensor:
        matched_vals, matches = quality.max(dim=0)
        best_per_gt, _ = quality.max(dim=1)
        pairs = torch.nonzero(quality == best_per_gt[:, None])
        updated = matches.clone()
        updated[pairs[:, 1]] = pairs[:, 0]
        return updated


class ProposalCount(torch.nn.Module):
    def forward(self, objectness: Tensor) -> Tensor:
        keep = objectness.sigmoid() > 0.5
        n = int(keep.sum())
        return objectness.new_full((1,), float(n))


class TopScoringPerClass(torch.nn.Module):
    def forward(self, scores: Tensor) -> Tensor:
        s = scores[scores > 0.3]
        k = min(5, s.numel())
        return s.topk(k)[0]


class KeepByIou(torch.nn.Module):
    def forward(self, iou: Tensor, b: Tensor) -> Tensor:
        keep = iou.max(dim=1)[0] < 0.7
        return b[keep].sum(0)


# --- token losses and decoding --------------------------------------------------

class FairseqLabelSmoothed(torch.nn.Module):
    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        lprobs = F.log_softmax(logits, dim=-1).view(-1, logits.size(-1))
        target = target.view(-1)
        keep = target != 1
        lprobs, target = lprobs[keep], target[keep]
        nll = -lprobs.gather(dim=-1, index=target.unsqueeze(-1)).squeeze(-1)
        smooth = -lprobs.sum(dim=-1)
        eps_i = 0.1 / lprobs.size(-1)
        return ((1.0 - 0.1) * nll + eps_i * smooth).sum()


class FairseqNTokens(torch.nn.Module):
    def forward(self, loss: Tensor, target: Tensor) -> Tensor:
        ntokens = target.ne(1).sum().item()
        return loss.sum() / ntokens


class FairseqMaskedLM(torch.nn.Module):
    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        masked = target.ne(1)
        lp = F.log_softmax(logits[masked], dim=-1)
        return F.nll_loss(lp, target[masked], reduction="sum")


class FairseqStripPad(torch.nn.Module):
    def forward(self, tokens: Tensor) -> Tensor:
        return tokens[tokens.ne(1)]


class HFIgnoreIndexLoss(torch.nn.Module):
    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        logits = logits.view(-1, logits.size(-1))
        labels = labels.view(-1)
        keep = labels != -100
        lprobs = torch.log_softmax(logits[keep], dim=-1)
        return -lprobs.gather(1, labels[keep].unsqueeze(1)).mean()


class HFActiveLoss(torch.nn.Module):
    def forward(self, logits: Tensor, labels: Tensor, attention: Tensor) -> Tensor:
        active = attention.view(-1) == 1
        active_logits = logits.view(-1, logits.size(-1))[active]
        active_labels = labels.view(-1)[active]
        return F.cross_entropy(active_logits, active_labels)


class HFTokenAccuracy(torch.nn.Module):
    def forward(self, logits: Tensor, labels: Tensor) -> Tensor:
        preds = logits.argmax(-1)
        mask = labels != -100
        return (preds[mask] == labels[mask]).float().mean()


class HFEosFinished(torch.nn.Module):
    def forward(self, next_tokens: Tensor, unfinished: Tensor) -> Tensor:
        unfinished = unfinished & (next_tokens != 2)
        if unfinished.max() == 0:
            return torch.zeros_like(next_tokens)
        return next_tokens * unfinished


class BeamEosCandidates(torch.nn.Module):
    def forward(self, cand_indices: Tensor, cand_scores: Tensor, bbsz: Tensor) -> Tensor:
        eos_mask = cand_indices.eq(2) & cand_scores.ne(float("-inf"))
        return torch.masked_select(bbsz, mask=eos_mask)


class SequenceLengths(torch.nn.Module):
    def forward(self, tokens: Tensor) -> Tensor:
        lengths = tokens.ne(1).sum(1)
        return tokens[:, :int(lengths.max())]


# --- metrics ----------------------------------------------------------------------

class MetricsAccuracyIgnore(torch.nn.Module):
    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        mask = target != -1
        p, t = preds[mask], target[mask]
        return (p == t).sum() / mask.sum()


class MetricsMAEMasked(torch.nn.Module):
    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        valid = ~torch.isnan(target)
        return (preds[valid] - target[valid]).abs().mean()


class MetricsConfusionBincount(torch.nn.Module):
    def forward(self, preds: Tensor, target: Tensor) -> Tensor:
        k = (target >= 0) & (target < 4)
        return torch.bincount(4 * target[k] + preds[k], minlength=16).view(4, 4)


class MetricsPrecisionAtThreshold(torch.nn.Module):
    def forward(self, scores: Tensor, target: Tensor) -> Tensor:
        predicted = scores > 0.5
        tp = (target[predicted] == 1).sum()
        return tp / predicted.sum().clamp(min=1)


class MetricsRMSEValid(torch.nn.Module):
    def forward(self, preds: Tensor, target: Tensor, valid: Tensor) -> Tensor:
        diff = preds[valid > 0] - target[valid > 0]
        return torch.sqrt((diff * diff).mean())


class MetricsStdOfValid(torch.nn.Module):
    def forward(self, x: Tensor, valid: Tensor) -> Tensor:
        return x[valid > 0].std()


# --- segmentation losses -------------------------------------------------------

class OhemCrossEntropy(torch.nn.Module):
    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        losses = F.cross_entropy(logits, target, reduction="none").view(-1)
        threshold = max(float(losses.mean()), 0.7)
        hard = losses[losses > threshold]
        return hard.mean() if hard.numel() > 0 else losses.mean()


class DiceIgnore(torch.nn.Module):
    def forward(self, pred: Tensor, target: Tensor) -> Tensor:
        valid = target != 255
        p, t = pred[valid], target[valid].float()
        inter = (p * t).sum()
        return 1 - 2 * inter / (p.sum() + t.sum() + 1e-6)


class LovaszIgnore(torch.nn.Module):
    def forward(self, scores: Tensor, labels: Tensor) -> Tensor:
        valid = labels != 255
        vscores, vlabels = scores[valid], labels[valid].float()
        errors = (1.0 - vscores * (2 * vlabels - 1))
        errors_sorted, perm = torch.sort(errors, descending=True)
        return (F.relu(errors_sorted) * vlabels[perm]).sum()


class SegIgnoreMean(torch.nn.Module):
    def forward(self, loss: Tensor, target: Tensor) -> Tensor:
        return loss[target != 255].mean()


class SegHardestK(torch.nn.Module):
    def forward(self, loss: Tensor, target: Tensor) -> Tensor:
        valid = loss[target != 255]
        k = min(8, valid.numel())
        return valid.topk(k)[0].mean()


# --- mixture of experts ----------------------------------------------------------

class MoEDispatch(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: Tensor, router: Tensor) -> Tensor:
        expert_index = router.argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx = torch.where(expert_index == e)[0]
            out[idx] = expert(x[idx])
        return out


class MoELayerFlattened(torch.nn.Module):
    """fairseq's MOELayer / DeepSpeed's MoE: tokens flattened to
    (tokens, d_model), a top-1 gate, each expert on the tokens routed to it,
    its output weighted by the gate and written back."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(4, 3, bias=False)
        self.experts = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: Tensor) -> Tensor:
        tokens = x.reshape(-1, x.size(-1))
        weight, expert_index = self.gate(tokens).softmax(-1).max(-1)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            idx = torch.where(expert_index == e)[0]
            out[idx] = expert(tokens[idx]) * weight[idx].unsqueeze(1)
        return out.reshape(x.shape)


class MoETokensPerExpert(torch.nn.Module):
    def forward(self, router: Tensor) -> Tensor:
        expert_index = router.argmax(-1)
        counts: List[Tensor] = []
        for e in range(3):
            counts.append((expert_index == e).sum())
        return torch.stack(counts)


class MoECapacityDrop(torch.nn.Module):
    def forward(self, x: Tensor, router: Tensor) -> Tensor:
        mask = F.one_hot(router.argmax(-1), 3)
        locations = torch.cumsum(mask, 0) - 1
        keep = (locations < 4) & (mask > 0)
        return x[keep.any(-1)].sum(0)


# --- more detection, data loading and point clouds ----------------------------------

class InstancesFilter(torch.nn.Module):
    def forward(self, scores: Tensor, b: Tensor, classes: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        keep = scores > 0.5
        return scores[keep], b[keep], classes[keep]


class KeypointVisibleLoss(torch.nn.Module):
    def forward(self, logits: Tensor, targets: Tensor, visible: Tensor) -> Tensor:
        valid = visible > 0
        return F.cross_entropy(logits[valid], targets[valid])


class NumItemsInBatch(torch.nn.Module):
    def forward(self, loss: Tensor, labels: Tensor) -> Tensor:
        num_items = int((labels != -100).sum())
        return loss.sum() / max(num_items, 1)


class PerGraphMean(torch.nn.Module):
    def forward(self, x: Tensor, batch: Tensor) -> Tensor:
        means: List[Tensor] = []
        for i in range(3):
            means.append(x[batch == i].sum(0))
        return torch.stack(means)


class PasteBoxCrop(torch.nn.Module):
    def forward(self, image: Tensor, box: Tensor) -> Tensor:
        x0, y0 = int(box[0]), int(box[1])
        return image[y0:y0 + 4, x0:x0 + 4].sum()


class YoloTargetsPresent(torch.nn.Module):
    def forward(self, targets: Tensor, pred: Tensor) -> Tensor:
        t = targets[targets[:, 1] > 0]
        if t.shape[0] > 0:
            return (pred[: t.shape[0]] - t).abs().mean()
        return pred.sum() * 0


# --- inputs -------------------------------------------------------------------------

def _mask(shape, gen, kind):
    return torch.rand(shape, generator=gen) < keep_frac(kind, gen)


def _token_inputs(pad, vocab=7):
    def make(gen, kind):
        logits = torch.randn(3, 5, vocab, generator=gen)
        target = torch.randint(2, vocab, (3, 5), generator=gen)
        target[~_mask((3, 5), gen, kind)] = pad
        return logits, target
    return make


def _det_matched(gen, kind):
    n = 12
    matched = torch.randint(0, 4, (n,), generator=gen)
    matched[~_mask((n,), gen, kind)] = -1
    return torch.randn(n, 4, generator=gen), torch.randn(n, 4, generator=gen), matched


def _scores(gen, kind, n=15):
    f = keep_frac(kind, gen)
    return torch.rand(n, generator=gen) * 0.4 + (0.6 if f == 1.0 else 0.0 if f == 0.0 else
                                                   0.6 * (torch.rand(n, generator=gen) < f))


IDIOMS = [
    ("remove-small-boxes", "torchvision: ops.boxes.remove_small_boxes", RemoveSmallBoxes(),
     lambda g, k: (boxes(10, g) * (1 if k != "none" else 0.01),)),
    ("score-threshold", "torchvision: RoIHeads.postprocess_detections", ScoreThreshold(),
     lambda g, k: (boxes(15, g), _scores(g, k), torch.randint(0, 5, (15,), generator=g))),
    ("foreground-box-loss", "torchvision: RetinaNetRegressionHead.compute_loss", ForegroundBoxLoss(),
     _det_matched),
    ("fast-rcnn-accuracy", "detectron2: FastRCNNOutputs._log_accuracy", FastRCNNAccuracy(),
     lambda g, k: (torch.randint(0, 4, (14,), generator=g),
                   torch.where(_mask((14,), g, k), torch.randint(0, 3, (14,), generator=g),
                               torch.full((14,), 3)))),
    ("focal-loss-normalized", "torchvision: RetinaNetClassificationHead.compute_loss",
     FocalLossNormalized(),
     lambda g, k: (torch.randn(12, 3, generator=g), torch.rand(12, 3, generator=g).round(),
                   _det_matched(g, k)[2] - 1 * (torch.rand(12, generator=g) < 0.2).long())),
    ("class-agnostic-scores", "mmdet: multiclass_nms score filter", ClassAgnosticScores(),
     lambda g, k: (_scores(g, k) - 0.5,)),
    ("matcher-low-quality", "torchvision: Matcher.set_low_quality_matches_", MatcherLowQuality(),
     lambda g, k: (torch.rand(3, 8, generator=g).round(decimals=1),)),
    ("proposal-count", "detectron2: RPN proposal counting for logging", ProposalCount(),
     lambda g, k: (torch.randn(20, generator=g) * (1 if k == "random" else 0) + (5 if k == "all" else -5 if k == "none" else 0),)),
    ("top-scoring", "torchvision: RegionProposalNetwork._get_top_n_idx after filtering",
     TopScoringPerClass(), lambda g, k: (_scores(g, k) - 0.3,)),
    ("keep-by-iou", "detectron2: ROIHeads label_and_sample_proposals filtering", KeepByIou(),
     lambda g, k: (torch.rand(9, 4, generator=g) * (1 if k == "random" else 0.5 if k == "all" else 0) + (0 if k != "none" else 0.8), boxes(9, g))),
    ("fairseq-label-smoothed", "fairseq: label_smoothed_nll_loss", FairseqLabelSmoothed(),
     _token_inputs(1)),
    ("fairseq-ntokens", "fairseq: sample['ntokens'] normalizer", FairseqNTokens(),
     lambda g, k: (torch.rand(3, 5, generator=g), _token_inputs(1)(g, k)[1])),
    ("fairseq-masked-lm", "fairseq: MaskedLmLoss.forward", FairseqMaskedLM(),
     lambda g, k: (_token_inputs(1)(g, k)[0].view(15, 7), _token_inputs(1)(g, k)[1].view(15))),
    ("fairseq-strip-pad", "fairseq: utils.strip_pad", FairseqStripPad(),
     lambda g, k: (_token_inputs(1)(g, k)[1].view(-1),)),
    ("hf-ignore-index-loss", "Hugging Face: CrossEntropyLoss(ignore_index=-100) by hand",
     HFIgnoreIndexLoss(), _token_inputs(-100)),
    ("hf-active-loss", "Hugging Face: BertForTokenClassification active_loss", HFActiveLoss(),
     lambda g, k: (torch.randn(3, 5, 7, generator=g), torch.randint(0, 7, (3, 5), generator=g),
                   _mask((3, 5), g, k).long())),
    ("hf-token-accuracy", "Hugging Face: Trainer token accuracy (compute_metrics)",
     HFTokenAccuracy(), _token_inputs(-100)),
    ("hf-eos-finished", "Hugging Face: GenerationMixin unfinished_sequences", HFEosFinished(),
     lambda g, k: (torch.randint(0, 5, (6,), generator=g), _mask((6,), g, k).long())),
    ("beam-eos-candidates", "fairseq: SequenceGenerator eos_bbsz_idx", BeamEosCandidates(),
     lambda g, k: (torch.where(_mask((4, 3), g, k), 2, 3), torch.randn(4, 3, generator=g),
                   torch.arange(12).view(4, 3))),
    ("sequence-lengths", "fairseq/HF: trim a batch to its longest sequence", SequenceLengths(),
     lambda g, k: (_token_inputs(1)(g, k)[1],)),
    ("metrics-accuracy-ignore", "torchmetrics: accuracy with ignore_index", MetricsAccuracyIgnore(),
     lambda g, k: (torch.randint(0, 3, (20,), generator=g),
                   torch.where(_mask((20,), g, k), torch.randint(0, 3, (20,), generator=g), -1))),
    ("metrics-mae-masked", "torchmetrics: MeanAbsoluteError on valid targets", MetricsMAEMasked(),
     lambda g, k: (torch.randn(20, generator=g),
                   torch.where(_mask((20,), g, k), torch.randn(20, generator=g), float("nan")))),
    ("metrics-confusion-bincount", "torchmetrics: _multiclass_confusion_matrix_update",
     MetricsConfusionBincount(),
     lambda g, k: (torch.randint(0, 4, (20,), generator=g),
                   torch.where(_mask((20,), g, k), torch.randint(0, 4, (20,), generator=g), -1))),
    ("metrics-precision", "torchmetrics: binary precision at a threshold",
     MetricsPrecisionAtThreshold(),
     lambda g, k: (_scores(g, k), torch.randint(0, 2, (15,), generator=g))),
    ("metrics-rmse-valid", "torchmetrics: MeanSquaredError(squared=False) on valid pixels",
     MetricsRMSEValid(),
     lambda g, k: (torch.randn(20, generator=g), torch.randn(20, generator=g),
                   _mask((20,), g, k).float())),
    ("metrics-std-valid", "torchmetrics: running std of valid values", MetricsStdOfValid(),
     lambda g, k: (torch.randn(20, generator=g), _mask((20,), g, k).float())),
    ("ohem-cross-entropy", "mmseg: OHEMPixelSampler / OhemCrossEntropy", OhemCrossEntropy(),
     lambda g, k: (torch.randn(16, 4, generator=g), torch.randint(0, 4, (16,), generator=g))),
    ("dice-ignore", "mmseg: DiceLoss with ignore_index", DiceIgnore(),
     lambda g, k: (torch.rand(20, generator=g),
                   torch.where(_mask((20,), g, k), torch.randint(0, 2, (20,), generator=g), 255))),
    ("lovasz-ignore", "mmseg: lovasz_hinge_flat after flatten_binary_logits", LovaszIgnore(),
     lambda g, k: (torch.randn(20, generator=g),
                   torch.where(_mask((20,), g, k), torch.randint(0, 2, (20,), generator=g), 255))),
    ("seg-ignore-mean", "mmseg: weight_reduce_loss over non-ignored pixels", SegIgnoreMean(),
     lambda g, k: (torch.rand(4, 5, generator=g),
                   torch.where(_mask((4, 5), g, k), torch.randint(0, 3, (4, 5), generator=g), 255))),
    ("seg-hardest-k", "mmseg: OHEM hardest-k pixels", SegHardestK(),
     lambda g, k: (torch.rand(20, generator=g),
                   torch.where(_mask((20,), g, k), torch.randint(0, 3, (20,), generator=g), 255))),
    ("moe-dispatch", "Switch Transformer: route tokens to experts", MoEDispatch(),
     lambda g, k: (torch.randn(10, 4, generator=g), torch.randn(10, 3, generator=g))),
    ("moe-layer-flattened", "fairseq MOELayer / DeepSpeed MoE: top-1 dispatch of flattened tokens",
     MoELayerFlattened(), lambda g, k: (torch.randn(2, 5, 4, generator=g),)),
    ("moe-tokens-per-expert", "GShard: tokens per expert (load balancing)", MoETokensPerExpert(),
     lambda g, k: (torch.randn(10, 3, generator=g),)),
    ("moe-capacity-drop", "GShard: top-1 gating with capacity", MoECapacityDrop(),
     lambda g, k: (torch.randn(10, 4, generator=g), torch.randn(10, 3, generator=g))),
    ("instances-filter", "detectron2: Instances[instances.scores > threshold]", InstancesFilter(),
     lambda g, k: (_scores(g, k), boxes(15, g), torch.randint(0, 5, (15,), generator=g))),
    ("keypoint-visible-loss", "torchvision: keypointrcnn_loss over visible keypoints",
     KeypointVisibleLoss(),
     lambda g, k: (torch.randn(12, 9, generator=g), torch.randint(0, 9, (12,), generator=g),
                   _mask((12,), g, k).long())),
    ("num-items-in-batch", "Hugging Face: Trainer num_items_in_batch", NumItemsInBatch(),
     lambda g, k: (torch.rand(3, 5, generator=g), _token_inputs(-100)(g, k)[1])),
    ("per-graph-mean", "PyTorch Geometric: global pooling by a batch vector, per graph",
     PerGraphMean(),
     lambda g, k: (torch.randn(12, 3, generator=g), torch.randint(0, 3, (12,), generator=g))),
    ("paste-box-crop", "torchvision: paste_mask_in_image's integer box corners", PasteBoxCrop(),
     lambda g, k: (torch.rand(20, 20, generator=g), torch.rand(4, generator=g) * 15)),
    ("yolo-targets-present", "YOLOv5: ComputeLoss over images with targets", YoloTargetsPresent(),
     lambda g, k: (torch.cat([torch.rand(6, 1, generator=g),
                              _mask((6, 1), g, k).float(), torch.rand(6, 2, generator=g)], 1),
                   torch.rand(6, 4, generator=g))),
]
