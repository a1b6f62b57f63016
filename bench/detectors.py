"""Where torchvision's detectors stand: each scripted in eval mode (random
weights, no download), run through staticify as it is and with
--specialize-training --runtime-ops (the runtime's NMS kernel: without it the
per-class loop of batched_nms is kept), and with --padded-outputs
--assume-none targets too (the inference export); the
graph size, findings and root causes (sync points) before and after
rewriting, and every remaining root cause with the reason the report gives.
Writes its section of docs/coverage.md with --docs.

    /usr/bin/python3 bench/detectors.py [--bin build/bin] [--docs docs] [--runs 3]
                                        [--models fasterrcnn_resnet50_fpn,...]"""
import argparse
import collections
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
from torchvision.models import detection

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from docs_section import write_section  # noqa: E402

BEGIN, END = "<!-- detectors:begin -->", "<!-- detectors:end -->"

MODELS = ["fasterrcnn_resnet50_fpn", "fasterrcnn_mobilenet_v3_large_fpn",
          "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn",
          "retinanet_resnet50_fpn", "fcos_resnet50_fpn", "ssd300_vgg16",
          "ssdlite320_mobilenet_v3_large"]


def build(name, size=None):
    """The detector \p name with random weights, eval mode; \p size: the
    transform's shorter side (the longer at most 5/3 of it, as 800 and
    1333), where the model takes one (not the SSDs)."""
    kwargs = dict(weights=None, weights_backbone=None)
    if name.startswith("ssd"):
        kwargs["num_classes"] = 91
    elif size is not None:
        kwargs.update(min_size=size, max_size=size * 1333 // 800)
    return getattr(detection, name)(**kwargs).eval()


def roots(method, after):
    """Root findings: all of them before rewriting; after, those kept and those
    a rewrite introduced."""
    return [f for f in method["findings"] if f["role"] == "root" and
            (f["action"] in ("kept", "introduced") if after else f["action"] != "introduced")]


def place(f):
    loc = f.get("location") or {}
    path = loc.get("file") or "?"
    marker = "torchvision/"
    short = path[path.index(marker) + len(marker):] if marker in path else os.path.basename(path)
    return f"{short}:{loc.get('line', '?')}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--docs")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runs", type=int, default=3,
                        help="`staticify -o` runs per model and mode; the table gives the median")
    args = parser.parse_args()
    lib = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0]
    rows, details, timings = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            torch.manual_seed(0)
            path = os.path.join(tmp, name + ".pt")
            torch.jit.script(build(name)).save(path)
            cells = [f"`{name}`"]
            kept = None
            for extra in ([], ["--specialize-training", "--runtime-ops"]):
                report = os.path.join(tmp, "r.json")
                times = []
                for _ in range(args.runs):  # load, analyse, rewrite, save
                    start = time.perf_counter()
                    subprocess.run([os.path.join(args.bin, "staticify"), path, "-o",
                                    os.path.join(tmp, "out.pt"), "--report-json", report,
                                    "--load-library", lib, *extra],
                                   check=True, capture_output=True, text=True)
                    times.append(time.perf_counter() - start)
                m = json.load(open(report))["methods"][0]
                cells += [f"{m['before']['nodes']:,}", f"{m['before']['counts']['total']:,}",
                          f"{len(roots(m, False))} → {len(roots(m, True))}",
                          f"{statistics.median(times):.2f} s"]
                kept = roots(m, True)
            # The inference export, padded outputs (the signature changes)
            # and no targets: sync points only.
            subprocess.run([os.path.join(args.bin, "staticify"), path, "-o",
                            os.path.join(tmp, "out.pt"), "--report-json", report,
                            "--load-library", lib, "--specialize-training", "--runtime-ops",
                            "--padded-outputs", "--assume-none", "targets"],
                           check=True, capture_output=True, text=True)
            m = json.load(open(report))["methods"][0]
            cells.append(f"{len(roots(m, False))} → {len(roots(m, True))}")
            rows.append("| " + " | ".join(cells) + " |")
            timings.append(f"| `{name}` | {cells[1]} | {cells[4]} | {cells[5]} | {cells[8]} |")
            groups = collections.OrderedDict()
            for f in kept:
                why = f.get("reason") or "no rule applies"
                groups.setdefault((place(f), f["op"], why), 0)
                groups[(place(f), f["op"], why)] += 1
            common = collections.Counter(why for (_, _, why) in groups).most_common(1)
            common = common[0][0] if common else ""
            details.append(f"\n### `{name}` (with `--specialize-training --runtime-ops`): "
                           f"{len(kept)} sync points left\n")
            if common:
                details.append(f"Most say: *{common}*.\n")
            details.append("| where | op | n | why, where it differs |\n|---|---|---:|---|")
            for (where, op, why), n in groups.items():
                other = "" if why == common else why.replace("|", "/")
                details.append(f"| {where} | `{op}` | {n} | {other} |")
    text = "\n".join([
        BEGIN,
        "Generated by `/usr/bin/python3 bench/detectors.py --docs docs` (torch "
        f"{torch.__version__}, torchvision {torchvision.__version__}; random weights, eval mode,"
        " scripted). Sync points are the report's root findings: each is one place where the"
        " host waits for the device; after rewriting, those kept plus any a rewrite introduced."
        " `-o` time: the wall time of `staticify MODEL -o OUT` (loading with torchvision's ops,"
        f" analysis, rewriting, saving), median of {args.runs} runs on this machine's 2 cores.",
        "",
        "The transform's size arithmetic (`GeneralizedRCNNTransform.resize`:"
        " `torch.tensor(image.shape[-2:])` ... `scale.item()`, and `torch_choice`'s"
        " `torch.empty(1).uniform_(...)`) runs on the host and is no longer reported:"
        " Faster R-CNN had 1,630 findings and 61 sync points before (commit 9c95de3);"
        " torchvision's transform alone, scripted, goes from 105 findings to none.",
        "",
        "| model | nodes | findings | sync points (before → after) | `-o` time |"
        " nodes, `--specialize-training --runtime-ops` | findings | sync points | `-o` time |"
        " sync points, and `--padded-outputs --assume-none targets` |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "What remains, per model, with the reason each report gives:",
        *details,
        END])
    print(text)
    if args.docs:
        # Its own section of the page: the idiom table (bench/idiom_table.py)
        # shares it.
        write_section(pathlib.Path(args.docs) / "coverage.md", BEGIN, END, text)
        begin, end = "<!-- detectors-time:begin -->", "<!-- detectors-time:end -->"
        write_section(pathlib.Path(args.docs) / "benchmarks.md", begin, end, "\n".join([
            begin,
            f"`staticify MODEL -o OUT` on each detector (scripted, random weights; loading "
            f"with torchvision's ops, analysis, rewriting, saving), median of {args.runs} "
            f"runs, torch {torch.__version__}, this machine's 2 cores; generated by "
            "`/usr/bin/python3 bench/detectors.py --docs docs`, which writes the coverage "
            "table too.",
            "",
            "| model | nodes | `-o` time | nodes, `--specialize-training --runtime-ops` | `-o` time |",
            "|---|---:|---:|---:|---:|",
            *timings,
            end]), heading="## `staticify -o` on torchvision's detectors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
