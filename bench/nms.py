"""Padded NMS side by side, in one process: torchvision.ops.nms, staticify's
TorchScript form (`nms` in passes/forms/bounded_forms.py) and the runtime's
kernel staticify::nms_padded; then two scripted models (test/e2e/test_nms.py)
against staticify's outputs of them: `keep-after-nms` keeps
`boxes[nms(boxes, scores, 0.5)]`, `postprocess` is torchvision's
postprocess_detections with an offset batched NMS (score threshold,
remove_small_boxes, NMS, top 100), `batched-nms` is torchvision.ops.batched_nms
itself (4 classes: its coordinate trick up to 1,000 boxes on the CPU, its
per-class loop above). Each is staticified three ways: default
(cut to the count at the return), --padded-outputs, and --padded-outputs
--runtime-ops.

    /usr/bin/python3 bench/nms.py [--device cpu|cuda] [--sizes 1000 4000]
        [--models DIR] [--bin build/bin] [--out bench/results]

Boxes are clustered (detector-like heavy overlap), scores uniform. Each
variant is checked equal to torchvision (or the original model) first, then
timed as in bench/seed000.py: median and IQR of single calls (CUDA events on
a GPU), host syncs per call (torch.cuda.set_sync_debug_mode), and the time
per call when calls are queued back to back. --models takes staticified
models made elsewhere (the GPU machine's CLI cannot load pip torchvision's
_C.so); without it they are made with --bin, which needs torchvision's
library: `--write-models DIR` only writes them."""
import argparse
import glob
import json
import os
import pathlib
import statistics
import subprocess
import sys

import torch
import torchvision

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test" / "e2e"))
from seed000 import count_syncs, ops_per_call, pipelined, timer  # noqa: E402
from test_forms import compile_forms  # noqa: E402
from test_nms import BatchedNms, KeepAfterNms, ThresholdThenOffsetNms  # noqa: E402

VARIANTS = {"default": [], "padded": ["--padded-outputs"],
            "padded+runtime-ops": ["--padded-outputs", "--runtime-ops"]}


MODELS = {"keep-after-nms": KeepAfterNms, "postprocess": ThresholdThenOffsetNms,
          "batched-nms": BatchedNms}


def write_models(out, staticify_bin):
    out.mkdir(parents=True, exist_ok=True)
    lib = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), "_C*.so"))[0]
    for model, cls in MODELS.items():
        original = out / f"{model}.pt"
        torch.jit.script(cls()).save(str(original))
        for name, flags in VARIANTS.items():
            subprocess.run([str(pathlib.Path(staticify_bin) / "staticify"), str(original),
                            "-o", str(out / f"{model}-{name}.pt"),
                            "--load-library", lib] + flags, check=True)


def clustered(n, device, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.rand(max(n // 20, 1), 2, generator=g) * 400
    xy = centers[torch.randint(0, centers.size(0), (n,), generator=g)] + \
        torch.rand(n, 2, generator=g) * 8
    boxes = torch.cat([xy, xy + 16 + torch.rand(n, 2, generator=g) * 16], 1)
    return boxes.to(device), torch.rand(n, generator=g).to(device)


def measure(fn, args, device, reps):
    run = timer(device)
    for _ in range(3):
        fn(*args)
    times = sorted(run(fn, args) for _ in range(reps))
    q = statistics.quantiles(times, n=4)
    row = {"median_us": statistics.median(times), "iqr_us": q[2] - q[0]}
    if device == "cuda":
        row["syncs_per_call"] = count_syncs(fn, args)
        row["pipelined_us"] = pipelined(fn, args, row["median_us"])
    return row


def ops_cell(row):
    """ops per call: a loop's body counted once (the form's walk runs it per
    box); blank for the ops called directly (torchvision's, the kernel)."""
    ops = row.get("ops_per_call")
    return "" if ops is None else str(ops)


def markdown(rows):
    """The results as the Markdown table of docs/benchmarks.md."""
    lines = ["| N | kind | variant | kept | median | IQR | vs first | ops/call | syncs/call | pipelined |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['kind']} | {r['variant']} | {r['kept']} | {r['median_us']:.1f} us | "
            f"{r['iqr_us']:.1f} us | {r['vs_first']:.2f}x | {ops_cell(r)} | "
            f"{r.get('syncs_per_call', '')} | "
            f"{'%.1f us' % r['pipelined_us'] if 'pipelined_us' in r else ''} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--models")
    parser.add_argument("--write-models")
    parser.add_argument("--runtime", default=str(ROOT / "build" / "lib" / "libstaticify_runtime.so"))
    parser.add_argument("--out")
    parser.add_argument("--render", metavar="JSON",
                        help="print the table of a results file (bench/results/nms-*.json) and exit")
    args = parser.parse_args()
    if args.render:
        print(markdown(json.loads(pathlib.Path(args.render).read_text())))
        return
    if args.write_models:
        write_models(pathlib.Path(args.write_models), args.bin)
        return
    torch.ops.load_library(args.runtime)
    models = pathlib.Path(args.models) if args.models else pathlib.Path("/tmp/staticify-nms-bench")
    if not args.models:
        write_models(models, args.bin)
    forms = compile_forms()
    kernel = torch.ops.staticify.nms_padded
    loaded = {model: {name: torch.jit.load(str(models / f"{model}{suffix}.pt"))
                      for name, suffix in [("original", "")] +
                      [(v, "-" + v) for v in VARIANTS]}
              for model in MODELS}
    rows = []
    for n in args.sizes:
        boxes, scores = clustered(n, args.device, n)
        labels = torch.randint(0, 4, (n,), generator=torch.Generator().manual_seed(n)).to(args.device)
        want = torchvision.ops.nms(boxes, scores, 0.5)
        ops = {"torchvision.ops.nms": lambda b, s: torchvision.ops.nms(b, s, 0.5),
               "form (TorchScript)": lambda b, s: forms.nms(b, s, 0.5, None, None),
               "staticify::nms_padded": lambda b, s: kernel(b, s, 0.5)}
        graphs = {"form (TorchScript)": ops_per_call(forms.nms)}
        for name, fn in ops.items():
            out = fn(boxes, scores)
            got = out if name.startswith("torchvision") else out[0][:int(out[1])]
            assert torch.equal(got, want), (name, n)
            rows.append({"n": n, "kind": "op", "variant": name, "kept": len(want),
                         "ops_per_call": graphs.get(name),
                         **measure(fn, (boxes, scores), args.device, args.reps)})
        for model, variants in loaded.items():
            inputs = (boxes, scores) if model == "keep-after-nms" else (boxes, scores, labels)
            reference = variants["original"](*inputs)
            single = isinstance(reference, torch.Tensor)  # batched_nms: one tensor
            if single:
                reference = (reference,)
            for name, fn in variants.items():
                out = fn(*inputs)
                if single:
                    out = (out,)
                if name.startswith("padded"):  # (padded, count) where bounded
                    out = tuple(o[0][:int(o[1])] if isinstance(o, tuple) else o
                                for o in out)
                assert all(torch.equal(a, b) for a, b in zip(out, reference)), (model, name, n)
                rows.append({"n": n, "kind": model, "variant": name, "kept": len(reference[0]),
                             **measure(fn, inputs, args.device, args.reps)})
    base = {}
    for r in rows:
        key = (r["n"], r["kind"])
        base.setdefault(key, r["median_us"])
        r["vs_first"] = r["median_us"] / base[key]
    print(f"device {args.device}: {torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}, "
          f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    print(markdown(rows))
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"nms-{args.device}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
