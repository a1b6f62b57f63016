"""--assume-none NAME: an Optional argument callers never pass is None in the
staticified method, after a host check that raises when it is passed.

The model follows torchvision's GeneralizedRCNN/RetinaNet forward: the
transform carries `targets` through its per-image loop, and the forward checks
every target's boxes for degenerate ones (`if degenerate_boxes.any():`, a host
read of data) whenever targets are given, in eval mode too."""
from typing import Dict, List, Optional

import torch

from conftest import findings, sync_points
from test_bad_input import assert_clean_failure


class Detector(torch.nn.Module):
    def transform(self, images: List[torch.Tensor],
                  targets: Optional[List[Dict[str, torch.Tensor]]]):
        for i in range(len(images)):
            image = images[i]
            target_index = targets[i] if targets is not None else None
            images[i] = image * 2.0
            if targets is not None and target_index is not None:
                targets[i] = {"boxes": target_index["boxes"] * 2.0}
        return images, targets

    def forward(self, images: List[torch.Tensor],
                targets: Optional[List[Dict[str, torch.Tensor]]] = None):
        images, targets = self.transform(images, targets)
        if targets is not None:
            for target in targets:
                boxes = target["boxes"]
                degenerate_boxes = boxes[:, 2:] <= boxes[:, :2]
                if degenerate_boxes.any():
                    bb_idx = torch.where(degenerate_boxes.any(dim=1))[0][0]
                    degen_bb: List[float] = boxes[bb_idx].tolist()
                    raise ValueError("degenerate box " + str(degen_bb))
        return [image.relu().sum() for image in images]


def test_targets_never_passed_take_their_check(staticify, save, tmp_path):
    path = save(Detector().eval())
    before, _ = sync_points(staticify.report(path))
    assert before >= 1
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--assume-none", "targets")
    assert findings(report) == []
    assert "assume-none" in report["methods"][0]["passes"]
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    images = [torch.randn(3, 8, 8), torch.randn(3, 5, 7)]
    assert all(torch.equal(a, b) for a, b in
               zip(original([i.clone() for i in images]), static([i.clone() for i in images])))
    targets = [{"boxes": torch.tensor([[0.0, 0.0, 4.0, 4.0]])}] * 2
    original([i.clone() for i in images], targets)  # checked, fine
    try:
        static([i.clone() for i in images], targets)
        raise AssertionError("the staticified module took targets")
    except torch.jit.Error as e:
        assert "staticify --assume-none targets" in str(e)


def test_assume_none_of_what_cannot_be_none(staticify, save, tmp_path):
    path = save(Detector().eval())
    out = tmp_path / "out.pt"
    proc = staticify(path, "-o", out, "--assume-none", "target", check=False)
    assert_clean_failure(proc, tmp_path, "--assume-none target: method 'forward' has no "
                         "argument 'target'; its arguments are: images, targets", out)
    proc = staticify(path, "-o", out, "--assume-none", "images", check=False)
    assert_clean_failure(proc, tmp_path, "argument 'images' of 'forward' is List[Tensor], "
                         "not Optional", out)


def test_python_api_takes_assume_none():
    import staticify
    module, report = staticify.optimize(Detector().eval(), assume_none=["targets"])
    assert report.method().before.sync_points == report.method().after.sync_points == 0
    images = [torch.randn(3, 4, 4)]
    assert torch.equal(module([images[0].clone()])[0], Detector()([images[0].clone()])[0])
