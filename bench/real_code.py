"""The real-code corpus: torchvision's and torchaudio's own models, ops and
transforms, scripted unchanged (random weights, eval mode; the smallest
factory the library has, else small constructor arguments), run through
staticify as an inference export (--specialize-training; --runtime-ops
where a rewrite has a runtime kernel: nms, batched_nms), and measured: sync
points before and after, whether the rest is at its floor, and whether the
output equals the original's. torchvision's detectors have their own
table (bench/detectors.py).

    /usr/bin/python3 bench/real_code.py [--bin build/bin] [--json OUT] [--docs docs]
                                        [--only NAME[,NAME...]] [--jobs N]

Each entry: (name, "library: what", build, inputs[, flags, method, trials]):
build() returns the library's nn.Module, or a module whose forward calls the
library's function (`wrap`: the call is ours, the function scripted is
theirs); inputs(gen) returns one realistic set of arguments. An entry that
does not script is reported with TorchScript's one-line reason.

Floor: after rewriting, no sync point left (after == 0), or only the cuts of
returned data-dependent outputs and reads of returned host numbers, i.e.
every sync point left is a finding whose reason is `bound: materialized:
it is returned` (nms's kept indices are cut to their count;
`--padded-outputs` would return them padded) or `lift-scalars: it is
returned as a host value` (an int or float the method returns). A
method the pipeline left as it was because its rewrite reached the host as
often and ran more ops is at its floor where, with --static-forms, that
rewrite leaves only such cuts.

Outputs: the staticified module against the scripted original on `trials`
inputs, under torch.no_grad(), then on 5 more with grad mode on (as users
call an eval model), with the same RNG seed before each run (the
random augmentations draw the same numbers): equal wherever the original
runs, integers and booleans exactly, floats and complex numbers within
rtol = atol = 1e-5 (test/e2e/test_rewrites.py's assert_same), Python floats
likewise.

Prints the table and a summary line; with --docs, writes the section
"Real-code corpus" of docs/coverage.md between the real-code markers."""
import argparse
import collections
import concurrent.futures
import inspect
import json
import math
import multiprocessing
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple, Tuple

import torch
import torchaudio
import torchaudio.compliance.kaldi
import torchaudio.functional as AF
import torchaudio.models as AM
import torchaudio.transforms as AT
import torchvision
import torchvision.ops as ops
import torchvision.transforms as T
import torchvision.transforms.functional as TF
from torch import Tensor
from torchvision import models as M

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from docs_section import write_section  # noqa: E402

BEGIN, END = "<!-- real-code:begin -->", "<!-- real-code:end -->"
HEADING = "## Real-code corpus: torchvision and torchaudio, scripted unchanged"
# The reasons of the cuts an output needs: a bounded value returned cut to
# its count, a host number returned (`return loss, int(n_correct)`).
FLOOR_REASONS = ("bound: materialized: it is returned",
                 "lift-scalars: it is returned as a host value")
EQUAL_SYNCS = "pipeline: the rewritten method would reach the host at as many points"

# The libraries' own op libraries (torchvision::nms, roi_align, ...;
# torchaudio::_lfilter, rnnt_loss, ...), which staticify loads before the
# archive, and the runtime library the --runtime-ops outputs need.
TV_LIB = next(pathlib.Path(torchvision.__file__).parent.glob("_C*.so"))
TA_LIB = pathlib.Path(torchaudio.__file__).parent / "lib" / "libtorchaudio.so"


class Entry(NamedTuple):
    name: str
    source: str
    build: object                # () -> nn.Module
    inputs: object               # (torch.Generator) -> tuple of arguments
    flags: Tuple[str, ...] = ()  # beyond --specialize-training
    method: str = "forward"
    trials: int = 3


# --- wrapping a library function ---------------------------------------------

def wrap(fn):
    """A module whose forward passes its tensor arguments to fn. fn is the
    library's function, or a glue function below that fixes its non-tensor
    arguments; TorchScript compiles fn from the library's source."""
    arity = sum(1 for p in inspect.signature(fn).parameters.values()
                if p.default is inspect.Parameter.empty)
    if arity == 1:
        class Call1(torch.nn.Module):
            def forward(self, a: Tensor):
                return fn(a)
        return Call1()
    if arity == 2:
        class Call2(torch.nn.Module):
            def forward(self, a: Tensor, b: Tensor):
                return fn(a, b)
        return Call2()
    if arity == 3:
        class Call3(torch.nn.Module):
            def forward(self, a: Tensor, b: Tensor, c: Tensor):
                return fn(a, b, c)
        return Call3()
    class Call4(torch.nn.Module):
        def forward(self, a: Tensor, b: Tensor, c: Tensor, d: Tensor):
            return fn(a, b, c, d)
    return Call4()


def initialized(module):
    """A lazy module (torchaudio's PitchShift builds its kernel on the first
    call) after one call, as it must be before scripting."""
    module(wave(torch.Generator().manual_seed(0)))
    return module


# --- inputs ------------------------------------------------------------------

def rand(gen, *shape):
    return torch.rand(*shape, generator=gen)


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen)


def randint(gen, low, high, *shape, dtype=torch.int64):
    return torch.randint(low, high, shape, generator=gen, dtype=dtype)


def image(gen, *shape):
    return rand(gen, *shape)


def image_u8(gen, *shape):
    """uint8 images; channel 1 of the first image is constant (autocontrast's
    and equalize's degenerate channel)."""
    img = randint(gen, 0, 256, *shape, dtype=torch.uint8)
    img.view(-1, *shape[-3:])[0, 1] = 77
    return img


def boxes(gen, n, size=64.0):
    xy = rand(gen, n, 2) * size * 0.75
    wh = rand(gen, n, 2) * size * 0.25 + 0.5
    return torch.cat([xy, xy + wh], 1)


def masks(gen, n, h=32, w=32):
    """n masks, each a random filled rectangle."""
    m = torch.zeros(n, h, w)
    for i in range(n):
        y0, x0 = randint(gen, 0, h // 2, 2).tolist()
        y1, x1 = y0 + 1 + int(randint(gen, 0, h // 2, 1)), x0 + 1 + int(randint(gen, 0, w // 2, 1))
        m[i, y0:y1, x0:x1] = 1
    return m


def wave(gen, channels=2, n=8000, sr=16000):
    """Speech-like: a few harmonics of a 150-330 Hz tone under noise."""
    t = torch.arange(n) / sr
    f0 = 150.0 + 180.0 * rand(gen, channels, 1)
    tone = sum(torch.sin(2 * math.pi * k * f0 * t) / k for k in (1, 2, 3))
    return 0.3 * tone + 0.05 * randn(gen, channels, n)


def lengths(gen, batch, full, low=None):
    """Valid lengths: the first is full, the others anywhere from low."""
    low = full // 2 if low is None else low
    return torch.cat([torch.tensor([full]), randint(gen, low, full + 1, batch - 1)])


def spec(gen, *shape):
    return rand(gen, *shape) ** 2 * 10


def complex_spec(gen, *shape):
    return torch.complex(randn(gen, *shape), randn(gen, *shape))


# --- glue: the library's function with its non-tensor arguments fixed ---------

def nms(b: Tensor, s: Tensor) -> Tensor:
    return ops.nms(b, s, 0.5)


def batched_nms(b: Tensor, s: Tensor, idxs: Tensor) -> Tensor:
    return ops.batched_nms(b, s, idxs, 0.5)


def box_convert(b: Tensor) -> Tensor:
    return ops.box_convert(b, "xyxy", "cxcywh")


def remove_small_boxes(b: Tensor) -> Tensor:
    return ops.remove_small_boxes(b, 4.0)


def clip_boxes_to_image(b: Tensor) -> Tensor:
    return ops.clip_boxes_to_image(b, (48, 40))


def roi_align(x: Tensor, rois: Tensor) -> Tensor:
    return ops.roi_align(x, rois, [7, 7], 0.25, -1, True)



def ps_roi_align(x: Tensor, rois: Tensor) -> Tensor:
    return ops.ps_roi_align(x, rois, 3, 0.25, 2)



def sigmoid_focal_loss(x: Tensor, t: Tensor) -> Tensor:
    return ops.sigmoid_focal_loss(x, t, 0.25, 2.0, "mean")


def giou_loss(a: Tensor, b: Tensor) -> Tensor:
    return ops.generalized_box_iou_loss(a, b, "mean")


def diou_loss(a: Tensor, b: Tensor) -> Tensor:
    return ops.distance_box_iou_loss(a, b, "mean")


def ciou_loss(a: Tensor, b: Tensor) -> Tensor:
    return ops.complete_box_iou_loss(a, b, "sum")


def stochastic_depth(x: Tensor) -> Tensor:
    return ops.stochastic_depth(x, 0.2, "row", True)


def drop_block2d(x: Tensor) -> Tensor:
    return ops.drop_block2d(x, 0.2, 3, True)


class MultiScaleRoIAlign(torch.nn.Module):
    """torchvision's pooler with its two feature maps and per-image boxes
    passed as the detectors pass them."""

    def __init__(self):
        super().__init__()
        self.pool = ops.MultiScaleRoIAlign(["p2", "p3"], 7, 2)

    def forward(self, p2: Tensor, p3: Tensor, b0: Tensor, b1: Tensor) -> Tensor:
        return self.pool({"p2": p2, "p3": p3}, [b0, b1], [(128, 128), (128, 128)])


class FeaturePyramidNetwork(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fpn = ops.FeaturePyramidNetwork([8, 16, 32], 16)

    def forward(self, c2: Tensor, c3: Tensor, c4: Tensor) -> Dict[str, Tensor]:
        return self.fpn({"c2": c2, "c3": c3, "c4": c4})


def autocontrast(img: Tensor) -> Tensor:
    return TF.autocontrast(img)


def equalize(img: Tensor) -> Tensor:
    return TF.equalize(img)


def posterize(img: Tensor) -> Tensor:
    return TF.posterize(img, 3)



def adjust_sharpness(img: Tensor) -> Tensor:
    return TF.adjust_sharpness(img, 2.0)





def normalize(img: Tensor) -> Tensor:
    return TF.normalize(img, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def rotate(img: Tensor) -> Tensor:
    return TF.rotate(img, 30.0)


def affine(img: Tensor) -> Tensor:
    return TF.affine(img, 15.0, [4, -2], 1.1, [5.0, 0.0])


def perspective(img: Tensor) -> Tensor:
    return TF.perspective(img, [[0, 0], [63, 0], [63, 63], [0, 63]],
                          [[4, 2], [60, 0], [63, 58], [2, 63]])






def erase(img: Tensor, v: Tensor) -> Tensor:
    return TF.erase(img, 8, 12, 16, 20, v)


def elastic_transform(img: Tensor, displacement: Tensor) -> Tensor:
    return TF.elastic_transform(img, displacement)



# The sample rate of the waveforms (TorchScript takes no Python global into
# a function: the glue functions spell it).
SR = 16000


def lfilter(x: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return AF.lfilter(x, a, b)


def filtfilt(x: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return AF.filtfilt(x, a, b)




def bandpass_biquad(x: Tensor) -> Tensor:
    return AF.bandpass_biquad(x, 16000, 1000.0, 0.707, True)







def equalizer_biquad(x: Tensor) -> Tensor:
    return AF.equalizer_biquad(x, 16000, 1000.0, 3.0)


def riaa_biquad(x: Tensor) -> Tensor:
    return AF.riaa_biquad(x, 44100)




def dcshift(x: Tensor) -> Tensor:
    return AF.dcshift(x, 0.3, 0.05)


def dither(x: Tensor) -> Tensor:
    return AF.dither(x, "TPDF", True)


def flanger(x: Tensor) -> Tensor:
    return AF.flanger(x, 16000)



def overdrive(x: Tensor) -> Tensor:
    return AF.overdrive(x, 20.0, 20.0)


def phaser(x: Tensor) -> Tensor:
    return AF.phaser(x, 16000)


def vad(x: Tensor) -> Tensor:
    return AF.vad(x, 16000)


def amplitude_to_db(x: Tensor) -> Tensor:
    return AF.amplitude_to_DB(x, 10.0, 1e-10, 0.0, 80.0)



def resample(x: Tensor) -> Tensor:
    return AF.resample(x, 16000, 8000)


def mask_along_axis(s: Tensor) -> Tensor:
    return AF.mask_along_axis(s, 10, 0.0, 1)


def mask_along_axis_iid(s: Tensor) -> Tensor:
    return AF.mask_along_axis_iid(s, 10, 0.0, 3)


def compute_deltas(s: Tensor) -> Tensor:
    return AF.compute_deltas(s)


def detect_pitch_frequency(x: Tensor) -> Tensor:
    return AF.detect_pitch_frequency(x, 16000)


def sliding_window_cmn(s: Tensor) -> Tensor:
    return AF.sliding_window_cmn(s, 60, 10)


def phase_vocoder(s: Tensor, phase_advance: Tensor) -> Tensor:
    return AF.phase_vocoder(s, 1.3, phase_advance)


def loudness(x: Tensor) -> Tensor:
    return AF.loudness(x, 16000)


def rnnt_loss(logits: Tensor, targets: Tensor, logit_lengths: Tensor,
              target_lengths: Tensor) -> Tensor:
    return AF.rnnt_loss(logits, targets, logit_lengths, target_lengths)





def kaldi_fbank(x: Tensor) -> Tensor:
    return torchaudio.compliance.kaldi.fbank(x)



# --- the torchaudio models' small configurations -------------------------------

def small_rnnt():
    return AM.emformer_rnnt_model(
        input_dim=20, encoding_dim=32, num_symbols=16, segment_length=4,
        right_context_length=1, time_reduction_input_dim=32, time_reduction_stride=2,
        transformer_num_heads=2, transformer_ffn_dim=32, transformer_num_layers=2,
        transformer_dropout=0.0, transformer_activation="gelu",
        transformer_left_context_length=8, transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=True,
        symbol_embedding_dim=32, num_lstm_layers=1, lstm_layer_norm=True,
        lstm_layer_norm_epsilon=1e-3, lstm_dropout=0.0).eval()


def small_tacotron2():
    return AM.Tacotron2(
        n_mels=20, n_symbol=40, symbol_embedding_dim=32, encoder_embedding_dim=32,
        encoder_n_convolution=1, decoder_rnn_dim=32, decoder_max_step=24,
        attention_rnn_dim=32, attention_hidden_dim=16, attention_location_n_filter=4,
        prenet_dim=16, postnet_n_convolution=1, postnet_embedding_dim=16).eval()


def small_wavernn():
    return AM.WaveRNN(upsample_scales=[5, 5, 4], n_classes=256, hop_length=100,
                      n_res_block=2, n_rnn=32, n_fc=32, n_freq=20, n_hidden=16,
                      n_output=16).eval()


def tokens_and_lengths(gen, batch=2, n=12):
    """Token batches sorted by length, longest first (pack_padded_sequence)."""
    lens = torch.sort(lengths(gen, batch, n), descending=True)[0]
    tok = randint(gen, 1, 40, batch, n)
    return tok * (torch.arange(n) < lens[:, None]), lens


def tacotron2_inputs(gen):
    tok, lens = tokens_and_lengths(gen)
    mel_lens = torch.sort(lengths(gen, 2, 16), descending=True)[0]
    return tok, lens, randn(gen, 2, 20, 16), mel_lens


def rnnt_inputs(gen):
    src_lens = lengths(gen, 2, 20, 12).int()
    tgt_lens = lengths(gen, 2, 6, 2).int()
    return randn(gen, 2, 20 + 2, 20), src_lens, randint(gen, 0, 15, 2, 6).int(), tgt_lens


class BeamSearch(torch.nn.Module):
    """torchaudio's RNN-T beam search over the small RNN-T, beam width 3;
    the hypotheses' token lists and scores are returned."""

    def __init__(self):
        super().__init__()
        self.search = AM.RNNTBeamSearch(small_rnnt(), blank=15, step_max_tokens=4)

    def forward(self, x: Tensor, length: Tensor) -> Tuple[List[List[int]], List[float]]:
        hyps = self.search(x, length, 3)
        return [h[0] for h in hyps], [h[3] for h in hyps]


def beam_inputs(gen):
    return randn(gen, 1, 10, 20), torch.tensor([10])


# --- the corpus ----------------------------------------------------------------

def tv_model(name, size=128, trials=2, **kwargs):
    """A torchvision classification model, random weights, on one image."""
    return Entry(name, f"torchvision: models.{name}",
                 lambda: getattr(M, name)(weights=None, **kwargs).eval(),
                 lambda gen: (image(gen, 1, 3, size, size),), trials=trials)


def tv_fn(fn, what, inputs, name=None, **kw):
    return Entry(name or fn.__name__, f"torchvision: {what}", lambda: wrap(fn), inputs, **kw)


def ta_fn(fn, what, inputs, name=None, **kw):
    return Entry(name or fn.__name__, f"torchaudio: {what}", lambda: wrap(fn), inputs, **kw)


def tv_transform(name, make, inputs, what=None):
    return Entry(name, f"torchvision: {what or 'transforms.' + name}", make, inputs)


def ta_transform(name, make, inputs, **kw):
    return Entry(name, f"torchaudio: transforms.{name}", make, inputs, **kw)


def img3(gen):
    return (image(gen, 3, 64, 64),)


def img_batch(gen):
    return (image(gen, 2, 3, 64, 64),)


def u8(gen):
    return (image_u8(gen, 3, 64, 64),)



def wav(gen):
    return (wave(gen),)


def box_pair(gen):
    return boxes(gen, 12), boxes(gen, 9)


def matched_boxes(gen):
    a = boxes(gen, 16)
    return a, a + randn(gen, 16, 4).clamp(-2, 2)


def rois(gen, k=12, size=128.0):
    return torch.cat([randint(gen, 0, 2, k, 1).float(), boxes(gen, k, size)], 1)


def detections(gen):
    b = boxes(gen, 200, 128.0)
    return b, rand(gen, 200)


RUNTIME_OPS = ("--runtime-ops",)

ENTRIES: List[Entry] = [
    # torchvision classification, segmentation, video and optical-flow models
    tv_model("resnet18"),
    tv_model("mobilenet_v2"),
    tv_model("mobilenet_v3_small"),
    tv_model("efficientnet_b0"),
    tv_model("vit_b_16", size=224),
    tv_model("swin_t", size=224),
    tv_model("swin_v2_t", size=224),
    tv_model("maxvit_t", size=224),
    tv_model("convnext_tiny"),
    tv_model("regnet_y_400mf"),
    tv_model("shufflenet_v2_x0_5"),
    tv_model("squeezenet1_1"),
    tv_model("mnasnet0_5"),
    tv_model("densenet121"),
    tv_model("googlenet", init_weights=False),
    tv_model("inception_v3", size=160, init_weights=False),
    Entry("fcn_resnet50", "torchvision: models.segmentation.fcn_resnet50",
          lambda: M.segmentation.fcn_resnet50(weights=None, weights_backbone=None).eval(),
          lambda gen: (image(gen, 1, 3, 96, 96),), trials=2),
    Entry("lraspp_mobilenet_v3_large", "torchvision: models.segmentation.lraspp_mobilenet_v3_large",
          lambda: M.segmentation.lraspp_mobilenet_v3_large(
              weights=None, weights_backbone=None).eval(),
          lambda gen: (image(gen, 1, 3, 128, 128),), trials=2),
    Entry("r3d_18", "torchvision: models.video.r3d_18",
          lambda: M.video.r3d_18(weights=None).eval(),
          lambda gen: (image(gen, 1, 3, 4, 32, 32),), trials=2),
    Entry("raft_small", "torchvision: models.optical_flow.raft_small",
          lambda: M.optical_flow.raft_small(weights=None).eval(),
          lambda gen: (image(gen, 1, 3, 128, 128), image(gen, 1, 3, 128, 128)), trials=2),

    # torchvision.ops
    tv_fn(nms, "ops.nms", detections, flags=RUNTIME_OPS),
    tv_fn(batched_nms, "ops.batched_nms",
          lambda gen: (*detections(gen), randint(gen, 0, 5, 200)), flags=RUNTIME_OPS),
    tv_fn(ops.box_iou, "ops.box_iou", box_pair, name="box_iou"),
    tv_fn(ops.generalized_box_iou, "ops.generalized_box_iou", box_pair, name="generalized_box_iou"),
    tv_fn(ops.distance_box_iou, "ops.distance_box_iou", box_pair, name="distance_box_iou"),
    tv_fn(ops.complete_box_iou, "ops.complete_box_iou", box_pair, name="complete_box_iou"),
    tv_fn(box_convert, "ops.box_convert", lambda gen: (boxes(gen, 20),)),
    tv_fn(ops.masks_to_boxes, "ops.masks_to_boxes", lambda gen: (masks(gen, 5),),
          name="masks_to_boxes"),
    tv_fn(remove_small_boxes, "ops.remove_small_boxes", lambda gen: (boxes(gen, 40),)),
    tv_fn(clip_boxes_to_image, "ops.clip_boxes_to_image", lambda gen: (boxes(gen, 40),)),
    tv_fn(roi_align, "ops.roi_align", lambda gen: (randn(gen, 2, 8, 32, 32), rois(gen))),
    tv_fn(ps_roi_align, "ops.ps_roi_align", lambda gen: (randn(gen, 2, 18, 32, 32), rois(gen))),
    Entry("MultiScaleRoIAlign", "torchvision: ops.MultiScaleRoIAlign", MultiScaleRoIAlign,
          lambda gen: (randn(gen, 2, 8, 32, 32), randn(gen, 2, 8, 16, 16),
                       boxes(gen, 10, 128.0), boxes(gen, 7, 128.0) * 0.5)),
    tv_fn(sigmoid_focal_loss, "ops.sigmoid_focal_loss",
          lambda gen: (randn(gen, 16, 5), (rand(gen, 16, 5) < 0.2).float())),
    tv_fn(giou_loss, "ops.generalized_box_iou_loss", matched_boxes),
    tv_fn(diou_loss, "ops.distance_box_iou_loss", matched_boxes),
    tv_fn(ciou_loss, "ops.complete_box_iou_loss", matched_boxes),
    tv_fn(stochastic_depth, "ops.stochastic_depth (training)",
          lambda gen: (randn(gen, 8, 4, 6, 6),)),
    tv_fn(drop_block2d, "ops.drop_block2d (training)", lambda gen: (randn(gen, 2, 4, 12, 12),)),
    Entry("StochasticDepth", "torchvision: ops.StochasticDepth (eval)",
          lambda: ops.StochasticDepth(0.2, "row").eval(), lambda gen: (randn(gen, 8, 4, 6, 6),)),
    Entry("DeformConv2d", "torchvision: ops.DeformConv2d",
          lambda: ops.DeformConv2d(4, 8, 3, padding=1).eval(),
          lambda gen: (randn(gen, 1, 4, 10, 10), randn(gen, 1, 18, 10, 10))),
    Entry("FeaturePyramidNetwork", "torchvision: ops.FeaturePyramidNetwork",
          lambda: FeaturePyramidNetwork().eval(),
          lambda gen: (randn(gen, 1, 8, 32, 32), randn(gen, 1, 16, 16, 16),
                       randn(gen, 1, 32, 8, 8))),

    # torchvision.transforms (v1), functional on tensors and as modules
    tv_fn(autocontrast, "transforms.functional.autocontrast", img_batch),
    tv_fn(equalize, "transforms.functional.equalize", u8),
    tv_fn(posterize, "transforms.functional.posterize", u8),
    tv_fn(adjust_sharpness, "transforms.functional.adjust_sharpness", img3),
    tv_fn(normalize, "transforms.functional.normalize", img_batch),
    tv_fn(rotate, "transforms.functional.rotate", img3),
    tv_fn(affine, "transforms.functional.affine", img3),
    tv_fn(perspective, "transforms.functional.perspective", img3),
    tv_fn(erase, "transforms.functional.erase", lambda gen: (image(gen, 3, 64, 64),
                                                             randn(gen, 3, 16, 20))),
    tv_fn(elastic_transform, "transforms.functional.elastic_transform",
          lambda gen: (image(gen, 3, 64, 64), randn(gen, 1, 64, 64, 2) * 0.05)),
    tv_transform("AutoAugment", lambda: T.AutoAugment(T.AutoAugmentPolicy.IMAGENET), u8),
    tv_transform("RandAugment", lambda: T.RandAugment(), u8),
    tv_transform("TrivialAugmentWide", lambda: T.TrivialAugmentWide(), u8),
    tv_transform("AugMix", lambda: T.AugMix(), u8),
    tv_transform("RandomResizedCrop", lambda: T.RandomResizedCrop(32, antialias=True), img3),
    tv_transform("ColorJitter", lambda: T.ColorJitter(0.4, 0.4, 0.4, 0.1), img3),
    tv_transform("RandomHorizontalFlip", lambda: T.RandomHorizontalFlip(), img_batch),
    # RandomErasing and ElasticTransform as constructed by default (an int
    # fill) do not script; RandomCrop and Resize take their sizes as
    # sequences, torchvision's documented form under TorchScript.
    tv_transform("RandomErasing", lambda: T.RandomErasing(p=1.0), img3),
    tv_transform("GaussianBlur", lambda: T.GaussianBlur(5, (0.1, 2.0)), img3),
    tv_transform("RandomAffine", lambda: T.RandomAffine(20, (0.1, 0.1), (0.9, 1.1), 5), img3),
    tv_transform("RandomPerspective", lambda: T.RandomPerspective(p=1.0), img3),
    tv_transform("RandomCrop", lambda: T.RandomCrop([48], padding=[4]), img3),
    tv_transform("ElasticTransform", lambda: T.ElasticTransform(20.0), img3),
    tv_transform("imagenet_eval_preset", lambda: torch.nn.Sequential(
        T.Resize([72], antialias=True), T.CenterCrop([64]),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])), img3,
        what="transforms Resize, CenterCrop, Normalize (nn.Sequential)"),

    # torchaudio models
    Entry("wav2vec2_base", "torchaudio: models.wav2vec2_base", lambda: AM.wav2vec2_base().eval(),
          lambda gen: (wave(gen, 2, 8000),), trials=2),
    Entry("wav2vec2_base+lengths", "torchaudio: models.wav2vec2_base, with lengths",
          lambda: AM.wav2vec2_base().eval(),
          lambda gen: (wave(gen, 2, 8000), lengths(gen, 2, 8000)), trials=2),
    Entry("hubert_base", "torchaudio: models.hubert_base", lambda: AM.hubert_base().eval(),
          lambda gen: (wave(gen, 2, 8000),), trials=2),
    Entry("hubert_base+lengths", "torchaudio: models.hubert_base, with lengths",
          lambda: AM.hubert_base().eval(),
          lambda gen: (wave(gen, 2, 8000), lengths(gen, 2, 8000)), trials=2),
    Entry("Conformer", "torchaudio: models.Conformer",
          lambda: AM.Conformer(80, 4, 128, 2, 31).eval(),
          lambda gen: (randn(gen, 2, 50, 80), lengths(gen, 2, 50))),
    Entry("Emformer", "torchaudio: models.Emformer",
          lambda: AM.Emformer(80, 4, 128, 2, 4, right_context_length=1).eval(),
          lambda gen: (randn(gen, 2, 21, 80), lengths(gen, 2, 20))),
    Entry("Emformer.infer", "torchaudio: models.Emformer, streaming infer",
          lambda: AM.Emformer(80, 4, 128, 2, 4, left_context_length=8,
                              right_context_length=1, max_memory_size=4).eval(),
          lambda gen: (randn(gen, 2, 5, 80), lengths(gen, 2, 5, 3)), method="infer"),
    Entry("emformer_rnnt_base", "torchaudio: models.emformer_rnnt_base",
          lambda: AM.emformer_rnnt_base(num_symbols=32).eval(),
          lambda gen: (randn(gen, 2, 64 + 16, 80), lengths(gen, 2, 64).int(),
                       randint(gen, 0, 31, 2, 6).int(), lengths(gen, 2, 6, 2).int()),
          trials=2),
    Entry("emformer_rnnt.transcribe", "torchaudio: models.emformer_rnnt_model, transcribe",
          small_rnnt, lambda gen: rnnt_inputs(gen)[:2], method="transcribe"),
    Entry("RNNTBeamSearch", "torchaudio: models.RNNTBeamSearch (small RNN-T)", BeamSearch,
          beam_inputs, trials=2),
    Entry("Tacotron2", "torchaudio: models.Tacotron2 (teacher forcing)", small_tacotron2,
          tacotron2_inputs),
    Entry("Tacotron2.infer", "torchaudio: models.Tacotron2, infer", small_tacotron2,
          lambda gen: tokens_and_lengths(gen), method="infer"),
    Entry("WaveRNN", "torchaudio: models.WaveRNN", small_wavernn,
          lambda gen: (randn(gen, 1, 1, 4 * 100), randn(gen, 1, 1, 20, 8))),
    Entry("WaveRNN.infer", "torchaudio: models.WaveRNN, infer", small_wavernn,
          lambda gen: (randn(gen, 2, 20, 6), lengths(gen, 2, 6, 3)), method="infer", trials=2),
    Entry("conv_tasnet_base", "torchaudio: models.conv_tasnet_base",
          lambda: AM.conv_tasnet_base().eval(), lambda gen: (wave(gen, 1, 4000)[:, None],),
          trials=2),
    Entry("DeepSpeech", "torchaudio: models.DeepSpeech", lambda: AM.DeepSpeech(40, 128).eval(),
          lambda gen: (randn(gen, 2, 1, 50, 40),)),
    Entry("Wav2Letter", "torchaudio: models.Wav2Letter", lambda: AM.Wav2Letter(40).eval(),
          lambda gen: (wave(gen, 1, 8000)[:, None],)),
    Entry("hdemucs_low", "torchaudio: models.hdemucs_low",
          lambda: AM.hdemucs_low(["drums", "bass", "other", "vocals"]).eval(),
          lambda gen: (wave(gen, 2, 8000)[None],), trials=2),

    # torchaudio.functional
    ta_fn(lfilter, "functional.lfilter", lambda gen: (
        wave(gen), torch.tensor([1.0, -0.9]), torch.tensor([0.5, 0.4]))),
    ta_fn(filtfilt, "functional.filtfilt", lambda gen: (
        wave(gen), torch.tensor([1.0, -0.9]), torch.tensor([0.5, 0.4]))),
    ta_fn(bandpass_biquad, "functional.bandpass_biquad", wav),
    ta_fn(equalizer_biquad, "functional.equalizer_biquad", wav),
    ta_fn(riaa_biquad, "functional.riaa_biquad", wav),
    ta_fn(dcshift, "functional.dcshift (limiter)", wav),
    ta_fn(dither, "functional.dither (noise shaping)", wav),
    ta_fn(flanger, "functional.flanger", wav),
    ta_fn(overdrive, "functional.overdrive", wav),
    ta_fn(phaser, "functional.phaser", wav),
    ta_fn(vad, "functional.vad", lambda gen: (torch.cat([0.001 * randn(gen, 1, 4000),
                                                         wave(gen, 1, 12000)], 1),)),
    ta_fn(amplitude_to_db, "functional.amplitude_to_DB (top_db)",
          lambda gen: (spec(gen, 2, 1, 40, 30),)),
    ta_fn(resample, "functional.resample", wav),
    ta_fn(mask_along_axis, "functional.mask_along_axis", lambda gen: (spec(gen, 2, 40, 30),)),
    ta_fn(mask_along_axis_iid, "functional.mask_along_axis_iid",
          lambda gen: (spec(gen, 2, 1, 40, 30),)),
    ta_fn(compute_deltas, "functional.compute_deltas", lambda gen: (spec(gen, 2, 40, 30),)),
    ta_fn(detect_pitch_frequency, "functional.detect_pitch_frequency", wav),
    ta_fn(sliding_window_cmn, "functional.sliding_window_cmn", lambda gen: (randn(gen, 80, 13),)),
    ta_fn(phase_vocoder, "functional.phase_vocoder",
          lambda gen: (complex_spec(gen, 2, 201, 20),
                       torch.linspace(0, math.pi * 200, 201)[..., None])),
    ta_fn(loudness, "functional.loudness", lambda gen: (wave(gen, 2, 8000),)),
    ta_fn(rnnt_loss, "functional.rnnt_loss", lambda gen: (
        randn(gen, 2, 10, 5, 8), randint(gen, 0, 7, 2, 4).int(),
        lengths(gen, 2, 10).int(), lengths(gen, 2, 4, 1).int())),
    ta_fn(kaldi_fbank, "compliance.kaldi.fbank", lambda gen: (wave(gen, 1, 8000),)),

    # torchaudio.transforms
    ta_transform("Spectrogram", lambda: AT.Spectrogram(n_fft=256), wav),
    ta_transform("MelSpectrogram", lambda: AT.MelSpectrogram(SR, n_fft=256, n_mels=40), wav),
    ta_transform("MFCC", lambda: AT.MFCC(SR, 13, melkwargs={"n_fft": 256, "n_mels": 40}), wav),
    ta_transform("InverseSpectrogram", lambda: AT.InverseSpectrogram(n_fft=256),
                 lambda gen: (complex_spec(gen, 2, 129, 30),)),
    ta_transform("GriffinLim", lambda: AT.GriffinLim(n_fft=256, n_iter=4),
                 lambda gen: (spec(gen, 2, 129, 30),)),
    ta_transform("Resample", lambda: AT.Resample(SR, 22050), wav),
    ta_transform("TimeStretch", lambda: AT.TimeStretch(128, 129, 1.2),
                 lambda gen: (complex_spec(gen, 2, 129, 30),)),
    ta_transform("FrequencyMasking", lambda: AT.FrequencyMasking(10, iid_masks=True),
                 lambda gen: (spec(gen, 2, 1, 40, 30),)),
    ta_transform("Fade", lambda: AT.Fade(1000, 2000, "logarithmic"), wav),
    ta_transform("SpectralCentroid", lambda: AT.SpectralCentroid(SR, n_fft=256), wav),
    ta_transform("PitchShift", lambda: initialized(AT.PitchShift(SR, 12, n_fft=256)), wav),
    ta_transform("InverseMelScale", lambda: AT.InverseMelScale(129, 20, max_iter=5),
                 lambda gen: (spec(gen, 2, 20, 10),)),
    ta_transform("RNNTLoss", lambda: AT.RNNTLoss(blank=7), lambda gen: (
        randn(gen, 2, 10, 5, 8), randint(gen, 0, 7, 2, 4).int(),
        lengths(gen, 2, 10).int(), lengths(gen, 2, 4, 1).int())),
    ta_transform("MVDR", lambda: AT.MVDR(solution="stv_evd"), lambda gen: (
        complex_spec(gen, 4, 33, 20), rand(gen, 33, 20), rand(gen, 33, 20))),
]

BY_NAME = {e.name: e for e in ENTRIES}
assert len(BY_NAME) == len(ENTRIES), "entry names must be unique"


# --- measuring -------------------------------------------------------------------

def one_line(err):
    """TorchScript's error in one line: its first line, and the first place
    it names in the library's code."""
    text = str(err).strip()
    # Skip the schema an "Expected a value of type ..." follows.
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and ") -> " not in ln]
    first = lines[0] if lines else type(err).__name__
    first = re.sub(r":$", "", first)
    first = first if len(first) <= 120 else first[:first.rfind(" ", 0, 117)] + " ..."
    where = re.search(r'File "([^"]*(?:torchvision|torchaudio)/[^"]+)", line (\d+)', text)
    if where:
        path = where.group(1)
        path = path[path.rindex("/torch") + 1:] if "/torch" in path else path
        first += f" ({path}:{where.group(2)})"
    return first


def clone(x):
    if isinstance(x, Tensor):
        return x.clone()
    if isinstance(x, (list, tuple)):
        return type(x)(clone(v) for v in x)
    if isinstance(x, dict):
        return {k: clone(v) for k, v in x.items()}
    return x


def differs(a, b):
    """Where b differs from a (None when they are the same), in
    assert_same's terms."""
    if isinstance(a, (tuple, list)):
        # By name: each archive loads its own class of a NamedTuple.
        if type(a).__name__ != type(b).__name__ or len(a) != len(b):
            return f"{type(a).__name__} of {len(a)} vs {type(b).__name__} of {len(b)}"
        return next((d for d in map(differs, a, b) if d), None)
    if isinstance(a, dict):
        if not isinstance(b, dict) or list(a) != list(b):
            return f"dict keys {list(a)} vs {list(b) if isinstance(b, dict) else type(b)}"
        return next((d for d in (differs(a[k], b[k]) for k in a) if d), None)
    if isinstance(a, float) and isinstance(b, float):
        return None if math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-5) else f"{a} vs {b}"
    if not isinstance(a, Tensor):
        return None if a == b else f"{a!r} vs {b!r}"
    if not isinstance(b, Tensor) or a.dtype != b.dtype or a.shape != b.shape:
        return (f"{a.dtype}{list(a.shape)} vs "
                f"{(b.dtype, list(b.shape)) if isinstance(b, Tensor) else type(b)}")
    if a.dtype.is_floating_point or a.dtype.is_complex:
        try:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)
        except AssertionError as e:
            return " ".join(str(e).split())[:160]
        return None
    return None if torch.equal(a, b) else f"{(a != b).sum()} of {a.numel()} elements differ"


GRAD_CALLS = 5


def run(module, method, args, seed, grad=False):
    torch.manual_seed(seed)
    with torch.set_grad_enabled(grad):
        out = getattr(module, method)(*clone(args))
    return detach(out) if grad else out


def detach(value):
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*map(detach, value))
    if isinstance(value, (tuple, list)):
        return type(value)(map(detach, value))
    if isinstance(value, dict):
        return {k: detach(v) for k, v in value.items()}
    return value


def compare(original, result, entry):
    """(trials compared, first difference or None): the original raising
    skips the trial; the result raising where it runs is a difference.
    After the no_grad trials, GRAD_CALLS calls with grad mode on, as users
    call an eval model (the parameters require grad, and the profiling
    executor differentiates from call 2); only once a trial compared."""
    gen = torch.Generator().manual_seed(0)
    compared = 0

    def differ(label, seed, grad):
        """None: compared equal; "": the original raised; else the difference."""
        args = entry.inputs(gen)
        try:
            want = run(original, entry.method, args, seed, grad)
        except Exception:  # noqa: BLE001 - the original may raise: no claim
            return ""
        try:
            got = run(result, entry.method, args, seed, grad)
        except Exception as e:  # noqa: BLE001
            return f"{label}: the output raised: {one_line(e)}"
        diff = differs(want, got)
        return f"{label}: {diff}" if diff else None

    for trial in range(entry.trials):
        diff = differ(f"trial {trial}", 1000 + trial, False)
        if diff:
            return compared, diff
        compared += diff is None
    for call in range(GRAD_CALLS if compared else 0):
        diff = differ(f"grad-mode call {call}", 2000 + call, True)
        if diff:
            return compared, diff
    return compared, None


def remaining(report, method):
    """The root findings, and those left after rewriting: kept, or
    introduced by a rewrite (conftest.sync_points's count)."""
    m = next(m for m in report["methods"] if m["name"] == method)
    found = [f for f in m["findings"] if f["role"] == "root"]
    return ([f for f in found if f["action"] != "introduced"],
            [f for f in found if f["action"] in ("kept", "introduced")])


def place(f):
    loc = f.get("location")
    if not loc:
        return "(no location)"
    path = loc.get("file") or "?"
    for marker in ("torchvision/", "torchaudio/", "torch/"):
        if marker in path:
            path = marker + path.split(marker, 1)[1]
            break
    return f"{path}:{loc.get('line', '?')}"


def why(f):
    """The reason a remaining sync point gives, or, where no rule looked, the
    analysis' own message."""
    return f.get("reason") or f"no rule applies: {f['message']}"


def short(reason):
    """A reason without its parenthesised detail (idiom_table.py's
    shortening): for bound, the uses with no bounded form."""
    marker = "uses with no bounded form materialize: "
    if marker in reason:
        return "bound: no bounded form for " + reason.split(marker)[1].rstrip(")")
    return reason.split(" (")[0]


def measure(entry, binary, workdir):
    """One row: scripts?, sync points before and after, floor, outputs equal,
    what remains."""
    row = {"name": entry.name, "source": entry.source, "method": entry.method,
           "flags": ["--specialize-training", *entry.flags]}
    start = time.perf_counter()
    torch.manual_seed(0)
    try:
        scripted = torch.jit.script(entry.build())
    except Exception as e:  # noqa: BLE001 - recorded, with TorchScript's reason
        row.update(scripts=False, why_not=one_line(e),
                   seconds=round(time.perf_counter() - start, 1))
        return row
    row["scripts"] = True
    path = pathlib.Path(workdir) / f"{entry.name}.pt"
    out, rep = path.with_suffix(".out.pt"), path.with_suffix(".json")
    scripted.save(str(path))
    method = [] if entry.method == "forward" else ["--method", entry.method]
    command = [str(binary), str(path), "-o", str(out), "--report-json", str(rep),
               "--load-library", str(TV_LIB), "--load-library", str(TA_LIB),
               *row["flags"], *method]
    for attempt in range(3):
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
            break
        except OSError:  # a rebuild replacing the binary: wait for the new one
            if attempt == 2:
                raise
            time.sleep(10)
    if proc.returncode != 0:
        row.update(error=(proc.stderr.strip().splitlines() or ["?"])[-1],
                   seconds=round(time.perf_counter() - start, 1))
        return row
    before, after = remaining(json.loads(rep.read_text()), entry.method)
    cuts = sum(1 for f in after if (f.get("reason") or "").startswith(FLOOR_REASONS))
    floor = len(after) == cuts
    if after and all((f.get("reason") or "").startswith(EQUAL_SYNCS) for f in after):
        # Left as it was: the rewrite reached the host as often and ran more
        # ops. At its floor if what the rewrite left is only returned cuts.
        forms = rep.with_suffix(".forms.json")
        subprocess.run([*command[:2], "--report-json", str(forms), *command[6:],
                        "--static-forms"], capture_output=True, text=True, timeout=900)
        if forms.exists():
            _, kept = remaining(json.loads(forms.read_text()), entry.method)
            floor = all((f.get("reason") or "").startswith(FLOOR_REASONS) for f in kept)
    row.update(before=len(before), after=len(after), floor=floor,
               reason=why(after[0]) if after else "",
               remains=[{"op": f["op"], "where": place(f), "action": f["action"],
                         "source": ((f.get("location") or {}).get("source") or "").strip()
                         or f["node"].strip()[:100],
                         "reason": why(f)} for f in after])
    compared, diff = compare(torch.jit.load(str(path)), torch.jit.load(str(out)), entry)
    # equal: None where the original raised on every input (no claim).
    row.update(compared=compared, equal=False if diff else (True if compared else None),
               diff=diff, seconds=round(time.perf_counter() - start, 1))
    return row


def load_runtime(binary):
    """The runtime library beside the binary: the --runtime-ops outputs call
    its staticify:: ops."""
    runtime = pathlib.Path(binary).resolve().parents[1] / "lib" / "libstaticify_runtime.so"
    if runtime.exists():
        torch.ops.load_library(str(runtime))


def _worker_init(threads, binary):
    torch.set_num_threads(threads)
    load_runtime(binary)


def _measure_named(name, binary, workdir):
    return measure(BY_NAME[name], binary, workdir)


def measure_all(entries, binary, jobs):
    with tempfile.TemporaryDirectory() as tmp:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
                jobs, mp_context=ctx, initializer=_worker_init,
                initargs=(max(1, (os.cpu_count() or 1) // jobs), binary)) as pool:
            futures = [pool.submit(_measure_named, e.name, binary, tmp) for e in entries]
            rows = []
            for e, fut in zip(entries, futures):
                try:
                    rows.append(fut.result())
                except Exception as exc:  # noqa: BLE001 - a crashed worker is a row too
                    rows.append({"name": e.name, "source": e.source, "scripts": True,
                                 "error": f"{type(exc).__name__}: {exc}"})
                print(progress(rows[-1]), file=sys.stderr, flush=True)
    return rows


# --- reporting -------------------------------------------------------------------

def progress(r):
    if not r.get("scripts"):
        return f"{r['name']}: does not script: {r.get('why_not') or r.get('error')}"
    if "error" in r:
        return f"{r['name']}: staticify failed: {r['error']}"
    return (f"{r['name']}: {r['before']} -> {r['after']}, floor {r['floor']}, "
            f"equal {r['equal']} ({r['seconds']} s) {r['diff'] or ''}")


def cell(text):
    return text.replace("|", "/").replace("\n", " ")


def table(rows):
    lines = ["| entry | library: what | sync points | floor | outputs equal "
             "| what remains (first) |",
             "|---|---|---:|:---:|:---:|---|"]
    for r in rows:
        if not r.get("scripts") or "error" in r:
            continue
        equal = {True: f"yes ({r['compared']})", False: "**no**", None: "not run"}[r["equal"]]
        lines.append(f"| `{r['name']}` | {r['source']} | {r['before']} → {r['after']} | "
                     f"{'yes' if r['floor'] else 'no'} | {equal} | "
                     f"{cell(short(r['reason']))} |")
    return "\n".join(lines)


def grouped(rows, key):
    """What remains, grouped by key(finding): each group with the entries it
    stays in and how many sync points, most entries first."""
    found = collections.OrderedDict()
    for r in rows:
        for f in r.get("remains", []):
            names, n = found.get(key(f), (set(), 0))
            found[key(f)] = (names | {r["name"]}, n + 1)
    return sorted(found.items(), key=lambda kv: (-len(kv[1][0]), -kv[1][1]))


def groups(rows):
    """By the library line and the reason."""
    return grouped(rows, lambda f: (f["where"], f["source"], f["op"], short(f["reason"])))


def by_reason(rows):
    """By the op and the reason alone."""
    return grouped(rows, lambda f: (f["op"], short(f["reason"])))


README_BEGIN, README_END = "<!-- readme-real-code:begin -->", "<!-- readme-real-code:end -->"


def readme_line(rows):
    """The README's bullet: the corpus's headline numbers."""
    scripted = [r for r in rows if r.get("scripts") and "error" not in r]
    synced = [r for r in scripted if r["before"] > 0]
    floor = [r for r in synced if r["floor"]]
    differ = [r for r in scripted if r["equal"] is False]
    return "\n".join([
        README_BEGIN,
        f"  - torchvision and torchaudio code scripted unchanged: {len(floor)} of the "
        f"{len(synced)} entries with a sync point reach their floor, sync points "
        f"{sum(r['before'] for r in scripted)} → {sum(r['after'] for r in scripted)}, "
        f"outputs that differ: {len(differ)} (`bench/real_code.py`).",
        README_END])


def summary(rows):
    scripted = [r for r in rows if r.get("scripts") and "error" not in r]
    failed = [r["name"] for r in rows if "error" in r]
    synced = [r for r in scripted if r["before"] > 0]
    floor = [r for r in synced if r["floor"]]
    worse = [r["name"] for r in scripted if r["after"] > r["before"]]
    differ = [r["name"] for r in scripted if r["equal"] is False]
    unchecked = [r["name"] for r in scripted if r["equal"] is None]
    pct = 100 * len(floor) / len(synced) if synced else 100.0
    text = (f"{len(rows)} entries, {len(scripted)} scripted and run through staticify; "
            f"{len(synced)} with a sync point; {len(floor)} of those at floor ({pct:.0f}%; "
            f"{sum(r['floor'] for r in scripted)} of all {len(scripted)}); sync points "
            f"{sum(r['before'] for r in scripted)} → {sum(r['after'] for r in scripted)} in all; "
            f"worse (after > before): {len(worse)}{' ' + str(worse) if worse else ''}; "
            f"outputs differ: {len(differ)}{' ' + str(differ) if differ else ''}")
    if unchecked:
        text += f"; outputs not compared (the original raised on every input): {unchecked}"
    if failed:
        text += f"; staticify failed: {failed}"
    return text + "."


def docs_body(rows, text):
    not_scripted = [f"- `{r['name']}` ({r['source']}): {cell(r['why_not'])}"
                    for r in rows if not r.get("scripts")]
    failed = [f"- `{r['name']}`: {cell(r['error'])}" for r in rows if "error" in r]
    grouped = ["| library line | op | reason | entries | sync points |", "|---|---|---|---|---:|"]
    for (where, source, op, reason), (names, n) in groups(rows):
        line = f"{where}: `{cell(source)}`" if source else where
        grouped.append(f"| {line} | `{op}` | {cell(reason)} | "
                       f"{', '.join(sorted(names))} ({len(names)}) | {n} |")
    reasons = ["| op | reason | entries | sync points |", "|---|---|---|---:|"]
    for (op, reason), (names, n) in by_reason(rows):
        reasons.append(f"| `{op}` | {cell(reason)} | {', '.join(sorted(names))} ({len(names)}) "
                       f"| {n} |")
    return "\n".join([
        BEGIN,
        "Generated by `/usr/bin/python3 bench/real_code.py --docs docs` "
        f"(torch {torch.__version__}, "
        f"torchvision {torchvision.__version__}, torchaudio {torchaudio.__version__}). Each entry "
        "is the library's own model, op or transform, scripted as the library ships it (random "
        "weights, eval mode; the smallest factory the library has, else small constructor "
        "arguments; a function is called from a one-line module that fixes its non-tensor "
        "arguments), then `staticify IN -o OUT --specialize-training` (with `--runtime-ops` for "
        "`nms` and `batched_nms`; the detectors have their own section above). "
        "Sync points: the report's root findings before; those kept or introduced after. "
        "*Floor*: none left, or only the cuts of returned data-dependent outputs and the reads "
        f"of returned host numbers (every one left says `{FLOOR_REASONS[0]}` or "
        f"`{FLOOR_REASONS[1]}`); or, where the pipeline left the method as it was because the "
        "rewrite reached the host as often and ran more ops, only such cuts with "
        "`--static-forms`). *Outputs equal*: the output against the scripted original on "
        "that many inputs, same RNG seed, equal wherever the original runs (floats within 1e-5). "
        "`test/e2e/test_real_code.py` checks a fast subset in CI (the whole corpus with "
        "`STATICIFY_REAL_CODE=all`).",
        "", text, "", table(rows), "",
        "Do not script (TorchScript's reason):", "", *(not_scripted or ["- none"]), "",
        *(["staticify failed:", "", *failed, ""] if failed else []),
        "What remains, by reason (most entries first):", "", *reasons, "",
        "And by the library line it stays at:", "", *grouped,
        END])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--json", help="write all rows to this file")
    parser.add_argument("--docs", help="write the section into DIR/coverage.md")
    parser.add_argument("--only", help="comma-separated entry names")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    entries = ENTRIES
    if args.only:
        unknown = [n for n in args.only.split(",") if n not in BY_NAME]
        if unknown:
            parser.error(f"unknown entries {unknown}; known: {', '.join(BY_NAME)}")
        entries = [BY_NAME[n] for n in args.only.split(",")]
    binary = pathlib.Path(args.bin) / "staticify"
    start = time.perf_counter()
    rows = measure_all(entries, binary, max(1, args.jobs))
    text = summary(rows)
    print(table(rows))
    print("\nDo not script:")
    for r in rows:
        if not r.get("scripts"):
            print(f"  {r['name']}: {r['why_not']}")
    print("\nWhat remains, by reason:")
    for (op, reason), (names, n) in by_reason(rows):
        print(f"  {len(names)} entries, {n} sync points: {op}: {reason} "
              f"[{', '.join(sorted(names))}]")
    print("\nWhat remains, by library line:")
    for (where, source, op, reason), (names, n) in groups(rows):
        print(f"  {len(names)} entries, {n} sync points: {where} {source!r} {op}: {reason} "
              f"[{', '.join(sorted(names))}]")
    print(f"\n{text} ({time.perf_counter() - start:.0f} s, {args.jobs} jobs)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.docs:
        write_section(pathlib.Path(args.docs) / "coverage.md", BEGIN, END,
                      docs_body(rows, text), heading=HEADING)
        write_section(pathlib.Path(args.docs).resolve().parent / "README.md",
                      README_BEGIN, README_END, readme_line(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
