"""staticify's wall time on a large real model: torchvision's Faster R-CNN
(ResNet-50 FPN, random weights), scripted; the binary loads it (with
torchvision's custom ops), analyses, rewrites and saves it.

    /usr/bin/python3 bench/fasterrcnn.py [--bin build/bin] [--runs 3]

Prints the graph size after inlining, the findings before and after, and the
median wall time of `staticify MODEL -o OUT` over the runs."""
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    lib = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0]
    model = torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None).eval()
    with tempfile.TemporaryDirectory() as tmp:
        path, out, report = (os.path.join(tmp, f) for f in ("frcnn.pt", "out.pt", "r.json"))
        torch.jit.script(model).save(path)
        cmd = [os.path.join(args.bin, "staticify"), path, "-o", out,
               "--report-json", report, "--load-library", lib]
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        method = json.load(open(report))["methods"][0]
        torch.jit.load(out)  # the output loads
    print(f"faster-rcnn: {method['before']['nodes']} nodes after inlining, "
          f"findings {method['before']['counts']['total']} -> "
          f"{method['after']['counts']['total']}, staticify -o: "
          f"{statistics.median(times):.2f} s (median of {args.runs}; "
          f"torch {torch.__version__}, torchvision {torchvision.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
