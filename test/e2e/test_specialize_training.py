"""--specialize-training: the saved `training` flags are constants, so an eval
export loses its training-only branches before the analysis (as
torch.jit.freeze does), and the output computes what the original does."""

import torch
import torchvision

from conftest import findings


class Sampler(torch.nn.Module):
    """detectron2 / torchvision style: the proposal sampler runs only when
    training."""

    def forward(self, scores):
        if self.training:
            keep = torch.where(scores > 0.5)[0]
            return scores[keep].sum()
        return scores.sum()


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.sampler = Sampler()

    def forward(self, x):
        return self.sampler(x.relu())


def test_eval_export_loses_the_training_branch(staticify, save, tmp_path):
    path = save(Head().eval())
    assert any(f["op"] == "aten::where" for f in findings(staticify.report(path)))
    report = staticify.report(path, "--specialize-training")
    assert findings(report) == []
    assert "specialize-training" in report["methods"][0]["passes"]
    proc = staticify(path, "--specialize-training", "--report")
    assert "specialized on the saved training flags (the module is in eval mode)" \
        in proc.stderr
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--specialize-training")
    x = torch.randn(100)
    assert torch.equal(torch.jit.load(str(path))(x), torch.jit.load(str(out))(x))


def test_a_training_export_keeps_its_training_branch(staticify, save):
    path = save(Head().train())
    report = staticify.report(path, "--specialize-training")
    assert any(f["op"] == "aten::where" for f in findings(report))


def test_torchvision_detector_in_eval(staticify, save, tmp_path, torchvision_library):
    torch.manual_seed(0)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, box_score_thresh=0.0).eval()
    path = save(model)
    lib = torchvision_library
    plain = staticify.report(path, "--load-library", lib)["methods"][0]
    special = staticify.report(path, "--load-library", lib,
                               "--specialize-training")["methods"][0]
    # The losses, the matcher and the samplers are gone.
    assert special["before"]["nodes"] < 0.75 * plain["before"]["nodes"]
    assert special["before"]["counts"]["total"] < 0.75 * plain["before"]["counts"]["total"]
    out = tmp_path / "out.pt"
    staticify(path, "-o", out, "--load-library", lib, "--specialize-training")
    images = [torch.rand(3, 240, 320)]
    _, a = torch.jit.load(str(path))(images)
    _, b = torch.jit.load(str(out))(images)
    assert len(a) == len(b) == 1 and a[0].keys() == b[0].keys()
    for key in a[0]:
        assert torch.equal(a[0][key], b[0][key]), key
