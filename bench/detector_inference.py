"""Time per image of torchvision's detectors: the original, staticified
(--specialize-training) and staticified with the runtime's NMS kernel
(--specialize-training --runtime-ops), side by side in one process, each
scripted in eval mode with random weights (no download) at torchvision's
default image size. The variants run interleaved, image by image; the table
gives the median time per image and each variant's ratio to the original,
whether every output equals the original's and, on a GPU, the host syncs of
one forward (torch.cuda.set_sync_debug_mode). Writes its section of
docs/benchmarks.md with --docs (CPU) or from a JSON brought back with
--render (GPU).

    /usr/bin/python3 bench/detector_inference.py [--bin build/bin] [--docs docs]
        [--images 2] [--reps 2] [--models fasterrcnn_resnet50_fpn,...]
    # on a GPU machine, whose CLI cannot load pip torchvision's _C.so: the
    # models are rewritten in process by the Python package (the same driver)
    PYTHONPATH=build-gpu/python python3 bench/detector_inference.py \\
        --device cuda --via api --json $OUT/detectors-cuda.json
    /usr/bin/python3 bench/detector_inference.py --render detectors-cuda.json --docs docs"""
import argparse
import glob
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

import torch
import torchvision

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test" / "e2e"))
from detectors import build, roots  # noqa: E402
from docs_section import write_section  # noqa: E402
from seed000 import count_syncs, ops_per_call, timer  # noqa: E402
# Equal but for the order among equal scores, which batched_nms's final
# unstable sort leaves unspecified (the tests' comparison).
# --padded-outputs' dicts are compared cut to their counts.
# SSDlite with convolutions that keep the activations' scale: torchvision's
# initialisation ties every anchor's scores (test_detectors.fresh_weights).
from test_detectors import cut_to_counts, fresh_weights, same_up_to_tie_order  # noqa: E402

MARKERS = {"cpu": ("<!-- detector-inference:begin -->", "<!-- detector-inference:end -->"),
           "cuda": ("<!-- detector-inference-cuda:begin -->",
                    "<!-- detector-inference-cuda:end -->")}
HEADINGS = {"cpu": "### Detectors: CPU time per image",
            "cuda": "### Detectors: GPU time per image"}
# The one-stage detectors (the ones the rewrites reach furthest) first, so that
# a run cut short by its time limit still has them.
ORDER = ["retinanet_resnet50_fpn", "fcos_resnet50_fpn", "ssd300_vgg16",
         "ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_fpn",
         "fasterrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn", "keypointrcnn_resnet50_fpn"]
VARIANTS = {"staticified": dict(specialize_training=True),
            "with the kernel": dict(specialize_training=True, runtime_ops=True),
            "padded": dict(specialize_training=True, runtime_ops=True, padded_outputs=True)}
FLAGS = {"specialize_training": "--specialize-training", "runtime_ops": "--runtime-ops",
         "padded_outputs": "--padded-outputs"}


def same(a, b):
    a, b = ({k: v.cpu() for k, v in cut_to_counts(d).items()} for d in (a, b))
    return a.keys() == b.keys() and same_up_to_tie_order(b, a)


def rewrite(path, out, options, args):
    """The staticified module of the archive \\p path, and its sync points
    before and after (the report's root findings)."""
    if args.via == "api":
        import staticify
        module, report = staticify.optimize(torch.jit.load(path), **options)
        data = json.loads(report.to_json())
    else:
        lib = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0]
        subprocess.run([os.path.join(args.bin, "staticify"), path, "-o", out,
                        "--report-json", out + ".json", "--load-library", lib,
                        *(FLAGS[k] for k in options)],
                       check=True, capture_output=True, text=True)
        module = torch.jit.load(out)
        with open(out + ".json") as f:
            data = json.load(f)
    method = data["methods"][0]
    return module, (len(roots(method, False)), len(roots(method, True)))


def run_images(modules, args, run):
    """Seconds per image of each module, interleaved image by image, whether
    every output equals the first module's, and on a GPU the host syncs of
    one more forward of each."""
    gen = torch.Generator().manual_seed(1)
    times = {v: [] for v in modules}
    equal = True
    for image in range(args.images + args.warmup):
        images = [torch.rand(3, 480, 640, generator=gen).to(args.device)]
        want = None
        for _ in range(args.reps):
            for variant, module in modules.items():
                got = []
                try:
                    us = run(lambda x: got.append(module(x)[1][0]), (images,))
                except RuntimeError as e:
                    raise RuntimeError(f"{variant}: " + str(e).strip().splitlines()[-1])
                if image >= args.warmup:
                    times[variant].append(us / 1e6)
                if want is None:
                    want = got[0]
                equal = equal and same(got[0], want)
    syncs = None
    if args.device == "cuda":
        images = [torch.rand(3, 480, 640, generator=gen).to(args.device)]
        syncs = {v: count_syncs(m, (images,)) for v, m in modules.items()}
    return times, equal, syncs


def measure(args, save):
    """Measures each model in turn; \\p save gets the result so far after each."""
    device = args.device
    if args.via == "cli":
        torch.ops.load_library(str(pathlib.Path(args.bin).resolve().parent / "lib" /
                                   "libstaticify_runtime.so"))
    if device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)
    run = timer(device)
    rows = []
    result = {"device": device, "images": args.images, "reps": args.reps,
              "warmup": args.warmup, "torch": torch.__version__,
              "torchvision": torchvision.__version__, "cores": os.cpu_count(),
              "gpu": torch.cuda.get_device_name() if device == "cuda" else None,
              "machine": platform.processor() or platform.machine(), "rows": rows}
    with tempfile.TemporaryDirectory() as tmp:
        for name, size in ((n, z) for z in args.sizes for n in args.models.split(",")):
            if size is not None and name.startswith("ssd") and size != args.sizes[0]:
                continue  # SSDs resize to their own size: one row each
            torch.manual_seed(0)
            path = os.path.join(tmp, name + ".pt")
            model = build(name, size)
            if name.startswith("ssdlite"):
                model = fresh_weights(model)
            torch.jit.script(model).save(path)
            modules = {"original": torch.jit.load(path)}
            paths = {"original": path}
            row = {"model": name, "size": None if name.startswith("ssd") else size,
                   "sync_points": {}}
            for variant, options in VARIANTS.items():
                out = paths[variant] = os.path.join(tmp, f"{name}-{len(modules)}.pt")
                modules[variant], row["sync_points"][variant] = rewrite(path, out, options,
                                                                        args)
                modules[variant].save(out)
            # Counted on the graphs as the report counts them (a loop's body
            # once, a runtime op one).
            row["ops_per_call"] = {v: ops_per_call(m) for v, m in modules.items()}
            for module in modules.values():
                module.to(device)
            try:
                times, row["equal"], syncs = run_images(modules, args, run)
            except RuntimeError as e:
                # PyTorch 2.x's TensorExpr fuser (on by default for CUDA
                # graphs in TorchScript) refuses some fusion groups ("Global
                # alloc not supported yet"): measured again with it off, and
                # the table says so.
                if device != "cuda" or not torch._C._jit_texpr_fuser_enabled():
                    raise
                row["fuser_off"] = str(e)
                print(f"{name}: {row['fuser_off']}; again with the TensorExpr fuser off",
                      flush=True)
                torch._C._jit_set_texpr_fuser_enabled(False)
                try:
                    modules = {v: torch.jit.load(p_).to(device) for v, p_ in paths.items()}
                    times, row["equal"], syncs = run_images(modules, args, run)
                finally:
                    torch._C._jit_set_texpr_fuser_enabled(True)
            row["seconds"] = {v: statistics.median(t) for v, t in times.items()}
            if syncs is not None:
                row["syncs_per_forward"] = syncs
            rows.append(row)
            print(json.dumps(row), flush=True)
            save(result)
    return result


def render(result):
    device = result["device"]
    begin, end = MARKERS[device]
    cuda = device == "cuda"
    unit = (lambda s: f"{s * 1e3:.1f} ms") if cuda else (lambda s: f"{s:.2f} s")
    # The variants the measurement had (an older JSON has fewer).
    variants = [v for v in VARIANTS if any(v in r["seconds"] for r in result["rows"])]
    sized = any(r.get("size") for r in result["rows"])
    head = ["model"] + (["size"] if sized else []) + ["original"] + [
        f"`{' '.join(FLAGS[k] for k in VARIANTS[v])}`" for v in variants]
    head += ["outputs equal (up to the order of equal scores)", "sync points (report)"]
    counted = any("ops_per_call" in r for r in result["rows"])
    if counted:
        head.append("ops per call")
    if cuda:
        head.append("host syncs per forward (measured)")
    numeric = 1 + len(variants) + sized
    lines = ["| " + " | ".join(head) + " |",
             "|---|" + "---:|" * numeric + "---|" * (len(head) - 1 - numeric)]
    for row in result["rows"]:
        base = row["seconds"]["original"]
        cells = [f"`{row['model']}`" + (" (fuser off)" if "fuser_off" in row else "")]
        if sized:
            cells.append(f"{row['size']} px" if row.get("size") else "its own")
        cells.append(unit(base))
        for variant in variants:
            t = row["seconds"].get(variant)
            cells.append(f"{unit(t)} ({t / base:.2f}x)" if t else "not measured")
        cells.append("yes" if row["equal"] else "**no**")
        points = row["sync_points"]
        cells.append(f"{points['staticified'][0]} → " +
                     " / ".join(str(points[v][1]) for v in variants if v in points))
        if counted:
            ops = row.get("ops_per_call", {})
            cells.append(" → ".join("—" if ops.get(v) is None else str(ops[v])
                                    for v in ["original"] + variants))
        if cuda:
            syncs = row["syncs_per_forward"]
            cells.append(" → ".join(str(syncs[v]) for v in syncs))
        lines.append("| " + " | ".join(cells) + " |")
    where = (f"one {result['gpu']}, {result['cores']} CPU cores" if cuda
             else f"this machine's {result['cores']} cores")
    return "\n".join([
        begin,
        f"{'GPU' if cuda else 'CPU'} time per image (one 480x640 image per call, resized "
        f"by the model's transform{' to the size given (its shorter side; SSDs to their own)' if sized else ''}), median of {result['images']} images x "
        f"{result['reps']} runs after {result['warmup']} warm-up images, the variants "
        f"interleaved in one process; torch {result['torch']}, torchvision "
        f"{result['torchvision']}, {where}, random weights (SSDlite's convolutions "
        "He-initialised: torchvision's ties its scores), default score thresholds. "
        "Sync points: the report's, before → after each variant. "
        + ("Ops per call: the nodes of the inlined forward graph but constants and "
           "list/tuple plumbing, a loop's body once (the report's count), for the "
           "original and each variant (a call of the runtime's NMS kernel is one op). "
           if any("ops_per_call" in r for r in result["rows"]) else "")
        + "".join(f"`{row['model']}` ran with TorchScript's TensorExpr fuser off (with it on, "
                  f"{row['fuser_off']}). " for row in result["rows"] if "fuser_off" in row)
        + "Generated by "
        "`bench/detector_inference.py`" + (" --device cuda --via api, rendered with "
                                           "--render" if cuda else " --docs docs") + ".",
        "",
        *lines,
        end])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--via", choices=("cli", "api"), default="cli",
                        help="rewrite with the staticify binary, or in process with "
                             "the Python package (needed where the CLI cannot load "
                             "torchvision's ops)")
    parser.add_argument("--docs")
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument("--render", help="no measuring: the table from this JSON")
    parser.add_argument("--images", type=int, default=2)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=0,
                        help="images run first and not timed (TorchScript's "
                             "profiling runs; CUDA's lazy start)")
    parser.add_argument("--models", default=",".join(ORDER))
    parser.add_argument("--sizes", type=int, nargs="+", default=[None],
                        help="the transform's size (shorter side, px) for each row; "
                             "default: the model's own (800 for the R-CNNs, RetinaNet "
                             "and FCOS)")
    args = parser.parse_args()
    if not args.render and args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU")
    if args.render:
        result = json.loads(pathlib.Path(args.render).read_text())
    else:
        def save(result):
            if args.json:
                pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
        result = measure(args, save)
    text = render(result)
    print(text)
    if args.docs:
        begin, end = MARKERS[result["device"]]
        write_section(pathlib.Path(args.docs) / "benchmarks.md", begin, end, text,
                      heading=HEADINGS[result["device"]])


if __name__ == "__main__":
    main()
