"""CPU time per image of torchvision's detectors, side by side in one
process: the original (scripted, eval mode, random weights), staticify's
output of it (`-o`, with --specialize-training), and the same with the
runtime's NMS kernel (--runtime-ops). Every variant's detections (boxes,
scores, labels, and masks or keypoints where the model has them) are checked
equal to the original's on every image before anything is timed.

    /usr/bin/python3 bench/detector_runtime.py [--images 20] [--size 320]
        [--models fasterrcnn_resnet50_fpn,...] [--bin build/bin] [--out FILE]

Images are uniform noise of size x size, the score threshold is lowered so
that random weights produce detections. Time per image: the median over the
images of one forward each (after one warm-up forward per variant)."""
import argparse
import glob
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from detectors import MODELS  # noqa: E402

VARIANTS = {"staticify": [], "staticify --runtime-ops": ["--runtime-ops"]}


def build(name, size):
    kwargs = dict(weights=None, weights_backbone=None, min_size=size, max_size=size)
    if name.startswith("ssd"):
        kwargs = dict(weights=None, weights_backbone=None, num_classes=91)
    model = getattr(torchvision.models.detection, name)(**kwargs).eval()
    for attr in ("box_score_thresh", "score_thresh"):  # RoIHeads, RetinaNet/FCOS/SSD
        for m in model.modules():
            if hasattr(m, attr):
                setattr(m, attr, 0.01)
    return model


def same(a, b):
    return all(a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a) and \
        a.keys() == b.keys()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20)
    parser.add_argument("--size", type=int, default=320)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--out")
    args = parser.parse_args()
    lib = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0]
    torch.ops.load_library(str(pathlib.Path(args.bin).parent / "lib" / "libstaticify_runtime.so"))
    torch.set_num_threads(2)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            torch.manual_seed(0)
            path = os.path.join(tmp, name + ".pt")
            torch.jit.script(build(name, args.size)).save(path)
            fns = {"original": torch.jit.load(path)}
            for variant, flags in VARIANTS.items():
                out = os.path.join(tmp, f"{name}-{len(fns)}.pt")
                subprocess.run([os.path.join(args.bin, "staticify"), path, "-o", out,
                                "--load-library", lib, "--specialize-training", *flags],
                               check=True, capture_output=True)
                fns[variant] = torch.jit.load(out)
            gen = torch.Generator().manual_seed(1)
            images = [torch.rand(3, args.size, args.size, generator=gen)
                      for _ in range(args.images)]
            times = {v: [] for v in fns}
            detections = 0
            for v, fn in fns.items():
                fn([images[0]])  # warm-up: the profiling executor's first runs
            for image in images:
                results = {}
                for v, fn in fns.items():
                    start = time.perf_counter()
                    with torch.no_grad():
                        results[v] = fn([image])[1][0]
                    times[v].append(time.perf_counter() - start)
                for v in VARIANTS:
                    assert same(results[v], results["original"]), (name, v)
                detections += len(results["original"]["boxes"])
            base = statistics.median(times["original"])
            for v in fns:
                t = statistics.median(times[v])
                rows.append({"model": name, "variant": v, "ms_per_image": t * 1e3,
                             "vs_original": t / base, "images": len(images),
                             "detections": detections})
                print(f"| `{name}` | {v} | {t * 1e3:.0f} ms | {t / base:.2f}x | "
                      f"{len(images)} | {detections} |", flush=True)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
