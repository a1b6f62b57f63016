"""Tensors built on the host from host values are not device reads.

torchvision's own GeneralizedRCNNTransform (the first stage of every
torchvision detector) resizes by `torch.tensor(image.shape[-2:])` ...
`scale.item()`, and its training-time size pick draws on the host with
`torch.empty(1).uniform_(...)`. Neither is a host-device sync. A model that
names a device for its tensor, or mixes in a device tensor, still reads the
device, and the report must say so."""
import torch
import torchvision
from torchvision.models.detection.transform import GeneralizedRCNNTransform

from conftest import findings

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def test_torchvision_transform_reads_no_device_value(staticify, save, tmp_path):
    transform = GeneralizedRCNNTransform(320, 512, MEAN, STD).eval()
    path = save(transform)
    report = staticify.report(path)
    assert findings(report) == []
    method = report["methods"][0]
    assert method["before"]["counts"]["total"] == 0
    # The model is written back as it came and runs as the original.
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    original, result = torch.jit.load(str(path)), torch.jit.load(str(out))
    torch.manual_seed(0)
    for h, w in [(200, 300), (480, 360), (77, 513)]:
        images = [torch.rand(3, h, w), torch.rand(3, w // 2, h)]
        a, _ = original(images)
        b, _ = result(images)
        assert a.image_sizes == b.image_sizes
        assert torch.equal(a.tensors, b.tensors)


class DeviceNamed(torch.nn.Module):
    """torchvision's postprocess spells its ratios like this: on the boxes'
    device, so reading one back would be a device read."""

    def forward(self, boxes):
        shape = torch.tensor(boxes.shape, dtype=torch.float32, device=boxes.device)
        return shape.max().item()


class DeviceOperand(torch.nn.Module):
    def forward(self, x):
        scale = torch.tensor(x.shape[-2:]).min() * x.mean()
        return scale.item()


class HostOnly(torch.nn.Module):
    """detectron2-style level mapping: log2 of a host scale."""

    def forward(self, x):
        lvl = -torch.log2(torch.tensor(x.shape[-1] / 4.0, dtype=torch.float32)).item()
        return x * lvl


def test_a_device_or_device_operand_keeps_the_read(staticify, save):
    for module in (DeviceNamed(), DeviceOperand()):
        f = findings(staticify.report(save(module)))
        reads = [x for x in f if x["op"] == "aten::item"]
        assert len(reads) == 1 and reads[0]["category"] == "host-sync", f


def test_host_only_chain_is_static_and_equal(staticify, save, tmp_path):
    path = save(HostOnly())
    assert findings(staticify.report(path)) == []
    out = tmp_path / "out.pt"
    staticify(path, "-o", out)
    x = torch.rand(2, 16)
    assert torch.equal(torch.jit.load(str(path))(x), torch.jit.load(str(out))(x))
