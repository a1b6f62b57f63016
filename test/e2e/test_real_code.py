"""The real-code corpus (bench/real_code.py): torchvision's and torchaudio's
own models, ops and transforms, scripted unchanged, through the real binary
with the inference flags. For each: it scripts, the rewrites leave no more
sync points than the original has, and the output equals the original's on
the entry's inputs. The static models (no data-dependent value in them)
report no sync point before or after, and the entries that reach their
floor today still do.

A CI-fast subset by default (about 30 s on two cores);
STATICIFY_REAL_CODE=all runs the whole corpus (120 entries, about three
and a half minutes on two cores), where an entry that TorchScript
refuses is an expected failure with its reason, and one of those that
starts to script fails until it leaves DOES_NOT_SCRIPT."""
import os
import pathlib
import sys

import pytest

from conftest import FULL

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
real_code = pytest.importorskip("real_code")

# swin_t and maxvit_t (about 55 seconds each) and wav2vec2 with lengths (60
# to 100) are in the slow tier (STATICIFY_TESTS=all); test_attribute_dtypes.py
# checks the two classifiers' reports in CI.
SUBSET = ["mobilenet_v3_small", "masks_to_boxes", "nms",
          "MultiScaleRoIAlign", "autocontrast", "AutoAugment", "lfilter", "overdrive",
          "MelSpectrogram", "Conformer", "giou_loss", "Emformer",
          "normalize", "bandpass_biquad", "perspective", "equalize"]
SLOW = ["swin_t", "maxvit_t", "wav2vec2_base+lengths"]

# Classification models and spectrograms: nothing in them depends on data,
# and the report must say so (swin_t and maxvit_t once reported 12 and 22
# false sync points: their int64 position-index buffers).
STATIC = {"swin_t", "maxvit_t", "mobilenet_v3_small", "lfilter", "MelSpectrogram"}

# At their floor today: all sync points rewritten away, or only nms's cut
# of its returned indices left.
FLOOR = {"masks_to_boxes", "nms", "MultiScaleRoIAlign", "autocontrast", "giou_loss", "Emformer",
         "wav2vec2_base+lengths", "normalize", "bandpass_biquad", "perspective"}

# What TorchScript refuses in torch 1.13, torchvision 0.14, torchaudio 0.13
# (the libraries' own code: bench/real_code.py prints each reason).
DOES_NOT_SCRIPT = {"DeepSpeech", "hdemucs_low", "drop_block2d", "RandomErasing",
                   "ElasticTransform", "InverseMelScale", "kaldi_fbank"}

NAMES = ([e.name for e in real_code.ENTRIES] if os.environ.get("STATICIFY_REAL_CODE") == "all"
         else SUBSET + (SLOW if FULL else []))


@pytest.fixture(scope="module")
def runtime(staticify):
    real_code.load_runtime(staticify.path)  # nms's --runtime-ops output


@pytest.mark.parametrize("name", NAMES)
def test_real_code(staticify, runtime, tmp_path, name):
    row = real_code.measure(real_code.BY_NAME[name], staticify.path, tmp_path)
    if name in DOES_NOT_SCRIPT:
        assert not row["scripts"], f"{name} scripts now: remove it from DOES_NOT_SCRIPT"
        pytest.xfail(row["why_not"])
    assert row["scripts"], row["why_not"]
    assert "error" not in row, row["error"]
    assert row["after"] <= row["before"], row
    assert row["equal"] is True, row["diff"] or "the original raised on every input"
    if name in STATIC:
        assert (row["before"], row["after"]) == (0, 0), row["remains"]
    if name in FLOOR:
        assert row["floor"], row["remains"]
