"""Lengths whose sign only the host knows, through the real binary: a module
attribute K that a caller may set to anything (RetinaNet's topk_candidates
and detections_per_img are such attributes), taken as torchvision takes them:
`topk(min(K, n))` (det_utils._topk_min) and `keep[:K]`. The staticified
module is static with --padded-outputs, and equals the original for K of
either sign: a negative K raises in topk as it did, and counts from the end
in a slice as Python's slices do."""
import pytest
import torch


class TopKByAttribute(torch.nn.Module):
    """RetinaNet.postprocess_detections' per-level top-k, on one level."""

    def __init__(self, k):
        super().__init__()
        self.topk_candidates = k

    def forward(self, logits, thresh: float):
        scores = torch.sigmoid(logits).flatten()
        keep = scores > thresh
        scores = scores[keep]
        idxs = torch.where(keep)[0]
        num_topk = min(self.topk_candidates, idxs.size(0))
        scores, order = scores.topk(num_topk)
        return scores * 2, idxs[order]


class PrefixByAttribute(torch.nn.Module):
    """`keep = keep[: self.detections_per_img]` on a selection."""

    def __init__(self, k):
        super().__init__()
        self.detections_per_img = k

    def forward(self, scores, thresh: float):
        keep = torch.where(scores > thresh)[0]
        keep = keep[: self.detections_per_img]
        return keep * 3


def run(module, args):
    try:
        return module(*args), None
    except RuntimeError as e:
        return None, str(e).splitlines()[0]


@pytest.mark.parametrize("cls", [TopKByAttribute, PrefixByAttribute])
def test_attribute_lengths_are_static_for_either_sign(staticify, save, tmp_path, cls):
    path = save(cls(5))
    out = tmp_path / "static.pt"
    report = staticify.report(path, "-o", out, "--padded-outputs")
    method = report["methods"][0]
    assert method["before"]["counts"]["dynamic-shape"] > 0
    assert method["after"]["static"] is True, method["after"]
    original, static = torch.jit.load(str(path)), torch.jit.load(str(out))
    gen = torch.Generator().manual_seed(3)
    raised = 0
    for k in (5, 0, 1, 40, -1, -3, -40):
        name = "topk_candidates" if cls is TopKByAttribute else "detections_per_img"
        setattr(original, name, k)
        setattr(static, name, k)
        for _ in range(20):
            x = torch.randn(int(torch.randint(0, 30, (), generator=gen)), generator=gen)
            args = (x, float(torch.randn((), generator=gen)))
            want, want_error = run(original, args)
            got, got_error = run(static, args)
            assert want_error == got_error, (k, want_error, got_error)
            if want_error:
                raised += 1
                continue
            want = want if isinstance(want, tuple) else (want,)
            parts = list(got) if isinstance(got, tuple) else [got]
            # With --padded-outputs each bounded result is (padded, count).
            flat = []
            for p in parts:
                flat.extend(p if isinstance(p, tuple) else (p,))
            valid = [flat[i][:int(flat[i + 1])] for i in range(0, len(flat), 2)]
            assert len(valid) == len(want)
            for w, g in zip(want, valid):
                assert torch.equal(w, g), (k, args, w, g)
    # topk raises for a negative k, in both; a slice never does.
    assert (raised > 0) == (cls is TopKByAttribute)
